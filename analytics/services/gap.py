"""Gap reports: score a campaign's coverage against its deployments and store the result."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from django.db import connection, transaction
from django.utils import timezone

from accounts.beside import Beside
from accounts.services import JobContext, audit_record, job_create, job_running
from analytics.gap import Dimension, GapInputs, compute_gap, domain_classifier_auc, top_gaps
from analytics.models import GapCell, GapReport
from analytics.services.gap_inputs import (
    UNKNOWN,
    CampaignInputs,
    campaign_inputs,
    feature_samples,
)
from analytics.steering.transfer import TransferModel
from campaigns.models import Campaign
from labeling.importers import pgcopy

DEFAULT_PARAMS: dict[str, Any] = {
    "uncovered_below": 1.0,
    "thin_below": 50.0,
    "top_k": 12,
    "blind_spot_min_share": 0.001,
}


class GapReportFailed(Exception):
    """The campaign cannot be scored (names what is missing)."""


def gap_report_request(
    *,
    campaign: Campaign,
    dimensions: list[str] | None = None,
    actor: Any = None,
    params: dict[str, Any] | None = None,
) -> GapReport:
    """Create a pending report and queue its computation in Celery."""
    with transaction.atomic():
        job = job_create(
            organization=campaign.organization,
            kind="gap_report",
            title=f"Gap report · {campaign.name}",
            task_name="analytics.tasks.gap_report_compute",
            created_by=actor,
            enqueue=False,
        )
        report = GapReport.objects.create(
            organization_id=campaign.organization_id,
            campaign=campaign,
            job=job,
            dimension_slugs=dimensions or [],
            params={**DEFAULT_PARAMS, **(params or {})},
        )
        from accounts.services import job_enqueue

        job_enqueue(job=job)
        audit_record(
            organization=campaign.organization_id,
            actor=actor,
            verb="gap_report.request",
            obj=report,
        )
    return report


def gap_report_compute(*, job_id: str) -> None:
    """Compute the report attached to a job (idempotent: a finished report is left alone)."""
    with job_running(job_id=job_id) as ctx:
        if ctx is None:
            return
        report = GapReport.objects.select_related("campaign").get(job_id=job_id)
        if report.status == GapReport.Status.DONE:
            return
        GapReport.objects.filter(pk=report.pk).update(status=GapReport.Status.RUNNING)
        try:
            gap_report_build(report=report, ctx=ctx)
        except Exception:
            GapReport.objects.filter(pk=report.pk).update(status=GapReport.Status.FAILED)
            raise


def gap_report_build(*, report: GapReport, ctx: JobContext | None = None) -> GapReport:
    """Score the report's campaign and store summary and cells (replacing any earlier cells)."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    campaign = report.campaign
    params = {**DEFAULT_PARAMS, **(report.params or {})}
    # The domain classifier (its samples and its CPU work) runs beside the coverage
    # aggregation, so the report costs little more than the GROUP BY.
    shift_job = Beside(lambda: _domain_shift(feature_samples(campaign=campaign))).start()
    try:
        inputs = campaign_inputs(campaign=campaign, slugs=report.dimension_slugs or None)
    except ValueError as exc:
        shift_job.wait()
        raise GapReportFailed(str(exc)) from exc
    timings["inputs"] = time.perf_counter() - t0
    if ctx:
        ctx.progress(1, 4, "Training coverage and targets aggregated", force=True)

    t1 = time.perf_counter()
    labels = [
        inputs.space.label(k)
        + (f" at {inputs.top_deployment[i]}" if inputs.top_deployment[i] else "")
        for i, k in enumerate(inputs.keys)
    ]
    dims = _dimensions(inputs)
    # Use the latest learning-curve refit over the same dimensions when there is one
    # (refitted after every evaluation import); else the engine fits from these cells.
    from analytics.curves import LearningCurve
    from analytics.selectors import latest_curves

    refit = latest_curves(
        campaign=campaign, dimension_slugs=[d.slug for d in inputs.space.dimensions]
    )
    curve = LearningCurve(f_inf=refit.f_inf, a=refit.a, b=refit.b) if refit is not None else None
    # And the transfer between cells that refit learnt (its curve was fitted at the
    # effective training it gives): the report's cells are read at the same.
    transfer = (
        TransferModel.from_stored(inputs.space.structure(inputs.keys), refit.transfer)
        if refit is not None and refit.transfer
        else None
    )
    # And every cell as that refit read it on the campaign's whole evaluation history (its
    # own exponent, its conditions), updated by what the refit does not hold: production
    # since the policy's release, an evaluation imported after the refit.
    from analytics.services.steering.curves import refit_history

    history = (
        refit_history(
            campaign=campaign,
            space=inputs.space,
            keys=inputs.keys,
            refit=refit,
            policy_id=inputs.evidence.get("policy_id"),
            trials=np.asarray(inputs.trials, dtype=np.float64),
            successes=np.asarray(inputs.successes, dtype=np.float64),
        )
        if refit is not None
        else None
    )
    result = compute_gap(
        GapInputs(
            labels=labels,
            target_share=inputs.target_share,
            train_count=inputs.train_count,
            trials=inputs.trials,
            successes=inputs.successes,
            cycles_per_day=inputs.cycles_per_day,
            reliability_target=inputs.reliability_target,
            uncovered_below=params["uncovered_below"],
            thin_below=params["thin_below"],
            dimensions=dims,
            curve=curve,
            transfer=transfer if transfer is not None and transfer.transfers else None,
            history=history,
        )
    )
    top = top_gaps(result, params["top_k"], blind_spot_min_share=params["blind_spot_min_share"])
    timings["score"] = time.perf_counter() - t1
    if ctx:
        ctx.progress(2, 4, "Cells scored", force=True)

    t2 = time.perf_counter()
    shift = shift_job.result()
    timings["domain_shift_wait"] = time.perf_counter() - t2
    timings["domain_shift"] = shift_job.seconds
    if ctx:
        ctx.progress(3, 4, "Domain shift measured", force=True)

    t3 = time.perf_counter()
    summary = _summary(inputs, result, top, shift, refit.pk if refit is not None else None)
    summary["transfer"] = transfer.stored() if transfer is not None else None
    summary["history"] = (
        None
        if history is None
        else {
            "tau": history.tau,
            "cells": int(np.isfinite(history.quantiles).all(axis=1).sum()),
            "held_trials": float(history.trials.sum()),
        }
    )
    _store(report=report, inputs=inputs, result=result, labels=labels, summary=summary)
    timings["store"] = time.perf_counter() - t3
    timings["total"] = time.perf_counter() - t0
    GapReport.objects.filter(pk=report.pk).update(
        params={**params, "timings_s": {k: round(v, 4) for k, v in timings.items()}}
    )
    report.refresh_from_db()
    return report


