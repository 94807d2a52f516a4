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


@register.filter
def count(value: Any, noun: str) -> str:
    """A count with its noun, singular or plural, with thousands separators: 1 row, 1,234 rows.

    The plural adds "s" to the last word ("uncovered cell" → "uncovered cells"); give an
    irregular one after a comma: ``{{ n|count:"entry,entries" }}``. No number reads "—".
    """
    if value is None or value == "":
        return "—"
    singular, _, plural = noun.partition(",")
    number = float(value)
    shown = num(number, 0 if number == round(number) else 1)
    return f"{shown} {singular if shown == '1' else plural or singular + 's'}"
