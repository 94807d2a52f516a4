"""Number formatting for pages: percentages and counts a person reads at a glance."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def pct(value: Any, digits: int | None = None) -> str:
    """Format a 0..1 share as a percentage: 99.87%, 4.2%, 0.3%."""
    if value is None or value == "":
        return "—"
    v = float(value) * 100
    if digits is None:
        digits = 2 if v >= 99 else 1
    return f"{v:.{int(digits)}f}%"


@register.filter
def num(value: Any, digits: int = 0) -> str:
    """Format a number with thousands separators."""
    if value is None or value == "":
        return "—"
    return f"{float(value):,.{int(digits)}f}"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    try:
        return mapping[key]
    except (KeyError, IndexError, TypeError):
        return None
