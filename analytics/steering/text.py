"""Number formatting for steering sentences (success rates near 100%, changes, counts)."""

from __future__ import annotations

import math

from analytics.gap.explain import format_count, format_interventions, format_percent

__all__ = [
    "format_count",
    "format_interventions",
    "format_percent",
    "format_points",
    "format_rate",
    "rate_decimals",
]


def rate_decimals(*rates: float) -> int:
    """Return the decimals that show these rates in percent honestly, from 1 up to 3.

    Success rates of a reliable policy differ in the second or third decimal (99.87% vs
    99.95%): the precision is that of the first significant digit of the smallest distance
    from 0% or 100% (0.2% from 100% → one decimal, 0.03% → two).
    """
    closest = min((min(r, 1.0 - r) for r in rates if math.isfinite(r)), default=0.5)
    if closest <= 0:
        return 1
    return max(1, min(3, math.ceil(-math.log10(100.0 * closest) - 1e-9)))


def format_rate(rate: float, decimals: int | None = None) -> str:
    """Format a rate in [0, 1] as a percentage with enough decimals to be honest.

    Never prints 100.0% (or 0.0%) for a rate that is not exactly 1 (or 0): it says
    ">99.9%" (or "<0.1%") at the chosen precision instead.
    """
    places = rate_decimals(rate) if decimals is None else decimals
    percent = 100.0 * rate
    text = f"{percent:.{places}f}%"
    top = f"{100.0:.{places}f}%"
    bottom = f"{0.0:.{places}f}%"
    if text == top and rate < 1.0:
        return f">{100.0 - 10.0**-places:.{places}f}%"
    if text == bottom and rate > 0.0:
        return f"<{10.0**-places:.{places}f}%"
    return text


def format_points(change: float, decimals: int = 1) -> str:
    """Format a difference of rates in percentage points, e.g. ``1.1`` for 0.011."""
    value = 100.0 * abs(change)
    places = decimals
    while places < 3 and value > 0 and f"{value:.{places}f}" == f"{0.0:.{places}f}":
        places += 1
    return f"{value:.{places}f}"
