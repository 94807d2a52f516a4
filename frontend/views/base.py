"""Shared view plumbing: login, role checks and the per-role home."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.generic import TemplateView

from accounts.models import Membership, Role, membership_of
from accounts.permissions import MANAGERS

__all__ = ["HOME_BY_ROLE", "MANAGERS", "JobProgressView", "MemberView", "home"]

HOME_BY_ROLE = {
    Role.MANAGER: "planner:home",
    Role.FIELD: "field:today",
    Role.ANNOTATOR: "label:queue",
    Role.VIEWER: "dashboard:home",
}


class MemberView(LoginRequiredMixin):
    """A page for signed-in members; ``roles`` narrows who may open it (others get 403)."""

    roles: frozenset[str] | None = None
    request: HttpRequest
    membership: Membership

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated:
            return self.handle_no_permission()
        membership = membership_of(request.user)
        if membership is None:
            raise PermissionDenied("Your account has no organization membership.")
        if self.roles is not None and membership.role not in self.roles:
            raise PermissionDenied("Your role cannot open this page.")
        self.membership = membership
        response: HttpResponseBase = super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        return response

    def owned(self, queryset: Any) -> Any:
        """``queryset`` scoped to what the member's organization owns (operates), for pages
        that change it: a customer member sees its deployments but never writes to them."""
        path = getattr(queryset, "operator_path", "organization")
        return queryset.visible_to(self.request.user).filter(
            **{path: self.membership.organization_id}
        )


class JobProgressView(MemberView, TemplateView):
    """The progress card of a long job (an htmx partial polled by its page): renders
    ``template_name`` with :meth:`progress_context`, and tells htmx to reload the page once
    :meth:`finished` says the job has ended, so the page shows the outcome."""

    def progress_context(self, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError

    def finished(self, context: dict[str, Any]) -> bool:
        job = context.get("job")
        return job is None or not job.is_active

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return super().get_context_data(**self.progress_context(**kwargs), **kwargs)

    def render_to_response(self, context: dict[str, Any], **kwargs: Any) -> HttpResponse:
        response = super().render_to_response(context, **kwargs)
        if self.finished(context):
            response["HX-Refresh"] = "true"
        return response


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """Refuse a form whose CSRF token no longer matches with a page in the app's layout (the
    member's navigation included) that says what to do; ``reason`` is for logs, not people."""
    return render(request, "403_csrf.html", status=403)


def home(request: HttpRequest) -> HttpResponseRedirect:
    """Send each role to its own home."""
    if not request.user.is_authenticated:
        return redirect(f"{reverse('login')}")
    membership = membership_of(request.user)
    if membership is None:
        if request.user.is_superuser:
            return redirect("admin:index")
        raise PermissionDenied("Your account has no organization membership.")
    return redirect(HOME_BY_ROLE[Role(membership.role)])
