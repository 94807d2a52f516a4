"""Round planning pages: propose, edit, lock, re-solve and publish a plan; team calendars and run sheets."""

from __future__ import annotations

from datetime import date, time
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Prefetch, Q, Sum
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils import timezone
from django.views import View
from django.views.generic import TemplateView

from accounts.models import Job, Role
from analytics.selectors import gap_report_latest
from analytics.services.planning import round_plan_request
from campaigns.models import CaptureTarget, CollectionRound, CollectionTask, FieldTeam, TaskTarget
from campaigns.services import round_create
from campaigns.services.calendar import team_calendar_ics, team_run_sheet
from campaigns.services.plan_edit import (
    PlanEditRefused,
    round_publish,
    target_remove,
    target_update,
    task_remove,
    task_update,
)
from frontend.views.base import MANAGERS, JobProgressView, MemberView
from frontend.views.inputs import FormInvalid, amount, parsed, whole

# Rows per page of a round's targets and tasks: a round of hundreds of targets stays a page
# a browser (and a tablet on site wifi) loads at once.
ROUND_PAGE_SIZE = 50
# The parts of the round page's address that row forms carry back after a POST.
ROUND_VIEW_PARAMS = ("q", "targets_page", "tasks_page")


def _round_view_query(data: QueryDict, **changes: Any) -> str:
    """The round page's filter and pages as a query string, with ``changes`` applied."""
    query = QueryDict(mutable=True)
    for key in ROUND_VIEW_PARAMS:
        value = changes.get(key, data.get(key, ""))
        if value not in ("", None):
            query[key] = str(value)
    return query.urlencode()


class RoundDetail(MemberView, TemplateView):
    """A round's plan: summary over the whole round; targets and tasks paged and filterable."""

    roles = MANAGERS
    scoped_model = CollectionRound
    template_name = "frontend/rounds/detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        round = get_object_or_404(
            CollectionRound.objects.visible_to(self.request.user).select_related(
                "campaign", "dataset"
            ),
            pk=kwargs["pk"],
        )
        params = self.request.GET
        search = params.get("q", "").strip()
        targets = round.targets.annotate(planned=Sum("task_targets__episodes_planned")).order_by(
            "-expected_avoided_per_day", "pk"
        )
        tasks = (
            round.tasks.select_related("site", "team")
            .prefetch_related(
                Prefetch("task_targets", queryset=TaskTarget.objects.select_related("target")),
                "steps",
            )
            .order_by("scheduled_date", "start_at", "pk")
        )
        if search:
            targets = targets.filter(label__icontains=search)
            tasks = tasks.filter(
                Q(site__name__icontains=search)
                | Q(team__name__icontains=search)
                | Q(task_targets__target__label__icontains=search)
            ).distinct()
        target_page = Paginator(targets, ROUND_PAGE_SIZE).get_page(params.get("targets_page"))
        task_page = Paginator(tasks, ROUND_PAGE_SIZE).get_page(params.get("tasks_page"))
        job = (
            Job.objects.filter(
                organization_id=round.campaign.organization_id,
                kind="plan",
                task_kwargs__round_id=round.pk,
            )
            .order_by("-created_at")
            .first()
        )
        teams = list(
            FieldTeam.objects.filter(organization_id=round.campaign.organization_id).order_by(
                "name"
            )
        )
        return super().get_context_data(
            round=round,
            campaign=round.campaign,
            targets=target_page,
            tasks=task_page,
            search=search,
            view_query=_round_view_query(params),
            targets_pages={
                "previous": _round_view_query(params, targets_page=target_page.number - 1),
                "next": _round_view_query(params, targets_page=target_page.number + 1),
            },
            tasks_pages={
                "previous": _round_view_query(params, tasks_page=task_page.number - 1),
                "next": _round_view_query(params, tasks_page=task_page.number + 1),
            },
            summary=round.plan_summary or {},
            job=job,
            report=gap_report_latest(campaign=round.campaign),
            teams=teams,
            # Over the whole round, not the page shown: every team with a visit gets its links.
            team_ids=set(
                round.tasks.exclude(team=None).values_list("team_id", flat=True).distinct()
            ),
            **kwargs,
        )


class RoundCreate(MemberView, View):
    roles = MANAGERS

    def post(self, request: HttpRequest) -> HttpResponse:
        from campaigns.models import Campaign

        try:
            campaign_id = whole(request.POST, "campaign", "The campaign", low=1)
            if campaign_id is None:
                raise FormInvalid("Choose the campaign to start a round in.")
        except FormInvalid as exc:
            messages.error(request, str(exc))
            return redirect("planner:home")
        campaign = get_object_or_404(Campaign.objects.visible_to(request.user), pk=campaign_id)
        round = round_create(campaign=campaign, actor=request.user)
        return redirect("planner:round", pk=round.pk)


