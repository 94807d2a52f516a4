"""The progress bar of a long job, drawn so that its state reads at a glance."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

STOPPED = {"failed", "cancelled"}


@register.inclusion_tag("frontend/_job_bar.html")
def job_bar(job: Any, default_total: int = 1) -> dict[str, Any]:
    """Render ``job``'s bar: filled as far as it got while running or once succeeded; a failed
    or cancelled job's bar is red or grey and never drawn full, since nothing was finished."""
    if job is None:
        return {"state": "queued", "max": default_total, "value": 0, "label": "Queued"}
    total = job.progress_total or default_total
    done = min(job.progress_done, total)
    if job.status in STOPPED and done >= total:
        done = 0  # a full bar reads as "done": show where it stopped only when that is partial
    label = f"{job.get_status_display()}: {job.progress_done:,}"
    if job.progress_total:
        label += f" of {job.progress_total:,}"
    return {"state": job.status, "max": total, "value": done, "label": label}
