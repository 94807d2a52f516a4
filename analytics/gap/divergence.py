"""Distribution distances between target (production) and training shares."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import special

FloatArray = npt.NDArray[np.float64]

LN2 = math.log(2.0)

PSI_EPSILON = 1e-4
"""Share substituted for empty bins in PSI, the usual convention (0.01%)."""


def _normalised(x: npt.ArrayLike, name: str) -> tuple[FloatArray, float]:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-d, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and >= 0")
    total = float(arr.sum())
    return (arr / total if total > 0 else arr), total


def js_divergence(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    """Return the Jensen-Shannon divergence (natural log, in ``[0, ln 2]``) between p and q.

    Both are normalised first, so counts work as well as shares. A side with no mass at all
    shares nothing with the other and gives ``ln 2`` (0 if both are empty). Raises ValueError
    on negative or non-finite entries or unequal lengths.
    """
    p_arr, p_total = _normalised(p, "p")
    q_arr, q_total = _normalised(q, "q")
    if p_arr.shape != q_arr.shape:
        raise ValueError(f"p and q differ in length: {p_arr.size} vs {q_arr.size}")
    if p_total == 0 or q_total == 0:
        return 0.0 if p_total == q_total else LN2
    m = 0.5 * (p_arr + q_arr)
    # rel_entr defines 0*log(0/m) = 0, which is exactly the JS convention for empty cells.
    value = 0.5 * float(special.rel_entr(p_arr, m).sum() + special.rel_entr(q_arr, m).sum())
    return min(max(value, 0.0), LN2)


def psi(p: npt.ArrayLike, q: npt.ArrayLike, *, epsilon: float = PSI_EPSILON) -> float:
    """Return the population stability index ``sum((p - q) * ln(p / q))`` over bins.

    Both sides are normalised; empty bins take share ``epsilon`` (without renormalising, the
    common convention) so the index stays finite. A training side with no mass at all is
    treated as empty in every bin. Raises ValueError on malformed input.
    """
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    p_arr, _ = _normalised(p, "p")
    q_arr, _ = _normalised(q, "q")
    if p_arr.shape != q_arr.shape:
        raise ValueError(f"p and q differ in length: {p_arr.size} vs {q_arr.size}")
    p_safe = np.maximum(p_arr, epsilon)
    q_safe = np.maximum(q_arr, epsilon)
    return float(np.sum((p_safe - q_safe) * np.log(p_safe / q_safe)))
