"""Scheduling core: time zones across DST, splitting, travel days, locks, reasons, site
capacity per day, properties."""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaigns.planning.errors import PlanInfeasible
from campaigns.planning.scheduling import (
    AccessWindow,
    LockedPlacement,
    ScheduleResult,
    ScheduleSite,
    Task,
    Team,
    schedule,
    validate_schedule,
)

EVERY_DAY = tuple(AccessWindow(d, time(8), time(16)) for d in range(7))
AMSTERDAM = ScheduleSite("amsterdam-dc", 52.37, 4.90, "Europe/Amsterdam", EVERY_DAY)


def team(key: str = "t1", lat: float = 52.37, lon: float = 4.90, **kw: object) -> Team:
    return Team(key, lat, lon, kw.pop("hours", 8.0), frozenset(kw.pop("embodiments", {1})), **kw)  # type: ignore[arg-type]


def run(
    tasks: list[Task], sites: list[ScheduleSite], teams: list[Team], start: date, days: int
) -> ScheduleResult:
    result = schedule(tasks=tasks, sites=sites, teams=teams, start=start, days=days)
    assert (
        validate_schedule(
            result=result, tasks=tasks, sites=sites, teams=teams, start=start, days=days
        )
        == []
    )
    return result


def test_amsterdam_window_maps_to_utc_shifted_by_the_dst_change() -> None:
    # Europe/Amsterdam leaves CET (UTC+1) for CEST (UTC+2) on Sunday 2025-03-30.
    tasks = [Task("big", site=0, embodiment=1, hours=40.0)]

    result = run(tasks, [AMSTERDAM], [team()], start=date(2025, 3, 28), days=5)

    by_date = {p.date: p for p in result.placements}
    before, after = by_date[date(2025, 3, 29)], by_date[date(2025, 3, 31)]
    assert before.local_start.time() == after.local_start.time() == time(8)
    assert before.local_end.time() == after.local_end.time() == time(16)
    assert before.utc_start == datetime(2025, 3, 29, 7, 0, tzinfo=UTC)
    assert after.utc_start == datetime(2025, 3, 31, 6, 0, tzinfo=UTC)
    assert after.utc_end == datetime(2025, 3, 31, 14, 0, tzinfo=UTC)


def test_task_longer_than_a_window_splits_into_consecutive_day_visits() -> None:
    tasks = [Task("t", site=0, embodiment=1, hours=20.0)]

    result = run(tasks, [AMSTERDAM], [team()], start=date(2025, 6, 2), days=7)

    assert [(p.date, p.hours) for p in result.placements] == [
        (date(2025, 6, 2), 8.0),
        (date(2025, 6, 3), 8.0),
        (date(2025, 6, 4), 4.0),
    ]
    assert result.unscheduled == []


def test_far_site_costs_whole_travel_days_and_is_counted_per_team() -> None:
    # Amsterdam to Munich is about 666 km: 11.1 h at 60 km/h, over a 6 h travel cap -> 2 days.
    munich = ScheduleSite("munich", 48.14, 11.58, "Europe/Berlin", EVERY_DAY)
    tasks = [Task("t", site=0, embodiment=1, hours=4.0)]

    result = run(
        tasks, [munich], [team(max_travel_hours_per_day=6.0)], start=date(2025, 6, 2), days=7
    )

    (placement,) = result.placements
    assert placement.travel_days == 2
    assert placement.date == date(2025, 6, 4)
    assert placement.travel_km == pytest.approx(666, abs=10)
    assert result.team_totals[0].travel_days == 2
    assert result.team_totals[0].travel_km == pytest.approx(placement.travel_km)


def test_unschedulable_tasks_say_why() -> None:
    closed = ScheduleSite(
        "closed", 52.0, 5.0, "Europe/Amsterdam", (AccessWindow(6, time(8), time(12)),)
    )
    tasks = [
        Task("no-operator", site=0, embodiment=9, hours=2.0),
        Task("no-window", site=1, embodiment=1, hours=2.0),
        Task("too-big", site=0, embodiment=1, hours=100.0),
    ]

    result = run(tasks, [AMSTERDAM, closed], [team()], start=date(2025, 6, 2), days=5)

    reasons = {u.task: (u.reason, u.hours) for u in result.unscheduled}
    assert reasons["no-operator"] == ("no team can operate embodiment 9", 2.0)
    assert reasons["no-window"] == ("no access window within horizon", 2.0)
    assert reasons["too-big"] == ("team hours exhausted", 60.0)


