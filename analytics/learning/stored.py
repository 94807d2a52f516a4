"""Each cell's curve kept and read again: its posterior of ``log m`` as a few quantiles (what
a refit and a gap report store), and the curves of a campaign read on its history (a refit's
posteriors, updated by the outcomes the refit does not hold yet). Part of
:mod:`analytics.learning`.

Why quantiles. A refit over a campaign's evaluation history gives each cell a grid posterior
of its multiplier (131 points); a gap report of 20,000 cells cannot store 2.6 million of
them, and the in-app recommendation must read back exactly the curves the report scored.
Seventeen quantiles keep a posterior's shape (its skew with a handful of failures, its long
lower tail with none) far better than a mean and a spread, and :func:`posterior_from_quantiles`
turns them back into a grid posterior. The report scores the curves rebuilt from the
quantiles it stores, so the recommendation reading them back gets the same curves.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import special

from analytics.curves import CurveFit, LearningCurve
from analytics.learning.curveset import CurveSet
from analytics.learning.fit import fit_curve_set, given_fit
from analytics.learning.posteriors import (
    LOG_MULTIPLIER_GRID,
    _ceiling,
    _row_log_likelihood,
    _share_rows,
)
from analytics.learning.rows import EvaluationRows, FloatArray

POSTERIOR_LEVELS: FloatArray = np.array(
    [
        0.001,
        0.01,
        0.025,
        0.05,
        0.1,
        0.2,
        0.3,
        0.4,
        0.5,
        0.6,
        0.7,
        0.8,
        0.9,
        0.95,
        0.975,
        0.99,
        0.999,
    ]
)
"""The levels at which a cell's posterior of ``log m`` is kept."""


def _step(grid: FloatArray) -> float:
    return float(grid[1] - grid[0])


def posterior_quantiles(
    posterior: npt.ArrayLike, grid: FloatArray = LOG_MULTIPLIER_GRID
) -> FloatArray:
    """Each cell's ``log m`` at :data:`POSTERIOR_LEVELS` (cells x levels), a grid point's mass
    read as spread evenly over the half step either side of it."""
    post = np.atleast_2d(np.asarray(posterior, dtype=np.float64))
    if post.shape[1] != grid.size:
        raise ValueError(f"posteriors need {grid.size} grid points, got {post.shape[1]}")
    h = _step(grid)
    cdf = np.concatenate([np.zeros((post.shape[0], 1)), np.cumsum(post, axis=1)], axis=1)
    total = cdf[:, -1:]
    if np.any(total <= 0):
        raise ValueError("every posterior needs mass")
    cdf = cdf / total
    levels = POSTERIOR_LEVELS[None, :]
    # The first edge at or past each level; the level lies in the grid interval before it.
    above = np.minimum((cdf[:, None, :] < levels[:, :, None]).sum(axis=2), grid.size)
    above = np.maximum(above, 1)
    rows = np.arange(post.shape[0])[:, None]
    low, high = cdf[rows, above - 1], cdf[rows, above]
    fraction = np.where(high > low, (levels - low) / np.where(high > low, high - low, 1.0), 0.5)
    edges = grid[0] - h / 2 + h * (above - 1)
    return np.asarray(edges + h * np.clip(fraction, 0.0, 1.0), dtype=np.float64)


