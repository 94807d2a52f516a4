"""Value of capture per condition cell: the concave gain curve and its inverse marginal.

``gain_c(k) = w_c * (r_c - f_inf) * (1 - ((n0_c + 1) / (n0_c + k + 1)) ** b)`` is the
expected interventions per day avoided by ``k`` more episodes in cell ``c``. Writing
``amp = w * max(r - f_inf, 0)`` it is ``amp * (1 - ((n0 + 1) / (n0 + k + 1)) ** b)``.
All functions are vectorised over cells and take ``n0`` possibly fractional (transfer
weighted counts).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def gain(amp: FloatArray, n0: FloatArray, b: float, k: npt.ArrayLike) -> FloatArray:
    """Return the gain of ``k`` more episodes (``k >= 0``) per cell."""
    k_arr = np.asarray(k, dtype=np.float64)
    # -expm1(b*log(x)) is 1 - x**b without cancellation when x is close to 1 (small k).
    ratio_log = np.log1p(n0) - np.log1p(n0 + k_arr)
    return np.asarray(-amp * np.expm1(b * ratio_log), dtype=np.float64)


def gain_scalar(amp: float, n0: float, b: float, k: float) -> float:
    """Return the gain of ``k`` more episodes for one cell (scalar fast path)."""
    if k <= 0.0 or amp <= 0.0:
        return 0.0
    return float(-amp * np.expm1(b * (np.log1p(n0) - np.log1p(n0 + k))))


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
    with np.errstate(divide="ignore"):
        # g'(k) = amp*b*(n0+1)**b * (n0+k+1)**(-b-1) = price  =>  solve for n0+k+1 in logs.
        log_total = np.log(amp_eff * b) + b * np.log1p(n0) - np.log(np.maximum(price, 1e-300))
    stationary = np.exp(np.minimum(log_total / (b + 1.0), 700.0)) - 1.0 - n0 - base
    y = np.clip(stationary, min_batch, upper)
    value = gain(amp_eff, n0, b, base + y) - gain(amp_eff, n0, b, base) - price * y
    return y, value
