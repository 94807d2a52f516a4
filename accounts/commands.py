"""What management commands share: finding the operator organization a command acts for."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from accounts.models import Organization


def operator_organization(slug: str | None, *, among: Any = None) -> Organization:
    """Return the operator named by ``--organization SLUG``, else the only one there is.

    ``among`` (organization ids, e.g. a values queryset) narrows who may be meant when no slug
    is given. Raises CommandError saying what to give instead of guessing.
    """
    operators = Organization.objects.filter(kind=Organization.Kind.OPERATOR)
    if slug:
        found = operators.filter(slug=slug).first()
        if found is None:
            raise CommandError(f"No operator organization {slug!r}.")
        return found
    pool = operators if among is None else operators.filter(pk__in=among)
    only = list(pool[:2])
    if len(only) != 1:
        raise CommandError(
            "Give --organization SLUG: there are "
            + ("no" if not only else "several")
            + " operator organizations that fit."
        )
    return only[0]