def posterior_from_quantiles(
    quantiles: npt.ArrayLike, grid: FloatArray = LOG_MULTIPLIER_GRID
) -> FloatArray:
    """Each cell's grid posterior from its quantiles (:func:`posterior_quantiles`): the
    distribution function through them, linear between, and normal tails beyond the
    outermost ones (their spread from the two outermost quantiles on each side), so that
    evidence far from the stored posterior can still move it (a cell that starts failing
    in production is read as failing, not held at its old rate by a cut-off tail)."""
    q = np.atleast_2d(np.asarray(quantiles, dtype=np.float64))
    if q.shape[1] != POSTERIOR_LEVELS.size or not np.all(np.isfinite(q)):
        raise ValueError(
            f"each cell needs {POSTERIOR_LEVELS.size} finite quantiles, got shape {q.shape}"
        )
    h = _step(grid)
    edges = np.r_[grid - h / 2, grid[-1] + h / 2]
    # Strictly increasing quantiles (a posterior inside one grid step has equal ones).
    q = np.maximum.accumulate(q + 1e-9 * np.arange(q.shape[1])[None, :], axis=1)
    z = special.ndtri(POSTERIOR_LEVELS)
    low_sd = np.maximum((q[:, 4] - q[:, 0]) / (z[4] - z[0]), h / 4)[:, None]
    high_sd = np.maximum((q[:, -1] - q[:, -5]) / (z[-1] - z[-5]), h / 4)[:, None]
    # Between the outermost quantiles, linear through them: one interpolation over every
    # cell at once, each cell's knots and edges shifted past the previous cell's (what it
    # gives outside a cell's knots is replaced by the tails below).
    shift = (edges[-1] - edges[0] + 2 * float(np.ptp(q)) + 2.0) * np.arange(q.shape[0])[:, None]
    cdf = np.interp(
        (edges[None, :] + shift).ravel(),
        (q + shift).ravel(),
        np.broadcast_to(POSTERIOR_LEVELS, q.shape).ravel(),
    ).reshape(q.shape[0], edges.size)
    below, above = edges[None, :] < q[:, :1], edges[None, :] > q[:, -1:]
    lower_tail = (
        POSTERIOR_LEVELS[0]
        * special.ndtr(z[0] + (edges[None, :] - q[:, :1]) / low_sd)
        / special.ndtr(z[0])
    )
    cdf = np.where(below, lower_tail, cdf)
    # Above, the survival function itself: 1 - F loses a far tail to rounding, and a far
    # tail is what strong new evidence weighs.
    upper_tail = (
        (1.0 - POSTERIOR_LEVELS[-1])
        * special.ndtr(-z[-1] - (edges[None, :] - q[:, -1:]) / high_sd)
        / special.ndtr(-z[-1])
    )
    survival = np.where(above, upper_tail, 1.0 - cdf)
    out = np.where(above[:, 1:], survival[:, :-1] - survival[:, 1:], np.diff(cdf, axis=1))
    out[:, 0] += cdf[:, 0]  # what lies off the grid goes to its end points
    out[:, -1] += survival[:, -1]
    return np.asarray(out / out.sum(axis=1, keepdims=True), dtype=np.float64)


def curves_from_quantiles(
    curve: LearningCurve | CurveFit,
    tau: float,
    quantiles: npt.ArrayLike,
    n: npt.ArrayLike,
    trials: npt.ArrayLike,
    successes: npt.ArrayLike,
    grid: FloatArray = LOG_MULTIPLIER_GRID,
) -> CurveSet:
    """The curve set whose cells hold the posteriors the quantiles describe, around the
    pooled curve and spread given (``n`` / ``trials`` / ``successes``: each cell's training
    and the outcomes shown for it, as :func:`analytics.gap.gap_curves` takes them)."""
    rows = EvaluationRows.snapshot(np.asarray(n, dtype=np.float64), trials, successes)
    fit = given_fit(curve, rows)
    posterior = posterior_from_quantiles(quantiles, grid)
    return CurveSet(
        fit=fit,
        grid=grid,
        posterior=posterior,
        tau=float(tau),
        amplitude=fit.curve.a * (posterior * np.exp(grid)).sum(axis=1),
        trials=rows.trials_per_cell(),
        failures=rows.failures_per_cell(),
    )


