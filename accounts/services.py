"""Jobs (long work with progress, cancellation and recovery) and the audit trail."""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import models, transaction
from django.db.models import F, Q
from django.utils import timezone

from accounts.models import AuditEvent, Job, Organization

logger = logging.getLogger("fieldcraft.jobs")


def duration_words(seconds: float | None) -> str:
    """``seconds`` in words a person reads at a glance: "under a second", "45 s",
    "3 min 10 s", "1 h 5 min" (to the unit below the largest); "" for ``None``."""
    if seconds is None:
        return ""
    whole = round(seconds)
    if whole < 1:
        return "under a second"
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, rest = divmod(round(seconds / 60), 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def time_left_words(seconds: float) -> str:
    """What is left of a job, in words: "about 3 min left", or "finishing" under a second."""
    return f"about {duration_words(seconds)} left" if seconds >= 1 else "finishing"


class JobCancelled(Exception):
    """The user asked for the job to stop; the service rolls back what it started."""


def job_create(
    *,
    organization: Organization,
    kind: str,
    task_name: str,
    task_kwargs: dict[str, Any] | None = None,
    title: str = "",
    created_by: Any = None,
    enqueue: bool = True,
) -> Job:
    """Create a queued job and dispatch its task once the surrounding transaction commits."""
    job = Job.objects.create(
        organization=organization,
        kind=kind,
        title=title[:200],
        task_name=task_name,
        task_kwargs=task_kwargs or {},
        created_by=created_by if getattr(created_by, "pk", None) else None,
    )
    if enqueue:
        job_enqueue(job=job)
    return job


def job_enqueue(*, job: Job) -> None:
    """Send the job's task after commit (so the worker sees the row)."""
    # The project's Celery app (config.celery) is the current one; accounts never imports config.
    app = current_app
    kwargs = {"job_id": str(job.pk)}

    def send() -> None:
        if settings.CELERY_TASK_ALWAYS_EAGER:
            # Task modules are discovered lazily; import the one that defines this task.
            importlib.import_module(job.task_name.rsplit(".", 1)[0])
            app.tasks[job.task_name].apply(kwargs=kwargs)
        else:
            app.send_task(job.task_name, kwargs=kwargs)

    transaction.on_commit(send)


def job_claim(*, job_id: str) -> Job | None:
    """Atomically take a queued (or stale running) job; None if someone else has it or it ended."""
    stale_before = timezone.now() - timedelta(seconds=settings.FIELDCRAFT["JOB_STALE_SECONDS"])
    now = timezone.now()
    updated = Job.objects.filter(
        Q(status=Job.Status.QUEUED) | Q(status=Job.Status.RUNNING, heartbeat_at__lt=stale_before),
        pk=job_id,
        cancel_requested=False,
    ).update(
        status=Job.Status.RUNNING,
        started_at=now,
        heartbeat_at=now,
        attempts=F("attempts") + 1,
        progress_done=0,
        paced_at=None,
        paced_done=0,
        expected_end_at=None,
    )
    if not updated:
        Job.objects.filter(pk=job_id, cancel_requested=True, status__in=Job.ACTIVE).update(
            status=Job.Status.CANCELLED, finished_at=now
        )
        return None
    return Job.objects.get(pk=job_id)


@dataclass
class JobContext:
    """Handed to a service running inside a job: report progress, check for cancellation,
    and extend the job's lease over a long phase. The one progress interface of the project."""

    job: Job
    _last_write: float = field(default=0.0)
    _counted: int | None = field(default=None)  # the last step count written with a total

    def progress(
        self,
        done: int,
        total: int | None = None,
        message: str | None = None,
        *,
        force: bool = False,
    ) -> None:
        """Record progress (throttled to a few writes a second); raise JobCancelled if asked to stop."""
        import time

        now = time.monotonic()
        if not force and now - self._last_write < 0.5:
            return
        self._last_write = now
        fields: dict[str, Any] = {"progress_done": done, "heartbeat_at": timezone.now()}
        if total is not None:
            fields["progress_total"] = total
            # The pace is measured from the first count with a total, and again from a
            # count that went back (a new phase: episodes written, then recordings converted).
            if self._counted is None or done < self._counted:
                fields |= {"paced_at": fields["heartbeat_at"], "paced_done": done}
                fields["expected_end_at"] = None  # counted steps tell again
            self._counted = done
        if message is not None:
            fields["message"] = message[:2000]
        # A separate connection-level autocommit write is not possible inside the service's
        # transaction, so progress is written with the same connection; services run their
        # long phases outside a wrapping transaction (staging) and commit at the end.
        Job.objects.filter(pk=self.job.pk).update(**fields)
        if Job.objects.filter(pk=self.job.pk, cancel_requested=True).exists():
            raise JobCancelled("Cancelled at the user's request.")

    def expect(self, seconds: float | None) -> None:
        """Say the job expects to end in ``seconds`` (``None``: it cannot tell), for a phase
        whose steps are not counted; the time left then runs down to that end, until a new
        phase counts its steps again (:meth:`accounts.models.Job.seconds_left`)."""
        end = None if seconds is None else timezone.now() + timedelta(seconds=seconds)
        Job.objects.filter(pk=self.job.pk).update(expected_end_at=end)

    def cancel_requested(self) -> bool:
        """Whether someone asked the job to stop (a read only: safe inside a transaction)."""
        return Job.objects.filter(pk=self.job.pk, cancel_requested=True).exists()

    def extend_lease(self, seconds: float) -> None:
        """Tell the stale-job reaper that the next ``seconds`` may pass without progress."""
        # A heartbeat in the future: the reaper re-dispatches jobs whose heartbeat is older
        # than JOB_STALE_SECONDS, and a long statement writes none.
        Job.objects.filter(pk=self.job.pk, status=Job.Status.RUNNING).update(
            heartbeat_at=timezone.now() + timedelta(seconds=seconds)
        )


@contextmanager
def job_running(*, job_id: str) -> Iterator[JobContext | None]:
    """Claim the job, run the body, and record success or failure.

    Yields None when the job cannot be claimed (already done, taken, or cancelled): the
    caller then does nothing, which makes re-delivered tasks harmless.
    """
    job = job_claim(job_id=job_id)
    if job is None:
        yield None
        return
    ctx = JobContext(job=job)
    try:
        yield ctx
    except JobCancelled as exc:
        Job.objects.filter(pk=job.pk).update(
            status=Job.Status.CANCELLED, message=str(exc), finished_at=timezone.now()
        )
    except JobFailed as exc:
        Job.objects.filter(pk=job.pk).update(
            status=Job.Status.FAILED,
            message=str(exc)[:2000],
            errors=exc.errors[:20],
            finished_at=timezone.now(),
        )
    except Exception:
        # The traceback is for the log; the people following the job (field members and
        # annotators among them) get a sentence, with the job id to find the log lines by.
        logger.exception("job %s (%s) failed", job.pk, job.kind)
        message = unexpected_failure_message(job=job)
        Job.objects.filter(pk=job.pk).update(
            status=Job.Status.FAILED,
            message=message,
            errors=[{"message": message}],
            finished_at=timezone.now(),
        )
    else:
        Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING).update(
            status=Job.Status.SUCCEEDED,
            finished_at=timezone.now(),
            heartbeat_at=timezone.now(),
            progress_done=models.Case(
                models.When(progress_total__isnull=False, then=F("progress_total")),
                default=F("progress_done"),
            ),
        )


