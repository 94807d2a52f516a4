"""Check a schedule against every hard constraint; used by tests and callers alike."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import date, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from campaigns.planning.geo import haversine_km

if TYPE_CHECKING:
    from campaigns.planning.schedule_types import (
        Placement,
        ScheduleResult,
        ScheduleSite,
        Task,
        Team,
    )

# Times are whole minutes; allow float noise when adding hours.
_EPS_H = 1e-6


def validate_schedule(
    *,
    result: ScheduleResult,
    tasks: Sequence[Task],
    sites: Sequence[ScheduleSite],
    teams: Sequence[Team],
    start: date,
    days: int,
) -> list[str]:
    """Return every hard-constraint violation in a schedule (empty when it is valid).

    Checks: windows in site local time (and UTC agreeing with it), closed dates, horizon,
    embodiment, team availability, hours per day (work + same-day travel), travel per day,
    travel distance and time from the previous site or home, no team in two places at once
    (travel included), hours per task, locked placements kept, and per site and local date
    work minutes placed plus ``minutes_used`` within ``minutes_per_day``.
    """
    problems: list[str] = []
    task_by_key = {t.key: t for t in tasks}
    team_by_key = {t.key: t for t in teams}
    end = start + timedelta(days=days)
    by_team: dict[str, list[Placement]] = defaultdict(list)
    site_hours: dict[tuple[int, date], float] = defaultdict(float)
    for p in result.placements:
        task, team = task_by_key.get(p.task), team_by_key.get(p.team)
        if task is None or team is None:
            problems.append(f"{p.task}: unknown task or team {p.team!r}")
            continue
        by_team[p.team].append(p)
        site_hours[task.site, p.date] += p.hours
        problems += _check_placement(p, task, team, sites[task.site], start, end)
    for team_key, placements in by_team.items():
        problems += _check_team(team_by_key[team_key], placements, sites, start)
    problems += _check_site_days(site_hours, sites)
    problems += _check_tasks(result, tasks)
    return problems


def _check_placement(
    p: Placement, task: Task, team: Team, site: ScheduleSite, start: date, end: date
) -> list[str]:
    out = []
    label = f"{p.task} on {p.date}"
    zone = ZoneInfo(site.tz)
    if p.site != task.site:
        out.append(f"{label}: placed at site {p.site}, task is at {task.site}")
    if task.embodiment not in team.embodiments:
        out.append(f"{label}: team {team.key} cannot operate embodiment {task.embodiment}")
    if not start <= p.date < end:
        out.append(f"{label}: outside the horizon")
    if p.date in team.unavailable_dates:
        out.append(f"{label}: team {team.key} unavailable")
    if p.date in site.closed_dates:
        out.append(f"{label}: site {site.key} closed")
    local_start, local_end = p.utc_start.astimezone(zone), p.utc_end.astimezone(zone)
    if p.utc_start.utcoffset() != timedelta(0) or p.utc_end.utcoffset() != timedelta(0):
        out.append(f"{label}: UTC times are not in UTC")
    if local_start != p.local_start or local_end != p.local_end:
        out.append(f"{label}: local and UTC times disagree")
    if local_start.date() != p.date or local_end.date() != p.date:
        out.append(f"{label}: visit does not lie on its local date")
    if not local_start < local_end:
        out.append(f"{label}: empty or reversed visit")
    inside = any(
        w.weekday == p.date.weekday()
        and w.start <= local_start.time()
        and local_end.time() <= w.end
        for w in site.windows
    )
    if not inside:
        out.append(
            f"{label}: {local_start:%H:%M}-{local_end:%H:%M} local is outside site "
            f"{site.key}'s access windows"
        )
    hours = (p.utc_end - p.utc_start).total_seconds() / 3600
    if abs(hours - p.hours) > _EPS_H:
        out.append(f"{label}: hours {p.hours} disagree with its times")
    if p.travel_days == 0 and p.travel_hours > team.travel_cap_hours + _EPS_H:
        out.append(f"{label}: {p.travel_hours:.2f} h same-day travel exceeds the daily cap")
    if p.travel_days > 0 and p.travel_hours > p.travel_days * team.travel_cap_hours + _EPS_H:
        out.append(f"{label}: travel does not fit its {p.travel_days} travel days")
    return out


def _check_team(
    team: Team,
    placements: list[Placement],
    sites: Sequence[ScheduleSite],
    start: date,
) -> list[str]:
    out = []
    placements = sorted(placements, key=lambda p: p.utc_start)
    lat, lon = team.home_lat, team.home_lon
    previous: Placement | None = None
    day_load: dict[date, float] = defaultdict(float)
    day_travel: dict[date, float] = defaultdict(float)
    travel_dates: set[date] = set()
    for p in placements:
        site = sites[p.site]
        km = (
            0.0
            if previous is not None and previous.site == p.site
            else haversine_km(lat, lon, site.lat, site.lon)
        )
        if abs(km - p.travel_km) > 1e-3:
            out.append(f"{p.task} on {p.date}: travel {p.travel_km:.1f} km, expected {km:.1f}")
        if p.travel_hours + 1 / 60 + _EPS_H < km / team.speed_kmh:
            out.append(f"{p.task} on {p.date}: travel time shorter than distance allows")
        if p.travel_days:
            first = p.date - timedelta(days=p.travel_days)
            trip = {first + timedelta(days=k) for k in range(p.travel_days)}
            if first < start:
                out.append(f"{p.task}: travel days start before the horizon")
            if trip & team.unavailable_dates:
                out.append(f"{p.task}: travel on a day team {team.key} is unavailable")
            if previous is not None and previous.date >= first:
                out.append(f"{p.task}: travel days overlap the previous visit of {team.key}")
            travel_dates |= trip
        else:
            leave = p.utc_start - timedelta(hours=p.travel_hours)
            if previous is not None and leave < previous.utc_end - timedelta(seconds=1):
                out.append(f"team {team.key} double-booked: {previous.task} and {p.task}")
            day_travel[p.date] += p.travel_hours
        day_load[p.date] += p.hours + (p.travel_hours if not p.travel_days else 0.0)
        lat, lon, previous = site.lat, site.lon, p
    for day, load in day_load.items():
        if load > team.hours_per_day + _EPS_H:
            out.append(f"team {team.key} works {load:.2f} h on {day} (> {team.hours_per_day})")
        if day_travel[day] > team.travel_cap_hours + _EPS_H:
            out.append(f"team {team.key} travels {day_travel[day]:.2f} h on {day}")
    for day in sorted(travel_dates & set(day_load)):
        out.append(f"team {team.key} both travels and works on {day}")
    return out


def _check_site_days(
    site_hours: dict[tuple[int, date], float], sites: Sequence[ScheduleSite]
) -> list[str]:
    out = []
    for (s, day), hours in sorted(site_hours.items()):
        site = sites[s]
        if site.minutes_per_day is None:
            continue
        used = site.minutes_used.get(day, 0)
        if hours + used / 60 > site.minutes_per_day / 60 + _EPS_H:
            out.append(
                f"site {site.key} takes {hours * 60:.0f} work minutes on {day} with {used} "
                f"already used, over its {site.minutes_per_day} per day"
            )
    return out


def _check_tasks(result: ScheduleResult, tasks: Sequence[Task]) -> list[str]:
    out = []
    placed: dict[str, float] = defaultdict(float)
    for p in result.placements:
        placed[p.task] += p.hours
    missing = {u.task: u.hours for u in result.unscheduled}
    for task in tasks:
        need = math.ceil(task.hours * 60 - 1e-6) / 60
        if placed[task.key] > need + _EPS_H:
            out.append(f"{task.key}: {placed[task.key]:.2f} h placed, only {need:.2f} needed")
        if abs(placed[task.key] + missing.get(task.key, 0.0) - need) > _EPS_H:
            out.append(f"{task.key}: placed and unscheduled hours do not add up to its need")
        lock = task.locked
        if lock is not None:
            kept = any(
                p.task == task.key
                and p.team == lock.team
                and p.date == lock.date
                and p.local_start.time() == lock.start
                and p.locked
                for p in result.placements
            )
            if not kept:
                out.append(f"{task.key}: locked placement not kept")
    return out
