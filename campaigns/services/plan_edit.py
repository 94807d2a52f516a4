"""Manager edits of a proposed plan, and publishing it to the field teams."""

from __future__ import annotations

from datetime import date, datetime, time
from typing import Any
from zoneinfo import ZoneInfo

from django.db import transaction
from django.db.models import F

from accounts.services import audit_record
from campaigns.models import CaptureTarget, CollectionRound, CollectionTask, FieldTeam
from campaigns.planning.plan_check import check_plan, describe
from campaigns.selectors import (
    DEFAULT_MIN_BATCH,
    budget_of,
    check_targets,
    check_tasks,
    plan_world,
    round_check_input,
    stored_round_tasks,
)
from campaigns.services.rounds import round_transition


class PlanEditRefused(Exception):
    """The edit is not possible (names why)."""


def _editable(round: CollectionRound) -> None:
    if not round.is_editable:
        raise PlanEditRefused(
            f"Round {round.number} is {round.status}: its plan can no longer be edited."
        )


@transaction.atomic
def target_update(
    *,
    target: CaptureTarget,
    episodes: int | None = None,
    locked: bool | None = None,
    actor: Any = None,
) -> CaptureTarget:
    """Change a target's episodes (which locks it: the number is the manager's) or its lock."""
    _editable(target.round)
    changes: dict[str, Any] = {}
    if episodes is not None:
        if episodes < 0:
            raise PlanEditRefused("Episodes must be zero or more.")
        min_batch = int((target.round.plan_summary or {}).get("min_batch", DEFAULT_MIN_BATCH))
        if 0 < episodes < min_batch:
            raise PlanEditRefused(
                f"Episodes: {episodes} is below the plan's minimum batch of {min_batch}; "
                f"set 0 or at least {min_batch}."
            )
        in_locked = sum(
            target.task_targets.filter(task__locked=True).values_list("episodes_planned", flat=True)
        )
        if episodes < in_locked:
            raise PlanEditRefused(
                f"Episodes: locked visits already hold {in_locked:,} of '{target.label}'; "
                f"set at least {in_locked:,} or unlock those visits first."
            )
        changes["episodes_wanted"] = [target.episodes_wanted, episodes]
        target.episodes_wanted = episodes
        target.locked = True
    if locked is not None:
        changes["locked"] = [target.locked, locked]
        target.locked = locked
    target.save(update_fields=["episodes_wanted", "locked"])
    audit_record(
        organization=target.round.campaign.organization_id,
        actor=actor,
        verb="target.update",
        obj=target,
        changes=changes,
    )
    return target


@transaction.atomic
def target_remove(*, target: CaptureTarget, actor: Any = None) -> None:
    """Remove a target and keep its cell out of later re-solves of this round."""
    round = target.round
    _editable(round)
    if target.task_targets.filter(task__locked=True).exists():
        raise PlanEditRefused(
            "A locked task captures this target; unlock or remove the task first."
        )
    summary = dict(round.plan_summary or {})
    excluded = [list(v) for v in summary.get("excluded", [])]
    key = sorted(target.condition_set.value_ids)
    if key not in excluded:
        excluded.append(key)
    summary["excluded"] = excluded
    CollectionRound.objects.filter(pk=round.pk).update(plan_summary=summary)
    audit_record(
        organization=round.campaign.organization_id,
        actor=actor,
        verb="target.remove",
        obj=target,
        changes={"label": target.label, "episodes": target.episodes_wanted},
    )
    for task in CollectionTask.objects.filter(task_targets__target=target).distinct():
        task.steps.filter(target=target).delete()
        CollectionTask.objects.filter(pk=task.pk).update(version=F("version") + 1)
    target.delete()


