"""Reads for planning: a round's world as the feasibility checker and the planner see it.

The checker (:mod:`campaigns.planning.plan_check`) is fed plain data; this module loads it
once per plan from the database: the organization's sites and teams, every other round's
tasks (team calendars and site days are shared across rounds and campaigns), and what the
campaign's other rounds planned or spent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from django.db.models import Avg, Count, Q
from django.utils import timezone

from campaigns.models import (
    Campaign,
    CaptureTarget,
    CollectionRound,
    CollectionTask,
    FieldRecord,
    FieldTeam,
)
from campaigns.planning.plan_check import (
    Amounts,
    CheckSite,
    CheckTarget,
    CheckTask,
    CheckTeam,
    PlanCheckInput,
    Violation,
    check_plan,
    plan_use,
)
from campaigns.planning.schedule_types import AccessWindow
from sites.models import Embodiment, Site

DEFAULT_MIN_BATCH = 20


@dataclass(frozen=True)
class SiteCosts:
    """What one episode and one batch's setup cost at a site, in hours and money."""

    hours_per_episode: float
    cost_per_episode: float
    setup_hours: float
    cost_per_visit: float


def site_costs(*, site: Site, team_rate: float) -> SiteCosts:
    """Return a site's per-episode and per-batch costs (site fee plus the teams' mean rate).

    The one costing of field work: the allocator's budgets and the checker's use both read it.
    """
    hours = site.episode_minutes / 60.0
    rate = float(site.cost_per_hour) + team_rate
    return SiteCosts(hours, rate * hours, site.setup_hours, rate * site.setup_hours)


@dataclass
class PlanWorld:
    """A round's world for planning and checking, loaded once."""

    round: CollectionRound
    sites: dict[str, Site]
    check_sites: dict[str, CheckSite]
    teams: dict[str, FieldTeam]
    check_teams: dict[str, CheckTeam]
    team_rate: float
    other_tasks: list[CheckTask]
    other_use: dict[int, Amounts]
    campaign_budget: Amounts
    embodiment_names: dict[int, str] = field(default_factory=dict)

    def remaining(self) -> Amounts:
        """The campaign's budget left after every other round (``None``: unlimited)."""

        def left(name: str) -> float | None:
            total = getattr(self.campaign_budget, name)
            if total is None:
                return None
            spent = sum(getattr(a, name) or 0.0 for a in self.other_use.values())
            return max(float(total) - spent, 0.0)

        return Amounts(episodes=left("episodes"), hours=left("hours"), money=left("money"))

    def site_day_episodes(self) -> dict[tuple[str, date], int]:
        """Episodes other rounds hold per (site slug, local date)."""
        from zoneinfo import ZoneInfo

        out: dict[tuple[str, date], int] = defaultdict(int)
        for task in self.other_tasks:
            if task.start is None:
                continue
            day = task.start.astimezone(ZoneInfo(self.check_sites[task.site].tz)).date()
            out[(task.site, day)] += task.episodes
        return out

    def busy_days(self) -> dict[str, set[date]]:
        """Local dates on which each team already has a visit of another round."""
        from zoneinfo import ZoneInfo

        out: dict[str, set[date]] = defaultdict(set)
        for task in self.other_tasks:
            if task.team is None or task.start is None or task.end is None:
                continue
            zone = ZoneInfo(self.check_sites[task.site].tz)
            out[task.team].add(task.start.astimezone(zone).date())
            out[task.team].add(task.end.astimezone(zone).date())
        return out


def site_windows(site: Site) -> tuple[AccessWindow, ...]:
    """A site's weekly access windows (``access_windows`` prefetched) for the planning cores."""
    return tuple(
        AccessWindow(w.weekday, w.start_time, w.end_time) for w in site.access_windows.all()
    )


def _check_site(site: Site, team_rate: float) -> CheckSite:
    costs = site_costs(site=site, team_rate=team_rate)
    return CheckSite(
        key=site.slug,
        name=site.name,
        tz=site.timezone,
        lat=site.latitude,
        lon=site.longitude,
        windows=site_windows(site),
        episodes_per_day=site.capacity_episodes_per_day,
        hours_per_episode=costs.hours_per_episode,
        setup_hours=costs.setup_hours,
        cost_per_episode=costs.cost_per_episode,
        cost_per_visit=costs.cost_per_visit,
    )


