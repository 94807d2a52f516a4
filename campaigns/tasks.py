"""Celery tasks of the campaigns app: thin wrappers around services."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="campaigns.tasks.recording_takes", acks_late=True)
def recording_takes(*, job_id: str) -> None:
    from campaigns.takes import recording_takes_run

    recording_takes_run(job_id=job_id)
