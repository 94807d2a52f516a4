"""The one feasibility checker of a stored plan, written apart from the solver (Django-free).

Every path that stores a plan (plan, re-solve, manual move, lock, recommendation → plan) runs
this over the round's tasks as they would be stored, together with every other round's
tasks, and stores nothing when it returns a violation. The rules are the physical and
contractual ones, stated independently of how the allocator and the scheduler work:

- budgets: the round's use within its own budget, and the campaign's budget net of what
  every other round planned or spent (episodes, field hours, money);
- team calendars across rounds: no two visits at once, time to drive between consecutive
  visits, work plus same-day driving within the team's hours per day, availability, and the
  embodiment the team can operate;
- sites: episodes per local day within the site's capacity (all teams and rounds together),
  visits inside the site's access windows in its own time zone, and a visit long enough for
  the episodes it holds;
- no visit in the past, no batch below the minimum, no target planned beyond its count;
- locks: a locked task exactly as it was locked, a locked target's count unchanged.

Only violations that involve the checked round are reported: a clash between two other
rounds is theirs to resolve, not a reason to refuse this plan.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from campaigns.planning.geo import haversine_km
from campaigns.planning.schedule_types import AccessWindow

# Stored times are whole minutes; sums of floats get this much slack.
_EPS_H = 1e-6
_EPS_MIN = timedelta(seconds=59)


@dataclass(frozen=True)
class CheckSite:
    """A site as the checker sees it: place, time zone, windows, capacity and costs."""

    key: str
    name: str
    tz: str
    lat: float
    lon: float
    windows: tuple[AccessWindow, ...]
    episodes_per_day: int | None
    hours_per_episode: float
    setup_hours: float = 0.0
    cost_per_episode: float = 0.0
    cost_per_visit: float = 0.0


@dataclass(frozen=True)
class CheckTeam:
    """A field team: hours per day, travel speed, home, what it operates, days off."""

    key: str
    name: str
    hours_per_day: float
    speed_kmh: float
    home_lat: float
    home_lon: float
    embodiments: frozenset[int]
    unavailable: frozenset[date] = frozenset()


@dataclass(frozen=True)
class CheckTask:
    """One visit: where, who, when (aware datetimes) and the episodes per target it holds.

    ``round`` is the round's number; ``ours`` marks the tasks of the round being checked.
    """

    key: str
    round: int
    ours: bool
    site: str
    embodiment: int
    team: str | None
    start: datetime | None
    end: datetime | None
    batches: tuple[tuple[str, int], ...] = ()
    locked: bool = False

    @property
    def episodes(self) -> int:
        return sum(n for _, n in self.batches)


@dataclass(frozen=True)
class CheckTarget:
    """A capture target of the checked round: its count, and whether the manager locked it."""

    key: str
    label: str
    episodes_wanted: int
    locked: bool = False


@dataclass(frozen=True)
class Amounts:
    """Episodes, field hours and money (``None`` in a limit: unlimited)."""

    episodes: float | None = None
    hours: float | None = None
    money: float | None = None


@dataclass(frozen=True)
class PlanCheckInput:
    """Everything the checker needs: the round's plan as it would be stored and its world.

    ``locked_tasks`` are the round's locked tasks as they were locked (before the change);
    ``locked_targets`` maps a locked target's key to its locked count. ``other_use`` is
    what each other round (by number) planned or spent.
    """

    round: int
    sites: Mapping[str, CheckSite]
    teams: Mapping[str, CheckTeam]
    tasks: Sequence[CheckTask]
    targets: Sequence[CheckTarget]
    today: date
    min_batch: int = 1
    round_budget: Amounts = Amounts()
    campaign_budget: Amounts = Amounts()
    other_use: Mapping[int, Amounts] = field(default_factory=dict)
    locked_tasks: Sequence[CheckTask] = ()
    locked_targets: Mapping[str, int] = field(default_factory=dict)
    embodiment_names: Mapping[int, str] = field(default_factory=dict)
    changed: frozenset[str] | None = None
    edit: bool = False

    def counts(self, task: CheckTask) -> bool:
        """Whether a task is one this check is about: the round's, and changed by it.

        ``changed`` names the tasks a change creates or moves (``None``: all of the
        round's), so a manual move is not refused for an old task nobody touched. ``edit``
        marks a manual change of visits: budgets do not move with a visit, and unlocked
        visits may still hold a count the manager has since changed (the next re-solve
        sets them), so only locked visits are held to locked targets.
        """
        return task.ours and (self.changed is None or task.key in self.changed)


@dataclass(frozen=True)
class Violation:
    """A broken rule, said for a person; ``rule`` is a stable identifier for code and tests."""

    rule: str
    message: str
    tasks: tuple[str, ...] = ()


def plan_use(tasks: Sequence[CheckTask], sites: Mapping[str, CheckSite]) -> Amounts:
    """Return the episodes, field hours and money a set of tasks uses.

    One batch is one target captured at one site (however many visits it takes): it costs
    its episodes' time and money plus the site's setup once, as the allocator counts it.
    """
    pairs: dict[tuple[str, str], int] = defaultdict(int)
    for task in tasks:
        for target, n in task.batches:
            pairs[(target, task.site)] += n
    episodes = hours = money = 0.0
    for (_, site_key), n in pairs.items():
        if n <= 0:
            continue
        site = sites[site_key]
        episodes += n
        hours += n * site.hours_per_episode + site.setup_hours
        money += n * site.cost_per_episode + site.cost_per_visit
    return Amounts(episodes=episodes, hours=hours, money=money)


def check_plan(plan: PlanCheckInput) -> list[Violation]:
    """Return every rule the round's plan breaks (empty when it can be carried out as stored).

    Assumes every task's site and team key is in ``plan.sites`` / ``plan.teams``.
    """
    out: list[Violation] = []
    ours = [t for t in plan.tasks if t.ours]
    if not plan.edit:
        out += _budgets(plan, ours)
    out += _tasks(plan, [t for t in ours if plan.counts(t)])
    out += _teams(plan)
    out += _site_days(plan)
    out += _locks(plan)
    out += _targets(plan, [t for t in ours if t.locked] if plan.edit else ours)
    return out


# ---- formatting ----------------------------------------------------------------------------


def _num(x: float) -> str:
    return f"{round(x):,}" if abs(x - round(x)) < 0.05 else f"{x:,.1f}"


def _hours(h: float) -> str:
    return f"{_num(h)} h"


def _day(d: date) -> str:
    return f"{d:%a} {d.day} {d:%b}"


def _local(task: CheckTask, site: CheckSite) -> tuple[datetime, datetime]:
    assert task.start is not None
    assert task.end is not None
    zone = ZoneInfo(site.tz)
    return task.start.astimezone(zone), task.end.astimezone(zone)


def _where(plan: PlanCheckInput, task: CheckTask) -> str:
    site = plan.sites[task.site]
    if task.start is None or task.end is None:
        return f"{site.name} (unscheduled)"
    begin, end = _local(task, site)
    return f"{site.name} {begin:%H:%M}–{end:%H:%M}"


def _round_of(plan: PlanCheckInput, task: CheckTask) -> str:
    return "" if task.ours else f" (round {task.round})"


# ---- rules ---------------------------------------------------------------------------------


def _budgets(plan: PlanCheckInput, ours: Sequence[CheckTask]) -> list[Violation]:
    out = []
    use = plan_use(ours, plan.sites)
    units = {
        "episodes": ("episodes", _num),
        "hours": ("field hours", _num),
        "money": ("in money", lambda x: f"{x:,.0f}"),
    }
    for name, (unit, show) in units.items():
        used = getattr(use, name) or 0.0
        limit = getattr(plan.round_budget, name)
        if limit is not None and used > limit + 1e-6:
            out.append(
                Violation(
                    f"round_budget_{name}",
                    f"Round {plan.round} would use {show(used)} {unit}; its budget is "
                    f"{show(limit)}.",
                )
            )
        total = getattr(plan.campaign_budget, name)
        if total is None:
            continue
        others = {r: getattr(a, name) or 0.0 for r, a in plan.other_use.items()}
        spent = sum(others.values())
        if used + spent > total + 1e-6:
            held = ", ".join(f"round {r} {show(v)}" for r, v in sorted(others.items()) if v > 0)
            out.append(
                Violation(
                    f"campaign_budget_{name}",
                    f"Round {plan.round} would use {show(used)} {unit}; the campaign's budget of "
                    f"{show(total)} leaves {show(max(total - spent, 0.0))} after the other rounds"
                    + (f" ({held})." if held else "."),
                )
            )
    return out


def _tasks(plan: PlanCheckInput, ours: Sequence[CheckTask]) -> list[Violation]:
    """Per visit of the checked round: team, embodiment, window, time, past, batches."""
    out = []
    for task in ours:
        site = plan.sites[task.site]
        if task.start is None or task.end is None or task.team is None:
            continue
        team = plan.teams[task.team]
        begin, end = _local(task, site)
        where = f"{site.name} on {_day(begin.date())}"
        if task.embodiment not in team.embodiments:
            robot = plan.embodiment_names.get(task.embodiment, f"embodiment {task.embodiment}")
            out.append(
                Violation(
                    "embodiment", f"{team.name} cannot operate {robot} ({where}).", (task.key,)
                )
            )
        if not end > begin:
            out.append(Violation("window", f"The visit to {where} ends before it starts."))
            continue
        inside = end.date() == begin.date() and any(
            w.weekday == begin.weekday() and w.start <= begin.time() and end.time() <= w.end
            for w in site.windows
        )
        if not inside:
            out.append(
                Violation(
                    "window",
                    f"{site.name} has no access window on {_day(begin.date())} from "
                    f"{begin:%H:%M} to {end:%H:%M} (local time).",
                    (task.key,),
                )
            )
        if begin.date() < plan.today:
            out.append(
                Violation(
                    "past",
                    f"The visit to {where} is in the past (today is {_day(plan.today)}).",
                    (task.key,),
                )
            )
        if begin.date() in team.unavailable:
            out.append(
                Violation(
                    "team_unavailable",
                    f"{team.name} is unavailable on {_day(begin.date())} ({site.name}).",
                    (task.key,),
                )
            )
        duration = (task.end - task.start).total_seconds() / 3600
        need = task.episodes * site.hours_per_episode
        if need > duration + 1 / 60 + _EPS_H:
            out.append(
                Violation(
                    "visit_too_short",
                    f"The visit to {where} holds {task.episodes:,} episodes "
                    f"({_hours(need)} at {site.hours_per_episode * 60:g} min each) in "
                    f"{_hours(duration)}.",
                    (task.key,),
                )
            )
        labels = {t.key: t.label for t in plan.targets}
        for target, n in task.batches:
            if 0 < n < plan.min_batch:
                out.append(
                    Violation(
                        "min_batch",
                        f"The visit to {where} holds {n} episode{'s' if n != 1 else ''} of "
                        f"'{labels.get(target, target)}'; the minimum batch is "
                        f"{plan.min_batch}.",
                        (task.key,),
                    )
                )
    return out


def _teams(plan: PlanCheckInput) -> list[Violation]:
    """Each team's calendar across rounds: overlaps, driving time, hours per day."""
    out = []
    by_team: dict[str, list[CheckTask]] = defaultdict(list)
    for task in plan.tasks:
        if task.team is not None and task.start is not None and task.end is not None:
            by_team[task.team].append(task)
    for team_key, tasks in by_team.items():
        if not any(plan.counts(t) for t in tasks):
            continue
        team = plan.teams[team_key]
        tasks.sort(key=lambda t: (t.start, t.end, t.key))
        day_work: dict[date, float] = defaultdict(float)
        day_drive: dict[date, float] = defaultdict(float)
        day_ours: dict[date, bool] = defaultdict(bool)  # a day holding a changed visit
        day_tasks: dict[date, list[str]] = defaultdict(list)
        for i, task in enumerate(tasks):
            site = plan.sites[task.site]
            begin = _local(task, site)[0]
            assert task.start is not None
            assert task.end is not None
            day = begin.date()
            day_work[day] += (task.end - task.start).total_seconds() / 3600
            day_ours[day] |= plan.counts(task)
            day_tasks[day].append(task.key)
            if i == 0:
                continue
            prev = tasks[i - 1]
            assert prev.end is not None
            if not (plan.counts(prev) or plan.counts(task)):
                continue
            prev_site = plan.sites[prev.site]
            prev_day = _local(prev, prev_site)[0].date()
            if task.start < prev.end - _EPS_MIN:
                out.append(
                    Violation(
                        "team_overlap",
                        f"{team.name} would be at {_where(plan, prev)}{_round_of(plan, prev)} "
                        f"and at {_where(plan, task)}{_round_of(plan, task)} on {_day(day)}.",
                        (prev.key, task.key),
                    )
                )
                continue
            if prev.site == task.site:
                continue
            km = haversine_km(prev_site.lat, prev_site.lon, site.lat, site.lon)
            drive = km / team.speed_kmh
            gap = (task.start - prev.end).total_seconds() / 3600
            if gap + 1 / 60 + _EPS_H < drive:
                out.append(
                    Violation(
                        "travel",
                        f"{team.name} cannot get from {prev_site.name} (leaves "
                        f"{_local(prev, prev_site)[1]:%H:%M}{_round_of(plan, prev)}) to "
                        f"{site.name} (starts {begin:%H:%M}{_round_of(plan, task)}) on "
                        f"{_day(day)}: the drive takes {_hours(drive)}.",
                        (prev.key, task.key),
                    )
                )
            if prev_day == day:
                day_drive[day] += drive
        for day, work in sorted(day_work.items()):
            load = work + day_drive[day]
            if day_ours[day] and load > team.hours_per_day + 1 / 60 + _EPS_H:
                drive_note = (
                    f" ({_hours(work)} of work and {_hours(day_drive[day])} of driving)"
                    if day_drive[day] > 0.05
                    else ""
                )
                out.append(
                    Violation(
                        "team_hours",
                        f"{team.name} would work {_hours(load)} on {_day(day)}{drive_note}; "
                        f"its limit is {_hours(team.hours_per_day)}.",
                        tuple(day_tasks[day]),
                    )
                )
    return out


def _site_days(plan: PlanCheckInput) -> list[Violation]:
    """Episodes per site and local day, all teams and rounds together, within capacity."""
    out = []
    load: dict[tuple[str, date], int] = defaultdict(int)
    ours: dict[tuple[str, date], bool] = defaultdict(bool)
    for task in plan.tasks:
        if task.start is None or task.end is None:
            continue
        site = plan.sites[task.site]
        key = (task.site, _local(task, site)[0].date())
        load[key] += task.episodes
        ours[key] |= plan.counts(task) and task.episodes > 0
    for (site_key, day), episodes in sorted(load.items()):
        site = plan.sites[site_key]
        cap = site.episodes_per_day
        if ours[(site_key, day)] and cap is not None and episodes > cap:
            out.append(
                Violation(
                    "site_capacity",
                    f"{site.name} would capture {episodes:,} episodes on {_day(day)}; its "
                    f"capacity is {cap:,} a day.",
                )
            )
    return out


def _locks(plan: PlanCheckInput) -> list[Violation]:
    out = []
    stored = {t.key: t for t in plan.tasks if t.ours}
    for locked in plan.locked_tasks:
        now = stored.get(locked.key)
        where = _where(plan, locked)
        if now is None:
            out.append(Violation("lock", f"The locked visit to {where} would be removed."))
            continue
        same = (
            now.team == locked.team
            and now.site == locked.site
            and now.start == locked.start
            and now.end == locked.end
            and sorted(now.batches) == sorted(locked.batches)
        )
        if not same:
            out.append(
                Violation("lock", f"The locked visit to {where} would change.", (locked.key,))
            )
    counts = {t.key: t for t in plan.targets}
    for key, wanted in plan.locked_targets.items():
        target = counts.get(key)
        if target is None:
            out.append(
                Violation("lock", f"A locked target ({wanted:,} episodes) would be removed.")
            )
        elif target.episodes_wanted != wanted:
            out.append(
                Violation(
                    "lock",
                    f"The locked target '{target.label}' would change from {wanted:,} to "
                    f"{target.episodes_wanted:,} episodes.",
                )
            )
    return out


def _targets(plan: PlanCheckInput, ours: Sequence[CheckTask]) -> list[Violation]:
    """No target is planned in tasks beyond the episodes it wants."""
    out = []
    planned: dict[str, int] = defaultdict(int)
    for task in ours:
        for key, n in task.batches:
            planned[key] += n
    for target in plan.targets:
        if plan.edit and not target.locked:
            continue
        if planned[target.key] > target.episodes_wanted:
            out.append(
                Violation(
                    "target_over",
                    f"'{target.label}' is planned at {planned[target.key]:,} episodes in its "
                    f"{'locked ' if plan.edit else ''}visits but wants "
                    f"{target.episodes_wanted:,}.",
                )
            )
    return out


def describe(violations: Sequence[Violation], *, most: int = 6) -> str:
    """Join violations into one message for a person (the first ``most``, then a count)."""
    shown = [v.message for v in violations[:most]]
    more = len(violations) - len(shown)
    if more > 0:
        shown.append(f"… and {more} more.")
    return " ".join(shown)


__all__ = [
    "Amounts",
    "CheckSite",
    "CheckTarget",
    "CheckTask",
    "CheckTeam",
    "PlanCheckInput",
    "Violation",
    "check_plan",
    "describe",
    "plan_use",
]
