"""Schedule collection tasks into site access windows for field teams (Django-free).

Each task (site, embodiment, hours) is placed as one or more day-visits inside the site's
access windows, in the site's local time zone, by one team that can operate the embodiment,
within the team's hours per day (work plus same-day travel) and availability, travelling
by great-circle distance at the team's speed from home or from its previous site. Travel
that does not fit in a day becomes whole travel days just before the visit.

Method: tasks in order of due date, then priority, each go to the team (and free stretch of
its calendar) that finishes them earliest, travel counted twice so nearby teams win ties;
a team's calendar is filled in time order, so its location is always known. Locked visits
cut a team's calendar into stretches; work is appended to a stretch only if the team can
still reach the next locked visit. A site takes at most its ``minutes_per_day`` of work
per local date across all teams, less what other rounds hold there (``minutes_used``);
only committed visits use it. All times are whole minutes; deterministic.
"""

from __future__ import annotations

import math
import time as clock
from collections.abc import Mapping, Sequence
from datetime import date, timedelta

from campaigns.planning.geo import haversine_km
from campaigns.planning.schedule_check import validate_schedule
from campaigns.planning.schedule_locks import finalise_locks, lock_stretches
from campaigns.planning.schedule_state import Calendar, Stretch, Visit, Where
from campaigns.planning.schedule_types import (
    AccessWindow,
    LockedPlacement,
    Placement,
    ScheduleResult,
    ScheduleSite,
    Task,
    Team,
    TeamTotals,
    UnscheduledTask,
)

__all__ = [
    "AccessWindow",
    "LockedPlacement",
    "Placement",
    "ScheduleResult",
    "ScheduleSite",
    "Task",
    "Team",
    "TeamTotals",
    "UnscheduledTask",
    "schedule",
    "validate_schedule",
]


# Room of a site without a daily cap: more minutes than any horizon holds.
_NO_LIMIT = 10**9


def schedule(
    *,
    tasks: Sequence[Task],
    sites: Sequence[ScheduleSite],
    teams: Sequence[Team],
    start: date,
    days: int,
    min_visit_hours: float = 1.0,
) -> ScheduleResult:
    """Place tasks in site windows for capable teams; report what does not fit and why.

    Raises PlanInfeasible when a locked placement breaks a hard constraint (team cannot
    operate the embodiment, date outside the horizon or unavailable, no window at that
    time, the team cannot travel between its locked visits, or the site has fewer work
    minutes left that day than the locked visit needs); ValueError on bad input.
    """
    started = clock.perf_counter()
    planner = _Planner(tasks, sites, teams, Calendar(sites, start, days), min_visit_hours)
    planner.run()
    return planner.result(clock.perf_counter() - started)