def _check_team(team: FieldTeam) -> CheckTeam:
    unavailable = {
        u.start_date + timedelta(days=d)
        for u in team.unavailability.all()
        for d in range((u.end_date - u.start_date).days + 1)
    }
    return CheckTeam(
        key=team.slug,
        name=team.name,
        hours_per_day=team.hours_per_day,
        speed_kmh=team.travel_speed_kmh,
        home_lat=team.home_latitude,
        home_lon=team.home_longitude,
        embodiments=frozenset(e.pk for e in team.embodiments.all()),
        unavailable=frozenset(unavailable),
    )


def check_tasks(
    *, tasks: Iterable[CollectionTask], ours: bool, round_numbers: Mapping[int, int] | None = None
) -> list[CheckTask]:
    """Turn stored tasks (with ``site``, ``team`` and ``task_targets`` loaded) into CheckTasks."""
    out = []
    for task in tasks:
        out.append(
            CheckTask(
                key=f"task-{task.pk}",
                round=(round_numbers or {}).get(task.round_id, 0),
                ours=ours,
                site=task.site.slug,
                embodiment=task.embodiment_id,
                team=task.team.slug if task.team is not None else None,
                start=task.start_at,
                end=task.end_at,
                batches=tuple(
                    sorted(
                        (f"target-{tt.target_id}", tt.episodes_planned)
                        for tt in task.task_targets.all()
                    )
                ),
                locked=task.locked,
            )
        )
    return out


def plan_world(*, round: CollectionRound) -> PlanWorld:
    """Load the round's world: sites, teams, other rounds' visits and use, campaign budget."""
    campaign = round.campaign
    org = campaign.organization_id
    sites = {
        s.slug: s
        for s in Site.objects.filter(organization_id=org)
        .prefetch_related("access_windows", "presents")
        .order_by("pk")
    }
    teams = {
        t.slug: t
        for t in FieldTeam.objects.filter(organization_id=org)
        .prefetch_related("embodiments", "unavailability")
        .order_by("pk")
    }
    team_rate = float(
        FieldTeam.objects.filter(organization_id=org).aggregate(r=Avg("cost_per_hour"))["r"] or 0
    )
    check_sites = {slug: _check_site(s, team_rate) for slug, s in sites.items()}
    horizon = timezone.now() - timedelta(days=2)
    others = list(
        CollectionTask.objects.filter(round__campaign__organization_id=org)
        .exclude(round=round)
        .exclude(status=CollectionTask.Status.CANCELLED)
        .filter(Q(end_at__isnull=True) | Q(end_at__gte=horizon) | Q(round__campaign=campaign))
        .select_related("site", "team", "round")
        .prefetch_related("task_targets")
    )
    numbers = {t.round_id: t.round.number for t in others}
    other_tasks = check_tasks(tasks=others, ours=False, round_numbers=numbers)
    use = rounds_use(campaign=campaign, exclude=round, sites=check_sites)
    budget = budget_of(campaign)
    names = dict(Embodiment.objects.filter(organization_id=org).values_list("pk", "name"))
    return PlanWorld(
        round=round,
        sites=sites,
        check_sites=check_sites,
        teams=teams,
        check_teams={slug: _check_team(t) for slug, t in teams.items()},
        team_rate=team_rate,
        other_tasks=other_tasks,
        other_use=use,
        campaign_budget=budget,
        embodiment_names=names,
    )


def budget_of(holder: Campaign | CollectionRound) -> Amounts:
    """A campaign's or round's own stored budget (``None`` where it sets none)."""
    return Amounts(
        episodes=holder.budget_episodes,
        hours=holder.budget_hours,
        money=float(holder.budget_money) if holder.budget_money is not None else None,
    )


