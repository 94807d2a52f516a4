"""Field validators the world model's serializers share."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ValidationError


def validate_time_zone(value: str) -> str:
    """Return ``value`` when it names an IANA time zone (Europe/Amsterdam); else raise
    ValidationError saying so."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        # ValueError: a path-like key ("../x") or NUL; OSError: a key too long for a file name.
        shown = value if len(value) <= 64 else value[:64] + "…"
        raise ValidationError(
            f"Unknown IANA time zone {shown!r}; use a name such as Europe/Amsterdam.",
            code="invalid_time_zone",
        ) from exc
    return value
