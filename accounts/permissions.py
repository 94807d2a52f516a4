"""Who may do what through the API. Object scoping is done by querysets, not here.

Every route declares the roles it allows, next to its view:

- a page (``frontend.views.base.MemberView``) in ``roles`` (``None``: every member);
- a viewset per action: ``action_roles[action]`` when the action is named there, else
  ``read_roles`` for safe methods (default: every member; a customer's viewer then sees only
  what the queryset scopes to their own customer) and ``write_roles`` for the others (default:
  managers).

:func:`declared_roles` reads that declaration; the permission class enforces it and the role
matrix test (tests/accounts/test_role_matrix.py) checks that every route serves exactly what
it declares. ``manage.py role_matrix`` prints the whole table.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from accounts.models import Role, membership_of

MANAGERS = frozenset({Role.MANAGER})
FIELD_ROLES = frozenset({Role.MANAGER, Role.FIELD})
LABELLERS = frozenset({Role.MANAGER, Role.ANNOTATOR})
OPERATOR_STAFF = frozenset({Role.MANAGER, Role.FIELD, Role.ANNOTATOR})
MEMBERS = frozenset(Role.values)
# The plan and its numbers: the planner's pages and, scoped to their own customer by the
# querysets, the customer's dashboards.
PLANNERS_AND_CUSTOMERS = frozenset({Role.MANAGER, Role.VIEWER})


def declared_roles(view: Any, *, action: str | None, method: str) -> frozenset[str]:
    """Return the roles ``view`` allows for ``action`` under HTTP ``method``.

    Assumes ``view`` is a DRF view instance (a viewset with its ``action`` set, or a plain
    APIView with ``action`` None).
    """
    table: dict[str, frozenset[str]] = getattr(view, "action_roles", None) or {}
    if action is not None and action in table:
        return frozenset(table[action])
    if method.upper() in SAFE_METHODS:
        read_roles = getattr(view, "read_roles", None)
        return MEMBERS if read_roles is None else frozenset(read_roles)
    return frozenset(getattr(view, "write_roles", MANAGERS))


class IsMemberWithRole(BasePermission):
    """Allow a member whose role the view declares for this action (see the module doc)."""

    message = "Your role does not allow this action."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        if request.user.is_superuser:
            return True
        membership = membership_of(request.user)
        if membership is None:
            return False
        method = request.method or "GET"
        roles = declared_roles(view, action=getattr(view, "action", None), method=method)
        return membership.role in roles