def curves_on_history(
    curve: LearningCurve | CurveFit,
    tau: float,
    history: npt.ArrayLike,
    held_trials: npt.ArrayLike,
    held_successes: npt.ArrayLike,
    n: npt.ArrayLike,
    trials: npt.ArrayLike,
    successes: npt.ArrayLike,
) -> tuple[CurveSet, FloatArray]:
    """Every cell's curve read on its history: the posterior a refit over the evaluation
    history gave it (``history``, quantiles per cell; a row of NaN for a cell the refit did
    not see, which starts from the pooled prior ``Normal(0, tau)``), updated by the outcomes
    the refit does not hold (``trials`` / ``successes`` at ``n`` less ``held_trials`` /
    ``held_successes``, which it does: production since, an evaluation imported after it).

    Returns the curves and the quantiles they were rebuilt from (what a report stores: the
    curves are :func:`curves_from_quantiles` of them, so reading them back gives the same).
    Raises ValueError on malformed input or outcomes the refit holds beyond those given.
    """
    n_arr = np.asarray(n, dtype=np.float64)
    t = np.asarray(trials, dtype=np.float64)
    s = np.asarray(successes, dtype=np.float64)
    held_t = np.asarray(held_trials, dtype=np.float64)
    held_s = np.asarray(held_successes, dtype=np.float64)
    q = np.asarray(history, dtype=np.float64).reshape(n_arr.size, POSTERIOR_LEVELS.size)
    for name, arr in (("trials", t), ("successes", s), ("held_trials", held_t)):
        if arr.shape != n_arr.shape:
            raise ValueError(f"{name} has shape {arr.shape}, expected {n_arr.shape}")
    extra_t, extra_s = t - held_t, s - held_s
    extra_f = extra_t - extra_s
    if np.any(extra_t < 0) or np.any(extra_s < 0) or np.any(extra_f < 0):
        bad = int(np.argmax((extra_t < 0) | (extra_s < 0) | (extra_f < 0)))
        raise ValueError(
            f"cell {bad}: the refit holds {held_t[bad]:g} trials ({held_s[bad]:g} successes) "
            f"of the {t[bad]:g} ({s[bad]:g}) given"
        )
    grid = LOG_MULTIPLIER_GRID
    fit = given_fit(curve, EvaluationRows.snapshot(n_arr, t, s))
    pooled = fit.curve
    posterior = np.empty((n_arr.size, grid.size))
    known = np.isfinite(q).all(axis=1)
    fresh = np.flatnonzero(~known)
    if fresh.size:
        # Cells without history: the pooled prior updated by all their outcomes, which is
        # the reading from current outcomes at this spread (cell by cell, the curve given).
        rows = EvaluationRows.snapshot(n_arr[fresh], extra_t[fresh], extra_s[fresh])
        posterior[fresh] = fit_curve_set(rows, n_arr[fresh], curve=fit, tau=tau).posterior
    at = np.flatnonzero(known)
    if at.size:
        prior = posterior_from_quantiles(q[at], grid)
        rows = EvaluationRows.snapshot(n_arr[at], extra_t[at], extra_s[at])
        loglik = _row_log_likelihood(pooled, rows, grid)
        last, top_share = _ceiling(pooled, n_arr[at], grid)
        with np.errstate(divide="ignore"):
            log_post = np.log(prior * _share_rows(last, top_share, grid.size)) + loglik
        top = log_post.max(axis=1, keepdims=True)
        # A prior with no mass where the cell's rate is a probability: the lowest point.
        top = np.where(np.isfinite(top), top, 0.0)
        post = np.exp(log_post - top)
        post[post.sum(axis=1) == 0, 0] = 1.0
        posterior[at] = post / post.sum(axis=1, keepdims=True)
    kept = posterior_quantiles(posterior, grid)
    return curves_from_quantiles(fit, tau, kept, n_arr, t, s, grid), kept


__all__ = [
    "POSTERIOR_LEVELS",
    "curves_from_quantiles",
    "curves_on_history",
    "posterior_from_quantiles",
    "posterior_quantiles",
]