def test_locked_placement_is_kept_and_others_fit_around_it() -> None:
    lock = LockedPlacement(team="t1", date=date(2025, 6, 4), start=time(9, 30))
    tasks = [
        Task("locked", site=0, embodiment=1, hours=3.0, locked=lock),
        Task("free", site=0, embodiment=1, hours=16.0),
    ]

    result = run(tasks, [AMSTERDAM], [team()], start=date(2025, 6, 2), days=7)

    locked = [p for p in result.placements if p.task == "locked"]
    assert [(p.date, p.local_start.time(), p.hours, p.locked) for p in locked] == [
        (date(2025, 6, 4), time(9, 30), 3.0, True)
    ]
    assert date(2025, 6, 4) not in {p.date for p in result.placements if p.task == "free"}


def test_locked_task_longer_than_its_visit_continues_with_the_same_team_next_day() -> None:
    lock = LockedPlacement(team="t2", date=date(2025, 6, 3), start=time(12))
    tasks = [Task("locked", site=0, embodiment=1, hours=10.0, locked=lock)]

    result = run(tasks, [AMSTERDAM], [team("t1"), team("t2")], start=date(2025, 6, 2), days=5)

    assert [(p.team, p.date, p.local_start.time(), p.hours) for p in result.placements] == [
        ("t2", date(2025, 6, 3), time(12), 4.0),
        ("t2", date(2025, 6, 4), time(8), 6.0),
    ]


def test_each_task_goes_to_the_nearby_team() -> None:
    rotterdam = ScheduleSite("rotterdam", 51.92, 4.48, "Europe/Amsterdam", EVERY_DAY)
    chicago = ScheduleSite("chicago", 41.88, -87.63, "America/Chicago", EVERY_DAY)
    teams = [team("eu", 52.0, 4.4), team("us", 41.9, -87.7)]
    tasks = [
        Task("in-chicago", site=1, embodiment=1, hours=6.0),
        Task("in-rotterdam", site=0, embodiment=1, hours=6.0),
    ]

    result = run(tasks, [rotterdam, chicago], teams, start=date(2025, 6, 2), days=3)

    assert {p.task: p.team for p in result.placements} == {"in-chicago": "us", "in-rotterdam": "eu"}
    assert all(t.travel_km < 20 for t in result.team_totals)


@pytest.mark.parametrize(
    ("lock", "message"),
    [
        (LockedPlacement("t1", date(2025, 6, 4), time(7)), "outside site 'amsterdam-dc'"),
        (LockedPlacement("t1", date(2025, 7, 4), time(9)), "outside the scheduling horizon"),
        (LockedPlacement("t1", date(2025, 6, 3), time(9)), "unavailable on 2025-06-03"),
        (LockedPlacement("nobody", date(2025, 6, 4), time(9)), "unknown team 'nobody'"),
    ],
)
def test_locked_placement_that_breaks_a_constraint_raises_plan_infeasible(
    lock: LockedPlacement, message: str
) -> None:
    tasks = [Task("locked", site=0, embodiment=1, hours=3.0, locked=lock)]

    with pytest.raises(PlanInfeasible, match=message):
        schedule(
            tasks=tasks,
            sites=[AMSTERDAM],
            teams=[team(unavailable_dates=frozenset({date(2025, 6, 3)}))],
            start=date(2025, 6, 2),
            days=7,
        )


def test_validator_reports_a_visit_moved_outside_its_window() -> None:
    tasks = [Task("t", site=0, embodiment=1, hours=2.0)]
    result = run(tasks, [AMSTERDAM], [team()], start=date(2025, 6, 2), days=3)
    (p,) = result.placements
    shift = timedelta(hours=7)
    bad = replace(
        p,
        local_start=p.local_start + shift,
        local_end=p.local_end + shift,
        utc_start=p.utc_start + shift,
        utc_end=p.utc_end + shift,
    )

    problems = validate_schedule(
        result=replace(result, placements=[bad]),
        tasks=tasks,
        sites=[AMSTERDAM],
        teams=[team()],
        start=date(2025, 6, 2),
        days=3,
    )

    assert any("outside site amsterdam-dc's access windows" in msg for msg in problems)


# --- site capacity per day ------------------------------------------------------------

CAPACITY_REASON = "site capacity full on its open days"


