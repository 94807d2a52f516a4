"""Each cell's posterior on a grid: its amplitude multiplier (and, opt-in, its exponent),
partially pooled, truncated so its rate now is a probability (steps 2 and the per-cell
exponents of :mod:`analytics.learning`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import special

from analytics.curves import B_BOUNDS, LearningCurve
from analytics.learning.rows import EvaluationRows, FloatArray, IntArray, _sum_by
from campaigns.planning.gain import level_from_amplitude

LOG_MULTIPLIER_GRID: FloatArray = np.linspace(-8.0, 5.0, 131)
"""Grid of ``log m`` in steps of 0.1 (10%): from m = 0.0003 (practically at the floor) to 148."""

TAU_GRID: tuple[float, ...] = (0.15, 0.25, 0.4, 0.6, 0.8, 1.0, 1.3, 1.7, 2.2)
"""Candidate spreads of ``log m`` between cells (averaged by marginal likelihood)."""

EXPONENT_OFFSET_GRID: FloatArray = np.linspace(-0.4, 0.4, 17)
"""Grid of a cell's exponent offset ``b_c - b`` in steps of 0.05 (per-cell exponents only)."""

EXPONENT_SPREADS: tuple[float, ...] = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
"""Candidate spreads of ``b_c - b`` between cells (averaged by marginal likelihood)."""

CONDITION_RIDGE = 1.0
"""Ridge penalty on each condition value's effect on ``log m`` (in units of cell weight)."""

_EXPONENT_BLOCK = 1024
"""Cells whose per-cell exponent posteriors are formed at once (a block holds a few arrays
of cells x offsets x grid: about 20 MB each)."""

_RATE_EPS = 1e-12


def _row_log_likelihood(curve: LearningCurve, rows: EvaluationRows, grid: FloatArray) -> FloatArray:
    """Return the binomial log-likelihood of every row at every grid multiplier (rows x grid)."""
    level = level_from_amplitude(curve.a, rows.train_count, curve.b)
    rate = curve.f_inf + level[:, None] * np.exp(grid)[None, :]
    rate = np.clip(rate, _RATE_EPS, 1.0 - _RATE_EPS)
    out = rows.successes[:, None] * np.log1p(-rate)
    # A row without failures adds nothing for them, so only the others take the log (a
    # reliable policy's evaluation has many such rows; the sums are the same to the last bit).
    failures = rows.trials - rows.successes
    some = np.flatnonzero(failures != 0)
    out[some] += failures[some, None] * np.log(rate[some])
    return out


