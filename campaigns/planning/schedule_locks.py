"""Locked visits for the scheduler: validate them, cut calendars at them, route to them.

A locked visit pins (team, site-local date, start time). It runs from its start to the
earlier of its window's end, the team's day and the task's hours, and reserves its day; any
remaining hours of its task continue right after it with the same team. Travel to it is
fixed last, from wherever the team ends up before it. Locked visits are charged to their
site's daily capacity before any other work is placed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import timedelta
from itertools import pairwise

from campaigns.planning.errors import PlanInfeasible
from campaigns.planning.schedule_state import Planner, Stretch, Visit, Where


def lock_stretches(planner: Planner) -> list[Stretch]:
    """Validate locked placements; return every team's calendar stretches, in order.

    Raises PlanInfeasible naming the locked task and the constraint it breaks.
    """
    by_team: dict[int, list[Visit]] = defaultdict(list)
    for i, task in enumerate(planner.tasks):
        if task.locked is not None:
            team_no, visit = _locked_visit(planner, i)
            by_team[team_no].append(visit)
    stretches: list[Stretch] = []
    continuations: list[tuple[int, int]] = []
    for team_no, team in enumerate(planner.teams):
        locks = sorted(by_team[team_no], key=lambda v: v.start)
        for first, second in pairwise(locks):
            if first.day == second.day:
                raise PlanInfeasible(
                    f"team {team.key!r} has two locked visits on "
                    f"{planner.cal.start + timedelta(days=first.day)}"
                )
        where = Where(team.home_lat, team.home_lon, None, 0, -1, 0, 0)
        day_cap = round(team.hours_per_day * 60)
        for lock in locks:
            if not _reachable(planner, team_no, where, lock):
                task = planner.tasks[lock.task]
                raise PlanInfeasible(
                    f"team {team.key!r} cannot reach locked task {task.key!r} at site "
                    f"{planner.sites[lock.site].key!r} on "
                    f"{planner.cal.start + timedelta(days=lock.day)} from its home base or "
                    "previous locked visit"
                )
            stretches.append(Stretch(team_no, where, lock))
            s = planner.sites[lock.site]
            # The locked visit reserves its day: the next stretch starts the day after.
            where = Where(s.lat, s.lon, lock.site, lock.end, lock.day, day_cap, day_cap)
            if planner.placed[lock.task] < planner.need[lock.task]:
                continuations.append((lock.task, len(stretches)))
        stretches.append(Stretch(team_no, where, None))
    for task_no, index in continuations:
        st = stretches[index]
        visits, end = planner.simulate(st, task_no)
        st.visits.extend(visits)
        st.where = end
        planner.placed[task_no] += sum(v.end - v.start for v in visits)
        planner.book(visits)
        if planner.placed[task_no] < planner.need[task_no]:
            planner.reasons[task_no] = planner.shortfall_reason(task_no)
    return stretches


def _locked_visit(planner: Planner, task_no: int) -> tuple[int, Visit]:
    """Return (team index, visit) of a task's locked placement, validating it; book it.

    Raises PlanInfeasible naming the constraint the lock breaks.
    """
    task = planner.tasks[task_no]
    lp = task.locked
    assert lp is not None
    where = f"locked task {task.key!r}"
    team_no = planner.team_index.get(lp.team)
    if team_no is None:
        raise PlanInfeasible(f"{where}: unknown team {lp.team!r}")
    team, site, cal = planner.teams[team_no], planner.sites[task.site], planner.cal
    if task.embodiment not in team.embodiments:
        raise PlanInfeasible(
            f"{where}: team {team.key!r} cannot operate embodiment {task.embodiment}"
        )
    day = cal.day_of(lp.date)
    if not 0 <= day < cal.days:
        raise PlanInfeasible(f"{where}: {lp.date} is outside the scheduling horizon")
    if day in planner.off[team_no]:
        raise PlanInfeasible(f"{where}: team {team.key!r} is unavailable on {lp.date}")
    if lp.date in site.closed_dates:
        raise PlanInfeasible(f"{where}: site {site.key!r} is closed on {lp.date}")
    begin = cal.minute(lp.date, lp.start, cal.zones[task.site])
    span = next((s for s in cal.windows[task.site][day] if s[0] <= begin < s[1]), None)
    if span is None:
        raise PlanInfeasible(
            f"{where}: {lp.start:%H:%M} on {lp.date} is outside site {site.key!r}'s access "
            "windows (local time)"
        )
    work = min(planner.need[task_no], span[1] - begin, round(team.hours_per_day * 60))
    left = planner.room(task.site, day)
    if work > left:
        raise PlanInfeasible(
            f"site {site.key!r} has {left} of {site.minutes_per_day} work minutes left on "
            f"{lp.date}; locked task {task.key!r} needs {work}"
        )
    visit = Visit(task_no, task.site, day, begin, begin + work, 0, 0.0, 0, True)
    planner.placed[task_no] += work
    planner.book([visit])
    return team_no, visit


def _reachable(planner: Planner, team_no: int, where: Where, lock: Visit) -> bool:
    """Return whether a team at ``where`` can be at a locked visit in time."""
    minutes, _ = planner.travel(team_no, where, lock.site)
    if minutes == 0:
        return where.free_at <= lock.start
    if where.free_at + minutes <= lock.start and planner.same_day_ok(
        team_no, minutes, 0, 0, lock.end - lock.start
    ):
        return True
    first = where.day + 1 if where.used > 0 else max(where.day, 0)
    return planner.travel_days(team_no, minutes, first, lock.day) is not None


def finalise_locks(planner: Planner) -> None:
    """Route each team to its locked visits from where it ends up; add them to the plan.

    Raises PlanInfeasible if a lock became unreachable (the scheduler prevents this).
    """
    for st in planner.stretches:
        lock = st.lock
        if lock is None:
            continue
        where = st.where
        minutes, km = planner.travel(st.team, where, lock.site)
        work = lock.end - lock.start
        days = 0
        same_day = where.free_at + minutes <= lock.start and planner.same_day_ok(
            st.team, minutes, 0, 0, work
        )
        if minutes and not same_day:
            first = where.day + 1 if where.used > 0 else max(where.day, 0)
            found = planner.travel_days(st.team, minutes, first, lock.day)
            if found is None:
                task = planner.tasks[lock.task]
                raise PlanInfeasible(f"locked task {task.key!r} became unreachable")
            days = found
        st.visits.append(replace(lock, travel=minutes, km=km, travel_days=days))
        st.lock = None
