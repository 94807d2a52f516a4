"""A team's calendar feed (iCalendar) and its printable day run sheet."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django.urls import reverse
from django.utils import timezone
from icalendar import Calendar, Event

from campaigns.models import CollectionTask, FieldTeam

VISIBLE = (
    CollectionTask.Status.PUBLISHED,
    CollectionTask.Status.IN_PROGRESS,
    CollectionTask.Status.DONE,
    CollectionTask.Status.BLOCKED,
)


def team_tasks(*, team: FieldTeam, start: date | None = None, end: date | None = None) -> Any:
    """The team's published tasks in time order, with what pages and feeds show."""
    qs = (
        CollectionTask.objects.filter(team=team, status__in=VISIBLE)
        .select_related("site", "embodiment", "round__campaign")
        .prefetch_related("task_targets__target", "steps")
        .order_by("start_at", "pk")
    )
    if start:
        qs = qs.filter(scheduled_date__gte=start)
    if end:
        qs = qs.filter(scheduled_date__lte=end)
    return qs


def field_task_url(task_id: int, base_url: str = "") -> str:
    """Where the tablet app opens a task: its page with the app's own ``#/task/<id>`` route."""
    return f"{base_url}{reverse('field:today')}#/task/{task_id}"


def team_calendar_ics(*, team: FieldTeam, base_url: str = "") -> bytes:
    """Return the team's tasks from 30 days ago onwards as an iCalendar feed."""
    cal = Calendar()
    cal.add("prodid", "-//Fieldcraft//Collection tasks//EN")
    cal.add("version", "2.0")
    cal.add("x-wr-calname", f"Fieldcraft · {team.name}")
    cal.add("x-published-ttl", "PT1H")
    since = timezone.localdate() - timedelta(days=30)
    for task in team_tasks(team=team, start=since):
        if task.start_at is None or task.end_at is None:
            continue
        event = Event()
        event.add("uid", f"task-{task.pk}@fieldcraft")
        event.add("sequence", task.version)
        event.add("dtstamp", task.updated_at)
        event.add("dtstart", task.start_at)
        event.add("dtend", task.end_at)
        targets = ", ".join(
            f"{tt.episodes_planned} × {tt.target.label}" for tt in task.task_targets.all()
        )
        event.add(
            "summary",
            f"{task.site.name}: capture {sum(tt.episodes_planned for tt in task.task_targets.all())} episodes",
        )
        event.add("location", task.site.address or task.site.name)
        event.add(
            "description",
            f"{task.round.campaign.name}, round {task.round.number} · {task.embodiment.name}\n"
            f"Targets: {targets}\n"
            + (
                f"Travel before: {task.travel_hours:.1f} h ({task.travel_km:.0f} km)\n"
                if task.travel_hours
                else ""
            )
            + (f"Open in Fieldcraft: {field_task_url(task.pk, base_url)}" if base_url else ""),
        )
        if base_url:
            event.add("url", field_task_url(task.pk, base_url))
        # Only VISIBLE tasks get here: a cancelled one leaves the feed rather than showing as such.
        event.add("status", "CONFIRMED")
        cal.add_component(event)
    return cal.to_ical()


def team_run_sheet(*, team: FieldTeam, day: date) -> list[CollectionTask]:
    """The team's tasks on one day, with targets and steps, for printing."""
    return list(team_tasks(team=team, start=day, end=day))
