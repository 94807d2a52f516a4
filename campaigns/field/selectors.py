"""Reads for field sync: a team's coming tasks for the tablet, and a round's live progress.

Every count is a SQL aggregate over captured episodes reached through their field records
(``SUM(episode_count)``, grouped by task and target), so the numbers the tablet, the progress
page and the API show are one and the same, and the query count does not grow with rows.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from typing import Any

from django.db import connection
from django.db.models import (
    Count,
    Exists,
    IntegerField,
    Max,
    OuterRef,
    Prefetch,
    Q,
    Subquery,
    Sum,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from campaigns.field.services import BLOCK_REASONS, task_seen_token
from campaigns.models import (
    CaptureTarget,
    CollectionRound,
    CollectionTask,
    FieldRecord,
    TaskTarget,
)
from labeling.models import Episode
from sites.models import AccessWindow, ConditionValue, FailureMode

SYNC_DAYS_BACK = 1
SYNC_DAYS_AHEAD = 7
NOTES_MAX = 500
FIELD_STATUSES = (
    CollectionTask.Status.PUBLISHED,
    CollectionTask.Status.IN_PROGRESS,
    CollectionTask.Status.BLOCKED,
    CollectionTask.Status.DONE,
    CollectionTask.Status.CANCELLED,
)
CAPTURED = Q(kind=FieldRecord.Kind.CAPTURE, episode__isnull=False)
NOT_CALIBRATION = ~Q(payload__calibration=True)


def _sum(outcome: str) -> Sum:
    return Sum("episode__episode_count", filter=Q(episode__outcome=outcome))


def captured_by_task_target(*, task_ids: list[int]) -> dict[tuple[int, int | None], dict[str, int]]:
    """Return {(task id, target id): {"success", "failure", "unknown"}} for capture episodes."""
    rows = (
        FieldRecord.objects.filter(CAPTURED, NOT_CALIBRATION, task_id__in=task_ids)
        .values("task_id", "target_id")
        .annotate(
            success=_sum(Episode.Outcome.SUCCESS),
            failure=_sum(Episode.Outcome.FAILURE),
            unknown=_sum(Episode.Outcome.UNKNOWN),
        )
        .order_by()
    )
    return {
        (r["task_id"], r["target_id"]): {
            "success": r["success"] or 0,
            "failure": r["failure"] or 0,
            "unknown": r["unknown"] or 0,
        }
        for r in rows
    }


def calibration_status(episode: Episode) -> tuple[str, str]:
    """Return (passed | failed | awaiting, detail) for a calibration episode.

    Capture validation records its verdict on the episode: ``extra["capture"]["passed"]``
    (with ``failed_checks``), or ``sync_status``/``validated``. Until a recording is
    uploaded and validated the step shows "awaiting".
    """
    verdict = (episode.extra or {}).get("capture") or {}
    if isinstance(verdict, dict) and verdict.get("passed") is not None:
        if verdict["passed"]:
            return "passed", "Capture validation passed."
        failed = ", ".join(str(c) for c in verdict.get("failed_checks") or []) or "see report"
        return "failed", f"Capture validation failed: {failed}."
    if episode.sync_status in (Episode.SyncStatus.DESYNCED, Episode.SyncStatus.INCOMPLETE):
        return "failed", f"Capture validation: {episode.get_sync_status_display().lower()}."
    if episode.validated and episode.sync_status == Episode.SyncStatus.SYNCED:
        return "passed", "Capture validation passed."
    return "awaiting", "Waiting for the recording to be uploaded and validated."


def _window_text(windows: list[AccessWindow], day: date | None) -> str:
    todays = [w for w in windows if day is not None and w.weekday == day.weekday()]
    if not todays:
        return "No access window that day" if windows else "No access windows set"
    return ", ".join(f"{w.start_time:%H:%M}–{w.end_time:%H:%M}" for w in todays)


def failure_modes_for_pick(*, organization_id: int) -> list[dict[str, Any]]:
    """The failure taxonomy for the tablet's quick pick: leaves (most specific) first."""
    modes = (
        FailureMode.objects.filter(organization_id=organization_id)
        .select_related("parent")
        .annotate(has_children=Exists(FailureMode.objects.filter(parent=OuterRef("pk"))))
        .order_by("has_children", "parent__code", "code")
    )
    return [
        {
            "id": m.pk,
            "code": m.code,
            "name": m.name,
            "parent": m.parent.name if m.parent else "",
            "leaf": not m.has_children,
        }
        for m in modes
    ]


