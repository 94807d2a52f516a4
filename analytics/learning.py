"""Refit learning curves after each evaluation: a pooled curve plus per-cell deviations.

Model. Every cell ``c`` follows ``f_c(n) = f_inf + a * m_c * (n + 1) ** -b``: the floor
``f_inf`` and exponent ``b`` are shared, each cell scales the pooled amplitude ``a`` by its
own multiplier ``m_c`` (a hard cell starts higher, an easy one lower, all learn at the same
relative pace). Evidence is a list of evaluation rows ``(cell, n at evaluation, trials,
successes)``; a cell evaluated after several rounds contributes several rows at different
``n``, which is what identifies ``b``.

Fit:

1. **Pooled curve** ``(f_inf, a, b)``: binomial maximum likelihood over all rows with
   :func:`analytics.curves.fit_learning_curve` (which falls back to its prior curve when the
   rows cannot identify three parameters).
2. **Per-cell multipliers with partial pooling**: ``log m_c ~ Normal(0, tau^2)`` (a
   log-normal random effect). For each cell the exact posterior of ``log m_c`` given its rows
   is computed on a fixed grid (no Laplace approximation: with a handful of failures the
   posterior is far from normal), truncated so the cell's rate at its current ``n`` stays a
   probability. The spread ``tau`` is not fixed: the posteriors under each candidate spread
   are averaged with weights proportional to the marginal likelihood of all cells' rows
   (a uniform prior over the candidates). With many cells this is empirical Bayes — the
   spread is learned from how much cells actually differ; with few it stays uncertain, so
   thinly evaluated cells keep wide posteriors. A cell with thin evidence stays near the
   pool, one with many trials follows its own data.
3. **Refinement** (``refine`` times, default 2): the shared ``(f_inf, a, b)`` are refitted
   with each cell's multiplier held at its posterior (geometric) mean — otherwise a hard
   cell with little data and an easy cell with much would be read as learning — and step 2
   is repeated. A floor ``f_inf > 0`` is kept only when a likelihood-ratio test against
   ``f_inf = 0`` demands it (:data:`FLOOR_EVIDENCE`): cells that learn more slowly than the
   shared exponent otherwise pass for a floor, and a spurious floor above the target would
   declare the target out of reach.

**Per-cell exponents** (``exponents=True``, what the steered strategy uses). A cell that
learns faster or slower than the pool is misread by a shared exponent: its rows at earlier
``n`` pull its multiplier the wrong way, so its rate *now* — what decides where the next
episodes go — comes out too high or too low. With this option each cell has its own exponent
``b_c = b + delta_c``, ``delta_c ~ Normal(0, s^2)`` on a grid of offsets
(:data:`EXPONENT_OFFSET_GRID`), its posterior joint with ``log m_c`` (the spread ``s``
averaged over :data:`EXPONENT_SPREADS` by marginal likelihood, like ``tau``). A cell seen at
one ``n`` learns its rate there but little of its exponent; one seen before and after
training arrived learns its own. The joint posterior is then read at each cell's current ``n`` as the
posterior of the shared-exponent multiplier giving the same rate there, so every method of
:class:`CurveSet` keeps its meaning at the current counts (rates and gains further away
follow the shared ``b``); :attr:`CurveSet.exponent` holds each cell's posterior-mean exponent.
With ``conditions`` (each cell's value per condition dimension) the prior mean of ``log m_c``
is no longer 0 but a sum of one effect per condition value (dim light is hard wherever it
occurs), fitted by weighted ridge regression on the cells' posterior means in each
refinement; ``tau`` is then the spread around that.

The grid posterior gives everything steering needs without refitting: the posterior-mean
amplitude (what a cell is expected to gain), upper quantiles (optimistic value for thin
evidence) and posterior draws (Thompson sampling). :class:`CurveSet` is the result; the gap
engine can take ``curve_set.pooled`` as its curve, and the planner takes per-cell failure
rates from :meth:`CurveSet.rate` with the shared ``f_inf`` and ``b`` (its gain
``w * (r - f_inf) * (1 - ((n0 + 1) / (n0 + k + 1)) ** b)`` is then exactly
:meth:`CurveSet.gain` times ``w``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import optimize, special

from analytics.curves import B_BOUNDS, CurveFit, LearningCurve, fit_learning_curve, log_likelihood
from campaigns.planning.gain import curve_rate, level_from_amplitude, power_gain

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

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

FLOOR_EVIDENCE = 3.84
"""Likelihood-ratio statistic a floor ``f_inf > 0`` must reach (chi-square, 1 df, 5%)."""

_RATE_EPS = 1e-12


def _sum_by(index: npt.ArrayLike, weights: FloatArray, size: int) -> FloatArray:
    return np.bincount(np.asarray(index), weights=weights, minlength=size).astype(np.float64)


@dataclass(frozen=True, eq=False)
class EvaluationRows:
    """Evaluation evidence: one row per (cell, evaluation), arrays of equal length.

    ``cell`` indexes cells ``0 .. n_cells - 1``; ``train_count`` is the cell's
    (transfer-weighted) training episodes when the evaluated policy was trained;
    ``trials`` / ``successes`` are its outcomes. Raises ValueError on malformed rows.
    """

    cell: IntArray
    train_count: FloatArray
    trials: FloatArray
    successes: FloatArray
    n_cells: int

    def __post_init__(self) -> None:
        cell = np.asarray(self.cell)
        n = np.asarray(self.train_count, dtype=np.float64)
        t = np.asarray(self.trials, dtype=np.float64)
        s = np.asarray(self.successes, dtype=np.float64)
        if not (cell.ndim == n.ndim == t.ndim == s.ndim == 1):
            raise ValueError("evaluation rows must be 1-d arrays")
        if not (cell.shape == n.shape == t.shape == s.shape):
            raise ValueError(
                f"evaluation rows must be equally long, got {cell.shape}, {n.shape}, "
                f"{t.shape}, {s.shape}"
            )
        if self.n_cells < 1:
            raise ValueError(f"need at least one cell, got n_cells={self.n_cells}")
        if cell.size and (cell.dtype.kind not in "iu" or cell.min() < 0):
            raise ValueError("cell indices must be integers >= 0")
        if cell.size and cell.max() >= self.n_cells:
            raise ValueError(f"cell index {int(cell.max())} out of range for {self.n_cells}")
        if not np.all(np.isfinite(n)) or np.any(n < 0):
            raise ValueError("training counts must be finite and >= 0")
        if not (np.all(np.isfinite(t)) and np.all(np.isfinite(s))):
            raise ValueError("trials and successes must be finite")
        if np.any(s < 0) or np.any(s > t):
            raise ValueError("need 0 <= successes <= trials in every row")
        object.__setattr__(self, "cell", cell.astype(np.int64))
        object.__setattr__(self, "train_count", n)
        object.__setattr__(self, "trials", t)
        object.__setattr__(self, "successes", s)

    @classmethod
    def snapshot(
        cls, train_count: npt.ArrayLike, trials: npt.ArrayLike, successes: npt.ArrayLike
    ) -> EvaluationRows:
        """Return one row per cell: the current policy's evaluation in every cell."""
        n = np.asarray(train_count, dtype=np.float64)
        return cls(
            cell=np.arange(n.size, dtype=np.int64),
            train_count=n,
            trials=np.asarray(trials, dtype=np.float64),
            successes=np.asarray(successes, dtype=np.float64),
            n_cells=int(n.size),
        )

    @classmethod
    def of_evaluations(
        cls, train_count: npt.ArrayLike, trials: npt.ArrayLike, successes: npt.ArrayLike
    ) -> EvaluationRows:
        """Return the rows of evaluations given as (evaluations x cells) arrays: the cells
        each evaluation tried, rows of equal (cell, training count) merged."""
        t = np.atleast_2d(np.asarray(trials, dtype=np.float64))
        evaluations, size = t.shape
        keep = t.reshape(-1) > 0
        return cls(
            cell=np.tile(np.arange(size, dtype=np.int64), evaluations)[keep],
            train_count=np.asarray(train_count, dtype=np.float64).reshape(-1)[keep],
            trials=t.reshape(-1)[keep],
            successes=np.asarray(successes, dtype=np.float64).reshape(-1)[keep],
            n_cells=size,
        ).merged()

    def merged(self) -> EvaluationRows:
        """Return the same evidence with rows of equal (cell, training count) summed.

        A cell that got no data between evaluations was evaluated twice at the same ``n``:
        the likelihood is the same with one row holding both, and the fits get faster.
        """
        if self.cell.size == 0:
            return self
        keys = np.stack([self.cell.astype(np.float64), self.train_count], axis=1)
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        return EvaluationRows(
            cell=unique[:, 0].astype(np.int64),
            train_count=unique[:, 1],
            trials=_sum_by(inverse, self.trials, len(unique)),
            successes=_sum_by(inverse, self.successes, len(unique)),
            n_cells=self.n_cells,
        )

    def trials_per_cell(self) -> FloatArray:
        """Return all trials per cell, summed over evaluations."""
        return _sum_by(self.cell, self.trials, self.n_cells)

    def failures_per_cell(self) -> FloatArray:
        """Return all failures per cell, summed over evaluations."""
        return _sum_by(self.cell, self.trials - self.successes, self.n_cells)