def site_minutes_per_day(result: ScheduleResult) -> dict[tuple[int, date], float]:
    out: dict[tuple[int, date], float] = defaultdict(float)
    for p in result.placements:
        out[p.site, p.date] += p.hours * 60
    return dict(out)


def test_two_teams_never_put_more_than_the_site_capacity_on_one_day() -> None:
    # 400 + 400 minutes: uncapped, each team takes its task on the first day (800 minutes).
    tasks = [Task(k, site=0, embodiment=e, hours=400 / 60) for k, e in (("a", 1), ("b", 2))]
    teams = [team("t1", embodiments={1}), team("t2", embodiments={2})]
    capped = replace(AMSTERDAM, minutes_per_day=300)
    d0, d1 = date(2025, 6, 2), date(2025, 6, 3)

    free = run(tasks, [AMSTERDAM], teams, start=d0, days=2)
    result = run(tasks, [capped], teams, start=d0, days=2)

    assert site_minutes_per_day(free) == {(0, d0): pytest.approx(800)}
    assert site_minutes_per_day(result) == {
        (0, d0): pytest.approx(300),
        (0, d1): pytest.approx(300),
    }
    assert [(u.task, u.hours, u.reason) for u in result.unscheduled] == [
        ("b", pytest.approx(200 / 60), CAPACITY_REASON)
    ]


def test_remainder_goes_to_later_days_when_the_horizon_has_room() -> None:
    tasks = [Task(k, site=0, embodiment=1, hours=400 / 60) for k in ("a", "b")]
    capped = replace(AMSTERDAM, minutes_per_day=300)

    result = run(tasks, [capped], [team("t1"), team("t2")], start=date(2025, 6, 2), days=5)

    per_day = site_minutes_per_day(result)
    assert max(per_day.values()) <= 300
    assert sum(per_day.values()) == pytest.approx(800)
    assert result.unscheduled == []


def test_a_task_split_across_two_windows_of_one_day_counts_both_against_the_capacity() -> None:
    two_windows = tuple(
        w
        for d in range(7)
        for w in (AccessWindow(d, time(8), time(11)), AccessWindow(d, time(13), time(16)))
    )
    site = ScheduleSite("split", 52.37, 4.90, "Europe/Amsterdam", two_windows, minutes_per_day=240)
    tasks = [Task("t", site=0, embodiment=1, hours=6.0)]

    result = run(tasks, [site], [team()], start=date(2025, 6, 2), days=2)

    assert [(p.date, p.local_start.time(), p.hours) for p in result.placements] == [
        (date(2025, 6, 2), time(8), 3.0),
        (date(2025, 6, 2), time(13), 1.0),
        (date(2025, 6, 3), time(8), 2.0),
    ]


def test_minutes_other_rounds_hold_are_left_to_them() -> None:
    d0, d1, d2 = date(2025, 6, 2), date(2025, 6, 3), date(2025, 6, 4)
    # 450 of 480 held on the first day leaves less than the one-hour minimum visit.
    site = replace(AMSTERDAM, minutes_per_day=480, minutes_used={d0: 450, d1: 300, d2: 900})
    tasks = [Task("t", site=0, embodiment=1, hours=5.0)]

    result = run(tasks, [site], [team()], start=d0, days=4)

    assert [(p.date, p.hours) for p in result.placements] == [(d1, 3.0), (date(2025, 6, 5), 2.0)]


def test_locked_visits_use_the_site_capacity_before_other_work() -> None:
    d0 = date(2025, 6, 2)
    lock = LockedPlacement(team="t1", date=d0, start=time(8))
    tasks = [
        Task("locked", site=0, embodiment=1, hours=4.0, locked=lock),
        Task("free", site=0, embodiment=1, hours=3.0),
    ]
    capped = replace(AMSTERDAM, minutes_per_day=300)

    result = run(tasks, [capped], [team("t1"), team("t2")], start=d0, days=3)

    free = [(p.date, p.hours) for p in result.placements if p.task == "free"]
    assert free == [(d0, 1.0), (date(2025, 6, 3), 2.0)]
    assert max(site_minutes_per_day(result).values()) <= 300


def test_locked_visit_over_what_the_site_has_left_raises_naming_site_date_and_minutes() -> None:
    day = date(2026, 12, 8)
    rotterdam = ScheduleSite(
        "rotterdam-dc",
        51.92,
        4.48,
        "Europe/Amsterdam",
        EVERY_DAY,
        minutes_per_day=480,
        minutes_used={day: 360},
    )
    lock = LockedPlacement(team="t1", date=day, start=time(9))
    tasks = [Task("x", site=0, embodiment=1, hours=5.0, locked=lock)]

    with pytest.raises(PlanInfeasible) as raised:
        schedule(tasks=tasks, sites=[rotterdam], teams=[team()], start=day, days=3)

    assert str(raised.value) == (
        "site 'rotterdam-dc' has 120 of 480 work minutes left on 2026-12-08; "
        "locked task 'x' needs 300"
    )