def _cell_posteriors(
    curve: LearningCurve,
    rows: EvaluationRows,
    n_now: FloatArray,
    grid: FloatArray,
    tau: float | None,
) -> tuple[FloatArray, float, float]:
    """Return each cell's grid posterior of ``log m``, the (posterior-mean) spread and the log
    of the marginal likelihood of every row under ``curve``, each cell's multiplier
    integrated out (up to a constant the same for every ``curve``)."""
    size = rows.n_cells
    spreads = (tau,) if tau is not None else TAU_GRID
    for spread in spreads:
        if not spread > 0:
            raise ValueError(f"tau must be > 0, got {spread}")
    log_priors = np.array([-0.5 * (grid / spread) ** 2 for spread in spreads])
    priors = np.exp(log_priors)
    cumulative = np.cumsum(priors, axis=1)

    # Truncation: the cell's rate at its current n must not exceed 1. Grid point ``j`` stands
    # for the interval of ``log m`` half a step either side of it and is allowed in the share
    # of that interval below the ceiling (1 below, 0 above, a fraction at the boundary), so a
    # cell's prior changes continuously with its n: one more episode moves the ceiling a
    # little, never a whole grid step at once. The lowest point is always allowed.
    last, top_share = _ceiling(curve, n_now, grid)

    # Only evaluated cells have a likelihood; the rest (most cells of a gap report) hold their
    # truncated prior.
    seen = rows.trials > 0  # a row without trials has likelihood 1 everywhere
    cells = np.unique(rows.cell[seen])
    loglik = np.zeros((cells.size, grid.size))
    if cells.size:
        evaluated = EvaluationRows(
            cell=np.searchsorted(cells, rows.cell[seen]),
            train_count=rows.train_count[seen],
            trials=rows.trials[seen],
            successes=rows.successes[seen],
            n_cells=int(cells.size),
        )
        per_row = _row_log_likelihood(curve, evaluated, grid)
        order = np.argsort(evaluated.cell, kind="stable")
        cells_sorted = evaluated.cell[order]
        starts = np.flatnonzero(np.r_[True, cells_sorted[1:] != cells_sorted[:-1]])
        loglik[cells_sorted[starts]] = np.add.reduceat(per_row[order], starts, axis=0)
    with np.errstate(divide="ignore"):
        loglik = loglik + np.log(_share_rows(last[cells], top_share[cells], grid.size))

    # The normaliser of each cell's truncated prior, per spread: the cumulative sum up to the
    # point below its last allowed one, plus that one's share.
    below = np.where(last > 0, cumulative[:, np.maximum(last - 1, 0)], 0.0)
    norm = (below + top_share[None, :] * priors[:, last]).T  # cells x spreads
    log_norm = np.log(norm[cells])

    # Every spread's posterior is the same likelihood times a different prior row, so the
    # likelihood is exponentiated once (shifted by each cell's maximum, which no prior row
    # exceeds) and each spread costs one matrix-vector product.
    top = loglik.max(axis=1) if cells.size else np.zeros(0)
    likelihood = np.exp(loglik - top[:, None])
    with np.errstate(divide="ignore"):
        log_mass = top[:, None] + np.log(likelihood @ priors.T)
    # A cell whose likelihood sits where a narrow prior underflows: its evidence in logs.
    odd = np.flatnonzero(~np.isfinite(log_mass).all(axis=1))
    for c in odd:
        log_mass[c] = special.logsumexp(loglik[c][None, :] + log_priors, axis=1)
    # Average over the spread, weighted by its marginal likelihood (a uniform prior over the
    # candidates): with many cells this is empirical Bayes, with few it keeps the spread
    # uncertain instead of trusting a tiny one that two cells happen to agree on. The
    # marginal is up to the grid step, the same for every spread; a cell without evidence
    # adds nothing to it.
    log_w = (log_mass - log_norm).sum(axis=0) - np.log(len(spreads))
    log_evidence = float(special.logsumexp(log_w))
    weights = np.exp(log_w - log_w.max())
    weights /= weights.sum()

    # A cell without evidence: sum_s w_s prior_s / (its truncated normaliser), times its share.
    posterior = (weights[None, :] / norm) @ priors
    posterior[np.arange(grid.size)[None, :] > last[:, None]] = 0.0
    posterior[np.arange(size), last] *= top_share
    # An evaluated cell: sum_s w_s L_c prior_s / mass_cs, one product over the spreads;
    # cells whose weights would overflow it are read in logs too.
    with np.errstate(divide="ignore"):
        log_share = np.log(weights)[None, :] + top[:, None] - log_mass
    odd = np.union1d(odd, np.flatnonzero(log_share.max(axis=1) > 600.0)).astype(np.int64)
    log_share[odd] = -np.inf
    evaluated_posterior = likelihood * (np.exp(log_share) @ priors)
    for c in odd:
        joint = loglik[c][None, :] + log_priors - log_mass[c][:, None]
        evaluated_posterior[c] = weights @ np.exp(joint)
    posterior[cells] = evaluated_posterior
    return posterior, float(np.dot(weights, spreads)), log_evidence


