"""A job's context: the one progress interface every long service reports through."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
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


def test_a_running_job_says_how_long_it_ran_and_how_long_it_would_still_take(world_a, client_for):
    from django.template import Context, Template

    from accounts.services import duration_words

    now = timezone.now()
    job = _queued(world_a)
    assert (job.seconds_elapsed(now), job.seconds_left(now)) == (None, None)  # not started

    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.RUNNING,
        started_at=now - timedelta(seconds=65),
        progress_done=0,
        progress_total=4,
    )
    job.refresh_from_db()
    assert job.seconds_elapsed(now) == 65.0
    assert job.seconds_left(now) is None  # no progress yet: no pace to go by

    Job.objects.filter(pk=job.pk).update(progress_done=1)
    job.refresh_from_db()
    # One of four steps in 65 s: three more at that pace.
    assert job.seconds_left(now) == 195.0
    html = Template("{% load jobs %}{% job_bar job %}").render(Context({"job": job}))
    # 1 min 5 s so far and 3 min 15 s left, give or take the clock's move since `now`.
    said = r"1 min \d+ s so far · about 3 min \d+ s left"
    assert re.search(rf'aria-label="Running: 1 of 4, {said}"', html)
    assert re.search(rf'<span class="job-time small muted">{said}</span>', html)

    api = client_for(world_a.manager).get(f"/api/jobs/{job.pk}/").json()
    assert api["elapsed_seconds"] >= 65.0
    assert api["remaining_seconds"] == pytest.approx(api["elapsed_seconds"] * 3, abs=0.1)

    # Ended: how long it took, nothing left.
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.SUCCEEDED, progress_done=4, finished_at=now - timedelta(seconds=5)
    )
    job.refresh_from_db()
    assert (job.seconds_elapsed(), job.seconds_left()) == (60.0, None)
    html = Template("{% load jobs %}{% job_bar job %}").render(Context({"job": job}))
    assert "took 1 min<" in html
    api = client_for(world_a.manager).get(f"/api/jobs/{job.pk}/").json()
    assert (api["elapsed_seconds"], api["remaining_seconds"]) == (60.0, None)

    # A kind whose steps cost unlike (a forecast's steered rounds against its others) says
    # how long it has run, and no pace.
    Job.objects.filter(pk=job.pk).update(
        kind="forecast", status=Job.Status.RUNNING, progress_done=1, finished_at=None
    )
    job.refresh_from_db()
    assert job.seconds_left(now) is None
    html = Template("{% load jobs %}{% job_bar job %}").render(Context({"job": job}))
    assert re.search(r'<span class="job-time small muted">1 min \d+ s so far</span>', html)

    assert [duration_words(s) for s in (None, 0.2, 45, 59.6, 190, 3600, 3900, 7170)] == [
        "",
        "under a second",
        "45 s",
        "1 min",
        "3 min 10 s",
        "1 h",
        "1 h 5 min",
        "2 h",
    ]
