"""Steering pages: evaluations in, round impact, the recommended next round, campaign forecast."""

from __future__ import annotations

from datetime import date
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.validators import slug_re
from django.db.models import Count, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.views import View
from django.views.generic import TemplateView

from accounts.models import Job
from accounts.services import duration_words
from analytics import charts
from analytics.models import CampaignForecast as StoredForecast
from analytics.models import EvaluationRun, PolicyVersion, RoundImpactReport
from analytics.selectors import campaign_forecast_find, forecast_pace
from analytics.services.evaluations import EvaluationImportError, evaluation_import_file
from analytics.services.forecast import (
    FORECAST_STRATEGIES,
    ForecastParameters,
    campaign_forecast_request,
)
from analytics.services.policies import policy_version_save
from analytics.services.steering import (
    ImpactUnavailable,
    round_impact_policies,
    round_plan_from_recommendation,
)
from analytics.services.steering_jobs import (
    recommendation_stale,
    round_impact_request,
    round_impact_stale,
    round_recommendation_request,
    round_steering_job,
)
from campaigns.models import Campaign, CollectionRound
from campaigns.selectors import campaign_remaining
from campaigns.services import round_create
from frontend.views.base import MANAGERS, JobProgressView, MemberView
from frontend.views.inputs import FormInvalid, ids, parsed, short_text, whole
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
        shown = list(runs)
        # Each run's refit job (queued by its import; the latest where there are several, as
        # they come in order): what it did or how far it is. One query for the page.
        refits: dict[int, Job] = {}
        for job in Job.objects.filter(
            organization=self.membership.organization,
            kind="curves_refit",
            task_kwargs__run_id__in=[r.pk for r in shown],
        ).order_by("created_at", "pk"):
            refits[int(job.task_kwargs["run_id"])] = job
        for run in shown:
            run.refit = refits.get(run.pk)  # type: ignore[attr-defined]
        return super().get_context_data(
            policies=policies,
            runs=shown,
            deployments=Deployment.objects.visible_to(user).order_by("name"),
            embodiments=Embodiment.objects.visible_to(user),
            datasets=Dataset.objects.visible_to(user).order_by("name"),
            rounds=CollectionRound.objects.visible_to(user)
            .select_related("campaign")
            .order_by("campaign", "number"),
            **kwargs,
        )

    def post(self, request: HttpRequest) -> HttpResponse:
        try:
            if request.POST.get("action") == "policy":
                self._policy_save(request)
            else:
                self._results_import(request)
        except FormInvalid as exc:
            messages.error(request, str(exc))
        return redirect("planner:evaluations")

    def _policy_save(self, request: HttpRequest) -> None:
        data = request.POST
        embodiment = get_object_or_404(
            Embodiment.objects.visible_to(request.user),
            pk=whole(data, "embodiment", "The embodiment", low=1),
        )
        slug = short_text(data, "slug", "The slug", max_length=64)
        if not slug:
            raise FormInvalid("A policy version needs a slug.")
        if not slug_re.fullmatch(slug):
            raise FormInvalid("The slug may hold only letters, digits, hyphens and underscores.")
        released_on = parsed(data, "released_on", "Released on", date.fromisoformat, "2027-01-31")
        policy = policy_version_save(
            organization=self.membership.organization,
            actor=request.user,
            slug=slug,
            name=short_text(data, "name", "The name", max_length=200),
            embodiment=embodiment,
            released_on=released_on,
            datasets=Dataset.objects.visible_to(request.user).filter(
                pk__in=ids(data, "datasets", "Trained on datasets")
            ),
            rounds=CollectionRound.objects.visible_to(request.user).filter(
                pk__in=ids(data, "rounds", "Trained on rounds")
            ),
        )
        messages.success(request, f"Policy version {policy.name} saved.")

    def _results_import(self, request: HttpRequest) -> None:
        data = request.POST
        upload = request.FILES.get("file")
        if upload is None:
            raise FormInvalid("Choose a results file (CSV or JSON).")
        policy_id = whole(data, "policy", "The policy version", low=1)
        if policy_id is None:
            raise FormInvalid("Choose the policy version that was evaluated.")
        policy = get_object_or_404(PolicyVersion.objects.visible_to(request.user), pk=policy_id)
        deployment_id = whole(data, "deployment", "The deployment", low=1)
        deployment = (
            get_object_or_404(Deployment.objects.visible_to(request.user), pk=deployment_id)
            if deployment_id is not None
            else None
        )
        label = short_text(data, "label", "The label", max_length=200)
        evaluated_on = parsed(
            data, "evaluated_on", "Evaluated on", date.fromisoformat, "2027-01-31"
        )
        try:
            run = evaluation_import_file(
                organization=self.membership.organization,
                name=upload.name or "results",
                content=upload.read(),
                policy=policy.slug,
                deployment=deployment.slug if deployment else "",
                label=label or None,
                evaluated_on=evaluated_on,
                actor=request.user,
            )
        except EvaluationImportError as exc:
            for problem in exc.problems:
                messages.error(request, problem)
            return
        messages.success(
            request,
            f"Imported {run.label}: the learning curves and the transfer between cells are "
            "being refitted (Refit, under Recent evaluations, says how far).",
        )