def _domain_shift(samples: Any) -> Any:
    if samples is None:
        return None
    names, x_train, x_target = samples
    # One BLAS/OpenMP thread: workers run several jobs per machine, and oversubscribed
    # threads made this ten times slower under load. threadpoolctl limits only libraries
    # already loaded: load scikit-learn's OpenMP first.
    import sklearn.ensemble  # noqa: F401
    from threadpoolctl import threadpool_limits

    # Standardised logistic regression: it finds shifts in level (light, camera offset),
    # which is what a capture plan can act on, at a tenth of boosting's cost, so the report
    # stays close to the cost of its GROUP BY.
    with threadpool_limits(1):
        return domain_classifier_auc(
            x_train, x_target, names, seed=0, folds=5, max_rows=2000, model="logistic"
        )


def _dimensions(inputs: CampaignInputs) -> list[Dimension]:
    keys = np.array(inputs.keys, dtype=np.int64).reshape(
        len(inputs.keys), len(inputs.space.dimensions)
    )
    dims = []
    for i, dim in enumerate(inputs.space.dimensions):
        values = [v.label for v in inputs.space.values[i]]
        codes = keys[:, i].copy()
        if (codes == UNKNOWN).any():
            values = [*values, "unrecorded"]
            codes[codes == UNKNOWN] = len(values) - 1
        dims.append(Dimension(name=dim.name, values=tuple(values), codes=codes))
    return dims


