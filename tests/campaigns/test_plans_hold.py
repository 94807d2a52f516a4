"""The demo's planning scenarios that produced plans nobody could carry out, as regressions.

Round 2 planned next to round 1 (from the recommendation, and overlapping it on purpose),
a locked count, a locked task, a manual move onto a booked team, an unlocked edit. Every
stored plan is checked twice: by the feasibility checker and by the plain sums below,
written apart from it.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command

from analytics.selectors import gap_report_latest
from analytics.services.planning import round_plan_from_gap
from analytics.services.steering import next_round_recommendation, round_plan_from_recommendation
from campaigns.models import Campaign, CollectionRound, CollectionTask, FieldTeam, TaskTarget
from campaigns.selectors import campaign_remaining, round_violations
from campaigns.services import round_create
from campaigns.services.plan import plan_today
from campaigns.services.plan_edit import PlanEditRefused, target_update, task_update
from frontend.demo import demo_round

pytestmark = pytest.mark.slow


def all_tasks(campaign: Campaign) -> list[CollectionTask]:
    return list(
        CollectionTask.objects.filter(round__campaign__organization=campaign.organization)
        .exclude(status=CollectionTask.Status.CANCELLED)
        .exclude(start_at__isnull=True)
        .select_related("site", "team", "round")
        .prefetch_related("task_targets")
        .order_by("start_at")
    )


def assert_calendars_and_sites_hold(campaign: Campaign) -> None:
    """No team in two places at once or over its hours; no site day over its capacity."""
    tasks = all_tasks(campaign)
    by_team: dict[int, list[CollectionTask]] = defaultdict(list)
    site_day: dict[tuple[int, object], int] = defaultdict(int)
    team_day: dict[tuple[int, object], float] = defaultdict(float)
    for t in tasks:
        by_team[t.team_id].append(t)
        day = t.start_at.astimezone(ZoneInfo(t.site.timezone)).date()
        site_day[(t.site_id, day)] += sum(tt.episodes_planned for tt in t.task_targets.all())
        team_day[(t.team_id, day)] += (t.end_at - t.start_at).total_seconds() / 3600
    for team_tasks in by_team.values():
        for a, b in zip(team_tasks, team_tasks[1:], strict=False):
            assert a.end_at <= b.start_at, (
                f"{a.team} double-booked: round {a.round.number} {a.site} {a.start_at}–{a.end_at}"
                f" and round {b.round.number} {b.site} {b.start_at}–{b.end_at}"
            )
    capacity = {t.site_id: t.site.capacity_episodes_per_day for t in tasks}
    for (site, day), episodes in site_day.items():
        assert episodes <= capacity[site], f"site {site} holds {episodes} on {day}"
    hours = {t.team_id: t.team.hours_per_day for t in tasks}
    for (team, day), worked in team_day.items():
        assert worked <= hours[team] + 1e-6, f"team {team} works {worked:.2f} h on {day}"


def campaign_use(campaign: Campaign) -> int:
    return sum(
        TaskTarget.objects.filter(task__round__campaign=campaign)
        .exclude(task__status=CollectionTask.Status.CANCELLED)
        .values_list("episodes_planned", flat=True)
    )


@pytest.fixture(scope="module")
def demo_built(django_db_setup, django_db_blocker, tmp_path_factory):
    """The demo with round 1 played, built once for the module and committed (about 45 s:
    the demo's curve refit reads 70,000 production cycles). Each test runs in a transaction
    rolled back after it, so each sees the demo as built; the module's end empties the
    database again (as a transactional test's end does) for the tests that follow."""
    with django_db_blocker.unblock():
        call_command("seed_demo", stdout=StringIO())
        demo_round(write_dir=tmp_path_factory.mktemp("demo"), import_results=True, recordings=0)
    yield
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)


@pytest.fixture
def demo(demo_built, db):
    return Campaign.objects.get(slug="northwind-2027-h1")


def test_round_two_shares_the_campaign_with_round_one(demo):
    campaign = demo
    round1 = campaign.rounds.get(number=1)
    held = campaign_use(campaign)
    round2 = round_create(campaign=campaign)

    recommendation = next_round_recommendation(campaign=campaign)
    round2 = round_plan_from_recommendation(round=round2, recommendation=recommendation)

    # The recommendation and the plan default to what round 1 left, and say so.
    assert recommendation["budget"] == campaign.budget_episodes - held
    assert "remaining" in recommendation["budget_note"]
    summary = round2.plan_summary
    assert summary["budget"]["episodes"] == campaign.budget_episodes - held
    assert any("remaining" in n for n in summary["budget_notes"])
    assert campaign_use(campaign) <= campaign.budget_episodes
    # Round 2 follows round 1: it starts after round 1's last visit.
    last_of_round1 = round1.tasks.order_by("-scheduled_date").first().scheduled_date
    assert round2.start_date > last_of_round1
    # The recommended counts are the targets (placed as they are, or explained).
    recommended = {
        tuple(sorted(a["value_ids"])): a["episodes"] for a in recommendation["allocations"]
    }
    for target in round2.targets.select_related("condition_set"):
        key = tuple(sorted(target.condition_set.value_ids))
        assert target.episodes_wanted <= recommended[key]
        if target.episodes_wanted < recommended[key]:
            assert any(target.label in line for line in summary["binding"]), target.label
    assert round_violations(round=round2) == []
    assert_calendars_and_sites_hold(campaign)


def test_round_two_planned_over_round_ones_days_books_no_team_twice(demo):
    campaign = demo
    round2 = round_create(campaign=campaign)
    report = gap_report_latest(campaign=campaign)

    round2 = round_plan_from_gap(
        round=round2, report=report, start=plan_today(), days=21, budget_episodes=2000
    )

    assert round2.tasks.exists()
    assert round_violations(round=round2) == []
    assert_calendars_and_sites_hold(campaign)


def test_a_count_beyond_what_the_campaign_has_left_is_refused_and_nothing_changes(demo):
    campaign = demo
    round2 = round_create(campaign=campaign)
    left = campaign_remaining(campaign=campaign).episodes

    with pytest.raises(
        Exception, match=r"budget_episodes: 12,000 episodes asked, but the campaign has"
    ):
        round_plan_from_gap(
            round=round2, report=gap_report_latest(campaign=campaign), budget_episodes=12000
        )

    round2.refresh_from_db()
    assert left < 12000
    assert round2.status == "draft" and not round2.tasks.exists() and not round2.targets.exists()
    assert round2.budget_episodes is None


@pytest.fixture
def round2(demo):
    round2 = round_create(campaign=demo)
    return round_plan_from_gap(
        round=round2, report=gap_report_latest(campaign=demo), days=21, budget_episodes=2000
    )


def planned_in_tasks(target) -> int:
    return sum(target.task_targets.values_list("episodes_planned", flat=True))


def test_a_locked_count_is_planned_at_that_count(round2):
    target = round2.targets.order_by("-episodes_wanted").first()
    wanted = target.episodes_wanted + 30

    target_update(target=target, episodes=wanted)
    round2 = round_plan_from_gap(
        round=round2, report=gap_report_latest(campaign=round2.campaign), budget_episodes=2000
    )

    target.refresh_from_db()
    assert target.locked and target.episodes_wanted == wanted
    assert planned_in_tasks(target) == wanted
    assert round_violations(round=round2) == []


def test_a_locked_count_that_cannot_be_placed_says_why_and_by_how_much(round2):
    target = round2.targets.order_by("-episodes_wanted").first()

    target_update(target=target, episodes=2500)
    round2 = round_plan_from_gap(
        round=round2, report=gap_report_latest(campaign=round2.campaign), budget_episodes=2000
    )

    target.refresh_from_db()
    planned = planned_in_tasks(target)
    assert target.episodes_wanted == 2500
    lines = [b for b in round2.plan_summary["binding"] if b.startswith("Locked target")]
    assert planned < 2500
    assert lines and f"{planned:,} of 2,500 episodes planned" in lines[0]
    assert f"the episode budget is spent ({2500 - planned:,} short)" in lines[0]


def test_a_locked_task_of_the_planner_is_kept_through_a_resolve(round2):
    task = round2.tasks.order_by("start_at").first()
    before = (
        task.team_id,
        task.start_at,
        task.end_at,
        sorted(task.task_targets.values_list("target_id", "episodes_planned")),
    )

    task_update(task=task, locked=True)
    round2 = round_plan_from_gap(
        round=round2, report=gap_report_latest(campaign=round2.campaign), budget_episodes=1500
    )

    task.refresh_from_db()
    assert task.locked
    assert (
        task.team_id,
        task.start_at,
        task.end_at,
        sorted(task.task_targets.values_list("target_id", "episodes_planned")),
    ) == before
    assert round_violations(round=round2) == []
    assert_calendars_and_sites_hold(round2.campaign)


def test_a_move_onto_a_booked_team_is_refused_with_the_reason(round2):
    campaign = round2.campaign
    mine = round2.tasks.select_related("team", "site").order_by("start_at").first()
    busy = (
        CollectionTask.objects.filter(round__campaign=campaign)
        .exclude(pk=mine.pk)
        .exclude(team=mine.team)
        .select_related("team", "site")
        .order_by("start_at")
        .first()
    )
    if busy is None:  # one team did everything: move onto its own other visit instead
        busy = round2.tasks.exclude(pk=mine.pk).select_related("team", "site").first()
    local = busy.start_at.astimezone(ZoneInfo(mine.site.timezone))
    before = (mine.team_id, mine.start_at, mine.end_at, mine.version)

    with pytest.raises(PlanEditRefused) as refused:
        task_update(task=mine, team=busy.team, day=local.date(), start=local.time())

    mine.refresh_from_db()
    assert (mine.team_id, mine.start_at, mine.end_at, mine.version) == before
    assert busy.team.name in str(refused.value)
    assert str(refused.value).startswith("Not changed: ")


def test_an_edited_count_left_unlocked_is_reported_when_the_plan_changes_it(round2):
    target = round2.targets.order_by("-episodes_wanted").first()
    target_update(target=target, episodes=target.episodes_wanted + 40)
    target_update(target=target, locked=False)

    round2 = round_plan_from_gap(
        round=round2, report=gap_report_latest(campaign=round2.campaign), budget_episodes=1000
    )

    changes = round2.plan_summary["target_changes"]
    assert any(target.label in c and "left it unlocked" in c for c in changes)


def test_a_refused_resolve_leaves_every_stored_round_as_it_was(round2):
    campaign = round2.campaign
    snapshot = sorted(
        (t.pk, t.round_id, t.team_id, t.start_at, t.end_at)
        for t in CollectionTask.objects.filter(round__campaign=campaign)
    )
    summary = round2.plan_summary

    with pytest.raises(Exception, match="start: .* is in the past"):
        round_plan_from_gap(
            round=round2,
            report=gap_report_latest(campaign=campaign),
            start=plan_today() - timedelta(days=1),
        )

    assert (
        sorted(
            (t.pk, t.round_id, t.team_id, t.start_at, t.end_at)
            for t in CollectionTask.objects.filter(round__campaign=campaign)
        )
        == snapshot
    )
    assert CollectionRound.objects.get(pk=round2.pk).plan_summary == summary
    assert FieldTeam.objects.filter(organization=campaign.organization).count() == 2
