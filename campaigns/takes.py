"""A task's recordings become its captures' episodes.

A recording uploaded for a task either is one take (the tablet named the capture it belongs
to: its episode links it) or holds many: then it is cut at the take boundaries the tablet
recorded ("Start take", then the +1 tap), after estimating the offset between the tablet's
clock and the recording's (:mod:`labeling.capture.takes`). Each take found gets a
:class:`~labeling.models.RecordingSegment` — its span of the recording — and with it the
recording's validation verdict and a converted video. A take that cannot be placed in any of
the task's recordings stays listed for the manager (:func:`task_unmatched_takes`), never
dropped; the manager can give the offset by hand and match again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from accounts.services import audit_record, job_create, job_running, job_set_result
from campaigns.models import CollectionTask, TaskRecording
from labeling.capture.messages import CaptureReadError
from labeling.capture.takes import (
    Offset,
    estimate_offset,
    recording_motion,
    takes_in_recording,
)
from labeling.models import Episode, Recording, RecordingSegment
from labeling.recording_services import recording_verdict_apply
from labeling.selectors import stream_map_for

TASK_NAME = "campaigns.tasks.recording_takes"


def _ns(text: str) -> int:
    moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return int(moment.timestamp() * 1_000_000) * 1000


@dataclass
class TakesResult:
    recording: int
    offset_ms: float = 0.0
    method: str = "assumed"
    score: float = 0.0
    note: str = ""
    matched: list[dict[str, Any]] = field(default_factory=list)
    unmatched: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def open_takes(episodes: QuerySet[Episode]) -> QuerySet[Episode]:
    """Of ``episodes``, the captures with a take span and no recording of their own yet."""
    return episodes.filter(
        extra__take__isnull=False, recordings__isnull=True, recording_segment__isnull=True
    ).order_by("recorded_at", "id")


def task_unmatched_takes(*, task: CollectionTask) -> list[Episode]:
    """Takes the tablet recorded that no recording of the task holds (for the manager)."""
    return list(open_takes(Episode.objects.filter(extra__collection_task=task.pk)))


def recording_takes_match(
    *,
    task: CollectionTask,
    recording: Recording,
    offset_ms: float | None = None,
    actor: Any = None,
) -> TakesResult:
    """Cut ``recording`` into the task's open takes. ``offset_ms`` (tablet − recording clock)
    overrides the estimate. Idempotent: takes already cut are not cut again."""
    result = TakesResult(recording=recording.pk)
    if recording.episode_id is not None:
        result.note = "the recording is one take, linked to its capture"
        return result
    takes = task_unmatched_takes(task=task)
    if not takes:
        result.note = "no open take in this task"
        return result
    spans = [(_ns(e.extra["take"]["started_at"]), _ns(e.extra["take"]["ended_at"])) for e in takes]
    try:
        motion = recording_motion(
            [Path(recording.storage_path)], stream_map_for(embodiment=task.embodiment)
        )
    except (CaptureReadError, ValueError) as exc:
        result.error = f"{recording.original_name}: {exc}"
        result.unmatched = [{"episode": e.pk, "key": e.key, "why": result.error} for e in takes]
        return result
    earlier = (
        RecordingSegment.objects.filter(recording=recording)
        .values_list("clock_offset_ms", flat=True)
        .first()
    )
    if offset_ms is not None:
        offset = Offset(round(offset_ms * 1e6), "given", 0.0, "offset given by the manager")
    elif earlier is not None:
        # Takes were cut from this recording before: the same clocks, the same offset (the
        # takes left over must not pull the estimate to wherever they would fit).
        offset = Offset(round(earlier * 1e6), "earlier", 0.0, "offset of the earlier match")
    else:
        offset = estimate_offset(spans, motion)
    result.offset_ms = offset.offset_ns / 1e6
    result.method, result.score, result.note = offset.method, offset.score, offset.note
    placed = takes_in_recording(spans, offset, motion)
    with transaction.atomic():
        for episode, span in zip(takes, placed, strict=True):
            if span is None:
                result.unmatched.append(
                    {
                        "episode": episode.pk,
                        "key": episode.key,
                        "why": "the take lies outside this recording",
                    }
                )
                continue
            RecordingSegment.objects.get_or_create(
                episode=episode,
                defaults={
                    "recording": recording,
                    "start_ns": span[0],
                    "end_ns": span[1],
                    "clock_offset_ms": result.offset_ms,
                },
            )
            result.matched.append(
                {
                    "episode": episode.pk,
                    "key": episode.key,
                    "start_s": (span[0] - motion.start_ns) / 1e9,
                    "duration_s": (span[1] - span[0]) / 1e9,
                }
            )
        TaskRecording.objects.filter(task=task, recording=recording).update(takes=result.as_dict())
        audit_record(
            actor=actor,
            organization=task.round.campaign.organization_id,
            verb="recording_takes_match",
            obj=recording,
            changes={
                "task": task.pk,
                "matched": len(result.matched),
                "unmatched": len(result.unmatched),
                "offset_ms": result.offset_ms,
                "method": result.method,
            },
        )
    if result.matched and recording.status in (Recording.Status.PASSED, Recording.Status.FAILED):
        recording_verdict_apply(recording=recording)
    return result


def recording_takes_request(
    *, task: CollectionTask, recording: Recording, actor: Any = None
) -> Any:
    return job_create(
        organization=recording.organization,
        kind="takes",
        task_name=TASK_NAME,
        task_kwargs={"task_id": task.pk, "recording_id": recording.pk},
        title=f"Find the takes of {recording.original_name}",
        created_by=actor,
    )


def recording_takes_run(*, job_id: str) -> None:
    with job_running(job_id=job_id) as ctx:
        if ctx is None:
            return
        task = CollectionTask.objects.select_related("embodiment", "round__campaign").get(
            pk=ctx.job.task_kwargs["task_id"]
        )
        recording = Recording.objects.get(pk=ctx.job.task_kwargs["recording_id"])
        result = recording_takes_match(task=task, recording=recording)
        job_set_result(
            job=ctx.job,
            result=result.as_dict(),
            message=f"{len(result.matched)} take(s) cut from {recording.original_name}, "
            f"{len(result.unmatched)} not found in it; {result.note}",
        )
