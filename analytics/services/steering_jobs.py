"""Round impact and the next-round recommendation as jobs: queued once, progress on the Job,
results stored where the impact page reads them (the RoundImpactReport and its summary)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import Job
from accounts.services import JobFailed, job_create, job_running, job_set_result
from analytics.models import EvaluationRun, RoundImpactReport
from analytics.selectors import gap_report_latest
from analytics.services.steering import (
    ImpactUnavailable,
    next_round_recommendation,
    round_impact_compute,
    round_impact_policies,
)
from campaigns.models import CollectionRound

IMPACT = "round_impact"
RECOMMEND = "recommend"
STEERING_KINDS = (IMPACT, RECOMMEND)
LEASE_SECONDS_PER_CELL = 0.05
"""How long a recommendation may run without a heartbeat, per cell of its gap report: every
cell is a candidate, and it allocates the round and up to 30 more in its projection (about
a millisecond a cell each, ``bench/transfer_allocation.py``)."""


def round_steering_job(
    *, round: CollectionRound, kinds: tuple[str, ...] = STEERING_KINDS
) -> Job | None:
    """Return the round's latest impact or recommendation job (of ``kinds``), if any."""
    return (
        Job.objects.filter(
            organization_id=round.campaign.organization_id,
            kind__in=kinds,
            task_kwargs__round_id=round.pk,
        )
        .order_by("-created_at")
        .first()
    )


def _round_job_request(
    *, round: CollectionRound, kind: str, title: str, task_name: str, actor: Any, **kwargs: Any
) -> tuple[Job, bool]:
    """Queue a job of ``kind`` for the round unless one is queued or running already.

    Returns the job and whether it is new. The round's row is locked while deciding, so two
    concurrent clicks start one job.
    """
    with transaction.atomic():
        CollectionRound.objects.select_for_update().filter(pk=round.pk).first()
        active = (
            Job.objects.filter(
                organization_id=round.campaign.organization_id,
                kind=kind,
                task_kwargs__round_id=round.pk,
                status__in=Job.ACTIVE,
            )
            .order_by("-created_at")
            .first()
        )
        if active is not None:
            return active, False
        job = job_create(
            organization=round.campaign.organization,
            kind=kind,
            title=title,
            task_name=task_name,
            task_kwargs={"round_id": round.pk, **kwargs},
            created_by=actor,
        )
    return job, True


def round_impact_request(*, round: CollectionRound, actor: Any = None) -> tuple[Job, bool]:
    """Queue measuring the round's impact (a new report); returns the job and whether it is new.

    Raises ImpactUnavailable at once (without a job) when the round cannot be measured yet.
    """
    round_impact_policies(round=round)
    return _round_job_request(
        round=round,
        kind=IMPACT,
        title=f"Impact · {round}",
        task_name="analytics.tasks.round_impact_measure",
        actor=actor,
    )


def round_impact_run(*, job_id: str) -> None:
    """Measure the round of a queued impact job and store the report.

    Idempotent: when a report was stored since the job was queued, a re-delivered task
    stores no second one.
    """
    with job_running(job_id=job_id) as ctx:
        if ctx is None:
            return
        round = CollectionRound.objects.select_related("campaign").get(
            pk=ctx.job.task_kwargs["round_id"]
        )
        done = RoundImpactReport.objects.filter(
            round=round, created_at__gte=ctx.job.created_at
        ).first()
        ctx.progress(0, 2, "Comparing the policies before and after the round", force=True)
        if done is None:
            try:
                done = round_impact_compute(round=round)
            except ImpactUnavailable as exc:
                raise JobFailed(str(exc), [{"message": str(exc)}]) from exc
        job_set_result(job=ctx.job, result={"report": done.pk}, message="Impact measured")
        ctx.progress(2, 2, force=True)


def round_recommendation_request(
    *, round: CollectionRound, budget: float | None = None, actor: Any = None
) -> tuple[Job, bool]:
    """Queue the next-round recommendation (stored with the round's latest impact report).

    Returns the job and whether it is new (an active one is returned instead of a second).
    """
    return _round_job_request(
        round=round,
        kind=RECOMMEND,
        title=f"Recommendation after {round}",
        task_name="analytics.tasks.round_recommendation_compute",
        actor=actor,
        budget=budget,
    )


def round_recommendation_run(*, job_id: str) -> None:
    """Compute a queued recommendation and store it in the round's latest impact report."""
    with job_running(job_id=job_id) as ctx:
        if ctx is None:
            return
        params = ctx.job.task_kwargs
        round = CollectionRound.objects.select_related("campaign").get(pk=params["round_id"])
        report = RoundImpactReport.objects.filter(round=round).first()
        if report is None:
            raise JobFailed("Measure the round's impact first.")
        ctx.progress(0, 2, "Refitting learning curves and spending the budget", force=True)
        latest = gap_report_latest(campaign=round.campaign)
        if latest is not None:
            ctx.extend_lease(60 + latest.cells.count() * LEASE_SECONDS_PER_CELL)
        try:
            recommendation = next_round_recommendation(
                campaign=round.campaign, budget=params.get("budget")
            )
        except ImpactUnavailable as exc:
            raise JobFailed(str(exc), [{"message": str(exc)}]) from exc
        recommendation["computed_at"] = timezone.now().isoformat()
        with transaction.atomic():
            # Merge into the summary as it is now (not as read above): nothing else is lost.
            report = RoundImpactReport.objects.select_for_update().get(pk=report.pk)
            report.summary = {**report.summary, "recommendation": recommendation}
            report.save(update_fields=["summary"])
        job_set_result(
            job=ctx.job,
            result={"report": report.pk},
            message=f"{recommendation['spent']:,.0f} episodes recommended",
        )
        ctx.progress(2, 2, force=True)


def round_impact_stale(*, round: CollectionRound, report: RoundImpactReport) -> str | None:
    """Say why a stored impact report may no longer hold (a few cheap queries), else None."""
    try:
        before, after = round_impact_policies(round=round)
    except ImpactUnavailable:
        return None
    if (before.pk, after.pk) != (report.before_policy_id, report.after_policy_id):
        return f"The policies to compare are now {before.name} and {after.name}."
    if EvaluationRun.objects.filter(
        policy_version__in=[before.pk, after.pk], created_at__gt=report.created_at
    ).exists():
        return "Evaluation results were imported since."
    return None


def recommendation_stale(*, round: CollectionRound, recommendation: dict[str, Any]) -> str | None:
    """Say why a stored recommendation may no longer hold (its gap report was superseded)."""
    latest = gap_report_latest(campaign=round.campaign)
    if latest is not None and latest.pk != recommendation.get("report"):
        return f"A newer gap report (#{latest.pk}) was computed since."
    return None
