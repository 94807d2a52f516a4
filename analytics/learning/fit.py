"""The fit: pooled curve, per-cell posteriors and their refinement (steps 1-3 of
:mod:`analytics.learning`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import optimize

from analytics.curves import (
    B_BOUNDS,
    DEFAULT_PRIOR,
    CurveFit,
    LearningCurve,
    exponent_penalty,
    fit_learning_curve,
    log_likelihood,
)
from analytics.learning.curveset import CurveSet
from analytics.learning.posteriors import (
    _RATE_EPS,
    EXPONENT_SPREADS,
    LOG_MULTIPLIER_GRID,
    _cell_posteriors,
    _cell_posteriors_with_exponents,
    _condition_means,
)
from analytics.learning.rows import EvaluationRows, FloatArray

FLOOR_EVIDENCE = 3.84
"""Likelihood-ratio statistic a floor ``f_inf > 0`` must reach (chi-square, 1 df, 5%)."""

FLOOR_SCALE = 0.005
"""Mean of the floor's prior (exponential): a floor is failure no amount of data removes,
rarely more than a fraction of a percent. Without it, an evaluation too thin to show any
learning (every cell failing at the pool's rate) passed for a floor at that rate."""

SETTLED_EXPONENT = 0.05
"""Where the floor is tested, the refinement goes on until the shared exponent moves less than
this in a step (see :func:`fit_curve_set`)."""

MAX_REFINE = 8
"""The most refinements until the exponent settles."""


@dataclass(frozen=True)
class _Read:
    """The cells read around one pooled curve: their posteriors at the current counts
    (formed on demand: only the read a fit keeps needs them), the spread, each cell's
    posterior-mean ``log m`` and exponent offset, the rows' log marginal likelihood plus the
    log priors of the pooled exponent and floor, and the conditions' prior means for the
    next read."""

    posterior_now: Callable[[], FloatArray]
    tau: float
    log_m: FloatArray
    offset: FloatArray
    log_evidence: float = 0.0
    prior_mean: FloatArray | None = None


def _refit_with_offsets(
    start: LearningCurve,
    rows: EvaluationRows,
    offsets: FloatArray,
    *,
    floor: bool = True,
    centre: float = DEFAULT_PRIOR.b,
) -> tuple[LearningCurve, float] | None:
    """Return the ``(f_inf, a, b)`` of greatest likelihood times the exponent's prior
    (centred on ``centre``) with row ``r``'s amplitude scaled by ``offsets[r]``, and that
    log-likelihood plus log prior (up to a constant); ``floor=False`` fixes ``f_inf = 0``."""
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
        penalty, d_penalty = exponent_penalty(float(b), centre)
        penalty += f_inf / FLOOR_SCALE
        grad = np.array(
            [
                d_rate.sum() - 1.0 / FLOOR_SCALE,
                np.dot(d_rate, x),
                np.dot(d_rate, -a * x * log_n1) - d_penalty,
            ]
        )
        return (penalty - float(ll.sum())) * scale, -grad * scale

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


def given_fit(curve: LearningCurve | CurveFit, rows: EvaluationRows) -> CurveFit:
    """A pooled curve given, not fitted, as the fit of these rows (a fit passes as it is)."""
    if isinstance(curve, CurveFit):
        return curve
    return CurveFit(
        curve=curve,
        source="given",
        n_cells=int(np.count_nonzero(rows.trials_per_cell())),
        n_trials=int(rows.trials.sum()),
        n_failures=int((rows.trials - rows.successes).sum()),
        log_likelihood=log_likelihood(curve, rows.train_count, rows.trials, rows.successes),
    )


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
    exponent_spreads: tuple[float, ...] | None = None,
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
    effects, learnt in step 3 (see the module docstring); ``exponent_spreads`` (only with
    ``exponents``) are the candidate spreads of the cells' exponents, :data:`EXPONENT_SPREADS`
    unless given. Raises ValueError on malformed input.
    """
    given = curve is not None
    if curve is not None:
        fit = given_fit(curve, rows)
    else:
        fit = fit_learning_curve(
            rows.train_count, rows.trials, rows.successes, prior=prior, min_cells=min_cells
        )
    curve = fit.curve
    centre = (prior if prior is not None else DEFAULT_PRIOR).b  # of the exponent's prior
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
    if exponent_spreads is not None and not exponents:
        raise ValueError("exponent spreads need exponents=True")
    spreads_b = EXPONENT_SPREADS if exponent_spreads is None else tuple(exponent_spreads)

    def read(curve: LearningCurve, prior_mean: FloatArray | None) -> _Read:
        if not exponents:
            posterior, spread, log_evidence = _cell_posteriors(curve, rows, n_now, grid, tau)
            log_evidence -= exponent_penalty(curve.b, centre)[0] + curve.f_inf / FLOOR_SCALE
            return _Read(
                lambda: posterior,
                spread,
                (posterior * grid).sum(axis=1),
                np.zeros(size),
                log_evidence,
            )
        at_now, spread, marginal, offset, log_evidence = _cell_posteriors_with_exponents(
            curve, rows, n_now, grid, tau, prior_mean, spreads_b
        )
        log_m = (marginal * grid).sum(axis=1)
        following = prior_mean
        if codes is not None:
            variance = np.maximum((marginal * grid * grid).sum(axis=1) - log_m * log_m, 0.0)
            following = _condition_means(codes, log_m, variance, spread)
        log_evidence -= exponent_penalty(curve.b, centre)[0] + curve.f_inf / FLOOR_SCALE
        return _Read(at_now, spread, log_m, offset, log_evidence, following)

    def offsets_of(now: _Read) -> FloatArray:
        # Each row's multiplier (and exponent offset) held at its cell's posterior mean, so
        # differences between cells are not mistaken for learning.
        cell = rows.cell
        return np.exp(now.log_m[cell] - now.offset[cell] * np.log1p(rows.train_count))

    def refined(
        curve: LearningCurve,
        now: _Read,
        floor: bool,
        times: int = refine,
        settle: bool = False,
        first: tuple[LearningCurve, float] | None = None,
    ) -> tuple[LearningCurve, _Read]:
        # Refit the shared (f_inf, a, b) around the cells and read them again, ``times``
        # times, and with ``settle`` on until the exponent moves less than SETTLED_EXPONENT
        # (at most MAX_REFINE times in all); ``first`` is the first refit, already made.
        for step in range(MAX_REFINE if settle else times):
            refit = (
                first
                if step == 0 and first is not None
                else _refit_with_offsets(curve, rows, offsets_of(now), floor=floor, centre=centre)
            )
            if refit is None:
                break
            moved = abs(refit[0].b - curve.b)
            curve = refit[0]
            now = read(curve, now.prior_mean)
            if step + 1 >= times and (not settle or moved < SETTLED_EXPONENT):
                break
        return curve, now

    now = read(curve, None)
    if fit.source == "fitted" and not given and refine > 0:
        if floor_evidence is not None:
            # The pooled fit that starts the refinement reads differences between cells as
            # learning (steep, often with a floor); with per-cell exponents each refinement
            # moves the shared exponent only as far as the cells' own exponents reach. So
            # the refinement goes on until the exponent settles, once without a floor and
            # once with one, and the floor is claimed only when the data demand it: a
            # likelihood-ratio test of the rows' marginal likelihood, every cell integrated
            # out. Slow learners otherwise pass for a floor, and a spurious floor above the
            # target would declare it out of reach; testing with the cells held where the
            # floor had put them favoured the floor.
            without = refined(curve, now, floor=False, settle=True)
            first = _refit_with_offsets(curve, rows, offsets_of(now), centre=centre)
            if first is None or first[0].f_inf == 0.0:
                with_floor = without  # the refit allowed a floor wants none: the same path
            else:
                with_floor = refined(curve, now, floor=True, settle=True, first=first)
            evidence = 2.0 * (with_floor[1].log_evidence - without[1].log_evidence)
            curve, now = with_floor if evidence >= floor_evidence else without
        else:
            curve, now = refined(curve, now, floor=True)
    posterior, best_tau, offset = now.posterior_now(), now.tau, now.offset
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
        log_evidence=float(now.log_evidence),
    )


def fit_history(
    train_count: npt.ArrayLike,
    trials: npt.ArrayLike,
    successes: npt.ArrayLike,
    current_train_count: npt.ArrayLike,
    *,
    conditions: npt.ArrayLike | None = None,
    exponent_spreads: tuple[float, ...] | None = None,
) -> CurveSet:
    """The curves steering acts on, refitted on an evaluation history: the one refit of the
    recommender (:func:`analytics.steering.recommend.recommend` with a ``history``), of the
    in-app refit after every evaluation import, and of the simulated steered strategy, so
    what ``bench/steering.py`` measures is what the app and ``manage.py recommend`` run.

    ``train_count`` / ``trials`` / ``successes`` hold one row per evaluation, oldest first,
    and one column per cell (training counts effective ones when episodes transfer);
    ``current_train_count`` is each cell's training now. With two or more evaluations each
    cell has its own exponent and ``conditions`` (cells x dimensions value codes, -1 for a
    value not stated) centre its amplitude prior (see the module docstring: a shared
    exponent misreads a cell's rate now wherever it learns faster or slower than the pool).
    With one there is no history: every cell is read from its current outcomes, row for
    row, around the pooled curve, as a recommendation without history always was.
    ``exponent_spreads`` fixes the candidate spreads of the cells' exponents (with two or
    more evaluations; :data:`EXPONENT_SPREADS` unless given): the transfer's candidates are
    scored under one (:data:`analytics.steering.levels.SCORING_EXPONENT_SPREAD`). Raises
    ValueError on malformed input.
    """
    t = np.atleast_2d(np.asarray(trials, dtype=np.float64))
    n = np.atleast_2d(np.asarray(train_count, dtype=np.float64))
    s = np.atleast_2d(np.asarray(successes, dtype=np.float64))
    if not n.shape == t.shape == s.shape:
        raise ValueError(
            f"evaluation arrays must agree in shape, got {n.shape}, {t.shape}, {s.shape}"
        )
    if n.shape[0] == 1:
        return fit_curve_set(EvaluationRows.snapshot(n[0], t[0], s[0]), current_train_count)
    if n.shape[0] == 0:  # nothing evaluated yet: every cell holds the pooled prior
        return fit_curve_set(EvaluationRows.of_evaluations(n, t, s), current_train_count)
    codes = None if conditions is None else np.asarray(conditions, dtype=np.int64)
    return fit_curve_set(
        EvaluationRows.of_evaluations(n, t, s),
        current_train_count,
        exponents=True,
        conditions=codes if codes is not None and codes.size else None,
        exponent_spreads=exponent_spreads,
    )
