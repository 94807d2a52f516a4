"""Confidence intervals for rates, their changes, and demonstration trial counts.

The one home of the interval maths (Wilson, Beta). All functions are Django-free and vectorised over numpy arrays where that makes sense.

* :func:`wilson_interval` — the Wilson score interval; good coverage down to a handful of
  trials and never outside [0, 1]. Used for every per-cell and per-group figure people read.
* :func:`credible_interval` — the equal-tailed interval of a Beta(alpha, beta) (the gap
  report's posterior failure rates).
* :func:`beta_interval` — an equal-tailed Beta-posterior interval of a success rate from
  counts (uniform prior by default, ``prior="jeffreys"`` for Beta(1/2, 1/2) with the usual
  boundary convention); :func:`credible_interval` of the posterior.
* :func:`difference_interval` — Newcombe's hybrid score interval for a change between two
  independent proportions (Newcombe 1998, method 10): the Wilson limits of each proportion
  combined by the square-and-add rule. Unlike a Wald interval it behaves at 0 and 100%
  success, which is exactly where a reliable policy sits.
* :func:`zero_failure_trials` and :func:`trials_to_demonstrate` — how many evaluation trials
  show a reliability target with a given confidence ("zero failures in 2,995 trials shows
  99.9% with 95% confidence").
* :func:`poisson_interval` — the exact (Garwood) interval of a Poisson rate from an event
  count and its exposure, as Gamma quantiles: interventions per day, per 1,000 cycles.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special, stats

FloatArray = npt.NDArray[np.float64]

Prior = tuple[float, float] | Literal["uniform", "jeffreys"]


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def _counts(successes: npt.ArrayLike, trials: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    s = np.asarray(successes, dtype=np.float64)
    t = np.asarray(trials, dtype=np.float64)
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(t))):
        raise ValueError("successes and trials must be finite")
    if np.any(s < 0) or np.any(s > t):
        raise ValueError("need 0 <= successes <= trials")
    return s, t


def wilson_interval(
    successes: npt.ArrayLike, trials: npt.ArrayLike, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Return the Wilson score interval ``(low, high)`` for ``successes / trials``.

    Vectorised; a cell with no trials gets the uninformative ``(0, 1)``. Raises ValueError
    unless ``0 < level < 1`` and ``0 <= successes <= trials``.
    """
    z = _z(level)
    s, t = _counts(successes, trials)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(t > 0, s / np.maximum(t, 1e-300), 0.5)
        denom = 1.0 + z * z / t
        centre = (p + z * z / (2.0 * t)) / denom
        half = z * np.sqrt(p * (1.0 - p) / t + z * z / (4.0 * t * t)) / denom
    low = np.where(t > 0, np.clip(centre - half, 0.0, 1.0), 0.0)
    high = np.where(t > 0, np.clip(centre + half, 0.0, 1.0), 1.0)
    # The score limits at s = 0 (s = t) are exactly 0 (1); rounding must not move them.
    low = np.where(s == 0, 0.0, low)
    high = np.where((s == t) & (t > 0), 1.0, high)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def _prior_params(prior: Prior) -> tuple[float, float]:
    if prior == "uniform":
        return 1.0, 1.0
    if prior == "jeffreys":
        return 0.5, 0.5
    if isinstance(prior, str):
        raise ValueError(f"unknown prior {prior!r}; use 'uniform', 'jeffreys' or (alpha, beta)")
    alpha, beta = (float(x) for x in prior)
    if not (alpha > 0 and beta > 0 and math.isfinite(alpha) and math.isfinite(beta)):
        raise ValueError(f"prior parameters must be finite and > 0, got {prior}")
    return alpha, beta


