"""Reading a page form's fields: each problem is a FormInvalid whose message names the field.

The API has serializers for this; a page's plain form posts get these few readers, so that a
number too large for its column or text where an id belongs is a message on the page, never
a server error.
"""

from __future__ import annotations

from typing import Any

# The largest number a positive integer column holds; anything above fails in the database.
MAX_WHOLE = 2**31 - 1


class FormInvalid(ValueError):
    """A form field the page cannot use; the message names the field for the person."""


def whole(data: Any, name: str, label: str, *, low: int = 0, high: int = MAX_WHOLE) -> int | None:
    """The form field ``name`` as a whole number in [low, high], or None when left empty."""
    text = (data.get(name) or "").strip()
    if not text:
        return None
    try:
        number = int(text)
    except ValueError:
        raise FormInvalid(f"{label} must be a whole number; {text[:30]!r} is not.") from None
    if not low <= number <= high:
        raise FormInvalid(f"{label} must be between {low:,} and {high:,}.")
    return number


def amount(data: Any, name: str, label: str) -> float | None:
    """The form field ``name`` as a finite number of at least 0, or None when left empty."""
    text = (data.get(name) or "").strip()
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        raise FormInvalid(f"{label} must be a number; {text[:30]!r} is not.") from None
    if not 0 <= number <= 1e12:
        raise FormInvalid(f"{label} must be between 0 and 1,000,000,000,000.")
    return number


def parsed(data: Any, name: str, label: str, parse: Any, example: str) -> Any:
    """The form field ``name`` read by ``parse`` (date or time), or None when left empty."""
    text = (data.get(name) or "").strip()
    if not text:
        return None
    try:
        return parse(text)
    except ValueError:
        raise FormInvalid(f"{label} must look like {example}; {text[:30]!r} does not.") from None


def ids(data: Any, name: str, label: str) -> list[int]:
    """The form field ``name`` (a multiple choice) as a list of ids."""
    chosen = []
    for text in data.getlist(name):
        text = text.strip()
        if not text:
            continue
        if not text.isascii() or not text.isdigit() or not 0 < int(text) <= MAX_WHOLE:
            raise FormInvalid(f"{label}: {text[:30]!r} is not one of the choices.")
        chosen.append(int(text))
    return chosen


def short_text(data: Any, name: str, label: str, *, max_length: int) -> str:
    """The form field ``name`` stripped, refused when longer than its column."""
    value = (data.get(name) or "").strip()
    if len(value) > max_length:
        raise FormInvalid(f"{label} can be at most {max_length} characters long.")
    return value
