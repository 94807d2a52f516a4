"""Round planning: allocate episodes to cells and sites, schedule visits, write tasks and steps.

This module is fed plain numbers per condition cell (``PlanCell``) and knows nothing of how
they were estimated: analytics turns a gap report (or a steering recommendation) into them.
Re-planning keeps what the manager locked: locked targets keep their episodes (placement may
move), locked tasks keep their team, day and episodes; removed targets stay out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.db import transaction
from django.db.models import Avg
from django.utils import timezone

from accounts.services import audit_record
from campaigns.models import (
    CaptureTarget,
    CollectionRound,
    CollectionTask,
    FieldTeam,
    ProtocolStep,
    TaskTarget,
)
from campaigns.planning import protocol as proto
from campaigns.planning.allocation import Budget, CellSpec, LockedItem, SiteSpec, allocate
from campaigns.planning.errors import PlanInfeasible
from campaigns.planning.schedule_types import (
    AccessWindow as WindowSpec,
)
from campaigns.planning.schedule_types import (
    LockedPlacement,
    ScheduleSite,
)
from campaigns.planning.schedule_types import (
    Task as ScheduleTask,
)
from campaigns.planning.schedule_types import (
    Team as ScheduleTeam,
)
from campaigns.planning.scheduling import schedule
from campaigns.services.rounds import round_transition
from sites.models import ConditionValue, Site
from sites.services import condition_sets_intern

__all__ = [
    "PlanCell",
    "PlanInfeasible",
    "PlanInputInvalid",
    "PlanRequest",
    "plan_today",
    "round_plan",
]


@dataclass(frozen=True)
class PlanCell:
    """One condition cell as the planner sees it: plain numbers and a rationale."""

    value_ids: tuple[int, ...]
    label: str
    weight: float  # production cycles per day in the cell
    n0: float  # current (transfer-weighted) training episodes
    failure_rate: float
    priority: float = 0.0
    rationale: str = ""


@dataclass
class PlanRequest:
    cells: list[PlanCell]
    f_inf: float
    b: float
    source: str
    interventions_before: float | None = None
    budget_episodes: int | None = None
    budget_hours: float | None = None
    budget_money: float | None = None
    start: date | None = None
    days: int | None = None
    min_batch: int = 20
    extra: dict[str, Any] = field(default_factory=dict)


class RoundNotEditable(Exception):
    """The round's plan can no longer change (names its status)."""


class PlanInputInvalid(PlanInfeasible):
    """The plan's inputs are refused before anything is solved or stored (names the field)."""


def plan_today() -> date:
    """The first day a plan may schedule: today in the site-wide time zone (``TIME_ZONE``),
    the same "today" the field app and the calendars use."""
    return timezone.localdate()


def _checked_inputs(round: CollectionRound, request: PlanRequest) -> tuple[date, int, Budget]:
    """Validate the request against the round before any write: (start, days, budget).

    Raises PlanInputInvalid naming the field: budgets must be more than 0 where they apply,
    days at least 1, and the start not before today.
    """
    today = plan_today()
    for name in ("budget_episodes", "budget_hours", "budget_money"):
        given = getattr(request, name)
        if given is not None and not given > 0:
            raise PlanInputInvalid(f"{name}: must be more than 0 to plan field work")
    if request.days is not None and request.days < 1:
        raise PlanInputInvalid("days: must be at least 1 to plan field work")
    if request.min_batch < 0:
        raise PlanInputInvalid("min_batch: must not be negative")
    if request.start is not None and request.start < today:
        raise PlanInputInvalid(
            f"start: {request.start:%Y-%m-%d} is in the past; a plan starts today "
            f"({today:%Y-%m-%d}) or later"
        )
    # Never schedule into the past: without an explicit start, begin today at the earliest.
    start = request.start or max(round.start_date or today, today)
    days = request.days or round.days or 14
    budget = _budget(round, request)
    for name, value, unit in (
        ("budget_episodes", budget.episodes, "episodes"),
        ("budget_hours", budget.hours, "h"),
        ("budget_money", budget.money, "in money"),
    ):
        if value is not None and not value > 0:
            raise PlanInputInvalid(
                f"{name}: must be more than 0 to plan field work (round {round.number} "
                f"has {value:g} {unit}; set a positive budget)"
            )
    return start, days, budget