def credible_interval(
    alpha: npt.ArrayLike, beta: npt.ArrayLike, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Return the equal-tailed ``level`` credible interval ``(low, high)`` of a Beta.

    Raises ValueError unless ``0 < level < 1``.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    tail = (1.0 - level) / 2.0
    a_arr = np.asarray(alpha, dtype=np.float64)
    b_arr = np.asarray(beta, dtype=np.float64)
    low = special.betaincinv(a_arr, b_arr, tail)
    high = special.betaincinv(a_arr, b_arr, 1.0 - tail)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def beta_interval(
    successes: npt.ArrayLike,
    trials: npt.ArrayLike,
    level: float = 0.95,
    prior: Prior = (1.0, 1.0),
) -> tuple[FloatArray, FloatArray]:
    """Return the equal-tailed Beta-posterior interval ``(low, high)`` of the success rate.

    The posterior is ``Beta(alpha + s, beta + t - s)`` for a ``Beta(alpha, beta)`` prior
    (``"uniform"`` = (1, 1), ``"jeffreys"`` = (1/2, 1/2)). As usual for the Jeffreys interval
    the lower limit is 0 when ``s = 0`` and the upper limit 1 when ``s = t``, so the interval
    always contains the observed rate. Raises ValueError on a bad level, prior or counts.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    alpha0, beta0 = _prior_params(prior)
    s, t = _counts(successes, trials)
    low, high = credible_interval(alpha0 + s, beta0 + t - s, level)
    low = np.where(s == 0, 0.0, low)
    high = np.where(s == t, 1.0, high)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def difference_interval(
    successes_before: npt.ArrayLike,
    trials_before: npt.ArrayLike,
    successes_after: npt.ArrayLike,
    trials_after: npt.ArrayLike,
    level: float = 0.95,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Return ``(change, low, high)`` for ``after - before`` success rate (Newcombe hybrid).

    Newcombe's method 10: with Wilson limits ``(l1, u1)`` for the before rate ``p1`` and
    ``(l2, u2)`` for the after rate ``p2``, the change ``d = p2 - p1`` has limits
    ``d - sqrt((p2 - l2)^2 + (u1 - p1)^2)`` and ``d + sqrt((u2 - p2)^2 + (p1 - l1)^2)``.
    The two samples must be independent (different evaluation trials). A side without trials
    contributes the uninformative Wilson interval (0, 1) and a rate of 0.5, so the interval
    is wide rather than wrong. Raises ValueError like :func:`wilson_interval`.
    """
    s1, t1 = _counts(successes_before, trials_before)
    s2, t2 = _counts(successes_after, trials_after)
    l1, u1 = wilson_interval(s1, t1, level)
    l2, u2 = wilson_interval(s2, t2, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        p1 = np.where(t1 > 0, s1 / np.maximum(t1, 1e-300), 0.5)
        p2 = np.where(t2 > 0, s2 / np.maximum(t2, 1e-300), 0.5)
    change = p2 - p1
    low = change - np.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
    high = change + np.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    return (
        np.asarray(change, dtype=np.float64),
        np.asarray(np.clip(low, -1.0, 1.0), dtype=np.float64),
        np.asarray(np.clip(high, -1.0, 1.0), dtype=np.float64),
    )


def _check_target(target_reliability: float, confidence: float) -> None:
    if not 0 < target_reliability < 1:
        raise ValueError(f"target reliability must be in (0, 1), got {target_reliability}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def zero_failure_trials(target_reliability: float, confidence: float = 0.95) -> int:
    """Return the trials that, all successful, show ``target_reliability`` at ``confidence``.

    ``ceil(ln(1 - confidence) / ln(target))``: the smallest n with ``target ** n <= 1 -
    confidence`` (99.9% at 95% → 2,995 trials, the "rule of three": about 3 / (1 - target)).
    Raises ValueError unless both arguments lie strictly between 0 and 1.
    """
    _check_target(target_reliability, confidence)
    exact = math.log1p(-confidence) / math.log(target_reliability)
    # Guard against ceil() of a float a hair above an integer that is the exact answer.
    nearest = round(exact)
    if abs(exact - nearest) < 1e-9 * max(1.0, exact):
        return int(nearest)
    return math.ceil(exact)


def trials_to_demonstrate(
    target_reliability: float, confidence: float = 0.95, allowed_failures: int = 0
) -> int:
    """Return the fewest trials that show ``target_reliability`` with up to ``k`` failures.

    The smallest n with ``P(X <= k | n, 1 - target) <= 1 - confidence`` for binomial X
    failures: observing at most ``k`` failures in n trials then rejects "reliability below
    target" at the given confidence. Equivalently, the one-sided Clopper–Pearson upper bound
    on the failure rate (a Beta quantile) is at most ``1 - target``. With ``k = 0`` this is
    :func:`zero_failure_trials`. Raises ValueError on arguments out of range.
    """
    _check_target(target_reliability, confidence)
    if allowed_failures < 0 or int(allowed_failures) != allowed_failures:
        raise ValueError(f"allowed_failures must be a whole number >= 0, got {allowed_failures}")
    k = int(allowed_failures)
    if k == 0:
        return zero_failure_trials(target_reliability, confidence)
    q = 1.0 - target_reliability
    alpha = 1.0 - confidence

    def too_few(n: int) -> bool:
        return float(stats.binom.cdf(k, n, q)) > alpha

    # The chi-square approximation gives a close start; then bracket and bisect exactly.
    guess = max(k + 1, int(stats.chi2.ppf(confidence, 2 * (k + 1)) / (2.0 * q)))
    low, high = k, guess
    while too_few(high):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        if too_few(mid):
            low = mid
        else:
            high = mid
    return high


def poisson_interval(
    counts: npt.ArrayLike, exposure: npt.ArrayLike = 1.0, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Return the exact (Garwood) interval ``(low, high)`` of the rate ``counts / exposure``.

    The limits are Gamma quantiles: ``low = G(tail; k) / E`` and ``high = G(1 - tail; k + 1) /
    E`` (``low = 0`` at ``k = 0``), so coverage is at least ``level`` for every true rate.
    Vectorised; an exposure of 0 gives the uninformative ``(0, inf)``. Raises ValueError
    unless ``0 < level < 1``, counts are finite and >= 0 and exposures finite and >= 0.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    k = np.asarray(counts, dtype=np.float64)
    e = np.asarray(exposure, dtype=np.float64)
    if not (np.all(np.isfinite(k)) and np.all(np.isfinite(e))):
        raise ValueError("counts and exposure must be finite")
    if np.any(k < 0) or np.any(e < 0):
        raise ValueError("counts and exposure must be >= 0")
    tail = (1.0 - level) / 2.0
    k, e = np.broadcast_arrays(k, e)
    with np.errstate(divide="ignore", invalid="ignore"):
        low_count = np.where(k > 0, special.gammaincinv(np.maximum(k, 1e-300), tail), 0.0)
        high_count = special.gammaincinv(k + 1.0, 1.0 - tail)
        low = np.where(e > 0, low_count / e, 0.0)
        high = np.where(e > 0, high_count / e, np.inf)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