def _summary(
    inputs: CampaignInputs, result: Any, top: list[Any], shift: Any, refit_id: int | None
) -> dict[str, Any]:
    s = result.summary
    fit = result.fit
    bars = []
    for dim in result.inputs.dimensions:
        p = np.bincount(dim.codes, weights=result.cells.target_share, minlength=len(dim.values))
        q = np.bincount(dim.codes, weights=result.cells.train_share, minlength=len(dim.values))
        bars.append(
            {
                "dimension": dim.name,
                "values": list(dim.values),
                "target": p.round(6).tolist(),
                "training": q.round(6).tolist(),
                "psi": round(float(s.psi.get(dim.name, 0.0)), 6),
            }
        )
    return {
        "n_cells": int(s.n_cells),
        "cycles_per_day": inputs.cycles_per_day,
        "training_episodes": inputs.train_total_raw,
        "training_weighted": float(s.total_train),
        "uncovered_mass": float(s.uncovered_mass),
        "thin_mass": float(s.thin_mass),
        "covered_mass": float(s.covered_mass),
        "n_uncovered": int(s.n_uncovered),
        "n_thin": int(s.n_thin),
        "js_divergence": float(s.js_divergence),
        "psi": {k: float(v) for k, v in s.psi.items()},
        "reliability_now": float(s.reliability_now),
        "reliability_interval": [float(x) for x in s.reliability_interval],
        "reliability_target": float(s.reliability_target),
        "interventions_per_day": float(s.interventions_per_day),
        "interventions_interval": [float(x) for x in s.interventions_interval],
        "interventions_at_target": float(s.interventions_at_target),
        "excess_interventions_per_day": float(s.excess_interventions_per_day),
        "meets_target": bool(s.meets_target),
        "curve": {
            "f_inf": fit.curve.f_inf,
            "a": fit.curve.a,
            "b": fit.curve.b,
            "refit": refit_id,
            "source": fit.source,
            "n_cells": fit.n_cells,
            "n_trials": fit.n_trials,
            "reason": fit.reason,
        },
        "evidence": inputs.evidence,
        "top_gaps": [
            {
                "index": g.index,
                "label": g.label,
                "sentence": g.sentence,
                "priority": float(g.priority),
                "interventions_per_day": float(g.interventions_per_day),
                "target_share": float(g.target_share),
                "train_count": float(g.train_count),
                "blind_spot": bool(g.blind_spot),
            }
            for g in top
        ],
        "bars": bars,
        "domain_shift": None
        if shift is None
        else {
            "auc": shift.auc,
            "auc_sd": shift.auc_sd,
            "n_train": shift.n_train,
            "n_target": shift.n_target,
            "model": shift.model,
            "features": [list(f) for f in shift.features],
            "reason": shift.reason,
        },
        "sources": [
            {
                "deployment": t.deployment.name,
                "deployment_id": t.deployment.pk,
                "source": t.source,
                "observations": t.observations,
                "cells": len(t.shares),
                "notes": t.notes,
            }
            for t in inputs.targets
        ],
    }