def _cell_posteriors_with_exponents(
    curve: LearningCurve,
    rows: EvaluationRows,
    n_now: FloatArray,
    grid: FloatArray,
    tau: float | None,
    prior_mean: FloatArray | None = None,
    exponent_spreads: tuple[float, ...] = EXPONENT_SPREADS,
) -> tuple[Callable[[], FloatArray], float, FloatArray, FloatArray, float]:
    """Per-cell exponents: each cell's joint grid posterior of ``(b_c - b, log m_c)``, read
    at the cell's current ``n`` as the shared-exponent multiplier with the same rate there.

    The cell's rate is ``f_inf + a * m_c * (n + 1) ** -b_c``: ``m_c`` scales the amplitude
    (the rate with no training) as in the shared model. Prior: ``log m_c ~ Normal(mu_c,
    tau^2)`` (``mu_c`` is ``prior_mean``, 0 by default) and, independently, ``b_c - b ~
    Normal(0, s^2)`` on :data:`EXPONENT_OFFSET_GRID` (offsets that leave :data:`B_BOUNDS`
    excluded), truncated so the rate now is a probability under every exponent. Both spreads
    are averaged over their candidates (:data:`TAU_GRID` or ``tau``, ``exponent_spreads``:
    :data:`EXPONENT_SPREADS` unless given) by the marginal likelihood of all cells' rows, as
    in :func:`_cell_posteriors`. A cell evaluated at one ``n`` learns its rate there but little
    of its exponent; one evaluated before and after training arrived learns how fast it
    falls.

    Returns a function giving the posterior of ``log m`` under the shared ``b`` at ``n_now``
    (formed on its first call where the cells fit in one block, so a fit that reads many
    pooled curves forms it for the one it keeps; a point of the joint grid moves to ``log m_c - (b_c - b) log(n_now + 1)``, split between the two
    nearest grid points), the posterior-mean ``tau``, each cell's marginal posterior of
    ``log m_c`` (cells x grid), its posterior-mean ``b_c - b``, and the log of the marginal
    likelihood of every row under ``curve``, each cell's state integrated out (up to a
    constant the same for every ``curve``: what a test between pooled curves compares).
    """
    spreads = (tau,) if tau is not None else TAU_GRID
    for spread in spreads:
        if not spread > 0:
            raise ValueError(f"tau must be > 0, got {spread}")
    if not exponent_spreads or not all(s > 0 for s in exponent_spreads):
        raise ValueError(f"exponent spreads must be > 0, got {exponent_spreads}")
    offsets = EXPONENT_OFFSET_GRID
    exponents = curve.b + offsets
    valid = (exponents >= B_BOUNDS[0]) & (exponents <= B_BOUNDS[1])
    size = rows.n_cells
    centre = np.zeros(size) if prior_mean is None else prior_mean
    log_pb = np.array([-0.5 * (offsets / s) ** 2 for s in exponent_spreads])  # s x offsets
    log_pb[:, ~valid] = -np.inf
    prior_b = np.exp(log_pb)
    curves = [
        LearningCurve(f_inf=curve.f_inf, a=curve.a, b=float(b) if ok else curve.b)
        for b, ok in zip(exponents, valid, strict=True)
    ]
    # The evaluated rows, sorted by cell, so that each block of cells reads its own.
    seen = rows.trials > 0
    order = np.argsort(rows.cell[seen], kind="stable")
    by_cell = EvaluationRows(
        cell=rows.cell[seen][order],
        train_count=rows.train_count[seen][order],
        trials=rows.trials[seen][order],
        successes=rows.successes[seen][order],
        n_cells=size,
    )

    shift = np.zeros(size)  # the log of what each cell's likelihood was divided by

    def block(lo: int, hi: int) -> tuple[FloatArray, FloatArray, FloatArray]:
        """The prior of ``log m`` per spread, the allowed share of every grid point and the
        likelihood (shifted by each cell's maximum) of cells ``lo .. hi - 1``."""
        shifted = grid[None, :] - centre[lo:hi, None]
        prior_m = np.exp(
            np.array([-0.5 * (shifted / spread) ** 2 for spread in spreads]).transpose(1, 0, 2)
        )  # cells x spreads x grid
        # log_post[c, j, i]: the cell's log-likelihood at (offset j, grid point i) plus the
        # log of the share of that point allowed by the truncation; a cell without rows has
        # only the latter, so its posterior is its truncated prior.
        log_allowed = np.empty((hi - lo, offsets.size, grid.size))
        with np.errstate(divide="ignore"):
            for j, curve_j in enumerate(curves):
                last, top_share = _ceiling(curve_j, n_now[lo:hi], grid)
                log_allowed[:, j, :] = np.log(_share_rows(last, top_share, grid.size))
        log_post = log_allowed.copy()
        first, stop = np.searchsorted(by_cell.cell, [lo, hi])
        if stop > first:
            mine = EvaluationRows(
                cell=by_cell.cell[first:stop] - lo,
                train_count=by_cell.train_count[first:stop],
                trials=by_cell.trials[first:stop],
                successes=by_cell.successes[first:stop],
                n_cells=hi - lo,
            )
            starts = np.flatnonzero(np.r_[True, mine.cell[1:] != mine.cell[:-1]])
            at = mine.cell[starts]
            for j, curve_j in enumerate(curves):
                per_row = _row_log_likelihood(curve_j, mine, grid)
                log_post[at, j, :] += np.add.reduceat(per_row, starts, axis=0)
        top = log_post.max(axis=(1, 2), keepdims=True)
        shift[lo:hi] = top.reshape(-1)
        return prior_m, np.exp(log_allowed), np.exp(log_post - top)

    def total(weights: FloatArray, prior_m: FloatArray) -> FloatArray:
        by_t = np.einsum("cji,cti->cjt", weights, prior_m)
        return np.asarray(np.einsum("cjt,sj->cst", by_t, prior_b))

    # Per cell and pair of spreads (s, t): the truncated prior's normaliser Z and the
    # evidence M. The likelihood is exponentiated once, shifted by each cell's maximum (the
    # shift is the same for every pair, so it cancels from their weights), and each sum over
    # the grid is two matrix products. A narrow spread can underflow to M = 0 where a cell's
    # likelihood lies far out: that pair then has no weight. Cells are taken in blocks of
    # _EXPONENT_BLOCK (memory: a block's cells x offsets x grid), twice when there are
    # several: once for the spreads' weights, which every cell's evidence decides, once for
    # the posteriors under them.
    bounds = [(lo, min(lo + _EXPONENT_BLOCK, size)) for lo in range(0, size, _EXPONENT_BLOCK)]
    norm = np.empty((size, len(exponent_spreads), len(spreads)))
    mass = np.empty_like(norm)
    kept: tuple[FloatArray, FloatArray, FloatArray] | None = None
    for lo, hi in bounds:
        prior_m, allowed, likelihood = block(lo, hi)
        norm[lo:hi], mass[lo:hi] = total(allowed, prior_m), total(likelihood, prior_m)
        if len(bounds) == 1:
            kept = (prior_m, allowed, likelihood)
    # The spreads' weights: the marginal likelihood of every cell's rows (a cell without
    # rows has M proportional to Z and adds nothing), under a uniform prior over the
    # candidates.
    with np.errstate(divide="ignore"):
        log_w = (np.log(mass) - np.log(norm)).sum(axis=0)
    log_w -= np.log(log_w.size)
    log_evidence = float(special.logsumexp(log_w) + shift.sum())
    weights = np.exp(log_w - log_w.max())
    weights /= weights.sum()
    # Each cell's posterior: sum over (s, t) of w_st * L * prior_st / M_cst.
    coefficient = np.divide(
        weights[None, :, :], mass, out=np.zeros_like(mass), where=weights[None, :, :] > 0
    )

    # Each cell's joint posterior, its marginal of log m_c and its mean exponent offset; and
    # the read at n_now under the shared b, the multiplier with the same rate there. Only the
    # read a fit keeps needs that, so with one block it is formed on demand from the joint
    # kept; with several (the joints would not all fit in memory) as each block passes.
    marginal = np.empty((size, grid.size))
    offset_mean = np.empty(size)
    step = float(grid[1] - grid[0])
    posterior = np.zeros(size * grid.size)

    def move(lo: int, hi: int, joint: FloatArray) -> None:
        moved = grid[None, None, :] - offsets[None, :, None] * np.log1p(n_now[lo:hi])[:, None, None]
        position = np.clip((moved - grid[0]) / step, 0.0, grid.size - 1.0)
        low = np.minimum(np.floor(position).astype(np.int64), grid.size - 2)
        upper = position - low
        base = (np.arange(hi - lo) * grid.size)[:, None, None]
        span = (hi - lo) * grid.size
        mine = posterior[lo * grid.size : hi * grid.size]  # a view: this block's cells
        mine += _sum_by((base + low).ravel(), (joint * (1.0 - upper)).ravel(), span)
        mine += _sum_by((base + low + 1).ravel(), (joint * upper).ravel(), span)

    waiting: FloatArray | None = None  # one block's joint, until its read at n_now is asked
    for lo, hi in bounds:
        prior_m, _, likelihood = kept if kept is not None else block(lo, hi)
        by_s = np.einsum("cst,sj->cjt", coefficient[lo:hi], prior_b)
        mix = np.einsum("cjt,cti->cji", by_s, prior_m)  # cells x offsets x grid
        joint = likelihood * mix
        joint /= joint.sum(axis=(1, 2), keepdims=True)
        marginal[lo:hi] = joint.sum(axis=1)
        offset_mean[lo:hi] = (joint.sum(axis=2) * offsets).sum(axis=1)
        if kept is None:
            move(lo, hi, joint)
        else:
            waiting = joint

    def at_now() -> FloatArray:
        nonlocal waiting
        if waiting is not None:
            move(0, size, waiting)
            waiting = None
        return posterior.reshape(size, grid.size)

    return (
        at_now,
        float(np.dot(weights.sum(axis=0), spreads)),
        marginal,
        offset_mean,
        log_evidence,
    )