class RoundImpact(MemberView, TemplateView):
    """The round's stored impact report; measuring it (first view, or Recompute) is a job."""

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
        job = round_steering_job(round=round)
        context: dict[str, Any] = {
            "round": round,
            "campaign": round.campaign,
            "report": report,
            "job": job,
        }
        nxt = (
            round.campaign.rounds.filter(status__in=("draft", "planned"))
            .order_by("-number")
            .first()
        )
        context["remaining"] = campaign_remaining(campaign=round.campaign, exclude=nxt)
        if report is None and (job is None or not job.is_active):
            # A GET only reads: it says whether the round can be measured, and the page's
            # button (a POST) starts the job.
            try:
                round_impact_policies(round=round)
                context["measurable"] = True
            except ImpactUnavailable as exc:
                context["unavailable"] = str(exc)
        context["failed"] = (
            job
            if job is not None
            and job.status == "failed"
            and (report is None or job.created_at > report.created_at)
            else None
        )
        if report is not None:
            context["stale"] = round_impact_stale(round=round, report=report)
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
                category="site",
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
                category="condition group",
            )
            context["cells"] = report.cells[:60]
            recommendation = report.summary.get("recommendation")
            context["recommendation"] = recommendation
            if recommendation:
                context["recommendation_at"] = parse_datetime(
                    recommendation.get("computed_at") or ""
                )
                context["recommendation_stale"] = recommendation_stale(
                    round=round, recommendation=recommendation
                )
        return super().get_context_data(**context, **kwargs)

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Measure the round again (a new report), in a job."""
        round = get_object_or_404(
            CollectionRound.objects.visible_to(request.user).select_related("campaign"), pk=pk
        )
        try:
            _, new = round_impact_request(round=round, actor=request.user)
        except ImpactUnavailable as exc:
            messages.error(request, str(exc))
        else:
            if not new:
                messages.info(request, "The impact is already being measured.")
        return redirect("planner:round-impact", pk=round.pk)


class RoundImpactProgress(JobProgressView):
    """The progress card of the round's impact or recommendation job (polled by the page)."""

    roles = MANAGERS
    scoped_model = CollectionRound
    template_name = "frontend/steering/_impact_job.html"

    def progress_context(self, **kwargs: Any) -> dict[str, Any]:
        round = get_object_or_404(
            CollectionRound.objects.visible_to(self.request.user).select_related("campaign"),
            pk=kwargs["pk"],
        )
        return {"round": round, "job": round_steering_job(round=round)}


class RoundRecommend(MemberView, View):
    """Queue the recommended next round (stored with the impact report), or plan from it."""

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
        raw = (request.POST.get("budget") or "").strip()
        budget: float | None = None
        if raw:
            try:
                budget = float(raw)
                if not (1.0 <= budget <= 1e7):
                    raise ValueError
            except ValueError:
                messages.error(request, "Budget: give a number of episodes from 1 to 10,000,000.")
                return redirect("planner:round-impact", pk=round.pk)
        _, new = round_recommendation_request(round=round, budget=budget, actor=request.user)
        if not new:
            messages.info(request, "A recommendation is already being computed.")
        return redirect("planner:round-impact", pk=round.pk)


