"""The pooled learning curve and its fit (Django-free); per-cell curves: :mod:`analytics.learning`.

A learning curve says how a policy's failure rate in a condition cell falls as training
episodes from that cell accumulate::

    f(n) = f_inf + a * (n + 1) ** -b

``n`` is the transfer-weighted episode count of the cell (episodes from another embodiment
were already scaled by their transfer weight upstream, so ``n`` may be fractional).

How this module refines DESIGN.md ("Core computations"):

* **Fit parametrisation.** The pooled curve is fitted by binomial maximum likelihood over
  ``(f0, u, b)`` with ``f0 = f_inf + a`` (the rate at ``n = 0``) and ``u = f_inf / f0``. Box
  bounds on ``f0, u`` in ``[0, 1]`` then guarantee ``f_inf >= 0``, ``a >= 0`` *and*
  ``f(n) <= 1`` for every ``n >= 0``, which a box on ``(f_inf, a)`` cannot; ``b`` is bounded
  to ``[0.05, 2]``. Several starts are tried because the likelihood has ridges.
* **Honest fallback.** With too little evidence to identify three parameters (no trials,
  fewer than ``min_cells`` evaluated cells, a single distinct ``n``, or no failure at all)
  the fit returns the prior curve with ``source="prior"`` and a sentence in ``reason``
  instead of an over-confident curve (zero failures would otherwise fit ``f = 0``
  everywhere, including in cells nobody evaluated).
* **One formula.** The curve's rate, its gain ``f(n) - f(n + k)`` and the marginal live in
  :mod:`campaigns.planning.gain` (the allocator needs them and imports only point down);
  :class:`LearningCurve` evaluates them for the pooled parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import optimize, special

from campaigns.planning.gain import curve_rate, power_gain

FloatArray = npt.NDArray[np.float64]

B_BOUNDS: tuple[float, float] = (0.05, 2.0)
"""Allowed learning-curve exponents: flatter than 0.05 is no learning, steeper than 2 is noise."""

# Keeps log(f) and log(1 - f) finite in the likelihood and Beta parameters positive.
_RATE_EPS = 1e-12


@dataclass(frozen=True)
class LearningCurve:
    """Failure rate as a function of training episodes: ``f_inf + a * (n + 1) ** -b``.

    Raises ValueError unless ``f_inf >= 0``, ``a >= 0``, ``b > 0`` and ``f_inf + a <= 1``
    (the last keeps every rate for ``n >= 0`` a probability).
    """

    f_inf: float
    a: float
    b: float

    def __post_init__(self) -> None:
        values = (self.f_inf, self.a, self.b)
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"learning curve parameters must be finite, got {values}")
        if self.f_inf < 0 or self.a < 0:
            raise ValueError(f"f_inf and a must be >= 0, got f_inf={self.f_inf}, a={self.a}")
        if self.b <= 0:
            raise ValueError(f"b must be > 0, got {self.b}")
        if self.f_inf + self.a > 1 + 1e-12:
            raise ValueError(
                f"f_inf + a is the failure rate with no data and must be <= 1, "
                f"got {self.f_inf + self.a}"
            )

    def rate(self, n: npt.ArrayLike) -> FloatArray:
        """Return the failure rate after ``n`` training episodes (vectorised, ``n >= 0``)."""
        return curve_rate(self.f_inf, self.a, self.b, n)

    def gain(self, n: npt.ArrayLike, k: npt.ArrayLike) -> FloatArray:
        """Return ``rate(n) - rate(n + k)``: the drop from ``k`` more episodes (concave in k)."""
        return power_gain(self.a, n, self.b, k)


DEFAULT_PRIOR = LearningCurve(f_inf=0.002, a=0.5, b=0.5)
"""Used when nothing can be fitted: 50% failure with no data, ~5% at 100 episodes, 0.2% floor."""

EXPONENT_PRIOR_SD = 0.5
"""Standard deviation of ``log b`` under the exponent's prior, centred on the prior curve's
``b`` (0.5 by default): exponents from about 0.2 to 1.4 within two standard deviations.

