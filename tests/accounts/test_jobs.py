"""A job's context: the one progress interface every long service reports through."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from accounts.models import Job
from accounts.services import JobContext, job_running


def _queued(world) -> Job:
    return Job.objects.create(organization=world.operator, kind="import", title="Import m.csv")


def test_progress_is_written_to_the_job_and_a_cancel_ends_it_cancelled(world_a):
    job = _queued(world_a)
    seen = []

    with job_running(job_id=str(job.pk)) as ctx:
        assert isinstance(ctx, JobContext)
        ctx.progress(3, 10, "Staged 3 rows", force=True)
        seen.append((Job.objects.get(pk=job.pk).progress_done, ctx.cancel_requested()))
        Job.objects.filter(pk=job.pk).update(cancel_requested=True)
        seen.append((3, ctx.cancel_requested()))
        ctx.progress(4, force=True)  # raises JobCancelled, which job_running records
        seen.append((4, "not reached"))

    job.refresh_from_db()
    assert seen == [(3, False), (3, True)]
    assert (job.status, job.progress_done, job.progress_total) == ("cancelled", 4, 10)


def test_extending_the_lease_of_a_running_job_keeps_the_reaper_away(world_a):
    job = _queued(world_a)
    Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING)
    ctx = JobContext(job=job)

    ctx.extend_lease(600)

    heartbeat = Job.objects.get(pk=job.pk).heartbeat_at
    assert heartbeat > timezone.now() + timedelta(seconds=590)
