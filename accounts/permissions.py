"""Who may do what through the API. Object scoping is done by querysets, not here."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from accounts.models import Role, membership_of


class IsMemberWithRole(BasePermission):
    """Allow members to read; allow writes only to the roles a view names in ``write_roles``.

    Views may also narrow readers with ``read_roles``. Viewers (customers) never write.
    """

    message = "Your role does not allow this action."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        if request.user.is_superuser:
            return True
        membership = membership_of(request.user)
        if membership is None:
            return False
        if request.method in SAFE_METHODS:
            read_roles = getattr(view, "read_roles", None)
            return read_roles is None or membership.role in read_roles
        write_roles = getattr(view, "write_roles", {Role.MANAGER})
        return membership.role in write_roles
