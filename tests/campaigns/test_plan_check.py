"""The feasibility checker by hand: each rule, its message, and what it leaves alone (no DB)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time

from campaigns.planning.plan_check import (
    Amounts,
    CheckSite,
    CheckTarget,
    CheckTask,
    CheckTeam,
    PlanCheckInput,
    check_plan,
    plan_use,
)
from campaigns.planning.schedule_types import AccessWindow

TUE = date(2026, 12, 8)  # a Tuesday
WEEKDAYS = tuple(AccessWindow(d, time(5), time(23)) for d in range(7))
SITES = {
    "rotterdam": CheckSite(
        "rotterdam", "Rotterdam DC", "Europe/Amsterdam", 51.92, 4.48, WEEKDAYS, 180, 2 / 60, 1.0
    ),
    "eindhoven": CheckSite(
        "eindhoven", "Eindhoven DC", "Europe/Amsterdam", 51.44, 5.47, WEEKDAYS, 300, 2 / 60, 1.0
    ),
    "venlo": CheckSite("venlo", "Venlo", "Europe/Amsterdam", 51.37, 6.17, WEEKDAYS, 200, 1 / 60),
}
TEAMS = {
    "rhine": CheckTeam("rhine", "Team Rhine", 8.0, 70.0, 51.44, 5.47, frozenset({1})),
    "benelux": CheckTeam(
        "benelux", "Team Benelux", 8.0, 70.0, 52.0, 4.5, frozenset({1}), frozenset({TUE})
    ),
}


def at(day: date, hh: int, mm: int = 0) -> datetime:
    """A local Amsterdam wall-clock time in December (UTC+1) as an aware UTC datetime."""
    return datetime.combine(day, time(hh - 1, mm), tzinfo=UTC)


def task(key: str, site: str, team: str | None, start: datetime, end: datetime, **kw) -> CheckTask:
    kw.setdefault("batches", (("t1", 20),))
    return CheckTask(
        key=key,
        round=kw.pop("round", 2),
        ours=kw.pop("ours", True),
        site=site,
        embodiment=kw.pop("embodiment", 1),
        team=team,
        start=start,
        end=end,
        **kw,
    )


def check(tasks: list[CheckTask], **kw) -> list:
    targets = kw.pop("targets", [CheckTarget("t1", "dim · dense", 10_000)])
    return check_plan(
        PlanCheckInput(
            round=2,
            sites=SITES,
            teams=TEAMS,
            tasks=tasks,
            targets=targets,
            today=kw.pop("today", date(2026, 12, 1)),
            **kw,
        )
    )


def rules(violations: list) -> list[str]:
    return sorted(v.rule for v in violations)


def test_a_sound_day_passes():
    tasks = [
        task("a", "eindhoven", "rhine", at(TUE, 8), at(TUE, 11)),
        task("b", "venlo", "rhine", at(TUE, 12), at(TUE, 15)),
    ]

    assert check(tasks) == []


def test_team_over_its_hours_is_named_with_the_day_and_limit():
    tasks = [
        task("a", "eindhoven", "rhine", at(TUE, 6), at(TUE, 14), batches=(("t1", 200),)),
        task("b", "venlo", "rhine", at(TUE, 19), at(TUE, 22, 59), batches=(("t1", 200),)),
    ]

    found = check(tasks)

    assert rules(found) == ["team_hours"]
    assert found[0].message.startswith(
        "Team Rhine would work 12.7 h on Tue 8 Dec (12 h of work and 0.7 h of driving)"
    )
    assert found[0].message.endswith("its limit is 8 h.")


def test_double_booking_across_rounds_names_both_visits():
    other = task("r1", "rotterdam", "rhine", at(TUE, 5), at(TUE, 9), round=1, ours=False)
    mine = task("r2", "eindhoven", "rhine", at(TUE, 8), at(TUE, 10))

    found = check([other, mine])

    overlap = [v for v in found if v.rule == "team_overlap"]
    assert overlap and overlap[0].message == (
        "Team Rhine would be at Rotterdam DC 05:00–09:00 (round 1) and at Eindhoven DC "
        "08:00–10:00 on Tue 8 Dec."
    )


def test_a_clash_between_two_other_rounds_is_not_this_rounds_problem():
    a = task("x", "rotterdam", "rhine", at(TUE, 8), at(TUE, 12), round=1, ours=False)
    b = task("y", "eindhoven", "rhine", at(TUE, 9), at(TUE, 11), round=3, ours=False)

    assert check([a, b]) == []


def test_no_time_to_drive_between_sites():
    tasks = [
        task("a", "rotterdam", "rhine", at(TUE, 8), at(TUE, 10)),
        task("b", "venlo", "rhine", at(TUE, 10, 30), at(TUE, 12)),
    ]

    found = check(tasks)

    assert rules(found) == ["travel"]
    assert "cannot get from Rotterdam DC (leaves 10:00) to Venlo (starts 10:30)" in found[0].message


def test_site_capacity_counts_every_round_on_the_local_day():
    other = task(
        "r1",
        "rotterdam",
        "rhine",
        at(TUE, 6),
        at(TUE, 8),
        round=1,
        ours=False,
        batches=(("t0", 60),),
    )
    mine = task("r2", "rotterdam", "rhine", at(TUE, 8), at(TUE, 13), batches=(("t1", 130),))

    found = check([other, mine])

    assert rules(found) == ["site_capacity"]
    assert found[0].message == (
        "Rotterdam DC would capture 190 episodes on Tue 8 Dec; its capacity is 180 a day."
    )


def test_window_past_unavailable_embodiment_short_visit_and_min_batch():
    closed = CheckSite(
        "closed",
        "Closed DC",
        "Europe/Amsterdam",
        51.9,
        4.5,
        (AccessWindow(0, time(8), time(16)),),
        100,
        2 / 60,
    )
    sites = {**SITES, "closed": closed}
    tasks = [
        task("w", "closed", "rhine", at(TUE, 8), at(TUE, 9)),
        task("p", "eindhoven", "rhine", at(date(2026, 11, 30), 8), at(date(2026, 11, 30), 9)),
        task("u", "venlo", "benelux", at(TUE, 8), at(TUE, 9)),
        task(
            "e",
            "eindhoven",
            "rhine",
            at(date(2026, 12, 9), 8),
            at(date(2026, 12, 9), 9),
            embodiment=7,
        ),
        task(
            "s",
            "eindhoven",
            "rhine",
            at(date(2026, 12, 10), 8),
            at(date(2026, 12, 10), 9),
            batches=(("t1", 40),),
        ),
        task(
            "m",
            "eindhoven",
            "rhine",
            at(date(2026, 12, 11), 8),
            at(date(2026, 12, 11), 9),
            batches=(("t1", 4),),
        ),
    ]

    found = check_plan(
        PlanCheckInput(
            round=2,
            sites=sites,
            teams=TEAMS,
            tasks=tasks,
            targets=[CheckTarget("t1", "dim · dense", 10_000)],
            today=date(2026, 12, 1),
            min_batch=20,
        )
    )

    assert rules(found) == [
        "embodiment",
        "min_batch",
        "past",
        "team_unavailable",
        "visit_too_short",
        "window",
    ]
    by_rule = {v.rule: v.message for v in found}
    assert by_rule["min_batch"] == (
        "The visit to Eindhoven DC on Fri 11 Dec holds 4 episodes of 'dim · dense'; the "
        "minimum batch is 20."
    )
    assert by_rule["window"].startswith("Closed DC has no access window on Tue 8 Dec from 08:00")
    assert by_rule["visit_too_short"].startswith(
        "The visit to Eindhoven DC on Thu 10 Dec holds 40 episodes (1.3 h at 2 min each) in 1 h"
    )


def test_changed_limits_the_per_visit_rules_to_the_visits_a_change_touches():
    old = task("old", "eindhoven", "rhine", at(date(2026, 11, 30), 8), at(date(2026, 11, 30), 9))
    moved = task("moved", "eindhoven", "rhine", at(TUE, 8), at(TUE, 9))

    assert rules(check([old, moved])) == ["past"]
    assert check([old, moved], changed=frozenset({"moved"})) == []


def test_budgets_are_net_of_the_other_rounds():
    tasks = [task("a", "eindhoven", "rhine", at(TUE, 8), at(TUE, 14), batches=(("t1", 150),))]

    found = check(
        tasks,
        round_budget=Amounts(episodes=200, hours=4.0),
        campaign_budget=Amounts(episodes=1000),
        other_use={1: Amounts(episodes=900)},
    )

    assert rules(found) == ["campaign_budget_episodes", "round_budget_hours"]
    messages = {v.rule: v.message for v in found}
    assert messages["campaign_budget_episodes"] == (
        "Round 2 would use 150 episodes; the campaign's budget of 1,000 leaves 100 after the "
        "other rounds (round 1 900)."
    )
    assert messages["round_budget_hours"] == "Round 2 would use 6 field hours; its budget is 4."


def test_plan_use_charges_setup_once_per_target_and_site():
    tasks = [
        task("a", "eindhoven", "rhine", at(TUE, 8), at(TUE, 10), batches=(("t1", 30),)),
        task("b", "eindhoven", "rhine", at(TUE, 11), at(TUE, 13), batches=(("t1", 30),)),
    ]

    use = plan_use(tasks, SITES)

    assert use.episodes == 60
    assert abs(use.hours - (60 * 2 / 60 + 1.0)) < 1e-9


def test_locks_hold_exactly():
    locked = task("L", "eindhoven", "rhine", at(TUE, 8), at(TUE, 10), locked=True)
    moved = task("L", "eindhoven", "rhine", at(TUE, 9), at(TUE, 11), locked=True)

    found = check(
        [moved],
        locked_tasks=[locked],
        targets=[CheckTarget("t1", "dim · dense", 40, locked=True)],
        locked_targets={"t1": 68},
    )

    assert rules(found) == ["lock", "lock"]
    assert any("would change from 68 to 40 episodes" in v.message for v in found)


def test_a_target_is_never_planned_beyond_its_count():
    tasks = [task("a", "eindhoven", "rhine", at(TUE, 8), at(TUE, 12), batches=(("t1", 60),))]

    found = check(tasks, targets=[CheckTarget("t1", "dim · dense", 40)])

    assert rules(found) == ["target_over"]
