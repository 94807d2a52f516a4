"""The learning curve, its gain and its marginal: the one home of this maths (Django-free).

A condition cell's failure rate after ``n`` (transfer-weighted, possibly fractional)
training episodes follows ``f(n) = f_inf + A * (n + 1) ** -b``. Two ways of naming the
part more data can remove are used across the project:

* the *amplitude* ``A`` (the curve's coefficient, :func:`power_gain`), and
* the *level* ``amp = A * (n0 + 1) ** -b``: what remains above the floor at the cell's
  current ``n0`` (:func:`gain`; the planner's ``amp = w * max(r - f_inf, 0)``).

``k`` more episodes then remove ``amp * (1 - ((n0 + 1) / (n0 + k + 1)) ** b)``, which is
``A * ((n0 + 1) ** -b - (n0 + k + 1) ** -b)``: concave and non-decreasing in ``k >= 0``.
The marginal gain at ``n0 + k`` equals a price ``rho`` where
``n0 + k + 1 = exp(stationary_log_total(amp, n0, b, rho))``. Everything is vectorised over
cells; the analytics layer (gap report, steering) imports it from here because the
allocator in ``campaigns`` must use the same formula and imports only point down.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def curve_rate(
    f_inf: npt.ArrayLike, amplitude: npt.ArrayLike, b: npt.ArrayLike, n: npt.ArrayLike
) -> FloatArray:
    """Return the failure rate ``f_inf + amplitude * (n + 1) ** -b`` (not capped)."""
    n_arr = np.asarray(n, dtype=np.float64)
    return np.asarray(
        np.asarray(f_inf, dtype=np.float64)
        + np.asarray(amplitude, dtype=np.float64) * np.power(n_arr + 1.0, -np.asarray(b)),
        dtype=np.float64,
    )


def level_from_amplitude(amplitude: npt.ArrayLike, n: npt.ArrayLike, b: float) -> FloatArray:
    """Return ``amplitude * (n + 1) ** -b``: the curve's height above the floor at ``n``."""
    n_arr = np.asarray(n, dtype=np.float64)
    return np.asarray(np.asarray(amplitude, dtype=np.float64) * np.power(n_arr + 1.0, -b))


def amplitude_from_level(level: npt.ArrayLike, n: npt.ArrayLike, b: float) -> FloatArray:
    """Return the amplitude ``A`` whose curve stands ``level`` above the floor at ``n``."""
    n_arr = np.asarray(n, dtype=np.float64)
    return np.asarray(np.asarray(level, dtype=np.float64) * np.power(n_arr + 1.0, b))


def decay_fraction(b: float, n: npt.ArrayLike, k: npt.ArrayLike) -> FloatArray:
    """Return ``1 - ((n + 1) / (n + k + 1)) ** b``: the share of the level ``k`` more remove."""
    # expm1/log1p: exact for tiny k/(n+1) where the naive form cancels to zero, so the
    # marginal value of one episode at large n stays positive.
    k_arr = np.asarray(k, dtype=np.float64)
    n_arr = np.asarray(n, dtype=np.float64)
    return np.asarray(-np.expm1(-b * np.log1p(k_arr / (n_arr + 1.0))), dtype=np.float64)


def gain(amp: npt.ArrayLike, n0: npt.ArrayLike, b: float, k: npt.ArrayLike) -> FloatArray:
    """Return the gain of ``k >= 0`` more episodes per cell at level ``amp`` and count ``n0``."""
    return np.asarray(np.asarray(amp, dtype=np.float64) * decay_fraction(b, n0, k))


def gain_one(amp: float, n0: float, b: float, k: float) -> float:
    """Return :func:`gain` for one cell in plain floats (the greedy loops' fast path)."""
    return -amp * math.expm1(-b * math.log1p(k / (n0 + 1.0)))


def power_gain(
    amplitude: npt.ArrayLike, n: npt.ArrayLike, b: float, k: npt.ArrayLike
) -> FloatArray:
    """Return ``A * ((n + 1) ** -b - (n + k + 1) ** -b)`` without cancellation for small k."""
    return gain(level_from_amplitude(amplitude, n, b), n, b, k)


def power_gain_one(amplitude: float, n: float, b: float, k: float) -> float:
    """Return :func:`power_gain` for one cell in plain floats."""
    return gain_one(amplitude * (n + 1.0) ** -b, n, b, k)


def marginal(amp: npt.ArrayLike, n0: npt.ArrayLike, b: float, k: npt.ArrayLike) -> FloatArray:
    """Return the marginal gain ``g'(k) = amp * b / (n0 + 1) * ((n0 + 1) / (n0 + k + 1)) ** (b + 1)``."""
    n1 = np.asarray(n0, dtype=np.float64) + 1.0
    k_arr = np.asarray(k, dtype=np.float64)
    return np.asarray(
        np.asarray(amp, dtype=np.float64) * b / n1 * np.power(n1 / (n1 + k_arr), b + 1.0)
    )


def stationary_log_total(
    amp: npt.ArrayLike, n0: npt.ArrayLike, b: float, price: npt.ArrayLike
) -> FloatArray:
    """Return ``log(n0 + k + 1)`` at which the marginal gain equals ``price`` (the inverse marginal).

    ``g'(k) = amp * b * (n0 + 1) ** b * (n0 + k + 1) ** (-b - 1)``, solved in logs. A cell
    with ``amp = 0`` gets ``-inf``; a zero price gets ``+inf`` (the caller clips).
    """
    amp_arr = np.asarray(amp, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_scale = np.log(amp_arr * b) + b * np.log1p(np.asarray(n0, dtype=np.float64))
        log_price = np.log(np.asarray(price, dtype=np.float64))
        level = (log_scale - log_price) / (b + 1.0)
    # A cell with nothing to gain stays at -inf even at a zero price (-inf - -inf is NaN).
    return np.asarray(np.where(amp_arr > 0, level, -np.inf), dtype=np.float64)


def batch_value(
    amp: FloatArray,
    n0: FloatArray,
    base: FloatArray,
    b: float,
    min_batch: float,
    upper: FloatArray,
    price: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """Return ``(y, value)``: the best batch size at a per-episode price, and its net value.

    The cell already holds ``base`` episodes; a batch adds ``y`` in ``[min_batch, upper]``
    and is worth ``gain(base + y) - gain(base) - price * y`` (which may be negative: then
    no batch is better). Concavity makes the best ``y`` the stationary point, clipped.
    Assumes ``b > 0``, ``price >= 0`` and ``upper >= min_batch`` finite.
    """
    amp_eff = np.maximum(amp, 0.0)
    log_total = stationary_log_total(amp_eff, n0, b, np.maximum(price, 1e-300))
    stationary = np.exp(np.minimum(log_total, 700.0)) - 1.0 - n0 - base
    y = np.clip(stationary, min_batch, upper)
    value = gain(amp_eff, n0, b, base + y) - gain(amp_eff, n0, b, base) - price * y
    return y, value
