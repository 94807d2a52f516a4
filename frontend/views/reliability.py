"""The reliability page of a deployment: interventions over time, breakdowns and shift flags."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from django.views.generic import TemplateView

from accounts.models import Role
from accounts.permissions import PLANNERS_AND_CUSTOMERS
from analytics import charts
from analytics.selectors_reliability import deployment_reliability
from frontend.views.base import MemberView
from sites.models import Deployment


class DeploymentReliability(MemberView, TemplateView):
    """Managers see their deployments; a customer's viewers their own (as on the dashboard)."""

    scoped_model = Deployment
    roles = PLANNERS_AND_CUSTOMERS
    template_name = "frontend/planner/deployment_reliability.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        deployments = Deployment.objects.visible_to(self.request.user)
        if self.membership.role == Role.VIEWER:
            # As on the dashboard: a viewer sees the deployments of their own customer only.
            deployments = deployments.filter(customer_id=self.membership.organization_id)
        deployment = get_object_or_404(
            deployments.select_related("customer", "site", "embodiment", "task"), pk=kwargs["pk"]
        )
        page = deployment_reliability(deployment=deployment)
        context: dict[str, Any] = {"deployment": deployment, "page": page}
        if page.series is not None:
            days = [d.isoformat() for d in page.series.days]
            context["cycles_total"] = float(page.series.cycles.sum())
            flags = page.check.flags if page.check else []
            context["timeline"] = charts.interventions_timeline(
                days=days,
                interventions=page.series.interventions.tolist(),
                low=page.series.low.tolist(),
                high=page.series.high.tolist(),
                rate=[None if r != r else float(r) for r in page.series.rate.tolist()],
                since=flags[0].since.isoformat() if flags else None,
            )
            context["by_mode"] = charts.interventions_by_mode(days=days, series=page.mode_daily)
            context["condition_figures"] = [
                {
                    "id": f"condition-{i}",
                    "figure": charts.rate_bars(
                        labels=[r.label for r in rows],
                        rate=[r.rate for r in rows],
                        low=[r.low for r in rows],
                        high=[r.high for r in rows],
                        title=f"Interventions per 1,000 cycles by {dimension.lower()}",
                        category=dimension,
                    ),
                }
                for i, (dimension, rows) in enumerate(page.conditions)
            ]
            context["policy_figure"] = charts.rate_bars(
                labels=[r.label for r in page.policies],
                rate=[r.rate for r in page.policies],
                low=[r.low for r in page.policies],
                high=[r.high for r in page.policies],
                title="Interventions per 1,000 cycles by policy version",
                category="policy version",
            )
        return super().get_context_data(**context, **kwargs)