def test_two_locked_visits_that_together_overfill_a_site_day_raise() -> None:
    d0 = date(2025, 6, 2)
    tasks = [
        Task("first", site=0, embodiment=1, hours=3.0, locked=LockedPlacement("t1", d0, time(8))),
        Task("second", site=0, embodiment=1, hours=3.0, locked=LockedPlacement("t2", d0, time(8))),
    ]
    capped = replace(AMSTERDAM, minutes_per_day=300)

    with pytest.raises(PlanInfeasible, match=re.escape("has 120 of 300 work minutes left")):
        schedule(tasks=tasks, sites=[capped], teams=[team("t1"), team("t2")], start=d0, days=2)


def test_validator_reports_a_site_day_over_its_capacity() -> None:
    tasks = [Task(k, site=0, embodiment=e, hours=400 / 60) for k, e in (("a", 1), ("b", 2))]
    teams = [team("t1", embodiments={1}), team("t2", embodiments={2})]
    result = run(tasks, [AMSTERDAM], teams, start=date(2025, 6, 2), days=1)
    capped = replace(AMSTERDAM, minutes_per_day=900, minutes_used={date(2025, 6, 2): 200})

    problems = validate_schedule(
        result=result, tasks=tasks, sites=[capped], teams=teams, start=date(2025, 6, 2), days=1
    )

    assert problems == [
        "site amsterdam-dc takes 800 work minutes on 2025-06-02 with 200 already used, "
        "over its 900 per day"
    ]


@pytest.mark.parametrize(
    "fields", [{"minutes_per_day": -1}, {"minutes_used": {date(2025, 6, 2): -5}}]
)
def test_negative_site_minutes_are_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="amsterdam-dc"):
        replace(AMSTERDAM, **fields)  # type: ignore[arg-type]


# --- property tests -------------------------------------------------------------------

ZONES = ("Europe/Amsterdam", "Europe/London", "America/Chicago", "Asia/Tokyo", "UTC")
START = date(2025, 3, 24)  # spans the EU and US DST weeks within the horizons below


@st.composite
def windows(draw: st.DrawFn) -> tuple[AccessWindow, ...]:
    out = []
    for weekday in sorted(draw(st.sets(st.integers(0, 6), max_size=7))):
        begin = draw(st.integers(5, 14))
        length = draw(st.integers(1, 10))
        out.append(AccessWindow(weekday, time(begin), time(min(begin + length, 23))))
    return tuple(out)


@st.composite
def scheduling_instances(draw: st.DrawFn) -> dict[str, object]:
    n_sites = draw(st.integers(1, 4))
    sites = [
        ScheduleSite(
            key=f"s{i}",
            lat=draw(st.floats(45.0, 55.0)),
            lon=draw(st.floats(-5.0, 15.0)),
            tz=draw(st.sampled_from(ZONES)),
            windows=draw(windows()),
            closed_dates=frozenset(
                draw(
                    st.sets(
                        st.sampled_from([START + timedelta(days=d) for d in range(14)]), max_size=3
                    )
                )
            ),
            minutes_per_day=draw(st.one_of(st.none(), st.integers(0, 900))),
            minutes_used=draw(
                st.dictionaries(
                    st.sampled_from([START + timedelta(days=d) for d in range(14)]),
                    st.integers(0, 900),
                    max_size=5,
                )
            ),
        )
        for i in range(n_sites)
    ]
    teams = [
        Team(
            key=f"t{j}",
            home_lat=draw(st.floats(45.0, 55.0)),
            home_lon=draw(st.floats(-5.0, 15.0)),
            hours_per_day=draw(st.sampled_from([4.0, 6.0, 8.0, 10.0])),
            embodiments=frozenset(draw(st.sets(st.integers(1, 3), min_size=1, max_size=3))),
            unavailable_dates=frozenset(
                draw(
                    st.sets(
                        st.sampled_from([START + timedelta(days=d) for d in range(14)]), max_size=4
                    )
                )
            ),
            speed_kmh=draw(st.sampled_from([40.0, 60.0, 90.0])),
            max_travel_hours_per_day=draw(st.sampled_from([None, 2.0, 5.0])),
        )
        for j in range(draw(st.integers(1, 3)))
    ]
    tasks = [
        Task(
            key=f"k{k}",
            site=draw(st.integers(0, n_sites - 1)),
            embodiment=draw(st.integers(1, 4)),
            hours=draw(st.floats(0.25, 30.0)),
            priority=draw(st.floats(0.0, 5.0)),
            due=draw(
                st.one_of(
                    st.none(), st.sampled_from([START + timedelta(days=d) for d in range(14)])
                )
            ),
        )
        for k in range(draw(st.integers(1, 8)))
    ]
    return {
        "tasks": tasks,
        "sites": sites,
        "teams": teams,
        "start": START,
        "days": draw(st.integers(1, 14)),
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scheduling_instances())
def test_every_schedule_respects_windows_bookings_hours_and_embodiments(
    inst: dict[str, object],
) -> None:
    result = schedule(**inst)  # type: ignore[arg-type]

    assert validate_schedule(result=result, **inst) == []  # type: ignore[arg-type]
    assert _independent_violations(result, inst) == []
    for u in result.unscheduled:
        assert u.hours > 0
        assert u.reason
    for u in result.unscheduled:
        if u.reason == CAPACITY_REASON:
            task = next(t for t in inst["tasks"] if t.key == u.task)  # type: ignore[attr-defined]
            assert inst["sites"][task.site].minutes_per_day is not None  # type: ignore[index]