@dataclass(frozen=True, eq=False)
class CurveSet:
    """A pooled learning curve and each cell's posterior amplitude multiplier.

    ``posterior[c]`` is the grid posterior of ``log m_c`` over ``grid`` (rows sum to 1);
    ``amplitude`` is the posterior-mean amplitude ``a * E[m_c]`` and ``tau`` the
    (posterior-mean) spread of ``log m`` across cells. ``trials`` / ``failures`` are the evidence per cell.
    ``exponent`` is each cell's posterior-mean exponent when fitted with per-cell exponents
    (``posterior`` is then the shared-exponent reading at the current counts; ``None``: every
    cell has the shared ``b``).
    """

    fit: CurveFit
    grid: FloatArray
    posterior: FloatArray
    tau: float
    amplitude: FloatArray
    trials: FloatArray
    failures: FloatArray
    exponent: FloatArray | None = None

    @property
    def pooled(self) -> LearningCurve:
        """Return the pooled curve (the gap engine's prior curve)."""
        return self.fit.curve

    @property
    def f_inf(self) -> float:
        """Return the shared floor."""
        return self.fit.curve.f_inf

    @property
    def b(self) -> float:
        """Return the shared exponent."""
        return self.fit.curve.b

    @property
    def n_cells(self) -> int:
        """Return the number of cells."""
        return int(self.amplitude.size)

    def rate(self, n: npt.ArrayLike, amplitude: npt.ArrayLike | None = None) -> FloatArray:
        """Return each cell's failure rate after ``n`` training episodes (capped at 1).

        ``amplitude`` defaults to the posterior mean; pass a quantile or a draw instead.
        """
        amp = self.amplitude if amplitude is None else np.asarray(amplitude, dtype=np.float64)
        return np.minimum(curve_rate(self.f_inf, amp, self.b, n), 1.0)

    def gain(
        self, n: npt.ArrayLike, k: npt.ArrayLike, amplitude: npt.ArrayLike | None = None
    ) -> FloatArray:
        """Return each cell's failure-rate drop from ``k`` more episodes (concave in k)."""
        amp = self.amplitude if amplitude is None else np.asarray(amplitude, dtype=np.float64)
        return power_gain(amp, n, self.b, k)

    def amplitude_quantile(self, level: float) -> FloatArray:
        """Return each cell's ``level`` posterior quantile of the amplitude ``a * m_c``.

        Raises ValueError unless ``0 < level < 1``.
        """
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level}")
        cdf = np.cumsum(self.posterior, axis=1)
        index = np.minimum((cdf < level).sum(axis=1), self.grid.size - 1)
        return self.pooled.a * np.exp(self.grid[index])

    def sample_amplitude(self, rng: np.random.Generator, size: int | None = None) -> FloatArray:
        """Draw amplitudes from each cell's posterior (shape ``(cells,)`` or ``(size, cells)``).

        Draws are independent across cells; the pooled curve is held fixed.
        """
        draws = 1 if size is None else int(size)
        cdf = np.cumsum(self.posterior, axis=1)
        u = rng.random((draws, self.n_cells)) * cdf[:, -1]
        index = np.empty((draws, self.n_cells), dtype=np.int64)
        for c in range(self.n_cells):
            index[:, c] = np.searchsorted(cdf[c], u[:, c], side="right")
        index = np.minimum(index, self.grid.size - 1)
        amp = self.pooled.a * np.exp(self.grid[index])
        return amp[0] if size is None else amp

    def rate_interval(self, n: npt.ArrayLike, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
        """Return the equal-tailed ``level`` posterior interval of each cell's rate at ``n``.

        The rate rises with the multiplier, so the interval is the curve at the amplitude's
        quantiles (the pooled ``f_inf`` and ``b`` taken as known).
        """
        tail = (1.0 - level) / 2.0
        return (
            self.rate(n, self.amplitude_quantile(tail)),
            self.rate(n, self.amplitude_quantile(1.0 - tail)),
        )

    def rate_variance(self, n: npt.ArrayLike) -> FloatArray:
        """Return the posterior variance of each cell's rate at ``n`` (before the cap at 1)."""
        level = level_from_amplitude(self.pooled.a, n, self.b)
        m = np.exp(self.grid)
        mean = (self.posterior * m).sum(axis=1)
        second = (self.posterior * m * m).sum(axis=1)
        return np.asarray(level * level * np.maximum(second - mean * mean, 0.0), dtype=np.float64)

    def subset(self, index: npt.ArrayLike) -> CurveSet:
        """Return the curve set of the cells at ``index`` (same pooled curve and spread)."""
        at = np.asarray(index, dtype=np.int64)
        return CurveSet(
            fit=self.fit,
            grid=self.grid,
            posterior=self.posterior[at],
            tau=self.tau,
            amplitude=self.amplitude[at],
            trials=self.trials[at],
            failures=self.failures[at],
            exponent=None if self.exponent is None else self.exponent[at],
        )

    def multiplier_interval(self, level: float = 0.9) -> tuple[FloatArray, FloatArray]:
        """Return the equal-tailed posterior interval of each cell's multiplier ``m_c``."""
        tail = (1.0 - level) / 2.0
        a = self.pooled.a if self.pooled.a > 0 else 1.0
        return self.amplitude_quantile(tail) / a, self.amplitude_quantile(1.0 - tail) / a


def _row_log_likelihood(curve: LearningCurve, rows: EvaluationRows, grid: FloatArray) -> FloatArray:
    """Return the binomial log-likelihood of every row at every grid multiplier (rows x grid)."""
    level = level_from_amplitude(curve.a, rows.train_count, curve.b)
    rate = curve.f_inf + level[:, None] * np.exp(grid)[None, :]
    rate = np.clip(rate, _RATE_EPS, 1.0 - _RATE_EPS)
    failures = (rows.trials - rows.successes)[:, None]
    return failures * np.log(rate) + rows.successes[:, None] * np.log1p(-rate)


def _cell_posteriors(
    curve: LearningCurve,
    rows: EvaluationRows,
    n_now: FloatArray,
    grid: FloatArray,
    tau: float | None,
) -> tuple[FloatArray, float]:
    """Return each cell's grid posterior of ``log m`` and the (posterior-mean) spread."""
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
    log_w = (log_mass - log_norm).sum(axis=0)
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
    return posterior, float(np.dot(weights, spreads))


def _cell_posteriors_with_exponents(
    curve: LearningCurve,
    rows: EvaluationRows,
    n_now: FloatArray,
    grid: FloatArray,
    tau: float | None,
    prior_mean: FloatArray | None = None,
) -> tuple[FloatArray, float, FloatArray, FloatArray]:
    """Per-cell exponents: each cell's joint grid posterior of ``(b_c - b, log m_c)``, read
    at the cell's current ``n`` as the shared-exponent multiplier with the same rate there.

    The cell's rate is ``f_inf + a * m_c * (n + 1) ** -b_c``: ``m_c`` scales the amplitude
    (the rate with no training) as in the shared model. Prior: ``log m_c ~ Normal(mu_c,
    tau^2)`` (``mu_c`` is ``prior_mean``, 0 by default) and, independently, ``b_c - b ~
    Normal(0, s^2)`` on :data:`EXPONENT_OFFSET_GRID` (offsets that leave :data:`B_BOUNDS`
    excluded), truncated so the rate now is a probability under every exponent. Both spreads
    are averaged over their candidates (:data:`TAU_GRID` or ``tau``,
    :data:`EXPONENT_SPREADS`) by the marginal likelihood of all cells' rows, as in
    :func:`_cell_posteriors`. A cell evaluated at one ``n`` learns its rate there but little
    of its exponent; one evaluated before and after training arrived learns how fast it
    falls.

    Returns the posterior of ``log m`` under the shared ``b`` at ``n_now`` (a point of the
    joint grid moves to ``log m_c - (b_c - b) log(n_now + 1)``, split between the two
    nearest grid points), the posterior-mean ``tau``, each cell's marginal posterior of
    ``log m_c`` (cells x grid) and its posterior-mean ``b_c - b``.
    """
    spreads = (tau,) if tau is not None else TAU_GRID
    for spread in spreads:
        if not spread > 0:
            raise ValueError(f"tau must be > 0, got {spread}")
    offsets = EXPONENT_OFFSET_GRID
    exponents = curve.b + offsets
    valid = (exponents >= B_BOUNDS[0]) & (exponents <= B_BOUNDS[1])
    size = rows.n_cells
    centre = np.zeros(size) if prior_mean is None else prior_mean
    shifted = grid[None, :] - centre[:, None]
    log_pm = np.array([-0.5 * (shifted / spread) ** 2 for spread in spreads])  # t x cells x grid
    log_pm = log_pm.transpose(1, 0, 2)  # cells x spreads x grid
    log_pb = np.array([-0.5 * (offsets / s) ** 2 for s in EXPONENT_SPREADS])  # s x offsets
    log_pb[:, ~valid] = -np.inf

    # log_post[c, j, i]: the cell's log-likelihood at (offset j, grid point i) plus the log of
    # the share of that point allowed by the truncation; a cell without rows has only the
    # latter, so its posterior is its truncated prior.
    log_allowed = np.empty((size, offsets.size, grid.size))
    curves = [
        LearningCurve(f_inf=curve.f_inf, a=curve.a, b=float(b) if ok else curve.b)
        for b, ok in zip(exponents, valid, strict=True)
    ]
    with np.errstate(divide="ignore"):
        for j, curve_j in enumerate(curves):
            last, top_share = _ceiling(curve_j, n_now, grid)
            log_allowed[:, j, :] = np.log(_share_rows(last, top_share, grid.size))
    log_post = log_allowed.copy()
    seen = rows.trials > 0
    cells = np.unique(rows.cell[seen])
    if cells.size:
        evaluated = EvaluationRows(
            cell=np.searchsorted(cells, rows.cell[seen]),
            train_count=rows.train_count[seen],
            trials=rows.trials[seen],
            successes=rows.successes[seen],
            n_cells=int(cells.size),
        )
        order = np.argsort(evaluated.cell, kind="stable")
        cells_sorted = evaluated.cell[order]
        starts = np.flatnonzero(np.r_[True, cells_sorted[1:] != cells_sorted[:-1]])
        at = cells[cells_sorted[starts]]
        for j, curve_j in enumerate(curves):
            per_row = _row_log_likelihood(curve_j, evaluated, grid)
            log_post[at, j, :] += np.add.reduceat(per_row[order], starts, axis=0)

    # Per cell and pair of spreads (s, t): the truncated prior's normaliser Z and the
    # evidence M. The likelihood is exponentiated once, shifted by each cell's maximum (the
    # shift is the same for every pair, so it cancels from their weights), and each sum over
    # the grid is two matrix products. A narrow spread can underflow to M = 0 where a cell's
    # likelihood lies far out: that pair then has no weight.
    prior_m, prior_b = np.exp(log_pm), np.exp(log_pb)
    allowed = np.exp(log_allowed)
    likelihood = np.exp(log_post - log_post.max(axis=(1, 2), keepdims=True))

    def total(weights: FloatArray) -> FloatArray:
        by_t = np.einsum("cji,cti->cjt", weights, prior_m)
        return np.asarray(np.einsum("cjt,sj->cst", by_t, prior_b))

    norm, mass = total(allowed), total(likelihood)
    # The spreads' weights: the marginal likelihood of every cell's rows (a cell without
    # rows has M proportional to Z and adds nothing), under a uniform prior over the
    # candidates.
    with np.errstate(divide="ignore"):
        log_w = (np.log(mass) - np.log(norm)).sum(axis=0)
    weights = np.exp(log_w - log_w.max())
    weights /= weights.sum()
    # Each cell's posterior: sum over (s, t) of w_st * L * prior_st / M_cst.
    coefficient = np.divide(
        weights[None, :, :], mass, out=np.zeros_like(mass), where=weights[None, :, :] > 0
    )
    by_s = np.einsum("cst,sj->cjt", coefficient, prior_b)
    mix = np.einsum("cjt,cti->cji", by_s, prior_m)  # cells x offsets x grid
    joint = likelihood * mix
    joint /= joint.sum(axis=(1, 2), keepdims=True)

    # Read at n_now under the shared b: the multiplier with the same rate there.
    step = float(grid[1] - grid[0])
    moved = grid[None, None, :] - offsets[None, :, None] * np.log1p(n_now)[:, None, None]
    position = np.clip((moved - grid[0]) / step, 0.0, grid.size - 1.0)
    low = np.minimum(np.floor(position).astype(np.int64), grid.size - 2)
    upper = position - low
    base = (np.arange(size) * grid.size)[:, None, None]
    cells_by_grid = size * grid.size
    posterior = _sum_by((base + low).ravel(), (joint * (1.0 - upper)).ravel(), cells_by_grid)
    posterior += _sum_by((base + low + 1).ravel(), (joint * upper).ravel(), cells_by_grid)
    return (
        posterior.reshape(size, grid.size),
        float(np.dot(weights.sum(axis=0), spreads)),
        joint.sum(axis=1),
        (joint.sum(axis=2) * offsets).sum(axis=1),
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


def _refit_with_offsets(
    start: LearningCurve, rows: EvaluationRows, offsets: FloatArray, *, floor: bool = True
) -> tuple[LearningCurve, float] | None:
    """Return the ML ``(f_inf, a, b)`` with row ``r``'s amplitude scaled by ``offsets[r]``,
    and its log-likelihood (up to a constant); ``floor=False`` fixes ``f_inf = 0``."""
    seen = rows.trials > 0
    if not seen.any():
        return None
    n, t, s, m = rows.train_count[seen], rows.trials[seen], rows.successes[seen], offsets[seen]
    k = t - s
    if k.sum() == 0:
        return None
    log_n1 = np.log1p(n)
    scale = 1.0 / float(t.sum())

    def objective(theta: FloatArray) -> tuple[float, FloatArray]:
        f_inf, a, b = theta
        x = m * np.exp(-b * log_n1)
        raw = f_inf + a * x
        rate = np.clip(raw, _RATE_EPS, 1.0 - _RATE_EPS)
        ll = k * np.log(rate) + s * np.log1p(-rate)
        d_rate = np.where(raw == rate, k / rate - s / (1.0 - rate), 0.0)
        grad = np.array([d_rate.sum(), np.dot(d_rate, x), np.dot(d_rate, -a * x * log_n1)])
        return -float(ll.sum()) * scale, -grad * scale

    bounds = [(0.0, 0.5 if floor else 0.0), (1e-9, 1.0), B_BOUNDS]
    x0 = np.clip(
        [start.f_inf, max(start.a, 1e-6), start.b],
        [lo for lo, _ in bounds],
        [hi for _, hi in bounds],
    )
    result = optimize.minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds)
    if not np.isfinite(result.fun):
        return None
    f_inf, a, b = (float(v) for v in result.x)
    return LearningCurve(f_inf=f_inf, a=min(a, 1.0 - f_inf), b=b), -float(result.fun) / scale


def fit_curve_set(
    rows: EvaluationRows,
    current_train_count: npt.ArrayLike | None = None,
    *,
    prior: LearningCurve | None = None,
    curve: LearningCurve | CurveFit | None = None,
    min_cells: int = 3,
    tau: float | None = None,
    refine: int = 2,
    floor_evidence: float | None = FLOOR_EVIDENCE,
    exponents: bool = False,
    conditions: npt.ArrayLike | None = None,
) -> CurveSet:
    """Fit the pooled curve and every cell's amplitude multiplier from evaluation rows.

    ``current_train_count`` (per cell) truncates each cell's multiplier so its rate now is a
    probability; it defaults to the largest ``n`` among the cell's rows (0 without rows).
    ``curve`` fixes the pooled curve (steps 1 and 3 are skipped: the cells are read around
    it, e.g. a refit over the whole history or the curve a stored gap report used); otherwise
    ``prior`` and ``min_cells`` go to :func:`analytics.curves.fit_learning_curve`; ``tau``
    fixes the random-effect spread instead of averaging over :data:`TAU_GRID`; ``refine``
    and ``floor_evidence`` control step 3 of the module docstring. ``exponents`` fits an
    exponent per cell and ``conditions`` (cells x dimensions value codes, -1 for a value not
    stated; only with ``exponents``) centres each cell's multiplier prior on its conditions'
    effects, learnt in step 3 (see the module docstring). Raises ValueError on malformed
    input.
    """
    given = curve is not None
    if isinstance(curve, CurveFit):
        fit = curve
    elif curve is not None:
        fit = CurveFit(
            curve=curve,
            source="given",
            n_cells=int(np.count_nonzero(rows.trials_per_cell())),
            n_trials=int(rows.trials.sum()),
            n_failures=int((rows.trials - rows.successes).sum()),
            log_likelihood=log_likelihood(curve, rows.train_count, rows.trials, rows.successes),
        )
    else:
        fit = fit_learning_curve(
            rows.train_count, rows.trials, rows.successes, prior=prior, min_cells=min_cells
        )
    curve = fit.curve
    grid = LOG_MULTIPLIER_GRID
    size = rows.n_cells
    if current_train_count is None:
        n_now = np.zeros(size)
        np.maximum.at(n_now, rows.cell, rows.train_count)
    else:
        n_now = np.asarray(current_train_count, dtype=np.float64)
        if n_now.shape != (size,):
            raise ValueError(f"current_train_count must have {size} entries, got {n_now.shape}")
        if not np.all(np.isfinite(n_now)) or np.any(n_now < 0):
            raise ValueError("current_train_count must be finite and >= 0")

    codes = None if conditions is None else np.asarray(conditions, dtype=np.int64)
    if codes is not None and (not exponents or codes.ndim != 2 or codes.shape[0] != size):
        raise ValueError(
            "conditions need exponents=True and one row of value codes per cell, "
            f"got shape {codes.shape} for {size} cells"
        )
    prior_mean: FloatArray | None = None

    def posteriors(curve: LearningCurve) -> tuple[FloatArray, float, FloatArray, FloatArray]:
        nonlocal prior_mean
        if not exponents:
            posterior, spread = _cell_posteriors(curve, rows, n_now, grid, tau)
            return posterior, spread, (posterior * grid).sum(axis=1), np.zeros(size)
        posterior, spread, marginal, offset = _cell_posteriors_with_exponents(
            curve, rows, n_now, grid, tau, prior_mean
        )
        log_m = (marginal * grid).sum(axis=1)
        if codes is not None:
            variance = np.maximum((marginal * grid * grid).sum(axis=1) - log_m * log_m, 0.0)
            prior_mean = _condition_means(codes, log_m, variance, spread)
        return posterior, spread, log_m, offset

    posterior, best_tau, log_m, offset = posteriors(curve)
    for _ in range(refine if fit.source == "fitted" and not given else 0):
        # Refit the shared (f_inf, a, b) with each cell's multiplier (and exponent offset)
        # held at its posterior mean, so differences between cells are not mistaken for
        # learning.
        cell = rows.cell
        offsets = np.exp(log_m[cell] - offset[cell] * np.log1p(rows.train_count))
        with_floor = _refit_with_offsets(curve, rows, offsets)
        if with_floor is None:
            break
        curve = with_floor[0]
        if floor_evidence is not None:
            # Claim a floor only when the data demand it (likelihood-ratio test against
            # f_inf = 0): slow learners otherwise pass for a floor, and a spurious floor
            # above the target would declare it out of reach.
            without = _refit_with_offsets(curve, rows, offsets, floor=False)
            if without is not None and 2.0 * (with_floor[1] - without[1]) < floor_evidence:
                curve = without[0]
        posterior, best_tau, log_m, offset = posteriors(curve)
    if curve is not fit.curve:
        fit = CurveFit(
            curve=curve,
            source=fit.source,
            n_cells=fit.n_cells,
            n_trials=fit.n_trials,
            n_failures=fit.n_failures,
            log_likelihood=log_likelihood(curve, rows.train_count, rows.trials, rows.successes),
            reason=fit.reason,
        )
    amplitude = curve.a * (posterior * np.exp(grid)).sum(axis=1)
    return CurveSet(
        fit=fit,
        grid=grid,
        posterior=posterior,
        tau=float(best_tau),
        amplitude=amplitude,
        trials=rows.trials_per_cell(),
        failures=rows.failures_per_cell(),
        exponent=curve.b + offset if exponents else None,
    )