@transaction.atomic
def task_update(
    *,
    task: CollectionTask,
    team: FieldTeam | None = None,
    day: date | None = None,
    start: time | None = None,
    locked: bool | None = None,
    actor: Any = None,
) -> CollectionTask:
    """Move a task to another team or day/time (which locks it), or change its lock."""
    round = task.round
    if round.status not in (
        CollectionRound.Status.DRAFT,
        CollectionRound.Status.PLANNED,
        CollectionRound.Status.SCHEDULED,
        CollectionRound.Status.COLLECTING,
    ):
        raise PlanEditRefused(
            f"Round {round.number} is {round.status}: its tasks can no longer change."
        )
    changes: dict[str, Any] = {}
    if team is not None and team.pk != task.team_id:
        if not team.embodiments.filter(pk=task.embodiment_id).exists():
            raise PlanEditRefused(f"{team.name} cannot operate {task.embodiment.name}.")
        changes["team"] = [task.team.name if task.team else None, team.name]
        task.team = team
        task.locked = True
    if day is not None or start is not None:
        tz = ZoneInfo(task.site.timezone)
        duration = (task.end_at - task.start_at) if task.start_at and task.end_at else None
        local = task.start_at.astimezone(tz) if task.start_at else None
        new_day = day or (local.date() if local else None) or task.scheduled_date
        new_start = start or (local.time() if local else time(8, 0))
        if new_day is None:
            raise PlanEditRefused("Give a day for the task.")
        begin = datetime.combine(new_day, new_start, tzinfo=tz)
        end = begin + (duration or (datetime.combine(new_day, time(17, 0), tzinfo=tz) - begin))
        changes["when"] = [str(task.start_at), begin.isoformat()]
        task.scheduled_date, task.start_at, task.end_at = new_day, begin, end
        task.locked = True
    if locked is not None:
        changes["locked"] = [task.locked, locked]
        task.locked = locked
    if "team" in changes or "when" in changes or locked:
        _task_check(task)
    task.version = F("version") + 1
    task.save()
    task.refresh_from_db()
    audit_record(
        organization=round.campaign.organization_id,
        actor=actor,
        verb="task.update",
        obj=task,
        changes=changes,
    )
    return task


def _task_check(task: CollectionTask) -> None:
    """Refuse a moved (or newly locked) task that breaks a rule of the feasibility checker.

    The task is checked as it would be stored, against its own round's other tasks and every
    other round's (team calendars, site days), naming each conflict. Budgets do not change
    when a visit moves, so they are not checked here.
    """
    round = task.round
    world = plan_world(round=round)
    stored = [t for t in stored_round_tasks(round) if t.pk != task.pk]
    mine = check_tasks(tasks=stored, ours=True, round_numbers={round.pk: round.number})
    moved = check_tasks(tasks=[task], ours=True, round_numbers={round.pk: round.number})[0]
    summary = round.plan_summary or {}
    violations = check_plan(
        round_check_input(
            world=world,
            tasks=[*mine, moved],
            targets=check_targets(round.targets.all()),
            budget=budget_of(round),
            min_batch=int(summary.get("min_batch", DEFAULT_MIN_BATCH)),
            changed=frozenset({moved.key}),
            edit=True,
        )
    )
    if violations:
        raise PlanEditRefused("Not changed: " + describe(violations))


@transaction.atomic
def task_cancel(*, task: CollectionTask, reason: str = "", actor: Any = None) -> CollectionTask:
    """Cancel a task; what was captured under it stays (nothing a team captured is lost)."""
    CollectionTask.objects.filter(pk=task.pk).update(
        status=CollectionTask.Status.CANCELLED,
        blocked_reason=reason[:300],
        version=F("version") + 1,
    )
    task.refresh_from_db()
    audit_record(
        organization=task.round.campaign.organization_id,
        actor=actor,
        verb="task.cancel",
        obj=task,
        changes={"reason": reason},
    )
    return task


@transaction.atomic
def task_remove(*, task: CollectionTask, actor: Any = None) -> None:
    """Delete a task of a plan that is not published yet."""
    _editable(task.round)
    audit_record(
        organization=task.round.campaign.organization_id, actor=actor, verb="task.remove", obj=task
    )
    task.delete()


@transaction.atomic
def round_publish(*, round: CollectionRound, actor: Any = None) -> CollectionRound:
    """Publish a planned round to its field teams: tasks become visible, round is scheduled."""
    round = CollectionRound.objects.select_for_update().get(pk=round.pk)
    if round.status != CollectionRound.Status.PLANNED:
        raise PlanEditRefused(
            f"Round {round.number} is {round.status}; only a planned round can be published."
        )
    tasks = round.tasks.exclude(status=CollectionTask.Status.CANCELLED)
    if not tasks.exists():
        raise PlanEditRefused("The plan has no tasks to publish.")
    unassigned = (
        tasks.filter(team__isnull=True).count() + tasks.filter(start_at__isnull=True).count()
    )
    if unassigned:
        raise PlanEditRefused(
            f"{unassigned} task(s) have no team or time yet; assign them before publishing."
        )
    tasks.filter(status=CollectionTask.Status.PLANNED).update(
        status=CollectionTask.Status.PUBLISHED, version=F("version") + 1
    )
    round_transition(round=round, to_status=CollectionRound.Status.SCHEDULED, actor=actor)
    audit_record(
        organization=round.campaign.organization_id,
        actor=actor,
        verb="round.publish",
        obj=round,
        changes={"tasks": tasks.count()},
    )
    return round