class RoundAction(MemberView, View):
    """POST actions on a round's plan: plan/resolve, publish, target and task edits."""

    roles = MANAGERS
    scoped_model = CollectionRound

    def post(self, request: HttpRequest, pk: int, action: str) -> HttpResponse:
        round = get_object_or_404(
            CollectionRound.objects.visible_to(request.user).select_related("campaign"), pk=pk
        )
        data = request.POST
        try:
            if action in ("plan", "resolve"):
                if not round.is_editable:
                    raise PlanEditRefused(
                        f"Round {round.number} is {round.status}; it can no longer be planned."
                    )
                round_plan_request(
                    round=round,
                    actor=request.user,
                    budget_episodes=whole(data, "budget_episodes", "Episodes"),
                    budget_hours=amount(data, "budget_hours", "Field hours"),
                    budget_money=amount(data, "budget_money", "Money"),
                    start=parsed(data, "start", "Start", date.fromisoformat, "2027-01-31"),
                    # The API's limits (PlanRequestSerializer): one to 120 days.
                    days=whole(data, "days", "Days", low=1, high=120),
                )
                messages.success(
                    request, "Planning started; the page updates when the plan is ready."
                )
            elif action == "publish":
                round_publish(round=round, actor=request.user)
                messages.success(request, "Published: the field teams now see their tasks.")
            elif action == "target":
                target = get_object_or_404(
                    CaptureTarget.objects.filter(round=round),
                    pk=whole(data, "target", "The target", low=1),
                )
                episodes = whole(data, "episodes", "Episodes wanted")
                if data.get("op") == "remove":
                    target_remove(target=target, actor=request.user)
                elif data.get("op") == "lock":
                    target_update(target=target, locked=not target.locked, actor=request.user)
                elif episodes is not None:
                    target_update(target=target, episodes=episodes, actor=request.user)
            elif action == "task":
                task = get_object_or_404(
                    CollectionTask.objects.filter(round=round),
                    pk=whole(data, "task", "The task", low=1),
                )
                if data.get("op") == "remove":
                    task_remove(task=task, actor=request.user)
                elif data.get("op") == "lock":
                    task_update(task=task, locked=not task.locked, actor=request.user)
                else:
                    team_id = whole(data, "team", "The team", low=1)
                    team = (
                        get_object_or_404(FieldTeam.objects.visible_to(request.user), pk=team_id)
                        if team_id is not None
                        else None
                    )
                    day = parsed(data, "day", "The day", date.fromisoformat, "2027-01-31")
                    start_time = parsed(
                        data, "start_time", "The start time", time.fromisoformat, "08:30"
                    )
                    task_update(task=task, team=team, day=day, start=start_time, actor=request.user)
            else:
                raise Http404
        except (PlanEditRefused, ValueError) as exc:
            messages.error(request, str(exc))
        # Back to the page and filter the edit was made from.
        query = _round_view_query(QueryDict(data.get("view", "")))
        url = reverse("planner:round", kwargs={"pk": round.pk})
        return redirect(f"{url}?{query}" if query else url)


class RoundJobProgress(JobProgressView):
    roles = MANAGERS
    scoped_model = CollectionRound
    template_name = "frontend/rounds/_job.html"

    def progress_context(self, **kwargs: Any) -> dict[str, Any]:
        round = get_object_or_404(
            CollectionRound.objects.visible_to(self.request.user), pk=kwargs["pk"]
        )
        job = (
            Job.objects.filter(
                kind="plan",
                task_kwargs__round_id=round.pk,
                organization_id=self.membership.organization_id,
            )
            .order_by("-created_at")
            .first()
        )
        return {"round": round, "job": job}


class TeamRunSheet(MemberView, TemplateView):
    roles = frozenset({Role.MANAGER, Role.FIELD})
    scoped_model = FieldTeam
    template_name = "frontend/rounds/run_sheet.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        team = get_object_or_404(FieldTeam.objects.visible_to(self.request.user), pk=kwargs["pk"])
        if (
            self.membership.role == Role.FIELD
            and not team.members.filter(pk=self.request.user.pk).exists()
        ):
            raise Http404
        try:
            day = (
                date.fromisoformat(self.request.GET.get("date", ""))
                if self.request.GET.get("date")
                else None
            )
        except ValueError:
            day = None
        if day is None:
            upcoming = (
                CollectionTask.objects.filter(team=team, scheduled_date__gte=timezone.localdate())
                .exclude(status=CollectionTask.Status.PLANNED)
                .order_by("scheduled_date")
                .first()
            )
            day = (
                upcoming.scheduled_date
                if upcoming and upcoming.scheduled_date
                else timezone.localdate()
            )
        return super().get_context_data(
            team=team, day=day, tasks=team_run_sheet(team=team, day=day), **kwargs
        )


def team_calendar(request: HttpRequest, token: str) -> HttpResponse:
    """A team's calendar feed; the unguessable token is the credential (rotate it to revoke)."""
    team = FieldTeam.objects.filter(calendar_token=token).first()
    if team is None or len(token) < 20:
        raise Http404
    body = team_calendar_ics(team=team, base_url=request.build_absolute_uri("/").rstrip("/"))
    response = HttpResponse(body, content_type="text/calendar; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="fieldcraft-{team.slug}.ics"'
    response["Cache-Control"] = "private, max-age=300"
    return response


team_calendar.scoped_model = FieldTeam  # type: ignore[attr-defined]
team_calendar.public_by_token = True  # type: ignore[attr-defined]


class TeamCalendarRotate(MemberView, View):
    roles = MANAGERS
    scoped_model = FieldTeam

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        from campaigns.services import team_rotate_calendar

        team = get_object_or_404(FieldTeam.objects.visible_to(request.user), pk=pk)
        team_rotate_calendar(team=team, actor=request.user)
        messages.success(
            request, f"{team.name}'s calendar link was replaced; the old link no longer works."
        )
        return redirect("planner:team-runsheet", pk=team.pk)