def _forecast_params(data: Any) -> ForecastParameters:
    """A forecast's parameters from a query or form: numbers clamped to their ranges, an
    unknown world read as the benchmark's."""
    from analytics.steering.simulate import WORLD_FAMILIES

    def number(name: str, default: int, low: int, high: int) -> int:
        try:
            return max(low, min(high, int(data.get(name, default))))
        except ValueError:
            return default

    default = ForecastParameters()
    world = data.get("world", default.world)
    return ForecastParameters(
        rounds=number("rounds", default.rounds, 1, 60),
        budget=number("budget", default.budget, 100, 100000),
        seed=number("seed", default.seed, 0, 10**6),
        world=world if world in WORLD_FAMILIES else default.world,
        production_days=number("production_days", default.production_days, 0, 30),
        earlier_release=number("earlier_release", default.earlier_release, 0, 100000),
        worlds=number("worlds", default.worlds, 1, 8),
    )


def _forecast_estimate(campaign: Campaign, parameters: ForecastParameters) -> dict[str, Any]:
    """How long a forecast of these parameters would take at the pace of the organization's
    last forecasts (``pace`` None before any ran to the end)."""
    pace = forecast_pace(organization=campaign.organization)
    seconds = pace.seconds(rounds=parameters.rounds, worlds=parameters.worlds) if pace else None
    return {"pace": pace, "estimate": duration_words(seconds)}


def _forecast_of(
    request: HttpRequest, pk: int
) -> tuple[Campaign, ForecastParameters, StoredForecast | None]:
    """The member's campaign, the forecast parameters the query asks for and their stored
    forecast (None when never asked)."""
    campaign = get_object_or_404(Campaign.objects.visible_to(request.user), pk=pk)
    parameters = _forecast_params(request.GET)
    forecast = campaign_forecast_find(campaign=campaign, parameters=parameters.fields())
    return campaign, parameters, forecast


class CampaignForecast(MemberView, TemplateView):
    """A synthetic campaign played forward under each strategy (hidden curves the strategies
    never see), in the world and with the record asked for, against the oracle that knows
    the truth: Simulate queues a job; its stored result shows for the same parameters."""

    roles = MANAGERS
    scoped_model = Campaign
    template_name = "frontend/steering/forecast.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from analytics.steering.simulate import WORLD_FAMILIES, describe_record, world_config

        campaign, parameters, forecast = _forecast_of(self.request, kwargs["pk"])
        stored = forecast.result if forecast is not None and forecast.computed_at else {}
        # In the order they are played: the stored JSON keeps none.
        runs = {name: stored[name] for name in FORECAST_STRATEGIES if name in stored}
        figure = charts.forecast_lines(runs=runs) if runs else None
        job = forecast.job if forecast is not None else None
        config = world_config(
            parameters.world,
            production_days=parameters.production_days,
            earlier_release=parameters.earlier_release,
        )
        return super().get_context_data(
            campaign=campaign,
            forecast=forecast,
            job=job,
            runs=runs,
            figure=figure,
            query=urlencode(parameters.fields()),
            parameters=parameters,
            last_seed=parameters.seed + parameters.worlds - 1,
            families=WORLD_FAMILIES.items(),
            hardship=WORLD_FAMILIES[parameters.world],
            record=describe_record(config),
            **_forecast_estimate(campaign, parameters),
            **kwargs,
        )

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        htmx = getattr(request, "htmx", None)
        if htmx and htmx.target == "forecast-estimate":
            # The form asks again as its fields change: only the estimate, not the page.
            campaign, parameters, _ = _forecast_of(request, kwargs["pk"])
            return render(
                request,
                "frontend/steering/_forecast_estimate.html",
                {
                    "campaign": campaign,
                    "parameters": parameters,
                    **_forecast_estimate(campaign, parameters),
                },
            )
        return super().get(request, *args, **kwargs)

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        campaign = get_object_or_404(Campaign.objects.visible_to(request.user), pk=pk)
        parameters = _forecast_params(request.POST)
        campaign_forecast_request(campaign=campaign, parameters=parameters, actor=request.user)
        query = urlencode(parameters.fields())
        return redirect(f"{reverse('planner:campaign-forecast', args=[campaign.pk])}?{query}")


class ForecastProgress(JobProgressView):
    """The progress card of a forecast's job (polled by the forecast page)."""

    roles = MANAGERS
    scoped_model = Campaign
    template_name = "frontend/steering/_forecast_job.html"

    def progress_context(self, **kwargs: Any) -> dict[str, Any]:
        campaign, parameters, forecast = _forecast_of(self.request, kwargs["pk"])
        return {
            "campaign": campaign,
            "forecast": forecast,
            "job": forecast.job if forecast is not None else None,
            "query": urlencode(parameters.fields()),
        }
