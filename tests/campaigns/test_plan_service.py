"""Round planning end to end: from a gap report to a published schedule the field team sees."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from icalendar import Calendar

from analytics.models import GapReport
from analytics.services.gap import gap_report_build
from analytics.services.planning import round_plan_from_gap
from campaigns.models import CaptureTarget, CollectionRound, CollectionTask, ProtocolStep
from campaigns.services.plan_edit import round_publish, target_remove, target_update, task_update
from sites.models import AccessWindow, ConditionDimension, ConditionValue

# The next Monday: plans never start in the past, so the week planned moves with the calendar.
MONDAY = date.today() + timedelta(days=7 - date.today().weekday())


def assert_schedule_is_sound(round: CollectionRound) -> None:
    """Every task inside an access window (site local time), no team in two places at once."""
    tasks = list(round.tasks.select_related("site", "team").order_by("start_at"))
    for task in tasks:
        tz = ZoneInfo(task.site.timezone)
        start, end = task.start_at.astimezone(tz), task.end_at.astimezone(tz)
        windows = AccessWindow.objects.filter(site=task.site, weekday=start.weekday())
        assert any(
            w.start_time <= start.time() and end.time() <= w.end_time and start.date() == end.date()
            for w in windows
        ), f"{task} outside its site's access windows"
    by_team: dict[int, list[CollectionTask]] = {}
    for task in tasks:
        by_team.setdefault(task.team_id, []).append(task)
    for team_tasks in by_team.values():
        for a, b in zip(team_tasks, team_tasks[1:], strict=False):
            assert a.end_at <= b.start_at, f"team double-booked: {a} and {b}"


@pytest.mark.slow
def test_demo_plan_follows_the_top_gaps_and_publishes_to_the_field(db, client_for):
    call_command("seed_demo", stdout=StringIO())
    from django.contrib.auth import get_user_model

    from campaigns.models import Campaign

    campaign = Campaign.objects.get(slug="northwind-2027-h1")
    report = gap_report_build(
        report=GapReport.objects.create(
            organization=campaign.organization,
            campaign=campaign,
            dimension_slugs=["lighting", "clutter", "human-activity"],
        )
    )
    round = campaign.rounds.get(number=1)

    round = round_plan_from_gap(round=round, report=report, days=21)  # starts today at the earliest

    summary = round.plan_summary
    assert round.status == "planned"
    assert summary["use"]["episodes"] <= round.budget_episodes
    assert summary["use"]["hours"] <= round.budget_hours + 1e-6
    assert summary["use"]["money"] <= float(round.budget_money) + 1e-6
    assert summary["bound_gap"] < 0.05
    assert summary["interventions_after"] < summary["interventions_before"]
    top_gap_labels = [g["label"] for g in report.summary["top_gaps"][:3]]
    biggest = list(
        round.targets.order_by("-expected_avoided_per_day")[:3].values_list("label", flat=True)
    )
    assert biggest[0] == top_gap_labels[0]
    assert set(biggest) & set(top_gap_labels)
    assert_schedule_is_sound(round)
    calibrated = ProtocolStep.objects.filter(task__round=round, kind="calibration").values_list(
        "task__site", flat=True
    )
    assert (
        len(list(calibrated)) == len(set(calibrated)) >= 1
    )  # once per site x embodiment x camera setup
    first = round.tasks.order_by("start_at").first()
    kinds = list(first.steps.values_list("kind", flat=True))
    assert kinds.index("setup") < kinds.index("calibration") < kinds.index("capture")

    round_publish(round=round)

    field = get_user_model().objects.get(username="field")
    visible = CollectionTask.objects.visible_to(field)
    assert CollectionRound.objects.get(pk=round.pk).status == "scheduled"
    assert visible.exists() and all(t.status == "published" for t in visible)
    assert set(visible.values_list("team__slug", flat=True)) == {"benelux"}


@pytest.fixture
def planned(world_a):
    """world_a with its round planned over the week from MONDAY."""
    AccessWindow.objects.filter(site=world_a.site).delete()
    for weekday in range(5):
        AccessWindow.objects.create(
            site=world_a.site, weekday=weekday, start_time="08:00", end_time="16:00"
        )
    world_a.round.targets.all().delete()
    world_a.round.tasks.all().delete()
    round = round_plan_from_gap(
        round=world_a.round, report=world_a.gap_report, start=MONDAY, days=7, budget_episodes=400
    )
    return world_a, round


def test_plan_respects_budget_and_windows(planned):
    world, round = planned

    assert 0 < round.plan_summary["use"]["episodes"] <= 400
    assert round.tasks.exists()
    assert_schedule_is_sound(round)


def test_resolve_keeps_locked_targets_and_tasks(planned):
    world, round = planned
    target = round.targets.order_by("-episodes_wanted").first()
    target_update(target=target, episodes=60)
    task = round.tasks.order_by("start_at").last()
    when = task.start_at
    task_update(task=task, locked=True)

    round = round_plan_from_gap(
        round=round, report=world.gap_report, start=MONDAY, days=7, budget_episodes=300
    )

    target.refresh_from_db()
    assert target.locked and target.episodes_wanted == 60
    assert CollectionTask.objects.get(pk=task.pk).start_at == when
    assert CollectionTask.objects.filter(pk=task.pk, locked=True).exists()
    assert_schedule_is_sound(round)


def test_removed_target_stays_out_of_a_resolve(planned):
    world, round = planned
    target = round.targets.first()
    values = sorted(target.condition_set.value_ids)

    target_remove(target=target)
    round = round_plan_from_gap(
        round=round, report=world.gap_report, start=MONDAY, days=7, budget_episodes=400
    )

    assert not [
        t
        for t in round.targets.select_related("condition_set")
        if sorted(t.condition_set.value_ids) == values
    ]


def test_a_cell_no_site_can_stage_is_reported_by_name(world_a):
    floor = ConditionDimension.objects.create(
        organization=world_a.operator, slug="floor", name="Floor", stageable=False
    )
    wet = ConditionValue.objects.create(dimension=floor, slug="wet", label="Wet floor")
    from sites.models import ConditionShare

    ConditionShare.objects.create(deployment=world_a.deployment, value=wet, share=1.0)
    for v in world_a.values:
        ConditionShare.objects.create(deployment=world_a.deployment, value=v, share=0.5)
    report = gap_report_build(
        report=GapReport.objects.create(organization=world_a.operator, campaign=world_a.campaign)
    )
    world_a.round.targets.all().delete()

    round = round_plan_from_gap(
        round=world_a.round, report=report, start=MONDAY, days=7, budget_episodes=400
    )

    messages = [u["message"] for u in round.plan_summary["unplaced"]]
    assert any(
        "no site can stage 'wet floor'" in m and "episodes unplaced" in m for m in messages
    ), messages


def test_plan_round_command_exits_non_zero_naming_the_binding_constraint(world_a):
    floor = ConditionDimension.objects.create(
        organization=world_a.operator, slug="floor", name="Floor", stageable=False
    )
    wet = ConditionValue.objects.create(dimension=floor, slug="wet", label="Wet floor")
    from sites.models import ConditionShare

    ConditionShare.objects.create(deployment=world_a.deployment, value=wet, share=1.0)
    GapReport.objects.filter(campaign=world_a.campaign).delete()
    world_a.round.targets.all().delete()

    with pytest.raises(CommandError, match="no site can stage 'wet floor'"):
        call_command(
            "plan_round",
            "--campaign",
            world_a.campaign.slug,
            "--start",
            MONDAY.isoformat(),
            "--days",
            "7",
            "--budget-episodes",
            "200",
            stdout=StringIO(),
        )


def test_plan_round_command_prints_the_plan_as_json(planned):
    world_a, _ = planned
    out = StringIO()

    call_command(
        "plan_round",
        "--campaign",
        world_a.campaign.slug,
        "--start",
        MONDAY.isoformat(),
        "--days",
        "7",
        "--budget-episodes",
        "200",
        "--json",
        stdout=out,
    )

    import json

    data = json.loads(out.getvalue())
    assert data["status"] == "planned"
    assert data["summary"]["use"]["episodes"] <= 200
    assert data["tasks"] and data["tasks"][0]["calibration"] is True


def test_a_locked_count_the_budget_cannot_buy_is_planned_in_part_and_explained(planned):
    world, round = planned
    target = round.targets.first()
    target_update(target=target, episodes=5000)

    round = round_plan_from_gap(
        round=round, report=world.gap_report, start=MONDAY, days=7, budget_episodes=100
    )

    target.refresh_from_db()
    planned_now = sum(tt.episodes_planned for tt in target.task_targets.all())
    assert target.locked and target.episodes_wanted == 5000
    assert 0 < planned_now <= 100
    assert (
        f"Locked target '{target.label}': {planned_now:,} of 5,000 episodes planned — "
        f"the episode budget is spent ({5000 - planned_now:,} short)."
    ) in round.plan_summary["binding"]


def test_publish_then_calendar_feed_parses_and_rotation_revokes_it(planned, client_for):
    world, round = planned
    round_publish(round=round)
    team = world.team
    url = f"/calendar/{team.calendar_token}.ics"

    feed = client_for(None).get(url)
    calendar = Calendar.from_ical(feed.content)
    events = list(calendar.walk("VEVENT"))
    client_for(world.manager).post(f"/planner/teams/{team.pk}/calendar/rotate/")

    assert feed.status_code == 200
    assert len(events) == round.tasks.filter(team=team).count()
    assert all(isinstance(e.decoded("dtstart"), datetime) for e in events)
    assert client_for(None).get(url).status_code == 404


def test_manager_workflow_through_the_pages(
    planned, client_for, django_capture_on_commit_callbacks
):
    world, round = planned
    manager = client_for(world.manager)
    page = manager.get(f"/planner/rounds/{round.pk}/")

    with django_capture_on_commit_callbacks(execute=True):
        resolve = manager.post(
            f"/planner/rounds/{round.pk}/do/plan/",
            {"budget_episodes": "300", "start": MONDAY.isoformat(), "days": "7"},
        )
    target = round.targets.first()
    lock = manager.post(
        f"/planner/rounds/{round.pk}/do/target/", {"target": target.pk, "op": "lock"}
    )
    publish = manager.post(f"/planner/rounds/{round.pk}/do/publish/")
    field_tasks = CollectionTask.objects.visible_to(world.field)

    assert page.status_code == 200 and "Re-solve" in page.content.decode()
    assert resolve.status_code == lock.status_code == publish.status_code == 302
    assert CaptureTarget.objects.get(pk=target.pk).locked
    assert CollectionRound.objects.get(pk=round.pk).status == "scheduled"
    assert field_tasks.exists()
    assert {t.status for t in field_tasks} == {"published"}


def test_api_plans_locks_and_publishes(planned, client_for, django_capture_on_commit_callbacks):
    world, round = planned
    api = client_for(world.manager)

    with django_capture_on_commit_callbacks(execute=True):
        job = api.post(
            f"/api/rounds/{round.pk}/resolve/",
            {"budget_episodes": 250, "start": MONDAY.isoformat(), "days": 7},
            content_type="application/json",
        )
    targets = api.get(f"/api/targets/?round={round.pk}").json()["results"]
    locked = api.patch(
        f"/api/targets/{targets[0]['id']}/", {"locked": True}, content_type="application/json"
    )
    published = api.post(f"/api/rounds/{round.pk}/publish/")
    again = api.post(f"/api/rounds/{round.pk}/publish/")

    assert job.status_code == 202
    assert locked.json()["locked"] is True
    assert published.status_code == 200 and published.json()["status"] == "scheduled"
    assert again.status_code == 409


def test_moving_a_task_outside_the_sites_windows_is_refused(planned):
    from campaigns.services.plan_edit import PlanEditRefused

    world, round = planned
    task = round.tasks.first()
    saturday = MONDAY + timedelta(days=5)

    with pytest.raises(PlanEditRefused, match="no access window"):
        task_update(task=task, day=saturday)


def test_moving_a_task_onto_its_teams_other_visit_through_the_api_is_a_409_naming_it(
    planned, client_for
):
    world, round = planned
    first, second = list(round.tasks.select_related("site", "team").order_by("start_at")[:2])
    local = first.start_at.astimezone(ZoneInfo(first.site.timezone))
    before = (second.scheduled_date, second.start_at, second.end_at, second.version)

    response = client_for(world.manager).patch(
        f"/api/collection-tasks/{second.pk}/",
        {"day": local.date().isoformat(), "start": local.time().strftime("%H:%M")},
        content_type="application/json",
    )

    second.refresh_from_db()
    assert response.status_code == 409
    assert f"{first.team.name} would be at {first.site.name}" in response.json()["detail"]
    assert (second.scheduled_date, second.start_at, second.end_at, second.version) == before
