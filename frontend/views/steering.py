"""Steering pages: evaluations in, round impact, the recommended next round, campaign forecast."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.contrib import messages
from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views import View
from django.views.generic import TemplateView

from analytics import charts
from analytics.models import EvaluationRun, PolicyVersion, RoundImpactReport
from analytics.services.evaluations import EvaluationImportError, evaluation_import_file
from analytics.services.steering import (
    ImpactUnavailable,
    next_round_recommendation,
    round_impact_compute,
    round_plan_from_recommendation,
)
from campaigns.models import Campaign, CollectionRound
from campaigns.services import round_create
from frontend.views.base import MANAGERS, MemberView
from labeling.models import Dataset
from sites.models import Deployment, Embodiment


class Evaluations(MemberView, TemplateView):
    roles = MANAGERS
    template_name = "frontend/steering/evaluations.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        user = self.request.user
        policies = (
            PolicyVersion.objects.visible_to(user)
            .select_related("embodiment")
            .prefetch_related("trained_on_datasets", "trained_on_rounds__campaign")
            .annotate(n_runs=Count("evaluations", distinct=True))
        )
        runs = (
            EvaluationRun.objects.visible_to(user)
            .select_related("policy_version", "deployment")
            .annotate(trials=Sum("results__trials"), successes=Sum("results__successes"))
            .order_by("-evaluated_on", "-pk")[:50]
        )
        return super().get_context_data(
            policies=policies,
            runs=runs,
            deployments=Deployment.objects.visible_to(user).order_by("name"),
            embodiments=Embodiment.objects.visible_to(user),
            datasets=Dataset.objects.visible_to(user).order_by("name"),
            rounds=CollectionRound.objects.visible_to(user)
            .select_related("campaign")
            .order_by("campaign", "number"),
            **kwargs,
        )

    def post(self, request: HttpRequest) -> HttpResponse:
        if request.POST.get("action") == "policy":
            embodiment = get_object_or_404(
                Embodiment.objects.visible_to(request.user), pk=request.POST.get("embodiment")
            )
            slug = request.POST.get("slug", "").strip()
            if not slug:
                messages.error(request, "A policy version needs a slug.")
                return redirect("planner:evaluations")
            policy, _ = PolicyVersion.objects.update_or_create(
                organization=self.membership.organization,
                slug=slug,
                defaults={
                    "name": request.POST.get("name") or slug,
                    "embodiment": embodiment,
                    "released_on": request.POST.get("released_on") or None,
                },
            )
            policy.trained_on_datasets.set(
                Dataset.objects.visible_to(request.user).filter(
                    pk__in=request.POST.getlist("datasets")
                )
            )
            policy.trained_on_rounds.set(
                CollectionRound.objects.visible_to(request.user).filter(
                    pk__in=request.POST.getlist("rounds")
                )
            )
            messages.success(request, f"Policy version {policy.name} saved.")
            return redirect("planner:evaluations")
        upload = request.FILES.get("file")
        if upload is None:
            messages.error(request, "Choose a results file (CSV or JSON).")
            return redirect("planner:evaluations")
        policy = get_object_or_404(
            PolicyVersion.objects.visible_to(request.user), pk=request.POST.get("policy")
        )
        deployment = None
        if request.POST.get("deployment"):
            deployment = get_object_or_404(
                Deployment.objects.visible_to(request.user), pk=request.POST["deployment"]
            )
        try:
            run = evaluation_import_file(
                organization=self.membership.organization,
                name=upload.name or "results",
                content=upload.read(),
                policy=policy.slug,
                deployment=deployment.slug if deployment else "",
                label=request.POST.get("label") or None,
                evaluated_on=date.fromisoformat(request.POST["evaluated_on"])
                if request.POST.get("evaluated_on")
                else None,
                actor=request.user,
            )
        except EvaluationImportError as exc:
            for problem in exc.problems:
                messages.error(request, problem)
            return redirect("planner:evaluations")
        messages.success(request, f"Imported {run.label}: learning curves refitted.")
        return redirect("planner:evaluations")


class RoundImpact(MemberView, TemplateView):
    roles = MANAGERS
    scoped_model = CollectionRound
    template_name = "frontend/steering/impact.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        round = get_object_or_404(
            CollectionRound.objects.visible_to(self.request.user).select_related("campaign"),
            pk=kwargs["pk"],
        )
        report = (
            RoundImpactReport.objects.filter(round=round)
            .select_related("before_policy", "after_policy")
            .first()
        )
        context: dict[str, Any] = {"round": round, "campaign": round.campaign, "report": report}
        if report is None:
            try:
                report = round_impact_compute(round=round)
                context["report"] = report
            except ImpactUnavailable as exc:
                context["unavailable"] = str(exc)
        if report is not None:
            sites = report.sites
            context["site_figure"] = charts.performance_shift(
                labels=[s["site"] for s in sites],
                before=[s["before"] for s in sites],
                before_err=[
                    [s["before"] - s["before_low"], s["before_high"] - s["before"]] for s in sites
                ],
                after=[s["after"] for s in sites],
                after_err=[
                    [s["after"] - s["after_low"], s["after_high"] - s["after"]] for s in sites
                ],
                title="Success before vs after, per site (95% intervals)",
            )
            groups = [g for g in report.summary.get("groups", []) if g.get("before") is not None][
                :8
            ]
            context["group_figure"] = charts.performance_shift(
                labels=[g["group"] for g in groups],
                before=[g["before"] for g in groups],
                before_err=[[0, 0] for _ in groups],
                after=[g["after"] for g in groups],
                after_err=[
                    [g["after"] - g["after_low"], g["after_high"] - g["after"]] for g in groups
                ],
                title="Success before vs after where the round added data (after: 95% intervals)",
            )
            context["cells"] = report.cells[:60]
            context["recommendation"] = report.summary.get("recommendation")
        return super().get_context_data(**context, **kwargs)


class RoundRecommend(MemberView, View):
    """Compute the recommended next round (stored with the impact report) or plan from it."""

    roles = MANAGERS
    scoped_model = CollectionRound

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        round = get_object_or_404(
            CollectionRound.objects.visible_to(request.user).select_related("campaign"), pk=pk
        )
        report = RoundImpactReport.objects.filter(round=round).first()
        if report is None:
            messages.error(request, "Measure the round's impact first.")
            return redirect("planner:round-impact", pk=round.pk)
        if request.POST.get("action") == "plan":
            recommendation = report.summary.get("recommendation")
            if not recommendation:
                messages.error(request, "Compute a recommendation first.")
                return redirect("planner:round-impact", pk=round.pk)
            campaign = round.campaign
            nxt = campaign.rounds.filter(number=round.number + 1).first() or round_create(
                campaign=campaign, actor=request.user
            )
            try:
                round_plan_from_recommendation(
                    round=nxt, recommendation=recommendation, actor=request.user
                )
            except Exception as exc:  # plan errors name their binding constraint
                messages.error(request, str(exc))
                return redirect("planner:round-impact", pk=round.pk)
            messages.success(request, f"Round {nxt.number} planned from the recommendation.")
            return redirect("planner:round", pk=nxt.pk)
        try:
            budget = max(
                1.0, float(request.POST.get("budget") or round.campaign.budget_episodes or 2000)
            )
        except ValueError:
            budget = 2000.0
        try:
            recommendation = next_round_recommendation(campaign=round.campaign, budget=budget)
        except ImpactUnavailable as exc:
            messages.error(request, str(exc))
            return redirect("planner:round-impact", pk=round.pk)
        report.summary = {**report.summary, "recommendation": recommendation}
        report.save(update_fields=["summary"])
        return redirect("planner:round-impact", pk=round.pk)


class CampaignForecast(MemberView, TemplateView):
    """A synthetic campaign played forward under each strategy (hidden curves the strategies never see)."""

    roles = MANAGERS
    scoped_model = Campaign
    template_name = "frontend/steering/forecast.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from analytics.steering.simulate import simulate

        campaign = get_object_or_404(
            Campaign.objects.visible_to(self.request.user), pk=kwargs["pk"]
        )
        params = self.request.GET

        def number(name: str, default: int, low: int, high: int) -> int:
            try:
                return max(low, min(high, int(params.get(name, default))))
            except ValueError:
                return default

        rounds, budget, seed = (
            number("rounds", 20, 1, 60),
            number("budget", 5000, 100, 100000),
            number("seed", 1, 0, 10**6),
        )
        strategies = ["steered", "uniform", "proportional", "more-of-the-same"]
        runs = (
            {name: simulate(name, seed=seed, rounds=rounds, budget=budget) for name in strategies}
            if "run" in params
            else {}
        )
        figure = None
        if runs:
            figure = {
                "data": [
                    {
                        "type": "scatter",
                        "mode": "lines+markers",
                        "name": name,
                        "x": list(range(len(r.interventions_per_day))),
                        "y": r.interventions_per_day,
                    }
                    for name, r in runs.items()
                ],
                "layout": {
                    "title": {"text": "Interventions per day by round (synthetic world)"},
                    "xaxis": {"title": {"text": "round"}},
                    "yaxis": {"title": {"text": "interventions/day"}, "type": "log"},
                    "height": 380,
                },
            }
        return super().get_context_data(
            campaign=campaign,
            runs=runs,
            figure=figure,
            rounds=rounds,
            budget=budget,
            seed=seed,
            **kwargs,
        )