def _store(
    *,
    report: GapReport,
    inputs: CampaignInputs,
    result: Any,
    labels: list[str],
    summary: dict[str, Any],
) -> None:
    """Write cells with COPY and the summary, in one transaction."""
    from analytics.gap import explain_cell

    cells = result.cells
    codes = np.array(inputs.keys, dtype=np.int64).reshape(len(labels), -1)
    order = np.lexsort((np.arange(len(labels)), -cells.interventions, -cells.priority))
    order = order[(codes[order] != UNKNOWN).any(axis=1)]  # a cell with no values is not stored
    ranks = np.arange(1, len(order) + 1)
    top_indices = {g["index"] for g in summary["top_gaps"]}
    explained = {
        int(i): explain_cell(result, int(i))
        for rank, i in zip(ranks.tolist(), order.tolist(), strict=True)
        if i in top_indices or rank <= 100
    }
    # COPY in text format, every column formatted by pyarrow at once: per-cell Python (or
    # psycopg's per-row adaptation of arrays and JSON) cost more than the rest of the report.
    space = inputs.space

    def number(values: Any) -> pa.Array:
        return pc.cast(pa.array(np.asarray(values)[order]), pa.string())

    columns = [
        space.value_id_literals(codes[order]),
        _copy_escape(pc.utf8_slice_codeunits(pa.array(labels).take(order), 0, 500)),
        pc.cast(pa.array(ranks), pa.string()),
        number(cells.target_share),
        number(cells.train_count),
        number(cells.train_share),
        number(cells.coverage.astype(np.int64)),
        number(result.inputs.trials.astype(np.int64)),
        number(result.inputs.successes.astype(np.int64)),
        number(cells.failure_rate),
        number(cells.failure_low),
        number(cells.failure_high),
        number(cells.interventions),
        number(cells.priority),
        number(cells.priority_elsewhere),
        number(cells.effective_count),
        _copy_escape(pa.array([explained.get(i, "") for i in order.tolist()], pa.string())),
        _copy_escape(space.slugs_json_texts(codes[order])),
        _array_literals(cells.log_multiplier, order),
    ]
    rows = pc.binary_join_element_wise(str(report.pk), *columns, "\t")
    lines = pc.binary_join_element_wise(rows, "\n", "")
    rank = len(order)
    with transaction.atomic():
        with connection.cursor() as cursor:
            # A report is derived data: its commit need not wait for the WAL flush. The job
            # is marked done afterwards with a synchronous commit, which flushes this too;
            # a crash in between leaves the job running, and the reaper re-runs it.
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
        # The report row first: its lock keeps the report from being deleted under the
        # cells (they have no foreign-key constraint), and a report deleted since it began
        # gets no cells.
        finished = GapReport.objects.filter(pk=report.pk).update(
            status=GapReport.Status.DONE,
            summary=summary,
            sources=summary["sources"],
            n_cells=rank,
            finished_at=timezone.now(),
            dimension_slugs=[d.slug for d in inputs.space.dimensions],
        )
        if not finished:
            raise GapReportFailed("the report was deleted while it was computed")
        GapCell.objects.filter(report=report).delete()
        with (
            connection.cursor() as cursor,
            cursor.copy(
                "COPY analytics_gapcell (report_id, value_ids, label, rank, target_share, train_count,"
                " train_share, coverage, trials, successes, failure_rate, failure_low, failure_high,"
                " interventions_per_day, priority, priority_elsewhere, effective_count, explanation,"
                ' "values", log_multiplier) FROM STDIN'
            ) as copy,
        ):
            if rank:
                copy.write(pgcopy.concatenated(lines))


def _array_literals(values: Any, order: Any) -> pa.Array:
    """Rows of floats as COPY text of PostgreSQL arrays (``{1.5,2}``); ``\\N`` (null) for
    every row without them."""
    if values is None:
        return pa.array(["\\N"] * len(order), pa.string())
    rows = np.asarray(values)[order]
    parts = [pc.cast(pa.array(rows[:, j]), pa.string()) for j in range(rows.shape[1])]
    return pc.binary_join_element_wise("{", pc.binary_join_element_wise(*parts, ","), "}", "")


def _copy_escape(values: pa.Array) -> pa.Array:
    """Escape text for COPY's text format (backslash, tab, newline, carriage return)."""
    for raw, escaped in (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r")):
        values = pc.replace_substring(values, raw, escaped)
    return values
