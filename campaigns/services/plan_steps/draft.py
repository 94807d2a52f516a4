"""A plan in memory: the schedule of its new episodes, cut into visits of whole batches."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from campaigns.planning.allocation import (
    AllocationResult,
    BudgetUse,
)
from campaigns.planning.errors import PlanInfeasible
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
from campaigns.selectors import site_windows
from campaigns.services.plan_steps.fixed import FixedItems, piece_of, use_of
from campaigns.services.plan_steps.inputs import PlanInputs
from sites.models import ConditionValue, Site

# ---- schedule and tasks in memory ------------------------------------------------------------


@dataclass(frozen=True)
class DraftTask:
    """A visit the plan would create: where, who, when, and episodes per cell."""

    key: str
    site: int
    team: str
    date: date
    start: datetime
    end: datetime
    travel_hours: float
    travel_km: float
    shares: dict[int, int]


@dataclass
class Draft:
    """A plan in memory: new visits, episode totals per cell, and what did not fit."""

    tasks: list[DraftTask]
    totals: dict[int, int]
    fixed_cells: set[int]
    shortfalls: list[str]
    unscheduled: list[dict[str, Any]]
    teams: list[dict[str, Any]]
    use: BudgetUse
    scheduled_hours: float
    travel_hours: float
    travel_days: int
    solve_seconds: float
    placed_by_site: dict[int, int] = field(default_factory=dict)
    dropped_by_site: dict[int, int] = field(default_factory=dict)


def split_visits(
    by_cell: dict[int, int],
    rooms: Sequence[int],
    *,
    min_batch: int,
    order: Callable[[int], Any] | None = None,
) -> tuple[list[dict[int, int]], dict[int, int]]:
    """Fill a site's visits in turn with whole cells, in setup order; return (shares, left over).

    ``rooms`` is how many episodes each visit can hold (its hours and the site's day). Cells
    are taken in ``order`` (similar setups next to each other) and split across visits only
    where a visit fills up, and only so that every piece holds at least ``min_batch``
    episodes: a visit never gets a sliver a manager could not lock. What fits nowhere in
    order is tried in any visit with room; what still fits nowhere is returned per cell.
    """
    room = list(rooms)
    shares: list[dict[int, int]] = [{} for _ in rooms]
    left_over: dict[int, int] = {}

    def place(cell: int, left: int, visits: Sequence[int]) -> int:
        for i in visits:
            if left <= 0:
                break
            take = piece_of(left, room[i], min_batch)
            if take:
                shares[i][cell] = shares[i].get(cell, 0) + take
                room[i] -= take
                left -= take
        return left

    visit = 0
    for cell in sorted(by_cell, key=order or (lambda c: c)):
        left = place(cell, by_cell[cell], range(visit, len(room)))
        while visit < len(room) and room[visit] <= 0:
            visit += 1
        if left > 0:
            left_over[cell] = left
    for cell, left in list(left_over.items()):
        rest = place(cell, left, range(len(room)))
        if rest:
            left_over[cell] = rest
        else:
            del left_over[cell]
    return shares, left_over


def setup_order(cell: Any, values_by_id: dict[int, ConditionValue]) -> tuple[Any, ...]:
    """Sort key that puts cells sharing their first conditions next to each other."""
    return tuple(
        sorted(
            (values_by_id[v].dimension.order, values_by_id[v].dimension.slug, values_by_id[v].order)
            for v in cell.value_ids
            if v in values_by_id
        )
    )


def _split_slack(inputs: PlanInputs, site: Site, hours: float, cells: int) -> float:
    """Hours to ask beyond a site's need so that cutting it into whole batches loses nothing.

    A visit boundary can leave up to one batch less a single episode of room unused (no
    piece is smaller than the minimum batch), so ask that much per expected visit; visits
    are trimmed to what they hold afterwards.
    """
    if cells <= 1:
        return 0.0
    day = min(
        [t.hours_per_day for t in inputs.world.teams.values()]
        + [site.capacity_episodes_per_day * site.episode_minutes / 60.0]
    )
    visits = max(math.ceil(hours / max(day, 1e-9)), 1)
    return min(visits, cells - 1) * (inputs.min_batch - 1) * site.episode_minutes / 60.0


def _schedule_inputs(
    inputs: PlanInputs, per_site: dict[int, dict[int, int]]
) -> tuple[list[ScheduleTask], list[ScheduleSite], list[ScheduleTeam]]:
    """The scheduler's tasks (one per site, locked visits pinned), sites and teams.

    Teams are unavailable on their days off and on the days another round's visit holds
    them; sites take no more work a day than their capacity leaves after other rounds.
    """
    sites, world, start, days = inputs.sites, inputs.world, inputs.start, inputs.days
    tasks: list[ScheduleTask] = []
    for site_i, by_cell in sorted(per_site.items()):
        s = sites[site_i]
        eps = sum(by_cell.values())
        hours = s.setup_hours + eps * s.episode_minutes / 60.0
        tasks.append(
            ScheduleTask(
                key=f"site-{s.pk}",
                site=site_i,
                embodiment=inputs.embodiment.pk,
                hours=hours + _split_slack(inputs, s, hours, len(by_cell)),
                priority=float(eps),
            )
        )
    lock_days: dict[str, set[date]] = defaultdict(set)
    for task in inputs.locked_tasks:
        if (
            task.site_id not in inputs.site_index
            or task.team is None
            or task.start_at is None
            or task.end_at is None
        ):
            continue
        local = task.start_at.astimezone(ZoneInfo(task.site.timezone))
        lock_days[task.team.slug].add(local.date())
        tasks.append(
            ScheduleTask(
                key=f"locked-{task.pk}",
                site=inputs.site_index[task.site_id],
                embodiment=task.embodiment_id,
                hours=(task.end_at - task.start_at).total_seconds() / 3600.0,
                locked=LockedPlacement(
                    team=task.team.slug,
                    date=local.date(),
                    start=local.time().replace(microsecond=0),
                ),
            )
        )
    horizon = {start + timedelta(days=d) for d in range(days)}
    busy = world.busy_days()
    teams = [
        ScheduleTeam(
            key=slug,
            home_lat=t.home_latitude,
            home_lon=t.home_longitude,
            hours_per_day=t.hours_per_day,
            embodiments=world.check_teams[slug].embodiments,
            unavailable_dates=frozenset(
                (world.check_teams[slug].unavailable | (busy.get(slug, set()) - lock_days[slug]))
                & horizon
            ),
            speed_kmh=t.travel_speed_kmh,
        )
        for slug, t in world.teams.items()
    ]
    held = world.site_day_episodes()
    schedule_sites = [
        ScheduleSite(
            key=s.slug,
            lat=s.latitude,
            lon=s.longitude,
            tz=s.timezone,
            windows=site_windows(s),
            minutes_per_day=math.floor(s.capacity_episodes_per_day * s.episode_minutes + 1e-9),
            minutes_used={
                d: math.ceil(n * s.episode_minutes)
                for (slug, d), n in held.items()
                if slug == s.slug and d in horizon
            },
        )
        for s in sites
    ]
    return tasks, schedule_sites, teams


def in_words(message: str, inputs: PlanInputs) -> str:
    """Replace the cores' keys (locked-<pk>, cell indices, slugs) with names a person knows."""
    visits = {
        f"locked-{t.pk}": f"the locked visit to {t.site.name} on {t.scheduled_date:%a %d %b}"
        for t in inputs.locked_tasks
        if t.scheduled_date is not None
    }
    message = re.sub(
        r"locked task '(locked-\d+)'( at site '[^']+' on \d{4}-\d{2}-\d{2})?",
        lambda m: visits.get(m[1], m[0]),
        message,
    )
    message = re.sub(
        r"cell '(\d+)'",
        lambda m: f"'{inputs.cells[int(m[1])].label}'" if int(m[1]) < len(inputs.cells) else m[0],
        message,
    )
    for slug, site in inputs.world.sites.items():
        message = message.replace(f"site '{slug}'", site.name)
    for slug, team in inputs.world.teams.items():
        message = message.replace(f"team '{slug}'", team.name)
    return message[:1].upper() + message[1:]


def plan_draft(*, inputs: PlanInputs, result: AllocationResult, fixed: FixedItems) -> Draft:
    """Schedule the plan's new episodes and cut them into visits, in memory.

    Each visit holds what its hours and its site's day allow (setup on a site's first
    visit); every piece of a cell is at least the minimum batch. Episodes the schedule
    cannot place are left out of the plan and said per site, with the scheduler's reason.
    """
    sites = inputs.sites
    per_site: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for a in result.allocations:
        new = a.episodes - fixed.in_tasks.get((a.cell, a.site), 0)
        if new > 0:
            per_site[a.site][a.cell] += new
    tasks, schedule_sites, teams = _schedule_inputs(inputs, per_site)
    try:
        plan = schedule(
            tasks=tasks, sites=schedule_sites, teams=teams, start=inputs.start, days=inputs.days
        )
    except PlanInfeasible as exc:
        raise PlanInfeasible(in_words(str(exc), inputs)) from exc
    reasons = {u.task: u.reason for u in plan.unscheduled}
    values_by_id = {v.pk: v for v in inputs.values}
    held = inputs.world.site_day_episodes()
    day_used: dict[tuple[int, date], int] = defaultdict(int)
    for task in inputs.locked_tasks:
        if task.site_id in inputs.site_index and task.start_at is not None:
            d = task.start_at.astimezone(ZoneInfo(task.site.timezone)).date()
            day_used[(inputs.site_index[task.site_id], d)] += sum(
                tt.episodes_planned for tt in task.task_targets.all()
            )
    by_site: dict[int, list[Any]] = defaultdict(list)
    for p in plan.placements:
        if p.task.startswith("site-"):
            by_site[p.site].append(p)
    drafts: list[DraftTask] = []
    totals: dict[int, int] = defaultdict(int)
    for (c, _), n in fixed.in_tasks.items():
        totals[c] += n
    unscheduled: list[dict[str, Any]] = []
    dropped_cells: dict[int, int] = defaultdict(int)
    dropped_by_site: dict[int, int] = {}
    for site_i, by_cell in sorted(per_site.items()):
        site = sites[site_i]
        placements = sorted(by_site.get(site_i, []), key=lambda p: p.utc_start)
        rooms = []
        for n, p in enumerate(placements):
            minutes = (p.utc_end - p.utc_start).total_seconds() / 60
            setup = site.setup_hours * 60 if n == 0 else 0.0
            fits = math.floor((minutes - setup) / site.episode_minutes + 1e-9)
            day_left = (
                site.capacity_episodes_per_day
                - held.get((site.slug, p.date), 0)
                - day_used[(site_i, p.date)]
            )
            room = max(min(fits, day_left), 0)
            day_used[(site_i, p.date)] += room
            rooms.append(room)
        shares, left_over = split_visits(
            dict(by_cell),
            rooms,
            min_batch=inputs.min_batch,
            order=lambda c: setup_order(inputs.cells[c], values_by_id),
        )
        # Give back the day capacity reserved for rooms the split left unused.
        for p, room, share in zip(placements, rooms, shares, strict=True):
            day_used[(site_i, p.date)] -= room - sum(share.values())
        for n, (p, share) in enumerate(zip(placements, shares, strict=True)):
            if not share:
                continue
            need = sum(share.values()) * site.episode_minutes + (
                site.setup_hours * 60 if n == 0 else 0.0
            )
            end = min(p.utc_end, p.utc_start + timedelta(minutes=math.ceil(need - 1e-9)))
            drafts.append(
                DraftTask(
                    key=f"new-{len(drafts)}",
                    site=site_i,
                    team=p.team,
                    date=p.date,
                    start=p.utc_start,
                    end=end,
                    travel_hours=p.travel_hours,
                    travel_km=p.travel_km,
                    shares=dict(share),
                )
            )
            for c, k in share.items():
                totals[c] += k
        dropped = sum(left_over.values())
        dropped_by_site[site_i] = dropped
        if dropped:
            for c, k in left_over.items():
                dropped_cells[c] += k
            reason = reasons.get(f"site-{site.pk}") or (
                "the visits the schedule found are full (hours, site capacity per day or "
                f"batches of at least {inputs.min_batch})"
            )
            unscheduled.append(
                {
                    "task": f"site-{site.pk}",
                    "site": site.name,
                    "episodes": dropped,
                    "hours": dropped * site.episode_minutes / 60,
                    "reason": reason,
                }
            )
    shortfalls = list(fixed.shortfalls)
    labels = {t.pk: t.label for t in inputs.locked_targets}
    for target in inputs.locked_targets:
        c = inputs.cell_of(target)
        if dropped_cells.get(c):
            shortfalls.append(
                f"Locked target '{labels[target.pk]}': {dropped_cells[c]:,} of its episodes "
                "could not be scheduled — see below."
            )
    pairs: dict[tuple[int, int], int] = defaultdict(int)
    for (c, s), n in fixed.in_tasks.items():
        pairs[(c, s)] += n
    for visit in drafts:
        for c, n in visit.shares.items():
            pairs[(c, visit.site)] += n
    placed_by_site: dict[int, int] = defaultdict(int)
    for (_, s), n in pairs.items():
        placed_by_site[s] += n
    return Draft(
        tasks=drafts,
        totals=dict(totals),
        fixed_cells={c for c, n in fixed.demand.items()},
        shortfalls=shortfalls,
        unscheduled=unscheduled,
        teams=[asdict(t) for t in plan.team_totals],
        use=use_of(pairs, inputs.specs),
        scheduled_hours=sum((d.end - d.start).total_seconds() / 3600 for d in drafts),
        travel_hours=sum(d.travel_hours for d in drafts),
        travel_days=sum(t.travel_days for t in plan.team_totals),
        solve_seconds=plan.solve_seconds,
        placed_by_site=dict(placed_by_site),
        dropped_by_site=dropped_by_site,
    )
