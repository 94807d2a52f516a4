"""A refused plan changes nothing; planning commands never end in a traceback; no task in the past."""

from __future__ import annotations

from datetime import date, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from analytics.services.planning import round_plan_from_gap
from campaigns.models import (
    CaptureTarget,
    CollectionRound,
    CollectionTask,
    ProtocolStep,
    TaskTarget,
)
from campaigns.services.plan import PlanInputInvalid, plan_today
from sites.models import AccessWindow


def next_monday() -> date:
    today = plan_today()
    return today + timedelta(days=(7 - today.weekday()) % 7 or 7)


def snapshot(campaign: Any) -> dict[str, Any]:
    """Every stored field of the campaign's rounds, their targets, tasks, task targets and steps."""
    rounds = CollectionRound.objects.filter(campaign=campaign)
    return {
        "rounds": list(rounds.order_by("pk").values()),
        "targets": list(CaptureTarget.objects.filter(round__in=rounds).order_by("pk").values()),
        "tasks": list(CollectionTask.objects.filter(round__in=rounds).order_by("pk").values()),
        "task_targets": list(
            TaskTarget.objects.filter(task__round__in=rounds).order_by("pk").values()
        ),
        "steps": list(ProtocolStep.objects.filter(task__round__in=rounds).order_by("pk").values()),
    }


@pytest.fixture
def planned(world_a):
    """world_a's round planned over next week (targets, tasks and steps to keep)."""
    AccessWindow.objects.filter(site=world_a.site).delete()
    for weekday in range(5):
        AccessWindow.objects.create(
            site=world_a.site, weekday=weekday, start_time="08:00", end_time="16:00"
        )
    world_a.round.targets.all().delete()
    world_a.round.tasks.all().delete()
    round = round_plan_from_gap(
        round=world_a.round,
        report=world_a.gap_report,
        start=next_monday(),
        days=7,
        budget_episodes=400,
    )
    assert round.tasks.exists()
    return world_a, round


def plan_round(world: Any, *args: str) -> str:
    out = StringIO()
    call_command("plan_round", "--campaign", world.campaign.slug, *args, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("field", "value"),
    [("budget_hours", 0.0), ("budget_episodes", 0), ("budget_money", -5.0)],
)
def test_a_budget_that_is_not_positive_is_refused_and_changes_nothing(planned, field, value):
    world, round = planned
    before = snapshot(world.campaign)

    with pytest.raises(PlanInputInvalid, match=f"{field}: must be more than 0 to plan field work"):
        round_plan_from_gap(round=round, report=world.gap_report, **{field: value})

    assert snapshot(world.campaign) == before


def test_plan_round_with_zero_hours_exits_1_with_the_message_and_changes_nothing(planned):
    world, _ = planned
    before = snapshot(world.campaign)

    with pytest.raises(CommandError) as refused:
        plan_round(world, "--budget-hours", "0")

    assert "budget_hours: must be more than 0 to plan field work" in str(refused.value)
    assert "Traceback" not in str(refused.value)
    assert snapshot(world.campaign) == before


def test_plan_round_on_a_draft_round_with_zero_hours_leaves_it_draft(world_a):
    before = snapshot(world_a.campaign)
    assert world_a.round.status == CollectionRound.Status.DRAFT

    with pytest.raises(CommandError, match="budget_hours: must be more than 0"):
        plan_round(world_a, "--budget-hours", "0", "--days", "7")

    assert snapshot(world_a.campaign) == before


def test_a_start_in_the_past_is_refused_and_changes_nothing(planned):
    world, round = planned
    yesterday = plan_today() - timedelta(days=1)
    before = snapshot(world.campaign)

    with pytest.raises(PlanInputInvalid, match=f"start: {yesterday:%Y-%m-%d} is in the past"):
        round_plan_from_gap(round=round, report=world.gap_report, start=yesterday, days=7)
    with pytest.raises(CommandError) as refused:
        plan_round(world, "--start", yesterday.isoformat(), "--days", "7")

    assert f"start: {yesterday:%Y-%m-%d} is in the past" in str(refused.value)
    assert snapshot(world.campaign) == before


def test_days_below_one_are_refused(planned):
    world, round = planned
    before = snapshot(world.campaign)

    with pytest.raises(CommandError, match="days: must be at least 1"):
        plan_round(world, "--days", "0", "--start", next_monday().isoformat())

    assert snapshot(world.campaign) == before


def test_the_default_start_is_not_before_today_and_no_task_is_in_the_past(world_a):
    today = plan_today()
    CollectionRound.objects.filter(pk=world_a.round.pk).update(
        start_date=today - timedelta(days=10)
    )
    world_a.round.refresh_from_db()
    AccessWindow.objects.filter(site=world_a.site).delete()
    for weekday in range(7):
        AccessWindow.objects.create(
            site=world_a.site, weekday=weekday, start_time="08:00", end_time="16:00"
        )
    world_a.round.targets.all().delete()

    round = round_plan_from_gap(
        round=world_a.round, report=world_a.gap_report, days=7, budget_episodes=400
    )

    assert round.start_date >= today
    assert round.plan_summary["start"] >= today.isoformat()
    assert round.tasks.exists()
    assert not round.tasks.filter(scheduled_date__lt=today).exists()


def test_a_missing_campaign_is_a_command_error(db):
    with pytest.raises(CommandError, match="'no-such-campaign': not found"):
        call_command("plan_round", "--campaign", "no-such-campaign", stdout=StringIO())
    with pytest.raises(CommandError, match="seed_demo"):
        call_command("demo_round", "--recordings", "0", stdout=StringIO())


@pytest.mark.slow
def test_demo_refused_plan_round_then_demo_round_never_tracebacks(db, tmp_path):
    from campaigns.models import Campaign

    call_command("seed_demo", stdout=StringIO())
    campaign = Campaign.objects.get(slug="northwind-2027-h1")
    before = snapshot(campaign)

    with pytest.raises(CommandError) as refused:
        call_command(
            "plan_round",
            "--campaign",
            "northwind-2027-h1",
            "--budget-hours",
            "0",
            stdout=StringIO(),
        )
    assert "budget_hours: must be more than 0 to plan field work" in str(refused.value)
    assert snapshot(campaign) == before
    round1 = campaign.rounds.get(number=1)
    assert round1.status == CollectionRound.Status.DRAFT and round1.budget_hours == 160

    # A round left behind by the old bug (planned, 0 h, no tasks): demo_round says why.
    CollectionRound.objects.filter(pk=round1.pk).update(
        status=CollectionRound.Status.PLANNED, budget_hours=0
    )
    broken = snapshot(campaign)
    with pytest.raises(CommandError) as said:
        call_command(
            "demo_round", "--recordings", "0", "--out", str(tmp_path / "a"), stdout=StringIO()
        )
    assert "budget_hours: must be more than 0 to plan field work" in str(said.value)
    assert snapshot(campaign) == broken

    # With the refused plan leaving round 1 as it was, demo_round plans and plays it normally.
    CollectionRound.objects.filter(pk=round1.pk).update(
        status=CollectionRound.Status.DRAFT, budget_hours=160
    )
    out = StringIO()
    call_command("demo_round", "--recordings", "0", "--out", str(tmp_path / "b"), stdout=out)
    assert "Round 1 played out" in out.getvalue()
    round1.refresh_from_db()
    assert round1.start_date is not None and round1.start_date >= plan_today()
    assert not round1.tasks.filter(scheduled_date__lt=plan_today()).exists()
