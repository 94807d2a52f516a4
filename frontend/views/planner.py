"""The planner: campaigns, deployments, sites, embodiments and taxonomies for managers."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Prefetch, Q, Sum
from django.shortcuts import get_object_or_404
from django.views.generic import TemplateView

from analytics.selectors import deployments_reliability
from campaigns.models import Campaign, CollectionRound
from frontend.views.base import MANAGERS, MemberView
from labeling.models import Dataset, Episode
from sites.models import (
    ConditionDimension,
    ConditionValue,
    Deployment,
    Embodiment,
    FailureMode,
    FailureRecord,
    Site,
)


class PlannerHome(MemberView, TemplateView):
    roles = MANAGERS
    template_name = "frontend/planner/home.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        user = self.request.user
        campaigns = list(
            Campaign.objects.visible_to(user)
            .select_related("customer", "task")
            .prefetch_related(
                Prefetch("rounds", queryset=CollectionRound.objects.order_by("number"))
            )
            .annotate(n_deployments=Count("deployments", distinct=True))
        )
        deployments = list(
            Deployment.objects.visible_to(user).select_related("customer", "site", "embodiment")
        )
        reliability = deployments_reliability(deployments=deployments)
        inventory = Episode.objects.visible_to(user).aggregate(
            episodes=Sum("episode_count"), frames=Sum("frames")
        )
        return super().get_context_data(
            campaigns=campaigns,
            deployments=[(d, reliability[d.pk]) for d in deployments],
            inventory=inventory,
            n_datasets=Dataset.objects.visible_to(user).count(),
            n_sites=Site.objects.visible_to(user).count(),
            **kwargs,
        )


class CampaignDetail(MemberView, TemplateView):
    scoped_model = Campaign
    roles = MANAGERS
    template_name = "frontend/planner/campaign_detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        campaign = get_object_or_404(
            Campaign.objects.visible_to(self.request.user).select_related("customer", "task"),
            pk=kwargs["pk"],
        )
        deployments = list(campaign.deployments.select_related("site", "embodiment"))
        reliability = deployments_reliability(deployments=deployments)
        rounds = list(
            campaign.rounds.select_related("dataset").annotate(
                n_targets=Count("targets", distinct=True), n_tasks=Count("tasks", distinct=True)
            )
        )
        return super().get_context_data(
            campaign=campaign,
            embodiments=list(campaign.embodiments.all()),
            deployments=[(d, reliability[d.pk]) for d in deployments],
            rounds=rounds,
            **kwargs,
        )


class DeploymentList(MemberView, TemplateView):
    roles = MANAGERS
    template_name = "frontend/planner/deployment_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        deployments = list(
            Deployment.objects.visible_to(self.request.user).select_related(
                "customer", "site", "embodiment", "task"
            )
        )
        reliability = deployments_reliability(deployments=deployments)
        return super().get_context_data(
            deployments=[(d, reliability[d.pk]) for d in deployments], **kwargs
        )


class DeploymentDetail(MemberView, TemplateView):
    scoped_model = Deployment
    roles = MANAGERS
    template_name = "frontend/planner/deployment_detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        deployment = get_object_or_404(
            Deployment.objects.visible_to(self.request.user).select_related(
                "customer", "site", "embodiment", "task"
            ),
            pk=kwargs["pk"],
        )
        profile = list(
            deployment.condition_profile.select_related("value__dimension").order_by(
                "value__dimension__order", "-share"
            )
        )
        failures = list(
            FailureRecord.objects.filter(deployment=deployment)
            .values("failure_mode__code", "failure_mode__name", "failure_mode__severity")
            .annotate(n=Count("id"), interventions=Count("id", filter=Q(intervention=True)))
            .order_by("-n")[:15]
        )
        return super().get_context_data(
            deployment=deployment,
            reliability=deployments_reliability(deployments=[deployment])[deployment.pk],
            profile=profile,
            failures=failures,
            **kwargs,
        )


class SiteList(MemberView, TemplateView):
    roles = MANAGERS
    template_name = "frontend/planner/site_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        sites = (
            Site.objects.visible_to(self.request.user)
            .select_related("customer")
            .prefetch_related("access_windows")
            .annotate(n_deployments=Count("deployments", distinct=True))
        )
        return super().get_context_data(sites=sites, **kwargs)


class SiteDetail(MemberView, TemplateView):
    scoped_model = Site
    roles = MANAGERS
    template_name = "frontend/planner/site_detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        site = get_object_or_404(
            Site.objects.visible_to(self.request.user).select_related("customer"), pk=kwargs["pk"]
        )
        return super().get_context_data(
            site=site,
            windows=list(site.access_windows.all()),
            presents=list(
                site.presents.select_related("dimension").order_by("dimension__order", "order")
            ),
            deployments=list(site.deployments.select_related("embodiment")),
            **kwargs,
        )


class EmbodimentList(MemberView, TemplateView):
    roles = MANAGERS
    template_name = "frontend/planner/embodiment_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        embodiments = Embodiment.objects.visible_to(self.request.user).prefetch_related(
            "action_dimensions", "cameras"
        )
        return super().get_context_data(embodiments=embodiments, **kwargs)


class EmbodimentDetail(MemberView, TemplateView):
    scoped_model = Embodiment
    roles = MANAGERS
    template_name = "frontend/planner/embodiment_detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        embodiment = get_object_or_404(
            Embodiment.objects.visible_to(self.request.user).prefetch_related(
                "action_dimensions", "cameras"
            ),
            pk=kwargs["pk"],
        )
        return super().get_context_data(embodiment=embodiment, **kwargs)


class Taxonomy(MemberView, TemplateView):
    roles = MANAGERS
    template_name = "frontend/planner/taxonomy.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        user = self.request.user
        dimensions = ConditionDimension.objects.visible_to(user).prefetch_related(
            Prefetch("values", queryset=ConditionValue.objects.order_by("order"))
        )
        modes = list(FailureMode.objects.visible_to(user).order_by("code"))
        return super().get_context_data(dimensions=dimensions, failure_modes=modes, **kwargs)