def field_sync(*, user: Any, organization_id: int, today: date | None = None) -> dict[str, Any]:
    """Return what a tablet needs to work offline for the coming days.

    The member's visible tasks (a field member's own team's) from yesterday to a week ahead,
    each with site, access window, targets with setup instructions and captured counts,
    steps with what is done, calibration verdicts, the manager's version and any stale
    records; plus the failure taxonomy and blocking reasons.
    """
    today = today or timezone.localdate()
    tasks = list(
        CollectionTask.objects.visible_to(user)
        .filter(
            status__in=FIELD_STATUSES,
            scheduled_date__gte=today - timedelta(days=SYNC_DAYS_BACK),
            scheduled_date__lte=today + timedelta(days=SYNC_DAYS_AHEAD),
        )
        .select_related("site", "team", "embodiment", "round__campaign")
        .prefetch_related(
            Prefetch("site__access_windows", queryset=AccessWindow.objects.order_by("weekday")),
            Prefetch(
                "task_targets",
                queryset=TaskTarget.objects.select_related(
                    "target__condition_set", "target__failure_mode"
                ).order_by("target__priority", "target_id"),
            ),
            "steps",
        )
        .order_by("scheduled_date", "start_at", "id")[:100]
    )
    task_ids = [t.pk for t in tasks]
    value_ids = {
        v
        for t in tasks
        for tt in t.task_targets.all()
        for v in (tt.target.condition_set.value_ids or [])
    }
    values = {
        v.pk: v for v in ConditionValue.objects.filter(pk__in=value_ids).select_related("dimension")
    }
    captured = captured_by_task_target(task_ids=task_ids)
    # Per task in one pass over its records (raw SQL: this runs on every tablet sync):
    # steps done, when work started and finished, and how many records are stale.
    done_steps: dict[int, set[int]] = defaultdict(set)
    times: dict[int, Any] = {}
    stale: dict[int, int] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT task_id,
                   array_agg(DISTINCT step_id) FILTER (WHERE kind = %s AND step_id IS NOT NULL),
                   MIN(client_created_at) FILTER (WHERE kind = %s),
                   MAX(client_created_at) FILTER (WHERE kind = %s),
                   COUNT(*) FILTER (WHERE stale)
            FROM campaigns_fieldrecord
            WHERE task_id = ANY(%s)
            GROUP BY task_id
            """,
            [
                FieldRecord.Kind.STEP_DONE,
                FieldRecord.Kind.START,
                FieldRecord.Kind.FINISH,
                task_ids,
            ],
        )
        for task_id, steps, started_at, finished_at, n_stale in cursor.fetchall():
            done_steps[task_id].update(steps or ())
            times[task_id] = {"started_at": started_at, "finished_at": finished_at}
            if n_stale:
                stale[task_id] = n_stale
    calibrations: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in (
        FieldRecord.objects.filter(CAPTURED, task_id__in=task_ids, payload__calibration=True)
        .select_related("episode")
        .order_by("received_at")
    ):
        assert record.episode is not None
        verdict, detail = calibration_status(record.episode)
        calibrations[record.task_id].append(
            {"uuid": str(record.uuid), "status": verdict, "detail": detail}
        )
    notes: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for note in (
        FieldRecord.objects.filter(task_id__in=task_ids, kind=FieldRecord.Kind.NOTE)
        .select_related("author")
        .order_by("-client_created_at")[:NOTES_MAX]
    ):
        notes[note.task_id].append(
            {
                "uuid": str(note.uuid),
                "text": note.payload.get("text", ""),
                "author": note.author.get_full_name() or note.author.username
                if note.author
                else "",
                "at": note.client_created_at,
            }
        )
    payload_tasks = []
    for t in tasks:
        windows = list(t.site.access_windows.all())
        targets = []
        for tt in t.task_targets.all():
            counts = captured.get((t.pk, tt.target_id), {"success": 0, "failure": 0, "unknown": 0})
            setup = [
                {
                    "dimension": values[v].dimension.name,
                    "value": values[v].label,
                    "instruction": values[v].setup_instruction,
                }
                for v in (tt.target.condition_set.value_ids or [])
                if v in values
            ]
            targets.append(
                {
                    "id": tt.target_id,
                    "label": tt.target.label or str(tt.target.condition_set),
                    "episodes_planned": tt.episodes_planned,
                    "failure_mode": tt.target.failure_mode.name if tt.target.failure_mode else "",
                    "captured": counts,
                    "setup": setup,
                }
            )
        payload_tasks.append(
            {
                "id": t.pk,
                "version": t.version,
                "status": t.status,
                "status_label": t.get_status_display(),
                "blocked_reason": t.blocked_reason,
                "scheduled_date": t.scheduled_date,
                "start_at": t.start_at,
                "end_at": t.end_at,
                "local_window": t.local_window,
                "campaign": t.round.campaign.name,
                "round": t.round.number,
                "embodiment": t.embodiment.name,
                "team": t.team.name if t.team else "",
                "site": {
                    "id": t.site_id,
                    "name": t.site.name,
                    "address": t.site.address,
                    "timezone": t.site.timezone,
                    "access_window": _window_text(windows, t.scheduled_date),
                    "access_windows": [
                        {
                            "weekday": w.weekday,
                            "start": w.start_time.strftime("%H:%M"),
                            "end": w.end_time.strftime("%H:%M"),
                        }
                        for w in windows
                    ],
                },
                "targets": targets,
                "steps": [
                    {
                        "id": s.pk,
                        "order": s.order,
                        "kind": s.kind,
                        "title": s.title,
                        "instructions": s.instructions,
                        "episodes": s.episodes,
                        "target": s.target_id,
                        "done": s.pk in done_steps[t.pk],
                    }
                    for s in sorted(t.steps.all(), key=lambda s: s.order)
                ],
                "captured_untargeted": captured.get(
                    (t.pk, None), {"success": 0, "failure": 0, "unknown": 0}
                ),
                "calibration": calibrations.get(t.pk, []),
                "started_at": times.get(t.pk, {}).get("started_at"),
                "finished_at": times.get(t.pk, {}).get("finished_at"),
                "notes": notes.get(t.pk, []),
                "stale_records": stale.get(t.pk, 0),
                "seen": task_seen_token(task_id=t.pk, team_id=t.team_id),
            }
        )
    return {
        "server_time": timezone.now(),
        "today": today,
        "tasks": payload_tasks,
        "failure_modes": failure_modes_for_pick(organization_id=organization_id),
        "block_reasons": [{"code": k, "label": v} for k, v in BLOCK_REASONS.items()],
    }


PIPELINE = ("captured", "recorded", "validated", "labelled", "exported")


def task_pipeline(*, round: CollectionRound) -> dict[int, dict[str, int]]:
    """Per task, how far its captured episodes have come: captured, with a recording (their
    own or a take's segment), validated (synchronised), labelled (accepted), and exported
    (in the dataset's latest LeRobot export with frames)."""
    from labeling.models import DatasetExport

    exported_ids: list[int] = []
    if round.dataset_id is not None:
        latest = (
            DatasetExport.objects.filter(
                dataset_id=round.dataset_id,
                job__status="succeeded",
                summary__conversion__isnull=False,
            )
            .order_by("-created_at")
            .values_list("summary", flat=True)
            .first()
        )
        if isinstance(latest, dict):
            exported_ids = list((latest.get("conversion") or {}).get("episode_ids") or [])
    rows = (
        FieldRecord.objects.filter(CAPTURED, NOT_CALIBRATION, task__round=round)
        .values("task_id")
        .annotate(
            captured=Count("episode", distinct=True),
            recorded=Count(
                "episode",
                distinct=True,
                filter=Q(episode__recordings__isnull=False)
                | Q(episode__recording_segment__isnull=False),
            ),
            validated=Count(
                "episode", distinct=True, filter=Q(episode__sync_status=Episode.SyncStatus.SYNCED)
            ),
            labelled=Count(
                "episode",
                distinct=True,
                filter=Q(episode__label_status=Episode.LabelStatus.ACCEPTED),
            ),
            exported=Count("episode", distinct=True, filter=Q(episode_id__in=exported_ids)),
        )
        .order_by()
    )
    out: dict[int, dict[str, int]] = {}
    for r in rows:
        row: dict[str, Any] = dict(r)
        out[row["task_id"]] = {k: int(row[k]) for k in PIPELINE}
    return out


def takes_to_resolve(*, round: CollectionRound) -> list[dict[str, Any]]:
    """Per task of the round with takes no recording holds: those takes, and the task's
    recordings of several takes with how their clocks were matched (for the manager).
    Two queries whatever the number of tasks (the progress page polls it)."""
    from campaigns.models import TaskRecording
    from campaigns.takes import open_takes

    by_task: dict[int, list[Episode]] = {}
    for episode in open_takes(
        Episode.objects.filter(field_record__task__round=round)
    ).select_related("field_record__task__site"):
        by_task.setdefault(episode.field_record.task_id, []).append(episode)
    links: dict[int, list[Any]] = {}
    for link in (
        TaskRecording.objects.filter(task_id__in=by_task, recording__episode__isnull=True)
        .select_related("recording")
        .order_by("created_at")
    ):
        links.setdefault(link.task_id, []).append(link)
    return [
        {"task": takes[0].field_record.task, "takes": takes, "recordings": links.get(task_id, [])}
        for task_id, takes in by_task.items()
    ]


def round_progress(*, round: CollectionRound) -> dict[str, Any]:
    """Return a round's live capture progress: per target, per task, blockers and stale records."""
    planned_by_target = (
        TaskTarget.objects.filter(target=OuterRef("pk"))
        .exclude(task__status=CollectionTask.Status.CANCELLED)
        .values("target")
        .annotate(n=Sum("episodes_planned"))
        .values("n")
    )
    targets = list(
        CaptureTarget.objects.filter(round=round)
        .select_related("failure_mode")
        .annotate(planned=Coalesce(Subquery(planned_by_target, output_field=IntegerField()), 0))
        .order_by("-priority", "id")
    )
    captured_rows = (
        FieldRecord.objects.filter(CAPTURED, NOT_CALIBRATION, task__round=round)
        .values("target_id")
        .annotate(success=_sum(Episode.Outcome.SUCCESS), failure=_sum(Episode.Outcome.FAILURE))
        .order_by()
    )
    by_target: dict[int | None, tuple[int, int]] = {
        r["target_id"]: (r["success"] or 0, r["failure"] or 0) for r in captured_rows
    }
    target_rows = []
    for t in targets:
        success, failure = by_target.get(t.pk, (0, 0))
        target_rows.append(
            {
                "target": t,
                "wanted": t.episodes_wanted,
                "planned": t.planned,
                "success": success,
                "failure": failure,
                "captured": success + failure,
                "percent": _percent(success + failure, t.episodes_wanted),
            }
        )
    unassigned = by_target.get(None)

    planned_by_task = (
        TaskTarget.objects.filter(task=OuterRef("pk"))
        .values("task")
        .annotate(n=Sum("episodes_planned"))
        .values("n")
    )
    tasks = list(
        CollectionTask.objects.filter(round=round)
        .select_related("site", "team")
        .annotate(
            planned=Coalesce(Subquery(planned_by_task, output_field=IntegerField()), 0),
            success=Coalesce(
                Sum(
                    "field_records__episode__episode_count",
                    filter=Q(
                        field_records__kind=FieldRecord.Kind.CAPTURE,
                        field_records__episode__outcome=Episode.Outcome.SUCCESS,
                    )
                    & ~Q(field_records__payload__calibration=True),
                ),
                0,
            ),
            failure=Coalesce(
                Sum(
                    "field_records__episode__episode_count",
                    filter=Q(
                        field_records__kind=FieldRecord.Kind.CAPTURE,
                        field_records__episode__outcome=Episode.Outcome.FAILURE,
                    )
                    & ~Q(field_records__payload__calibration=True),
                ),
                0,
            ),
            n_stale=Count("field_records", filter=Q(field_records__stale=True)),
            n_notes=Count("field_records", filter=Q(field_records__kind=FieldRecord.Kind.NOTE)),
            n_photos=Count("field_records", filter=Q(field_records__kind=FieldRecord.Kind.PHOTO)),
            last_record_at=Max("field_records__received_at"),
        )
        .order_by("scheduled_date", "start_at", "id")
    )
    pipeline = task_pipeline(round=round)
    task_rows = [
        {
            "task": t,
            "planned": t.planned,
            "success": t.success,
            "failure": t.failure,
            "captured": t.success + t.failure,
            "percent": _percent(t.success + t.failure, t.planned),
            "pipeline": pipeline.get(t.pk, dict.fromkeys(PIPELINE, 0)),
        }
        for t in tasks
    ]
    recent = (
        FieldRecord.objects.filter(task__round=round)
        .select_related("task__site", "author")
        .order_by("-received_at", "-id")
    )
    blockers = list(recent.filter(kind=FieldRecord.Kind.BLOCKED)[:20])
    stale_records = list(recent.filter(stale=True)[:20])
    notes = list(recent.filter(kind=FieldRecord.Kind.NOTE)[:10])
    wanted = sum(r["wanted"] for r in target_rows)
    captured_total = sum(r["captured"] for r in task_rows)
    return {
        "takes": takes_to_resolve(round=round),
        "targets": target_rows,
        "unassigned": {"success": unassigned[0], "failure": unassigned[1]} if unassigned else None,
        "tasks": task_rows,
        "blocked_tasks": [t for t in tasks if t.status == CollectionTask.Status.BLOCKED],
        "blockers": blockers,
        "stale_records": stale_records,
        "notes": notes,
        "totals": {
            "wanted": wanted,
            "planned": sum(r["planned"] for r in task_rows),
            "captured": captured_total,
            "success": sum(r["success"] for r in task_rows),
            "failure": sum(r["failure"] for r in task_rows),
            "percent": _percent(captured_total, wanted),
            "stale": sum(t.n_stale for t in tasks),
        },
        "updated_at": timezone.now(),
    }


def _percent(part: int, whole: int) -> int:
    if not whole:
        return 0
    return min(100, round(100 * part / whole))