def _budget(round: CollectionRound, request: PlanRequest) -> Budget:
    campaign = round.campaign

    def pick(*values: Any) -> Any:
        return next((v for v in values if v is not None), None)

    money = pick(request.budget_money, round.budget_money, campaign.budget_money)
    return Budget(
        episodes=pick(request.budget_episodes, round.budget_episodes, campaign.budget_episodes),
        hours=pick(request.budget_hours, round.budget_hours, campaign.budget_hours),
        money=float(money) if money is not None else None,
    )


def _open_days(site: Site, start: date, days: int) -> int:
    weekdays = {w.weekday for w in site.access_windows.all()}
    return sum(1 for d in range(days) if (start + timedelta(days=d)).weekday() in weekdays)


def _candidate_sites(round: CollectionRound) -> list[Site]:
    campaign = round.campaign
    return [
        s
        for s in Site.objects.filter(organization_id=campaign.organization_id)
        .prefetch_related("access_windows", "presents")
        .order_by("pk")
        if s.customer_id in (None, campaign.customer_id) and s.access_windows.all()
    ]


@transaction.atomic
def round_plan(
    *, round: CollectionRound, request: PlanRequest, actor: Any = None
) -> CollectionRound:
    """Propose (or re-solve) the round's plan and store targets, tasks and protocol steps.

    Raises RoundNotEditable unless the round is draft or planned; PlanInputInvalid (before
    any write) for a budget that is not positive, a start in the past or no days;
    PlanInfeasible (from the allocation or scheduling core) when locked items break a hard
    constraint, naming it, or when the schedule would put a task before today. Nothing is
    stored unless the whole plan is: a refusal rolls back the round's fields, targets, tasks
    and steps. (A plan in which nothing could be placed is stored with its reasons in
    ``plan_summary["unplaced"]``; the plan_round command refuses and rolls it back.)
    """
    round = CollectionRound.objects.select_for_update().select_related("campaign").get(pk=round.pk)
    if not round.is_editable:
        raise RoundNotEditable(
            f"Round {round.number} is {round.status}; only draft or planned rounds can be planned."
        )
    campaign = round.campaign
    # Everything is checked before the first write; the round's fields change in memory
    # only and are saved with the plan (the whole function is one transaction).
    start, days, budget = _checked_inputs(round, request)
    round.start_date, round.days = start, days
    if request.budget_episodes is not None:
        round.budget_episodes = request.budget_episodes
    if request.budget_hours is not None:
        round.budget_hours = request.budget_hours
    if request.budget_money is not None:
        round.budget_money = Decimal(str(request.budget_money))
    excluded = {tuple(v) for v in (round.plan_summary or {}).get("excluded", [])}
    embodiment = campaign.embodiments.order_by("pk").first()
    if embodiment is None:
        raise PlanInfeasible(f"campaign {campaign.name!r} names no embodiment to capture with")

    locked_targets = list(
        round.targets.filter(locked=True)
        .select_related("condition_set")
        .prefetch_related("task_targets__task")
    )
    locked_tasks = list(
        round.tasks.filter(locked=True)
        .select_related("team", "site")
        .prefetch_related("task_targets__target")
    )

    # ---- cells: the request's, minus removed ones, plus any locked target's cell
    cells: list[PlanCell] = []
    index: dict[tuple[int, ...], int] = {}
    for cell in request.cells:
        key = tuple(sorted(cell.value_ids))
        if key in excluded or key in index or not key:
            continue
        index[key] = len(cells)
        cells.append(cell)
    for target in locked_targets:
        key = tuple(sorted(target.condition_set.value_ids))
        if key not in index:
            index[key] = len(cells)
            cells.append(PlanCell(key, target.label, 0.0, 0.0, 0.0, 0.0, target.rationale))

    # ---- sites, teams, stageability
    sites = _candidate_sites(round)
    site_index = {s.pk: i for i, s in enumerate(sites)}
    teams = list(
        FieldTeam.objects.filter(organization_id=campaign.organization_id)
        .prefetch_related("embodiments", "unavailability")
        .order_by("pk")
    )
    team_rate = float(
        FieldTeam.objects.filter(organization_id=campaign.organization_id).aggregate(
            r=Avg("cost_per_hour")
        )["r"]
        or 0
    )
    site_specs = []
    for s in sites:
        hpe = s.episode_minutes / 60.0
        rate = float(s.cost_per_hour) + team_rate
        site_specs.append(
            SiteSpec(
                key=s.slug,
                present_values=frozenset(v.pk for v in s.presents.all()),
                capacity_episodes=s.capacity_episodes_per_day * _open_days(s, start, days),
                hours_per_episode=hpe,
                cost_per_episode=rate * hpe,
                setup_hours_per_visit=s.setup_hours,
                cost_per_visit=rate * s.setup_hours,
            )
        )
    values = ConditionValue.objects.filter(
        dimension__organization_id=campaign.organization_id
    ).select_related("dimension")
    stageable = {v.pk for v in values if v.is_stageable}
    value_labels = {v.pk: v.label.lower() for v in values}

    # ---- locks → fixed (cell, site, episodes)
    fixed: dict[tuple[int, int], int] = defaultdict(int)
    for task in locked_tasks:
        for tt in task.task_targets.all():
            key = tuple(sorted(tt.target.condition_set.value_ids))
            if key in index and task.site_id in site_index:
                fixed[(index[key], site_index[task.site_id])] += tt.episodes_planned
    locked_task_ids = {t.pk for t in locked_tasks}
    for target in locked_targets:
        key = tuple(sorted(target.condition_set.value_ids))
        already = sum(
            tt.episodes_planned for tt in target.task_targets.all() if tt.task_id in locked_task_ids
        )
        remaining = target.episodes_wanted - already
        if remaining <= 0:
            continue
        by_site: dict[int, int] = defaultdict(int)
        for tt in target.task_targets.all():
            if tt.task_id not in locked_task_ids and tt.task.site_id in site_index:
                by_site[site_index[tt.task.site_id]] += tt.episodes_planned
        if not by_site:
            raise PlanInfeasible(
                f"locked target {target.label!r} ({remaining:,} episodes) has no site to capture at; "
                "unlock it or assign it to a task"
            )
        total = sum(by_site.values())
        for site_i, eps in by_site.items():
            fixed[(index[key], site_i)] += round_share(remaining, eps, total)
    locked_items = [LockedItem(cell=c, site=s, episodes=e) for (c, s), e in fixed.items() if e > 0]

    result = allocate(
        cells=[
            CellSpec(
                key=str(i),
                value_ids=tuple(sorted(c.value_ids)),
                weight=c.weight,
                n0=c.n0,
                failure_rate=c.failure_rate,
            )
            for i, c in enumerate(cells)
        ],
        sites=site_specs,
        budget=budget,
        f_inf=request.f_inf,
        b=request.b,
        stageable_values=stageable,
        value_labels=value_labels,
        min_batch=request.min_batch,
        locked=locked_items,
    )

    # ---- replace everything that is not locked
    ProtocolStep.objects.filter(task__round=round).exclude(task__locked=True).delete()
    TaskTarget.objects.filter(task__round=round).exclude(task__locked=True).delete()
    round.tasks.filter(locked=False).delete()
    round.targets.filter(locked=False).exclude(task_targets__task__locked=True).delete()

    allocated_cells = sorted({a.cell for a in result.allocations})
    set_ids = condition_sets_intern(
        organization=campaign.organization_id,
        combinations=[cells[i].value_ids for i in allocated_cells],
    )
    targets: dict[int, CaptureTarget] = {}
    existing = {
        tuple(sorted(t.condition_set.value_ids)): t
        for t in round.targets.select_related("condition_set")
    }
    for i in allocated_cells:
        cell = cells[i]
        key = tuple(sorted(cell.value_ids))
        where = [sites[a.site].name for a in result.allocations if a.cell == i]
        total = result.cell_totals[i]
        gain = result.cell_gains[i]
        rationale = (cell.rationale + " " if cell.rationale else "") + (
            f"Plan: {total:,} episodes at {', '.join(where)}, expected to avoid about "
            f"{gain:.1f} interventions a day."
        )
        found = existing.get(key)
        if found is None:
            found = CaptureTarget.objects.create(
                round=round,
                condition_set_id=set_ids[key],
                label=cell.label[:300],
                episodes_wanted=total,
                priority=cell.priority,
                expected_avoided_per_day=gain,
                rationale=rationale,
            )
        else:
            if not found.locked:
                found.episodes_wanted = total
            found.expected_avoided_per_day = gain
            found.priority = cell.priority
            found.save(update_fields=["episodes_wanted", "expected_avoided_per_day", "priority"])
        targets[i] = found

    # ---- schedule: one task request per site (new episodes only), locked tasks pinned
    per_site: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for a in result.allocations:
        new = a.episodes - fixed.get((a.cell, a.site), 0)
        if new > 0:
            per_site[a.site][a.cell] += new
    schedule_tasks: list[ScheduleTask] = []
    for site_i, by_cell in sorted(per_site.items()):
        s = sites[site_i]
        eps = sum(by_cell.values())
        schedule_tasks.append(
            ScheduleTask(
                key=f"site-{s.pk}",
                site=site_i,
                embodiment=embodiment.pk,
                hours=s.setup_hours + eps * s.episode_minutes / 60.0,
                priority=sum(
                    result.cell_gains[c] * n / max(result.cell_totals[c], 1)
                    for c, n in by_cell.items()
                ),
            )
        )
    for task in locked_tasks:
        if (
            task.site_id not in site_index
            or task.team is None
            or task.start_at is None
            or task.end_at is None
        ):
            continue
        tz = ZoneInfo(task.site.timezone)
        local = task.start_at.astimezone(tz)
        schedule_tasks.append(
            ScheduleTask(
                key=f"locked-{task.pk}",
                site=site_index[task.site_id],
                embodiment=task.embodiment_id,
                hours=(task.end_at - task.start_at).total_seconds() / 3600.0,
                locked=LockedPlacement(
                    team=task.team.slug,
                    date=local.date(),
                    start=local.time().replace(microsecond=0),
                ),
            )
        )
    horizon_end = start + timedelta(days=days)
    team_specs = [
        ScheduleTeam(
            key=t.slug,
            home_lat=t.home_latitude,
            home_lon=t.home_longitude,
            hours_per_day=t.hours_per_day,
            embodiments=frozenset(e.pk for e in t.embodiments.all()),
            unavailable_dates=frozenset(
                start + timedelta(days=d)
                for u in t.unavailability.all()
                for d in range(days)
                if u.start_date <= start + timedelta(days=d) <= u.end_date
                and start + timedelta(days=d) < horizon_end
            ),
            speed_kmh=t.travel_speed_kmh,
        )
        for t in teams
    ]
    site_schedules = [
        ScheduleSite(
            key=s.slug,
            lat=s.latitude,
            lon=s.longitude,
            tz=s.timezone,
            windows=tuple(
                WindowSpec(w.weekday, w.start_time, w.end_time) for w in s.access_windows.all()
            ),
        )
        for s in sites
    ]
    plan = schedule(
        tasks=schedule_tasks, sites=site_schedules, teams=team_specs, start=start, days=days
    )

    past = sorted({p.date for p in plan.placements if p.date < plan_today()})
    if past:
        raise PlanInfeasible(
            f"the schedule would put a task on {past[0]:%a %d %b %Y}, before today; "
            "nothing was stored"
        )

    team_by_slug = {t.slug: t for t in teams}
    placements_by_site: dict[int, list[Any]] = defaultdict(list)
    for p in plan.placements:
        if p.task.startswith("site-"):
            placements_by_site[p.site].append(p)
    visited = _visited_setups(round, embodiment)
    camera_key = tuple(sorted((c.name, c.mount) for c in embodiment.cameras.all()))
    cameras = [proto.CameraSpec(c.name, c.mount) for c in embodiment.cameras.all()]
    dims = [
        proto.ActionDimension(a.name, a.unit, a.min_value, a.max_value)
        for a in embodiment.action_dimensions.all()
    ]
    values_by_id = {v.pk: v for v in values}
    created_tasks = 0
    for site_i, placements in sorted(placements_by_site.items()):
        site = sites[site_i]
        placements.sort(key=lambda p: p.utc_start)
        split = _split_episodes(
            per_site[site_i],
            [p.hours for p in placements],
            order=lambda c: _setup_order(cells[c], values_by_id),
        )
        for p, share in zip(placements, split, strict=True):
            if not share:
                continue
            task = CollectionTask.objects.create(
                round=round,
                site=site,
                embodiment=embodiment,
                team=team_by_slug[p.team],
                scheduled_date=p.date,
                start_at=p.utc_start,
                end_at=p.utc_end,
                travel_hours=p.travel_hours,
                travel_km=p.travel_km,
            )
            created_tasks += 1
            TaskTarget.objects.bulk_create(
                [
                    TaskTarget(task=task, target=targets[c], episodes_planned=n)
                    for c, n in share.items()
                ]
            )
            needs = proto.calibration_needed(visited, site.pk, embodiment.pk, camera_key)
            visited.add((site.pk, embodiment.pk, camera_key))
            present = {v.pk for v in site.presents.all()}
            specs = [
                proto.CaptureTargetSpec(
                    key=str(targets[c].pk),
                    label=targets[c].label,
                    episodes=n,
                    conditions=tuple(
                        proto.ConditionSetup(
                            dimension=values_by_id[v].dimension.name,
                            value=values_by_id[v].label,
                            instructions=values_by_id[v].setup_instruction or None,
                            staged=v not in present,
                            affects_camera_pose="camera" in values_by_id[v].dimension.slug,
                        )
                        for v in cells[c].value_ids
                        if v in values_by_id
                    ),
                )
                for c, n in sorted(
                    share.items(), key=lambda item: _setup_order(cells[item[0]], values_by_id)
                )
            ]
            steps = proto.build_protocol_steps(
                targets=specs, cameras=cameras, action_dimensions=dims, needs_calibration=needs
            )
            ProtocolStep.objects.bulk_create(
                [
                    ProtocolStep(
                        task=task,
                        order=s.order,
                        kind=s.kind,
                        title=s.title[:200],
                        instructions=s.instructions,
                        episodes=s.episodes,
                        target_id=int(s.target) if s.target else None,
                    )
                    for s in steps
                ]
            )

    before = request.interventions_before
    if before is None:
        before = sum(c.weight * c.failure_rate for c in cells)
    scheduled_hours = sum(p.hours for p in plan.placements)
    summary = {
        "source": request.source,
        "planned_at": timezone.now().isoformat(),
        "start": start.isoformat(),
        "days": days,
        "budget": asdict(budget),
        "use": asdict(result.budget_use),
        "objective": result.objective,
        "upper_bound": result.upper_bound,
        "bound_gap": result.gap,
        "interventions_before": before,
        "interventions_after": max(0.0, before - result.objective),
        "episodes": sum(result.cell_totals),
        "targets": len(targets),
        "tasks": created_tasks + len(locked_tasks),
        "scheduled_hours": scheduled_hours,
        "travel_hours": sum(t.travel_hours for t in plan.team_totals),
        "travel_days": sum(t.travel_days for t in plan.team_totals),
        "binding": result.binding_constraints,
        "unplaced": [
            {"reason": u.reason, "message": u.message, "episodes": u.episodes}
            for u in result.unplaced
        ],
        "unscheduled": [
            {
                "task": u.task,
                "hours": u.hours,
                "reason": u.reason,
                "site": _site_name(u.task, sites, site_index),
            }
            for u in plan.unscheduled
        ],
        "teams": [asdict(t) for t in plan.team_totals],
        "solve_seconds": {"allocation": result.solve_seconds, "schedule": plan.solve_seconds},
        "excluded": [list(k) for k in sorted(excluded)],
        **request.extra,
    }
    round.plan_summary = summary
    round.save(
        update_fields=[
            "start_date",
            "days",
            "budget_episodes",
            "budget_hours",
            "budget_money",
            "plan_summary",
        ]
    )
    if round.status == CollectionRound.Status.DRAFT:
        round_transition(round=round, to_status=CollectionRound.Status.PLANNED, actor=actor)
    audit_record(
        organization=campaign.organization_id,
        actor=actor,
        verb="round.plan",
        obj=round,
        changes={
            "episodes": summary["episodes"],
            "tasks": summary["tasks"],
            "source": request.source,
        },
    )
    return round