Fits maximise the likelihood times this prior. Where failures are few (a reliable policy
fails a handful of times in an evaluation) and the hard conditions are also the ones with
little data, the likelihood alone often runs to the steepest exponent allowed (2): it reads
"cells with little data fail more" as learning, and a plan on that curve spends everything
on the thinnest cells. The prior keeps such a fit near ordinary learning rates; a few
hundred failures overrule it. Its centre is this module's prior curve, not the simulator's
exponents (what it changes there: ``bench/steering.py --oracle``, figures in the README)."""


def exponent_penalty(b: float, centre: float) -> tuple[float, float]:
    """Return minus the log of the exponent's prior at ``b`` (up to a constant) and its
    derivative in ``b`` (see :data:`EXPONENT_PRIOR_SD`)."""
    z = (math.log(b) - math.log(centre)) / EXPONENT_PRIOR_SD
    return 0.5 * z * z, z / (EXPONENT_PRIOR_SD * b)


@dataclass(frozen=True)
class CurveFit:
    """A learning curve with the evidence behind it.

    ``source`` is ``"fitted"`` (maximum likelihood on the data), ``"prior"`` (too little data;
    ``reason`` says why) or ``"given"`` (supplied by the caller). ``n_cells`` counts cells
    with at least one trial; ``log_likelihood`` is the binomial log-likelihood of the data
    under ``curve`` (0.0 without trials).
    """

    curve: LearningCurve
    source: Literal["prior", "fitted", "given"]
    n_cells: int
    n_trials: int
    n_failures: int
    log_likelihood: float
    reason: str = ""


def _as_counts(
    n: npt.ArrayLike, trials: npt.ArrayLike, successes: npt.ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray]:
    n_arr = np.asarray(n, dtype=np.float64)
    t_arr = np.asarray(trials, dtype=np.float64)
    s_arr = np.asarray(successes, dtype=np.float64)
    if not (n_arr.shape == t_arr.shape == s_arr.shape) or n_arr.ndim != 1:
        raise ValueError(
            f"n, trials and successes must be 1-d and equally long, got shapes "
            f"{n_arr.shape}, {t_arr.shape}, {s_arr.shape}"
        )
    if not np.all(np.isfinite(n_arr)) or np.any(n_arr < 0):
        raise ValueError("training counts n must be finite and >= 0")
    if np.any(s_arr < 0) or np.any(s_arr > t_arr):
        raise ValueError("need 0 <= successes <= trials in every cell")
    return n_arr, t_arr, s_arr


def log_likelihood(
    curve: LearningCurve, n: npt.ArrayLike, trials: npt.ArrayLike, successes: npt.ArrayLike
) -> float:
    """Return the binomial log-likelihood of per-cell outcomes under ``curve``.

    Raises ValueError on malformed arrays.
    """
    n_arr, t, s = _as_counts(n, trials, successes)
    failures = t - s
    rate = np.clip(curve.rate(n_arr), _RATE_EPS, 1.0 - _RATE_EPS)
    log_binom = special.gammaln(t + 1) - special.gammaln(failures + 1) - special.gammaln(s + 1)
    return float(np.sum(log_binom + failures * np.log(rate) + s * np.log1p(-rate)))


def _curve_from(theta: npt.NDArray[np.float64]) -> LearningCurve:
    f0, u, b = (float(x) for x in theta)
    return LearningCurve(f_inf=f0 * u, a=f0 * (1.0 - u), b=b)


def fit_learning_curve(
    n: npt.ArrayLike,
    trials: npt.ArrayLike,
    successes: npt.ArrayLike,
    *,
    prior: LearningCurve | None = None,
    min_cells: int = 3,
) -> CurveFit:
    """Fit the pooled learning curve across cells by binomial maximum likelihood, with the
    exponent's prior (:data:`EXPONENT_PRIOR_SD`, centred on ``prior``'s ``b``).

    Arrays are per cell: transfer-weighted training episodes ``n``, evaluation ``trials``
    and ``successes``. Returns ``prior`` (default :data:`DEFAULT_PRIOR`) with
    ``source="prior"`` when the data cannot identify the curve: no trials, fewer than
    ``min_cells`` evaluated cells, one distinct ``n`` among them, no failures, or an
    optimiser failure. Raises ValueError on malformed arrays.
    """
    prior_curve = prior if prior is not None else DEFAULT_PRIOR
    n_arr, t_arr, s_arr = _as_counts(n, trials, successes)
    seen = t_arr > 0
    n_seen, t_seen, s_seen = n_arr[seen], t_arr[seen], s_arr[seen]
    k_seen = t_seen - s_seen
    n_cells, n_trials, n_failures = int(seen.sum()), int(t_seen.sum()), int(k_seen.sum())

    def fallback(reason: str) -> CurveFit:
        return CurveFit(
            curve=prior_curve,
            source="prior",
            n_cells=n_cells,
            n_trials=n_trials,
            n_failures=n_failures,
            log_likelihood=log_likelihood(prior_curve, n_seen, t_seen, s_seen),
            reason=reason,
        )

    if n_trials == 0:
        return fallback("no evaluation trials; using the prior curve")
    if n_cells < min_cells:
        return fallback(f"only {n_cells} cell(s) have trials, need {min_cells}; using the prior")
    if np.unique(n_seen).size < 2:
        return fallback("all evaluated cells have the same training count; slope not identifiable")
    if n_failures == 0:
        return fallback("no failures observed; a fitted curve would claim zero failures anywhere")

    log_n1 = np.log1p(n_seen)
    scale = 1.0 / n_trials  # per-trial objective keeps L-BFGS tolerances meaningful

    def objective(theta: FloatArray) -> tuple[float, FloatArray]:
        f0, u, b = theta
        x = np.exp(-b * log_n1)
        raw = f0 * (u + (1.0 - u) * x)
        rate = np.clip(raw, _RATE_EPS, 1.0 - _RATE_EPS)
        ll = k_seen * np.log(rate) + s_seen * np.log1p(-rate)
        d_rate = k_seen / rate - s_seen / (1.0 - rate)
        d_rate = np.where(raw == rate, d_rate, 0.0)  # flat where clipped
        penalty, d_penalty = exponent_penalty(float(b), prior_curve.b)
        grad = np.array(
            [
                np.sum(d_rate * (u + (1.0 - u) * x)),
                np.sum(d_rate * f0 * (1.0 - x)),
                np.sum(d_rate * -f0 * (1.0 - u) * x * log_n1) - d_penalty,
            ]
        )
        return (penalty - float(ll.sum())) * scale, -grad * scale

    observed = n_failures / n_trials
    starts = [
        np.array([prior_curve.f_inf + prior_curve.a, _share(prior_curve), prior_curve.b]),
        np.array([min(1.0, 4 * observed + 0.05), 0.1, 0.5]),
        np.array([min(1.0, 2 * observed + 0.01), 0.5, 1.0]),
        np.array([min(1.0, 10 * observed + 0.1), 0.02, 0.3]),
    ]
    bounds = [(_RATE_EPS, 1.0), (0.0, 1.0), B_BOUNDS]
    best: optimize.OptimizeResult | None = None
    for start in starts:
        start = np.clip(start, [lo for lo, _ in bounds], [hi for _, hi in bounds])
        result = optimize.minimize(objective, start, jac=True, method="L-BFGS-B", bounds=bounds)
        if np.isfinite(result.fun) and (best is None or result.fun < best.fun):
            best = result
    if best is None:
        return fallback("the optimiser did not converge; using the prior curve")

    curve = _curve_from(best.x)
    return CurveFit(
        curve=curve,
        source="fitted",
        n_cells=n_cells,
        n_trials=n_trials,
        n_failures=n_failures,
        log_likelihood=log_likelihood(curve, n_seen, t_seen, s_seen),
        reason="" if best.success else f"optimiser stopped early: {best.message}",
    )


def _share(curve: LearningCurve) -> float:
    total = curve.f_inf + curve.a
    return curve.f_inf / total if total > 0 else 0.5
