"""Turn a gap report into a proposed round plan (analytics decides, campaigns executes)."""

from __future__ import annotations

from datetime import date
from typing import Any

from analytics.models import GapCell, GapReport
from analytics.selectors import gap_report_latest
from campaigns.models import CollectionRound
from campaigns.planning.gain import decay_fraction
from campaigns.services.plan import PlanCell, PlanRequest, round_plan

MAX_CELLS = 5000


class NoGapReport(Exception):
    """The campaign has no finished gap report to plan from."""


def plan_cells_from_report(*, report: GapReport, limit: int = MAX_CELLS) -> list[PlanCell]:
    """Cells worth capturing in a report, as plain numbers for the planner.

    A cell is read at its effective training (its own plus what transfers to it), and what
    an episode there is worth in the cells it also trains becomes its ``spill``: the level
    whose first episode is worth what the report's value of capture puts elsewhere, so the
    planner values an episode as the gap page does.
    """
    cycles = float(report.summary.get("cycles_per_day", 0.0))
    b = float((report.summary.get("curve") or {}).get("b", 0.5))
    rows = (
        GapCell.objects.filter(report=report, priority__gt=0)
        .order_by("-priority")
        .values_list(
            "value_ids",
            "label",
            "target_share",
            "train_count",
            "effective_count",
            "failure_rate",
            "priority",
            "priority_elsewhere",
            "explanation",
        )[:limit]
    )
    cells = []
    for v, label, p, n, n_eff, f, prio, elsewhere, explanation in rows:
        n0 = n if n_eff is None else n_eff
        cells.append(
            PlanCell(
                value_ids=tuple(v),
                label=label,
                weight=cycles * p,
                n0=n0,
                failure_rate=f,
                priority=prio,
                rationale=explanation,
                spill=elsewhere / float(decay_fraction(b, n0, 1.0)) if elsewhere > 0 else 0.0,
            )
        )
    return cells


def round_plan_from_gap(
    *,
    round: CollectionRound,
    report: GapReport | None = None,
    actor: Any = None,
    budget_episodes: int | None = None,
    budget_hours: float | None = None,
    budget_money: float | None = None,
    start: date | None = None,
    days: int | None = None,
    min_batch: int = 20,
) -> CollectionRound:
    """Propose (or re-solve) a round's plan from the campaign's latest gap report.

    Raises NoGapReport when there is none; PlanInfeasible / RoundNotEditable from planning.
    """
    report = report or gap_report_latest(campaign=round.campaign)
    if report is None:
        raise NoGapReport(
            f"{round.campaign.name} has no finished gap report yet: compute one first."
        )
    curve = report.summary.get("curve", {})
    request = PlanRequest(
        cells=plan_cells_from_report(report=report),
        f_inf=float(curve.get("f_inf", 0.0)),
        b=float(curve.get("b", 0.5)),
        source=f"gap report #{report.pk} of {report.finished_at:%Y-%m-%d %H:%M}"
        if report.finished_at
        else f"gap report #{report.pk}",
        interventions_before=float(report.summary.get("interventions_per_day", 0.0)),
        budget_episodes=budget_episodes,
        budget_hours=budget_hours,
        budget_money=budget_money,
        start=start,
        days=days,
        min_batch=min_batch,
        extra={
            "gap_report": report.pk,
            "reliability_before": report.summary.get("reliability_now"),
            "cycles_per_day": report.summary.get("cycles_per_day"),
        },
    )
    return round_plan(round=round, request=request, actor=actor)


def round_plan_request(*, round: CollectionRound, actor: Any = None, **params: Any) -> Any:
    """Queue planning of a round in Celery (progress on its Job); returns the Job."""
    from accounts.services import job_create

    clean = {
        k: (v.isoformat() if isinstance(v, date) else v) for k, v in params.items() if v is not None
    }
    return job_create(
        organization=round.campaign.organization,
        kind="plan",
        title=f"Plan · {round}",
        task_name="analytics.tasks.round_plan_compute",
        task_kwargs={"round_id": round.pk, **clean},
        created_by=actor,
    )


def round_plan_run(*, job_id: str) -> None:
    """Run a queued planning job (idempotent: re-running re-solves the same round)."""
    from accounts.services import JobFailed, job_running, job_set_result
    from campaigns.planning.errors import PlanInfeasible
    from campaigns.services.plan import RoundNotEditable

    with job_running(job_id=job_id) as ctx:
        if ctx is None:
            return
        params = dict(ctx.job.task_kwargs)
        round = CollectionRound.objects.select_related("campaign").get(pk=params.pop("round_id"))
        if "start" in params:
            params["start"] = date.fromisoformat(params["start"])
        ctx.progress(0, 2, "Allocating episodes and scheduling visits", force=True)
        actor = ctx.job.created_by
        try:
            round = round_plan_from_gap(round=round, actor=actor, **params)
        except (PlanInfeasible, RoundNotEditable, NoGapReport) as exc:
            raise JobFailed(str(exc), [{"message": str(exc)}]) from exc
        summary = round.plan_summary
        job_set_result(
            job=ctx.job,
            result={
                "round": round.pk,
                "episodes": summary.get("episodes"),
                "tasks": summary.get("tasks"),
            },
            message=f"{summary.get('episodes', 0):,} episodes in {summary.get('tasks', 0)} tasks",
        )
        ctx.progress(2, 2, force=True)
