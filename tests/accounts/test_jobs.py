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


def test_the_pace_runs_from_where_the_steps_began_to_be_counted(world_a):
    """An export reads its episodes before it counts them: the time left is read at the pace
    of the counted steps alone, a new phase counts its own, and a phase whose steps are not
    counted runs down to the end its service expects."""
    from django.db.models import F

    from frontend.templatetags.jobs import job_time

    job = _queued(world_a)
    with job_running(job_id=str(job.pk)) as ctx:
        assert ctx is not None
        ctx.progress(0, None, "Reading the episodes", force=True)
        assert Job.objects.get(pk=job.pk).paced_at is None  # nothing counted yet
        # The reading took 100 s; counting begins now, and two of ten steps take 10 s.
        Job.objects.filter(pk=job.pk).update(started_at=F("started_at") - timedelta(seconds=100))
        ctx.progress(0, 10, "Writing 10 episodes", force=True)
        Job.objects.filter(pk=job.pk).update(paced_at=F("paced_at") - timedelta(seconds=10))
        ctx.progress(2, 10, force=True)
        job.refresh_from_db()
        counted_for = job.paced_at + timedelta(seconds=10)  # read at a stated instant
        # Eight more at 5 s each: 40 s, not the 440 s the whole run's pace would say.
        assert job.seconds_left(counted_for) == pytest.approx(40.0)
        assert job.seconds_elapsed(counted_for) >= 100.0

        # A new phase counts from where it begins: recordings converted, one of four so far.
        ctx.progress(4, 10, force=True)
        ctx.progress(1, 4, "Converting recordings", force=True)
        job.refresh_from_db()
        assert job.paced_done == 1
        assert job.seconds_left() is None  # nothing counted since it began
        Job.objects.filter(pk=job.pk).update(paced_at=F("paced_at") - timedelta(seconds=6))
        ctx.progress(3, 4, force=True)
        job.refresh_from_db()
        six_later = job.paced_at + timedelta(seconds=6)
        assert job.seconds_left(six_later) == pytest.approx(3.0)  # two in 6 s, one left

        # A phase that counts nothing: the service says when it expects to end.
        ctx.progress(4, 4, "Zipping", force=True)
        job.refresh_from_db()
        assert job_time(job).endswith("· finishing")  # all counted, nothing expected
        before = timezone.now()
        ctx.expect(30)
        after = timezone.now()
        job.refresh_from_db()
        assert (
            before + timedelta(seconds=30) <= job.expected_end_at <= after + timedelta(seconds=30)
        )
        assert job.seconds_left(job.expected_end_at - timedelta(seconds=12)) == 12.0
        assert re.search(r"so far · about \d+ s left$", job_time(job))
        ctx.progress(4, 4, force=True)  # the same count: the expectation holds
        job.refresh_from_db()
        assert job.expected_end_at is not None
        Job.objects.filter(pk=job.pk).update(
            expected_end_at=F("expected_end_at") - timedelta(seconds=60)
        )
        job.refresh_from_db()
        assert job.seconds_left() == 0.0  # overdue: finishing, not a negative time
        ctx.progress(0, 7, "Another phase", force=True)  # counted steps tell again
        job.refresh_from_db()
        assert (job.expected_end_at, job.paced_done) == (None, 0)

    # A retried job starts its pace afresh.
    Job.objects.filter(pk=job.pk).update(status=Job.Status.QUEUED)
    with job_running(job_id=str(job.pk)) as again:
        assert again is not None
        job.refresh_from_db()
        assert (job.paced_at, job.expected_end_at, job.progress_done) == (None, None, 0)