def unexpected_failure_message(*, job: Job) -> str:
    """What a job that stopped on an unexpected error tells the people following it."""
    what = job.title or f"This {job.kind} job"
    return (
        f"{what} stopped on an unexpected error. Try again; if it fails again, tell your "
        f"administrator (job {job.pk}: the details are in the server log)."
    )


class JobFailed(Exception):
    """A job ended with problems a person can act on (listed in ``errors``)."""

    def __init__(self, message: str, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


def job_set_result(*, job: Job, result: dict[str, Any], message: str = "") -> None:
    Job.objects.filter(pk=job.pk).update(result=result, message=message[:2000])


def job_cancel(*, job: Job) -> bool:
    """Ask a job to stop. A queued job is cancelled at once; a running one at its next progress."""
    Job.objects.filter(pk=job.pk, status__in=Job.ACTIVE).update(cancel_requested=True)
    cancelled = Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(
        status=Job.Status.CANCELLED,
        finished_at=timezone.now(),
        message="Cancelled before it started.",
    )
    return bool(cancelled) or Job.objects.filter(pk=job.pk, cancel_requested=True).exists()


def jobs_requeue_stale() -> int:
    """Re-dispatch jobs whose worker died (no heartbeat) or whose message was lost."""
    stale_before = timezone.now() - timedelta(seconds=settings.FIELDCRAFT["JOB_STALE_SECONDS"])
    stale = list(
        Job.objects.filter(
            Q(status=Job.Status.RUNNING, heartbeat_at__lt=stale_before)
            | Q(status=Job.Status.QUEUED, created_at__lt=stale_before),
            cancel_requested=False,
            attempts__lt=5,
        ).exclude(task_name="")
    )
    for job in stale:
        logger.warning("re-dispatching stale job %s (%s)", job.pk, job.kind)
        job_enqueue(job=job)
    return len(stale)


def jsonable(value: Any) -> Any:
    """Return ``value`` as plain JSON data: model instances by primary key, the rest as text."""
    return json.loads(json.dumps(value, default=lambda v: getattr(v, "pk", None) or str(v)))


def audit_record(
    *,
    organization: Organization | int,
    actor: Any,
    verb: str,
    obj: models.Model,
    changes: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one line to the audit trail (``changes`` made JSON: objects by primary key)."""
    org_id = organization if isinstance(organization, int) else organization.pk
    return AuditEvent.objects.create(
        organization_id=org_id,
        actor=actor if getattr(actor, "pk", None) else None,
        verb=verb,
        object_type=obj._meta.label,
        object_id=str(obj.pk),
        object_repr=str(obj)[:200],
        changes=jsonable(changes or {}),
    )