def _independent_violations(result: ScheduleResult, inst: dict[str, object]) -> list[str]:
    """Check the hard constraints again, without the validator under test."""
    tasks = {t.key: t for t in inst["tasks"]}  # type: ignore[attr-defined]
    teams = {t.key: t for t in inst["teams"]}  # type: ignore[attr-defined]
    sites: list[ScheduleSite] = inst["sites"]  # type: ignore[assignment]
    out = []
    busy: dict[str, list[tuple[datetime, datetime]]] = {}
    load: dict[tuple[str, date], float] = {}
    work_days: dict[str, set[date]] = {}
    travel_days: dict[str, set[date]] = {}
    for p in result.placements:
        task, team, site = tasks[p.task], teams[p.team], sites[tasks[p.task].site]
        zone = ZoneInfo(site.tz)
        begin, end = p.utc_start.astimezone(zone), p.utc_end.astimezone(zone)
        if task.embodiment not in team.embodiments:
            out.append(f"{p.task}: embodiment")
        if p.utc_start.utcoffset() != timedelta(0):
            out.append(f"{p.task}: UTC start not in UTC")
        if begin.date() != end.date() or begin.date() in site.closed_dates:
            out.append(f"{p.task}: date")
        if begin.date() in team.unavailable_dates:
            out.append(f"{p.task}: team unavailable")
        if not any(
            w.weekday == begin.weekday() and w.start <= begin.time() and end.time() <= w.end
            for w in site.windows
        ):
            out.append(f"{p.task}: outside window {begin:%a %H:%M}-{end:%H:%M} {site.tz}")
        same_day_travel = timedelta(hours=p.travel_hours if not p.travel_days else 0.0)
        busy.setdefault(p.team, []).append((p.utc_start - same_day_travel, p.utc_end))
        key = (p.team, begin.date())
        load[key] = load.get(key, 0.0) + p.hours + same_day_travel.total_seconds() / 3600
        work_days.setdefault(p.team, set()).add(begin.date())
        trip = {begin.date() - timedelta(days=k + 1) for k in range(p.travel_days)}
        travel_days.setdefault(p.team, set()).update(trip)
    for team_key, spans in busy.items():
        spans.sort()
        for (_, first_end), (second_start, _) in itertools.pairwise(spans):
            if second_start < first_end:
                out.append(f"team {team_key} double-booked")
        if travel_days.get(team_key, set()) & work_days[team_key]:
            out.append(f"team {team_key} works on a travel day")
    for (team_key, day), hours in load.items():
        if hours > teams[team_key].hours_per_day + 1e-9:
            out.append(f"team {team_key} over hours on {day}")
    for (s, day), minutes in site_minutes_per_day(result).items():
        cap = sites[s].minutes_per_day
        if cap is not None and minutes + sites[s].minutes_used.get(day, 0) > cap + 1e-6:
            out.append(f"site {sites[s].key} over capacity on {day}")
    return out
