"""The progress bar of a long job, drawn so that its state reads at a glance, with how long
it has run and, while it runs, how long it would still take at its pace so far (where its
steps cost alike)."""

from __future__ import annotations

from typing import Any

from django import template

from accounts.services import duration_words, time_left_words

register = template.Library()

STOPPED = {"failed", "cancelled"}


def job_time(job: Any) -> str:
    """How long ``job`` has run and, while it runs, how long it would still take where its
    steps cost alike (:meth:`accounts.models.Job.seconds_left`): "1 min 5 s so far · about
    3 min left"; once ended, "took 2 min"; "" before it starts."""
    elapsed = job.seconds_elapsed()
    if elapsed is None:
        return ""
    if job.status != "running":
        return f"took {duration_words(elapsed)}" if job.finished_at is not None else ""
    said = f"{duration_words(elapsed)} so far"
    left = job.seconds_left()
    if left is not None:
        said += f" · {time_left_words(left)}"
    return said


@register.inclusion_tag("frontend/_job_bar.html")
def job_bar(job: Any, default_total: int = 1) -> dict[str, Any]:
    """Render ``job``'s bar: filled as far as it got while running or once succeeded; a failed
    or cancelled job's bar is red or grey and never drawn full, since nothing was finished.
    Beside it, how long the job has run and how long it would still take (:func:`job_time`)."""
    if job is None:
        return {"state": "queued", "max": default_total, "value": 0, "label": "Queued", "time": ""}
    total = job.progress_total or default_total
    done = min(job.progress_done, total)
    if job.status in STOPPED and done >= total:
        done = 0  # a full bar reads as "done": show where it stopped only when that is partial
    label = f"{job.get_status_display()}: {job.progress_done:,}"
    if job.progress_total:
        label += f" of {job.progress_total:,}"
    time = job_time(job)
    if time:
        label += f", {time}"
    return {"state": job.status, "max": total, "value": done, "label": label, "time": time}
