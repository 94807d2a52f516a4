"""The customer dashboard: read-only coverage and reliability of a customer's own deployments."""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib import messages
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views import View
from django.views.generic import TemplateView

from accounts.models import Organization, Role
from analytics.models import DashboardShare
from analytics.selectors import customer_dashboard
from analytics.services.shares import dashboard_share_create, dashboard_share_revoke
from campaigns.models import Campaign
from frontend.views.base import MANAGERS, MemberView
from sites.models import Deployment


def customers_visible_to(membership: Any) -> Any:
    """Customers a member may open dashboards for: viewers their own, managers their clients."""
    org = membership.organization
    if org.kind == Organization.Kind.CUSTOMER:
        return Organization.objects.filter(pk=org.pk)
    if membership.role == Role.MANAGER:
        return Organization.objects.filter(Q(operator=org), kind=Organization.Kind.CUSTOMER)
    return Organization.objects.none()


def dashboard_context(*, customer: Organization, operator_id: int | None) -> dict[str, Any]:
    """The dashboard of one customer (only its deployments and campaigns), precomputed.

    The computed context is cached under a fingerprint of every row it is built from (one
    query, see :func:`_fingerprint`), so an edit shows on the next request and dashboards
    stay fast however many rounds accumulate.
    """
    from django.core.cache import cache

    fingerprint = hashlib.sha256(_fingerprint(customer).encode()).hexdigest()[:32]
    key = f"dashboard:{customer.pk}:{operator_id}:{fingerprint}"
    cached = cache.get(key)
    if cached is not None:
        return cached
    context = _dashboard_context(customer=customer, operator_id=operator_id)
    cache.set(key, context, 600)
    return context


# Every input of the dashboard, per customer. Small tables (the customer, its deployments
# with their site, embodiment and task, campaigns, rounds, the operators' condition labels,
# evaluation runs) are hashed row by row, whole rows where the page shows most columns: an
# edit, insert or delete changes the hash whether it went through save() or update(), and
# needs no updated_at column. Large tables (production logs, evaluation results) enter as
# count, max id and the sums the page shows. A finished gap report's cells and summary are
# written once, with its finished_at; a rebuild sets a new finished_at.
_FINGERPRINT_SQL = """
WITH camp AS (SELECT * FROM campaigns_campaign WHERE customer_id = %(c)s),
     dep AS (SELECT * FROM sites_deployment WHERE customer_id = %(c)s)
SELECT
  (SELECT md5(o::text) FROM accounts_organization o WHERE o.id = %(c)s),
  (SELECT md5(string_agg(concat_ws('|', d::text, s::text, e.name, t.name), ',' ORDER BY d.id))
     FROM dep d JOIN sites_site s ON s.id = d.site_id
     JOIN sites_embodiment e ON e.id = d.embodiment_id JOIN sites_task t ON t.id = d.task_id),
  (SELECT md5(string_agg(c::text, ',' ORDER BY c.id)) FROM camp c),
  (SELECT md5(string_agg(r::text, ',' ORDER BY r.id))
     FROM campaigns_collectionround r JOIN camp c ON c.id = r.campaign_id),
  (SELECT md5(string_agg(concat_ws('|', g.id, g.status, g.finished_at, g.dimension_slugs),
                         ',' ORDER BY g.id))
     FROM analytics_gapreport g JOIN camp c ON c.id = g.campaign_id),
  (SELECT md5(string_agg(concat_ws('|', m.id, m.slug, m.name, v.id, v.slug, v.label, v."order"),
                         ',' ORDER BY m.id, v.id))
     FROM sites_conditiondimension m LEFT JOIN sites_conditionvalue v ON v.dimension_id = m.id
     WHERE m.organization_id IN (SELECT organization_id FROM camp)),
  (SELECT md5(string_agg(concat_ws('|', e.id, e.label, e.evaluated_on, e.deployment_id),
                         ',' ORDER BY e.id))
     FROM analytics_evaluationrun e JOIN dep d ON d.id = e.deployment_id),
  (SELECT concat_ws('|', COUNT(*), MAX(x.id), SUM(x.trials), SUM(x.successes))
     FROM analytics_evaluationresult x JOIN analytics_evaluationrun e ON e.id = x.run_id
     JOIN dep d ON d.id = e.deployment_id),
  (SELECT concat_ws('|', COUNT(*), MAX(p.id), SUM(p.cycles), SUM(p.failures),
                    SUM(p.day - DATE '2000-01-01'))
     FROM sites_productionlog p JOIN dep d ON d.id = p.deployment_id)
"""


