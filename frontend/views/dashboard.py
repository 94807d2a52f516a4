"""The customer dashboard: read-only coverage and reliability of a customer's deployments."""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.views.generic import TemplateView

from accounts.models import Organization, Role
from analytics.selectors import deployments_reliability
from campaigns.models import Campaign
from frontend.views.base import MemberView
from sites.models import Deployment


def customers_visible_to(membership: Any) -> Any:
    """Customers a member may open dashboards for: viewers their own, managers their clients."""
    org = membership.organization
    if org.kind == Organization.Kind.CUSTOMER:
        return Organization.objects.filter(pk=org.pk)
    if membership.role == Role.MANAGER:
        return Organization.objects.filter(Q(operator=org), kind=Organization.Kind.CUSTOMER)
    return Organization.objects.none()


class DashboardHome(MemberView, TemplateView):
    roles = frozenset({Role.VIEWER, Role.MANAGER})
    template_name = "frontend/dashboard/home.html"

    def get(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        customers = list(customers_visible_to(self.membership))
        if self.membership.organization.kind == Organization.Kind.CUSTOMER:
            return CustomerDashboard.as_view()(request, slug=self.membership.organization.slug)
        return self.render_to_response(self.get_context_data(customers=customers))


class CustomerDashboard(MemberView, TemplateView):
    scoped_model = Organization
    roles = frozenset({Role.VIEWER, Role.MANAGER})
    template_name = "frontend/dashboard/customer.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        customer = get_object_or_404(customers_visible_to(self.membership), slug=kwargs["slug"])
        deployments = list(
            Deployment.objects.visible_to(self.request.user)
            .filter(customer=customer)
            .select_related("site", "embodiment", "task")
        )
        if (
            not deployments
            and not Campaign.objects.visible_to(self.request.user)
            .filter(customer=customer)
            .exists()
        ):
            if self.membership.organization_id != customer.pk:
                raise Http404
        reliability = deployments_reliability(deployments=deployments)
        campaigns = list(
            Campaign.objects.visible_to(self.request.user)
            .filter(customer=customer)
            .prefetch_related("rounds")
        )
        total_ipd = sum(r.interventions_per_day or 0 for r in reliability.values())
        target_ipd = sum(r.target_interventions_per_day for r in reliability.values())
        return super().get_context_data(
            customer=customer,
            deployments=[(d, reliability[d.pk]) for d in deployments],
            campaigns=campaigns,
            total_ipd=total_ipd,
            target_ipd=target_ipd,
            **kwargs,
        )
