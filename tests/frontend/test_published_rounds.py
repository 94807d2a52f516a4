"""Customers see only published rounds; calendar events open the task in the tablet app."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from urllib.parse import urlsplit

import pytest
from django.utils import dateformat, timezone
from icalendar import Calendar

from campaigns.models import CollectionRound
from campaigns.services.plan_edit import round_publish
from campaigns.services.rounds import round_transition

# What only this round would put on the page: its episodes, its start date and its row.
EPISODES = 4321


def _start() -> date:
    """The round's first day, five days ahead: the calendar feed shows from 30 days back."""
    return timezone.localdate() + timedelta(days=5)


def _prepare_round(world, status: str) -> CollectionRound:
    round = world.round
    CollectionRound.objects.filter(pk=round.pk).update(
        plan_summary={
            "episodes": EPISODES,
            "interventions_before": 12.5,
            "interventions_after": 3.5,
        },
        start_date=_start(),
        days=9,
    )
    task = world.collection_task
    task.scheduled_date = _start()
    task.start_at = datetime.combine(_start(), time(8), tzinfo=UTC)
    task.end_at = datetime.combine(_start(), time(12), tzinfo=UTC)
    task.save(update_fields=["scheduled_date", "start_at", "end_at"])
    round.refresh_from_db()
    if status == "planned":
        round_transition(round=round, to_status="planned")
    assert round.status == status
    return round


def _page(world, client_for, where: str) -> str:
    if where == "dashboard":
        response = client_for(world.viewer).get("/dashboard/")
    else:
        response = client_for(None).get(f"/share/{world.share.token}/")
    assert response.status_code == 200
    return response.content.decode()


def _shows_round(body: str) -> dict[str, bool]:
    return {
        "next round": "Next round" in body,
        "row": re.search(r"<td>Round 1</td>", body) is not None,
        "episodes": "4,321" in body or "4321" in body or "4 321" in body,
        "dates": dateformat.format(_start(), "N j, Y") in body
        or _start().isoformat() in body
        or "9 days" in body,
    }


@pytest.mark.parametrize("where", ["dashboard", "share"])
@pytest.mark.parametrize("status", ["draft", "planned"])
def test_unpublished_round_stays_off_the_customer_dashboard_until_published(
    world_a, client_for, where, status
):
    round = _prepare_round(world_a, status)

    before = _page(world_a, client_for, where)
    if status == "draft":
        round_transition(round=round, to_status="planned")
    round_publish(round=round)
    after = _page(world_a, client_for, where)

    assert _shows_round(before) == dict.fromkeys(_shows_round(before), False)
    assert "No rounds yet." in before
    assert _shows_round(after) == dict.fromkeys(_shows_round(after), True)
    assert "round 1 (scheduled)" in after


def test_calendar_event_url_opens_the_task_in_the_tablet_app(world_a, client_for):
    _prepare_round(world_a, "draft")
    task = world_a.collection_task

    response = client_for(None).get(f"/calendar/{world_a.team.calendar_token}.ics")
    calendar = Calendar.from_ical(response.content)
    events = [e for e in calendar.walk("VEVENT") if str(e["uid"]) == f"task-{task.pk}@fieldcraft"]

    assert response.status_code == 200
    assert len(events) == 1
    url = str(events[0]["url"])
    parts = urlsplit(url)
    assert url == f"http://testserver/field/#/task/{task.pk}"
    assert (parts.path, parts.fragment) == ("/field/", f"/task/{task.pk}")
    # The hash route the tablet app handles (frontend/static/frontend/field/app.js).
    assert re.match(r"^#\/task\/(\d+)(?:\/step\/(\d+))?", "#" + parts.fragment)
    assert f"Open in Fieldcraft: {url}" in str(events[0]["description"])
    assert "/field/tasks/" not in response.content.decode()


@pytest.mark.parametrize("status", ["draft", "planned"])
def test_customer_api_lists_no_round_target_or_task_until_the_round_is_published(
    world_a, client_for, status
):
    round = _prepare_round(world_a, status)
    viewer = client_for(world_a.viewer)
    manager = client_for(world_a.manager)
    routes = ("/api/rounds/", "/api/targets/", "/api/collection-tasks/")

    before = {r: viewer.get(r).json()["results"] for r in routes}
    detail = viewer.get(f"/api/rounds/{round.pk}/")
    if status == "draft":
        round_transition(round=round, to_status="planned")
    round_publish(round=round)
    after = {r: viewer.get(r).json()["results"] for r in routes}

    assert all(rows == [] for rows in before.values())
    assert detail.status_code == 404
    assert all(manager.get(r).json()["results"] for r in routes)
    assert [r["id"] for r in after["/api/rounds/"]] == [round.pk]
    assert after["/api/targets/"] and after["/api/collection-tasks/"]