def _condition_means(
    codes: IntArray, log_m: FloatArray, variance: FloatArray, tau: float
) -> FloatArray:
    """Each cell's prior mean of ``log m``: a sum of one effect per condition value, fitted
    by weighted ridge regression on the cells' posterior means (weight ``1 / (variance +
    tau^2)``, :data:`CONDITION_RIDGE` on every effect; code ``-1`` is a value not named)."""
    columns = [
        codes[:, d] == value
        for d in range(codes.shape[1])
        for value in np.unique(codes[:, d][codes[:, d] >= 0])
    ]
    if not columns:
        return np.zeros(log_m.size)
    design = np.array(columns, dtype=np.float64).T
    weight = 1.0 / (variance + tau * tau)
    gram = design.T @ (design * weight[:, None]) + CONDITION_RIDGE * np.eye(design.shape[1])
    effects = np.linalg.solve(gram, design.T @ (weight * log_m))
    return np.asarray(design @ effects, dtype=np.float64)


def _ceiling(
    curve: LearningCurve, n_now: FloatArray, grid: FloatArray
) -> tuple[IntArray, FloatArray]:
    """Each cell's last allowed grid point and the share of its interval allowed: grid point
    ``j`` stands for ``log m`` within half a step of it, allowed where the rate at the cell's
    n is at most 1 (the points below ``last`` wholly, none above it; the lowest always)."""
    size = n_now.size
    if not curve.a > 0:
        return np.full(size, grid.size - 1), np.ones(size)
    step = float(grid[1] - grid[0])
    level_now = level_from_amplitude(curve.a, n_now, curve.b)
    log_ceiling = np.log(1.0 - curve.f_inf) - np.log(level_now)
    # In steps above the lower edge of the lowest point's interval.
    position = (log_ceiling - (grid[0] - step / 2)) / step
    last = np.clip(np.ceil(position).astype(np.int64) - 1, 0, grid.size - 1)
    top_share = np.clip(position - last, 0.0, 1.0)
    top_share = np.where(top_share > 0, top_share, 1.0)  # the lowest point when nothing fits
    return last, top_share


def _share_rows(last: IntArray, top_share: FloatArray, size: int) -> FloatArray:
    """The allowed share of every grid point, per cell (rows of 1, the top share, then 0)."""
    points = np.arange(size)[None, :]
    rows = (points < last[:, None]).astype(np.float64)
    rows[np.arange(last.size), last] = top_share
    return rows