def rounds_use(
    *,
    campaign: Campaign,
    exclude: CollectionRound | None = None,
    sites: Mapping[str, CheckSite] | None = None,
) -> dict[int, Amounts]:
    """What each of the campaign's rounds (but ``exclude``) planned, or captured where more.

    Episodes, field hours and money of the visits that are not cancelled, counted as the
    allocator counts them (one setup per target and site); episodes are the larger of
    planned and captured, so a round that captured beyond its plan is charged for it.
    """
    rounds = [
        r for r in campaign.rounds.order_by("number") if exclude is None or r.pk != exclude.pk
    ]
    if not rounds:
        return {}
    if sites is None:
        team_rate = float(
            FieldTeam.objects.filter(organization_id=campaign.organization_id).aggregate(
                r=Avg("cost_per_hour")
            )["r"]
            or 0
        )
        sites = {
            s.slug: _check_site(s, team_rate)
            for s in Site.objects.filter(organization_id=campaign.organization_id).prefetch_related(
                "access_windows"
            )
        }
    tasks = list(
        CollectionTask.objects.filter(round__in=rounds)
        .exclude(status=CollectionTask.Status.CANCELLED)
        .select_related("site", "team")
        .prefetch_related("task_targets")
    )
    captured = dict(
        FieldRecord.objects.filter(
            kind=FieldRecord.Kind.CAPTURE, stale=False, task__round__in=rounds
        )
        .values("task__round")
        .annotate(n=Count("pk"))
        .values_list("task__round", "n")
    )
    by_round: dict[int, list[CollectionTask]] = defaultdict(list)
    for t in tasks:
        by_round[t.round_id].append(t)
    use: dict[int, Amounts] = {}
    for r in rounds:
        planned = plan_use(check_tasks(tasks=by_round[r.pk], ours=False), sites)
        use[r.number] = Amounts(
            episodes=max(planned.episodes or 0.0, float(captured.get(r.pk, 0))),
            hours=planned.hours,
            money=planned.money,
        )
    return use


def campaign_remaining(*, campaign: Campaign, exclude: CollectionRound | None = None) -> Amounts:
    """The campaign's budget left after its rounds (but ``exclude``); ``None``: unlimited."""
    use = rounds_use(campaign=campaign, exclude=exclude)
    total = budget_of(campaign)

    def left(name: str) -> float | None:
        limit = getattr(total, name)
        if limit is None:
            return None
        return max(float(limit) - sum(getattr(a, name) or 0.0 for a in use.values()), 0.0)

    return Amounts(episodes=left("episodes"), hours=left("hours"), money=left("money"))


def round_check_input(
    *,
    world: PlanWorld,
    tasks: Sequence[CheckTask],
    targets: Sequence[CheckTarget],
    budget: Amounts,
    min_batch: int,
    locked_tasks: Sequence[CheckTask] = (),
    locked_targets: Mapping[str, int] | None = None,
    today: date | None = None,
    changed: frozenset[str] | None = None,
    edit: bool = False,
) -> PlanCheckInput:
    """Assemble the checker's input: the round's tasks as they would be stored, in its world."""
    return PlanCheckInput(
        round=world.round.number,
        sites=world.check_sites,
        teams=world.check_teams,
        tasks=[*world.other_tasks, *tasks],
        targets=targets,
        today=today or timezone.localdate(),
        min_batch=min_batch,
        round_budget=budget,
        campaign_budget=world.campaign_budget,
        other_use=world.other_use,
        locked_tasks=locked_tasks,
        locked_targets=locked_targets or {},
        embodiment_names=world.embodiment_names,
        changed=changed,
        edit=edit,
    )


def stored_round_tasks(round: CollectionRound) -> list[CollectionTask]:
    """The round's tasks that count (not cancelled), with what the checker reads."""
    return list(
        round.tasks.exclude(status=CollectionTask.Status.CANCELLED)
        .select_related("site", "team")
        .prefetch_related("task_targets")
        .order_by("pk")
    )


def check_targets(targets: Iterable[CaptureTarget]) -> list[CheckTarget]:
    """Turn stored targets into the checker's."""
    return [
        CheckTarget(
            key=f"target-{t.pk}", label=t.label, episodes_wanted=t.episodes_wanted, locked=t.locked
        )
        for t in targets
    ]


def round_violations(
    *,
    round: CollectionRound,
    tasks: Sequence[CheckTask] | None = None,
    world: PlanWorld | None = None,
) -> list[Violation]:
    """Check the round's plan as stored (or with ``tasks`` in place of its stored tasks).

    Locks are checked by the paths that change a plan (they know what was locked before);
    here the stored round is checked against every other rule.
    """
    world = world or plan_world(round=round)
    if tasks is None:
        tasks = check_tasks(
            tasks=stored_round_tasks(round), ours=True, round_numbers={round.pk: round.number}
        )
    summary: dict[str, Any] = round.plan_summary or {}
    return check_plan(
        round_check_input(
            world=world,
            tasks=tasks,
            targets=check_targets(round.targets.all()),
            budget=budget_of(round),
            min_batch=int(summary.get("min_batch", DEFAULT_MIN_BATCH)),
        )
    )
