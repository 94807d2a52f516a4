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
    """

    fit: CurveFit
    grid: FloatArray
    posterior: FloatArray
    tau: float
    amplitude: FloatArray
    trials: FloatArray
    failures: FloatArray

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
) -> CurveSet:
    """Fit the pooled curve and every cell's amplitude multiplier from evaluation rows.

    ``current_train_count`` (per cell) truncates each cell's multiplier so its rate now is a
    probability; it defaults to the largest ``n`` among the cell's rows (0 without rows).
    ``curve`` fixes the pooled curve (steps 1 and 3 are skipped: the cells are read around
    it, e.g. a refit over the whole history or the curve a stored gap report used); otherwise
    ``prior`` and ``min_cells`` go to :func:`analytics.curves.fit_learning_curve`; ``tau``
    fixes the random-effect spread instead of averaging over :data:`TAU_GRID`; ``refine``
    and ``floor_evidence`` control step 3 of the module docstring. Raises
    ValueError on malformed input.
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

    posterior, best_tau = _cell_posteriors(curve, rows, n_now, grid, tau)
    for _ in range(refine if fit.source == "fitted" and not given else 0):
        # Refit the shared (f_inf, a, b) with each cell's multiplier held at its posterior
        # (geometric) mean, so differences between cells are not mistaken for learning.
        offsets = np.exp((posterior * grid).sum(axis=1))[rows.cell]
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
        posterior, best_tau = _cell_posteriors(curve, rows, n_now, grid, tau)
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
    )