def _site_name(task_key: str, sites: list[Site], site_index: dict[int, int]) -> str:
    """Name the site of a scheduler task key ("site-<pk>" or "locked-<task pk>")."""
    kind, _, pk = task_key.partition("-")
    if kind == "site" and pk.isdigit() and int(pk) in site_index:
        return sites[site_index[int(pk)]].name
    if kind == "locked" and pk.isdigit():
        task = CollectionTask.objects.filter(pk=int(pk)).select_related("site").first()
        return task.site.name if task else task_key
    return task_key


def round_share(total: int, part: int, whole: int) -> int:
    return round(total * part / whole) if whole else 0


def _split_episodes(
    by_cell: dict[int, int], hours: list[float], order: Any = None
) -> list[dict[int, int]]:
    """Fill a site's day-visits in turn with whole cells, in setup order.

    Each visit gets a share of the site's episodes in proportion to its hours; cells are
    taken in ``order`` (similar setups next to each other) and split across two visits only
    where a visit fills up, so a day holds few targets with full batches instead of every
    target in slivers.
    """
    total = sum(by_cell.values())
    weights = [max(h, 0.0) for h in hours]
    whole = sum(weights) or 1.0
    raw = [total * w / whole for w in weights]
    capacity = [math.floor(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: -(raw[i] - capacity[i]))[
        : total - sum(capacity)
    ]:
        capacity[i] += 1
    shares: list[dict[int, int]] = [{} for _ in hours]
    visit, room = 0, capacity[0] if capacity else 0
    for cell in sorted(by_cell, key=order or (lambda c: c)):
        left = by_cell[cell]
        while left > 0:
            while room == 0 and visit + 1 < len(capacity):
                visit += 1
                room = capacity[visit]
            take = min(left, room) if room > 0 else left
            shares[visit][cell] = shares[visit].get(cell, 0) + take
            left -= take
            room -= min(take, room)
    return shares


def _setup_order(cell: PlanCell, values_by_id: dict[int, Any]) -> tuple[Any, ...]:
    """Sort key that puts cells sharing their first conditions next to each other."""
    ordered = sorted(
        (values_by_id[v].dimension.order, values_by_id[v].dimension.slug, values_by_id[v].order)
        for v in cell.value_ids
        if v in values_by_id
    )
    return tuple(ordered)


def _visited_setups(round: CollectionRound, embodiment: Any) -> set[tuple[Any, Any, Any]]:
    """Site × embodiment × camera setups already visited in this campaign (calibration done)."""
    camera_key = tuple(sorted((c.name, c.mount) for c in embodiment.cameras.all()))
    earlier = CollectionTask.objects.filter(
        round__campaign=round.campaign, steps__kind=ProtocolStep.Kind.CALIBRATION
    ).exclude(status=CollectionTask.Status.CANCELLED)
    return {
        (site_id, emb_id, camera_key)
        for site_id, emb_id in earlier.values_list("site_id", "embodiment_id").distinct()
    }
