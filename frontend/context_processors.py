from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from accounts.models import membership_of


def navigation(request: HttpRequest) -> dict[str, Any]:
    """Expose the signed-in member's organization and role to every template."""
    membership = membership_of(getattr(request, "user", None))
    return {
        "membership": membership,
        "role": membership.role if membership else None,
        "organization": membership.organization if membership else None,
    }