def _fingerprint(customer: Organization) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(_FINGERPRINT_SQL, {"c": customer.pk})
        return ":".join(str(v) for v in cursor.fetchone())


def _dashboard_context(*, customer: Organization, operator_id: int | None) -> dict[str, Any]:
    deployments = Deployment.objects.filter(customer=customer).select_related(
        "site", "embodiment", "task"
    )
    campaigns = Campaign.objects.filter(customer=customer).select_related("task")
    if operator_id is not None:
        deployments = deployments.filter(organization_id=operator_id)
        campaigns = campaigns.filter(organization_id=operator_id)
    deployment_list = list(deployments.order_by("name"))
    data = customer_dashboard(
        customer=customer, deployments=deployment_list, campaigns=list(campaigns.order_by("name"))
    )
    return {
        "customer": customer,
        "deployments": [(d, data["reliability"][d.pk]) for d in deployment_list],
        **data,
    }


class DashboardHome(MemberView, TemplateView):
    roles = frozenset({Role.VIEWER, Role.MANAGER})
    template_name = "frontend/dashboard/home.html"

    def get(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        if self.membership.organization.kind == Organization.Kind.CUSTOMER:
            return CustomerDashboard.as_view()(request, slug=self.membership.organization.slug)
        customers = list(customers_visible_to(self.membership))
        shares = (
            DashboardShare.objects.visible_to(request.user)
            .select_related("customer")
            .order_by("-created_at")[:50]
        )
        return self.render_to_response(self.get_context_data(customers=customers, shares=shares))


class CustomerDashboard(MemberView, TemplateView):
    roles = frozenset({Role.VIEWER, Role.MANAGER})
    scoped_model = Organization
    template_name = "frontend/dashboard/customer.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        customer = get_object_or_404(customers_visible_to(self.membership), slug=kwargs["slug"])
        operator_id = (
            self.membership.organization_id if self.membership.organization.is_operator else None
        )
        context = dashboard_context(customer=customer, operator_id=operator_id)
        if self.membership.role == Role.MANAGER:
            context["shares"] = DashboardShare.objects.visible_to(self.request.user).filter(
                customer=customer
            )
        return super().get_context_data(**context, **kwargs)


class ShareCreate(MemberView, View):
    roles = MANAGERS
    scoped_model = Organization

    def post(self, request: HttpRequest, slug: str) -> HttpResponse:
        customer = get_object_or_404(customers_visible_to(self.membership), slug=slug)
        try:
            days = max(1, min(90, int(request.POST.get("days", "14"))))
        except ValueError:
            days = 14
        dashboard_share_create(
            organization=self.membership.organization,
            customer=customer,
            actor=request.user,
            days=days,
            label=request.POST.get("label", ""),
        )
        messages.success(request, f"Share link created; it expires in {days} days.")
        return redirect("dashboard:customer", slug=customer.slug)


class ShareRevoke(MemberView, View):
    roles = MANAGERS
    scoped_model = DashboardShare

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        share = get_object_or_404(DashboardShare.objects.visible_to(request.user), pk=pk)
        dashboard_share_revoke(share=share, actor=request.user)
        messages.success(request, "Share link revoked.")
        return redirect("dashboard:customer", slug=share.customer.slug)


def shared_dashboard(request: HttpRequest, token: str) -> HttpResponse:
    """A customer dashboard behind a share link: read-only, no sign-in, until expiry or
    revocation; a revoked link answers 410 with a page that says so."""
    if len(token) < 20:
        raise Http404
    share = DashboardShare.objects.live().select_related("customer").filter(token=token).first()
    if share is None:
        if DashboardShare.objects.filter(token=token, revoked_at__isnull=False).exists():
            # Say why the link stopped working, and nothing about what it showed.
            return render(request, "frontend/dashboard/share_revoked.html", status=410)
        raise Http404
    context = dashboard_context(customer=share.customer, operator_id=share.organization_id)
    return render(request, "frontend/dashboard/customer.html", {**context, "shared": share})


shared_dashboard.scoped_model = DashboardShare  # type: ignore[attr-defined]
shared_dashboard.public_by_token = True  # type: ignore[attr-defined]