class _Planner:
    def __init__(
        self,
        tasks: Sequence[Task],
        sites: Sequence[ScheduleSite],
        teams: Sequence[Team],
        cal: Calendar,
        min_visit_hours: float,
    ) -> None:
        self.tasks, self.sites, self.teams, self.cal = tasks, sites, teams, cal
        self.min_visit = max(1, round(min_visit_hours * 60))
        self.need = [math.ceil(t.hours * 60 - 1e-6) for t in tasks]
        self.placed = [0] * len(tasks)
        self.reasons: dict[int, str] = {}
        self.off = [{cal.day_of(d) for d in t.unavailable_dates} for t in teams]
        self.team_index = {t.key: i for i, t in enumerate(teams)}
        self.capped = [s.minutes_per_day is not None for s in sites]
        dates = [cal.start + timedelta(days=d) for d in range(cal.days)]
        # Work minutes each site still takes per horizon day; only committed visits use them.
        self.left = [
            [_NO_LIMIT if (m := s.minutes_left(d)) is None else m for d in dates] for s in sites
        ]
        for task in tasks:
            if not 0 <= task.site < len(sites):
                raise ValueError(f"task {task.key!r} refers to unknown site {task.site}")
            if task.hours < 0:
                raise ValueError(f"task {task.key!r} needs negative hours")
        for team in teams:
            if team.speed_kmh <= 0 or team.hours_per_day <= 0:
                raise ValueError(f"team {team.key!r}: speed and hours per day must be > 0")
        self.stretches = lock_stretches(self)

    # -- travel ------------------------------------------------------------------------
    def travel(self, team: int, where: Where, site: int) -> tuple[int, float]:
        """Return (minutes, km) from a stretch's append point to a site."""
        if where.site == site:
            return 0, 0.0
        s = self.sites[site]
        km = haversine_km(where.lat, where.lon, s.lat, s.lon)
        return math.ceil(km / self.teams[team].speed_kmh * 60 - 1e-9), km

    def travel_days(self, team: int, minutes: int, first: int, day: int) -> int | None:
        """Return how many whole travel days before ``day`` a trip needs, if they are free.

        The days must be in the horizon, at or after ``first`` and the team available.
        """
        per_day = math.floor(self.teams[team].travel_cap_hours * 60)
        k = math.ceil(minutes / per_day) if per_day > 0 else 10**9
        if day - k < max(first, 0) or any(d in self.off[team] for d in range(day - k, day)):
            return None
        return k

    def same_day_ok(self, team: int, minutes: int, used: int, travelled: int, work: int) -> bool:
        """Return whether travel and work fit in a team's day after what it already did."""
        t = self.teams[team]
        cap = round(t.travel_cap_hours * 60)
        return travelled + minutes <= cap and used + minutes + work <= round(t.hours_per_day * 60)

    # -- site capacity -----------------------------------------------------------------
    def room(self, site: int, day: int, taken: Mapping[int, int] | None = None) -> int:
        """Return the work minutes a site still takes on a day, less ``taken[day]``."""
        return self.left[site][day] - (taken.get(day, 0) if taken else 0)

    def book(self, visits: Sequence[Visit]) -> None:
        """Charge committed visits to their sites' daily capacity."""
        for v in visits:
            if self.capped[v.site]:
                self.left[v.site][v.day] -= v.end - v.start

    # -- placing -----------------------------------------------------------------------
    def next_visit(
        self, st: Stretch, where: Where, task: int, remaining: int, taken: Mapping[int, int]
    ) -> Visit | None:
        """Return the earliest visit of a task appended at ``where``, or None.

        ``taken`` holds per day the site minutes of visits simulated but not yet committed.
        """
        team, site = st.team, self.tasks[task].site
        day_cap = round(self.teams[team].hours_per_day * 60)
        minutes, km = self.travel(team, where, site)
        last_day = self.cal.days - 1 if st.lock is None else st.lock.day - 1
        need = min(remaining, self.min_visit)
        first_free = where.day + 1 if where.used > 0 else max(where.day, 0)
        for day in range(max(where.day, 0), last_day + 1):
            spans = self.cal.windows[site][day]
            if day in self.off[team] or not spans:
                continue
            room = self.room(site, day, taken)
            if room < need:
                continue
            same = day == where.day
            used = where.used if same else 0
            travelled = where.travelled if same else 0
            k = 0
            if minutes and not self.same_day_ok(team, minutes, used, travelled, need):
                found = self.travel_days(team, minutes, first_free, day)
                if found is None:
                    continue
                k, used, travelled = found, 0, 0
            for begin, finish in spans:
                arrive = where.free_at + (minutes if k == 0 else 0)
                s = max(begin, arrive)
                work = min(remaining, finish - s, day_cap - used - (minutes if k == 0 else 0), room)
                if work < need:
                    continue
                visit = Visit(task, site, day, s, s + work, minutes, km, k)
                if st.lock is not None and not self.reaches(team, visit, st.lock):
                    return None  # later days are only closer to the lock
                return visit
        return None

    def reaches(self, team: int, visit: Visit, lock: Visit) -> bool:
        """Return whether the team can get from a visit to its next locked visit."""
        here = Where(
            self.sites[visit.site].lat,
            self.sites[visit.site].lon,
            visit.site,
            visit.end,
            visit.day,
            1,
            0,
        )
        minutes, _ = self.travel(team, here, lock.site)
        if minutes == 0:
            return visit.end <= lock.start
        work = lock.end - lock.start
        if self.same_day_ok(team, minutes, 0, 0, work) and visit.end + minutes <= lock.start:
            return True
        return self.travel_days(team, minutes, visit.day + 1, lock.day) is not None

    def after(self, team: int, where: Where, visit: Visit) -> Where:
        s = self.sites[visit.site]
        same = visit.day == where.day and visit.travel_days == 0
        travel_today = visit.travel if visit.travel_days == 0 else 0
        return Where(
            s.lat,
            s.lon,
            visit.site,
            visit.end,
            visit.day,
            (where.used if same else 0) + travel_today + (visit.end - visit.start),
            (where.travelled if same else 0) + travel_today,
        )

    def simulate(self, st: Stretch, task: int) -> tuple[list[Visit], Where]:
        """Return the visits a task would get appended to a stretch, and the new end."""
        where, visits = st.where, []
        remaining = self.need[task] - self.placed[task]
        taken: dict[int, int] = {}
        while remaining > 0:
            visit = self.next_visit(st, where, task, remaining, taken)
            if visit is None:
                break
            visits.append(visit)
            remaining -= visit.end - visit.start
            taken[visit.day] = taken.get(visit.day, 0) + visit.end - visit.start
            where = self.after(st.team, where, visit)
        return visits, where

    def run(self) -> None:
        order = sorted(
            (i for i, t in enumerate(self.tasks) if t.locked is None),
            key=lambda i: (
                self.tasks[i].due or date.max,
                -self.tasks[i].priority,
                -self.need[i],
                self.tasks[i].key,
            ),
        )
        same_site: dict[int, list[int]] = {}
        for i in order:
            same_site.setdefault(self.tasks[i].site, []).append(i)
        done: set[int] = set()
        for i in order:
            if i in done:
                continue
            done.add(i)
            st = self._assign(i)
            if st is not None:
                self._fill_day(st, same_site[self.tasks[i].site], done)

    def _assign(self, i: int) -> Stretch | None:
        """Give task ``i`` to the stretch that finishes it earliest; return that stretch."""
        task = self.tasks[i]
        if self.need[i] == 0:
            return None
        capable = [
            st for st in self.stretches if task.embodiment in self.teams[st.team].embodiments
        ]
        if not capable:
            self.reasons[i] = f"no team can operate embodiment {task.embodiment}"
            return None
        if not any(self.cal.windows[task.site]):
            self.reasons[i] = "no access window within horizon"
            return None
        best: tuple[tuple[int, int, int], Stretch, list[Visit], Where] | None = None
        for st in capable:
            visits, end = self.simulate(st, i)
            if not visits:
                continue
            placed = sum(v.end - v.start for v in visits)
            travel = sum(v.travel for v in visits)
            score = (-placed, visits[-1].end + 2 * travel, st.team)
            if best is None or score < best[0]:
                best = (score, st, visits, end)
        if best is None:
            self.reasons[i] = self.shortfall_reason(i)
            return None
        _, st, visits, end = best
        self._commit(i, st, visits, end)
        return st

    def _fill_day(self, st: Stretch, same_site: list[int], done: set[int]) -> None:
        """Chain further tasks at the site the team is at, while they start that same day."""
        team = self.teams[st.team]
        for j in same_site:
            if j in done or self.tasks[j].embodiment not in team.embodiments:
                continue
            visits, end = self.simulate(st, j)
            if visits and visits[0].day == st.where.day and visits[0].travel == 0:
                done.add(j)
                self._commit(j, st, visits, end)

    def _commit(self, i: int, st: Stretch, visits: list[Visit], end: Where) -> None:
        st.visits.extend(visits)
        st.where = end
        self.placed[i] += sum(v.end - v.start for v in visits)
        self.book(visits)
        if self.placed[i] < self.need[i]:
            self.reasons[i] = self.shortfall_reason(i)

    def shortfall_reason(self, task: int) -> str:
        """Say why a task is (partly) unplaced once no stretch takes more of it.

        Capacity is named only when every open day some capable team has is full.
        """
        t = self.tasks[task]
        capable = [i for i, team in enumerate(self.teams) if t.embodiment in team.embodiments]
        days = [
            d
            for d in range(self.cal.days)
            if self.cal.windows[t.site][d] and any(d not in self.off[i] for i in capable)
        ]
        if not days:
            return "no capable team is available on the site's open days"
        need = min(self.need[task] - self.placed[task], self.min_visit)
        if all(self.room(t.site, d) < need for d in days):
            return "site capacity full on its open days"
        return "team hours exhausted"

    # -- output ------------------------------------------------------------------------
    def result(self, seconds: float) -> ScheduleResult:
        finalise_locks(self)
        placements: list[Placement] = []
        totals: list[TeamTotals] = []
        for team_no, team in enumerate(self.teams):
            visits = [v for st in self.stretches if st.team == team_no for v in st.visits]
            visits.sort(key=lambda v: v.start)
            for v in visits:
                zone = self.cal.zones[v.site]
                begin, end = self.cal.utc(v.start), self.cal.utc(v.end)
                placements.append(
                    Placement(
                        task=self.tasks[v.task].key,
                        team=team.key,
                        site=v.site,
                        date=self.cal.start + timedelta(days=v.day),
                        local_start=begin.astimezone(zone),
                        local_end=end.astimezone(zone),
                        utc_start=begin,
                        utc_end=end,
                        hours=(v.end - v.start) / 60,
                        travel_hours=v.travel / 60,
                        travel_km=v.km,
                        travel_days=v.travel_days,
                        locked=v.locked,
                    )
                )
            totals.append(
                TeamTotals(
                    team=team.key,
                    work_hours=sum(v.end - v.start for v in visits) / 60,
                    travel_hours=sum(v.travel for v in visits) / 60,
                    travel_km=sum(v.km for v in visits),
                    travel_days=sum(v.travel_days for v in visits),
                    visits=len(visits),
                    days_worked=len({v.day for v in visits}),
                )
            )
        unscheduled = [
            UnscheduledTask(
                task=self.tasks[i].key,
                hours=(self.need[i] - self.placed[i]) / 60,
                reason=reason,
            )
            for i, reason in sorted(self.reasons.items())
        ]
        return ScheduleResult(placements, totals, unscheduled, seconds)
