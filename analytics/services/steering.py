"""Steering in the database: refit learning curves, measure round impact, recommend the next round.

All aggregation is SQL GROUP BY; the numbers come from :mod:`analytics.steering`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db import connection, transaction

from analytics.learning import EvaluationRows, fit_curve_set
from analytics.models import (
    CurveFitRecord,
    EvaluationRun,
    GapReport,
    PolicyVersion,
    RoundImpactReport,
)
from analytics.selectors import gap_report_latest
from analytics.services.gap_inputs import UNKNOWN, DimensionSpace
from analytics.steering.transfer import TransferModel, estimate_transfer
from campaigns.models import Campaign, CollectionRound

Key = tuple[int, ...]


def _space(campaign: Campaign) -> DimensionSpace:
    """The campaign's cells: the dimensions of its latest gap report (all, without one)."""
    latest = gap_report_latest(campaign=campaign)
    slugs = latest.dimension_slugs if latest and latest.dimension_slugs else None
    return DimensionSpace.build(organization_id=campaign.organization_id, slugs=slugs)


def _project(space: DimensionSpace, rows: list[tuple[int, float]]) -> dict[Key, float]:
    """Sum values per projected cell for (condition_set_id, value) rows; drops unrecorded cells."""
    if not rows:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, value_ids FROM sites_conditionset WHERE id = ANY(%s)",
            [list({r[0] for r in rows})],
        )
        keys = {pk: space.project(v) for pk, v in cursor.fetchall()}
    out: dict[Key, float] = {}
    for set_id, value in rows:
        key = keys[set_id]
        if UNKNOWN not in key:
            out[key] = out.get(key, 0.0) + float(value)
    return out


def train_counts(
    *, campaign: Campaign, space: DimensionSpace, dataset_ids: list[int] | None = None
) -> dict[Key, float]:
    """Transfer-weighted training episodes per cell (in the given datasets, else all countable).

    Reads the counts the database maintains per (dataset, embodiment, task, condition set),
    which hold only countable episodes (labeling.models.CoverageCount).
    """
    own = list(campaign.embodiments.values_list("pk", flat=True))
    sql = """
        SELECT condition_set_id,
               SUM(episodes * CASE WHEN embodiment_id = ANY(%s) THEN 1.0 ELSE %s END)
        FROM labeling_coveragecount
        WHERE organization_id = %s AND (task_id = %s OR task_id IS NULL)
    """
    params: list[Any] = [own, campaign.transfer_weight, campaign.organization_id, campaign.task_id]
    if dataset_ids is not None:
        sql += " AND dataset_id = ANY(%s)"
        params.append(dataset_ids)
    with connection.cursor() as cursor:
        cursor.execute(sql + " GROUP BY condition_set_id", params)
        return _project(space, cursor.fetchall())


def policy_datasets(policy: PolicyVersion) -> list[int]:
    """Datasets a policy was trained on, including its rounds' capture datasets."""
    ids = set(policy.trained_on_datasets.values_list("pk", flat=True))
    ids |= set(policy.trained_on_rounds.exclude(dataset=None).values_list("dataset_id", flat=True))
    return sorted(ids)


def _outcomes(
    policy: PolicyVersion, space: DimensionSpace, deployment_ids: list[int], by_site: bool = False
) -> dict[Any, list[float]]:
    """Trials and successes of a policy's evaluations at the campaign's deployments (and bench)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT r.condition_set_id, COALESCE(e.site_id, 0), SUM(r.trials), SUM(r.successes)
            FROM analytics_evaluationresult r JOIN analytics_evaluationrun e ON e.id = r.run_id
            WHERE e.policy_version_id = %s AND (e.deployment_id = ANY(%s) OR e.deployment_id IS NULL)
            GROUP BY 1, 2
            """,
            [policy.pk, deployment_ids],
        )
        rows = cursor.fetchall()
        cursor.execute(
            "SELECT id, value_ids FROM sites_conditionset WHERE id = ANY(%s)",
            [list({r[0] for r in rows})],
        )
        keys = {pk: space.project(v) for pk, v in cursor.fetchall()}
    out: dict[Any, list[float]] = {}
    for set_id, site_id, trials, successes in rows:
        key = keys[set_id]
        if UNKNOWN in key:
            continue
        k = (key, site_id) if by_site else key
        acc = out.setdefault(k, [0.0, 0.0])
        acc[0] += float(trials)
        acc[1] += float(successes)
    return out


REFIT_INTERVAL_CELLS = 2000
"""Up to this many cells the refit gives each transfer strength its interval (each interval
costs about forty estimates; beyond it the strengths are given without)."""


def curves_refit(*, campaign: Campaign) -> CurveFitRecord:
    """Refit the campaign's learning curves from its whole evaluation history and store them."""
    space = _space(campaign)
    deployment_ids = list(campaign.deployments.values_list("pk", flat=True))
    policies = list(
        PolicyVersion.objects.filter(
            organization_id=campaign.organization_id, embodiment__in=campaign.embodiments.all()
        ).prefetch_related("trained_on_datasets", "trained_on_rounds")
    )
    current = train_counts(campaign=campaign, space=space)
    keys: list[Key] = sorted(current)
    index = {k: i for i, k in enumerate(keys)}
    # One evaluation per evaluated policy, oldest first: the training counts of every cell
    # in the data it was trained on, and its outcomes where it was evaluated.
    evaluated: list[tuple[dict[Key, float], dict[Key, list[float]]]] = []
    for policy in policies:
        outcomes = _outcomes(policy, space, deployment_ids)
        if not outcomes:
            continue
        trained = train_counts(campaign=campaign, space=space, dataset_ids=policy_datasets(policy))
        for key in [*outcomes, *trained]:
            if key not in index:
                index[key] = len(keys)
                keys.append(key)
        evaluated.append((trained, outcomes))
    size = max(1, len(keys))
    counts = np.zeros((len(evaluated), size))
    trials = np.zeros((len(evaluated), size))
    successes = np.zeros((len(evaluated), size))
    for e, (trained, outcomes) in enumerate(evaluated):
        for key, n in trained.items():
            counts[e, index[key]] = n
        for key, (t, s) in outcomes.items():
            trials[e, index[key]], successes[e, index[key]] = t, s
    n_now = np.array([current.get(k, 0.0) for k in keys] or [0.0])
    # How much an episode in one cell trains the cells sharing its conditions, learnt from
    # the same history (none until two evaluations show it); the curves are read at the
    # effective training it gives, here and wherever this refit is used.
    transfer = (
        estimate_transfer(
            space.structure(keys),
            counts,
            trials,
            successes,
            intervals=len(keys) <= REFIT_INTERVAL_CELLS,
        )
        if keys
        else None
    )
    if transfer is not None and transfer.transfers:
        counts, n_now = transfer.effective(counts), transfer.effective(n_now)
    rows = EvaluationRows.of_evaluations(counts, trials, successes)
    curves = fit_curve_set(rows, n_now)
    pooled = curves.pooled
    return CurveFitRecord.objects.create(
        campaign=campaign,
        dimension_slugs=[d.slug for d in space.dimensions],
        f_inf=pooled.f_inf,
        a=pooled.a,
        b=pooled.b,
        tau=curves.tau,
        source=curves.fit.source,
        cells={
            ",".join(map(str, space.value_ids(k))): float(curves.amplitude[i])
            for i, k in enumerate(keys)
            if i < len(curves.amplitude)
        },
        evidence={
            "policies": len(policies),
            "rows": int(rows.cell.size),
            "trials": float(rows.trials.sum()),
            "failures": float((rows.trials - rows.successes).sum()),
            "reason": curves.fit.reason,
        },
        transfer=transfer.stored() if transfer is not None else {},
    )


def curves_refit_for_run(*, run_id: int) -> list[CurveFitRecord]:
    """Refit every campaign an evaluation run bears on (its deployment's, or its embodiment's)."""
    run = EvaluationRun.objects.select_related("policy_version").filter(pk=run_id).first()
    if run is None:
        return []
    campaigns = Campaign.objects.filter(
        organization_id=run.organization_id, embodiments=run.policy_version.embodiment_id
    )
    if run.deployment_id:
        campaigns = campaigns.filter(deployments=run.deployment_id)
    return [curves_refit(campaign=c) for c in campaigns.distinct()]


# ------------------------------------------------------------------ round impact


def _policies_around(round: CollectionRound) -> tuple[PolicyVersion | None, PolicyVersion | None]:
    embodiments = round.campaign.embodiments.all()
    evaluated = PolicyVersion.objects.filter(
        organization_id=round.campaign.organization_id,
        embodiment__in=embodiments,
        evaluations__isnull=False,
    ).distinct()
    after = (
        evaluated.filter(trained_on_rounds=round).order_by("-released_on", "-created_at").first()
    )
    before = (
        evaluated.exclude(trained_on_rounds=round)
        .exclude(
            trained_on_rounds__campaign=round.campaign, trained_on_rounds__number__gt=round.number
        )
        .order_by("-released_on", "-created_at")
        .first()
    )
    return before, after


class ImpactUnavailable(Exception):
    """The round cannot be measured yet (names what is missing)."""


def round_impact_policies(*, round: CollectionRound) -> tuple[PolicyVersion, PolicyVersion]:
    """Return the evaluated policies before and after a round (a few queries, no fitting).

    Raises ImpactUnavailable when no evaluated policy trained on the round exists yet, or
    no earlier one to compare it with.
    """
    before, after = _policies_around(round)
    if after is None:
        raise ImpactUnavailable(
            f"No evaluated policy version lists round {round.number} among its training data yet: "
            "import the evaluation of the policy trained on it."
        )
    if before is None:
        raise ImpactUnavailable("No earlier evaluated policy to compare with.")
    return before, after


@transaction.atomic
def round_impact_compute(*, round: CollectionRound) -> RoundImpactReport:
    """Compare the policies before and after a round per cell and per site, and store the result.

    Raises ImpactUnavailable when no evaluated policy trained on the round exists yet.
    """
    from analytics.steering.impact import (
        describe_did,
        group_impact,
        predicted_failure_rate,
        round_impact,
    )

    before, after = round_impact_policies(round=round)
    campaign = round.campaign
    space = _space(campaign)
    dep_ids = list(campaign.deployments.values_list("pk", flat=True))
    out_before = _outcomes(before, space, dep_ids)
    out_after = _outcomes(after, space, dep_ids)
    n_before = train_counts(campaign=campaign, space=space, dataset_ids=policy_datasets(before))
    added = (
        train_counts(campaign=campaign, space=space, dataset_ids=[round.dataset_id])
        if round.dataset_id
        else {}
    )
    keys = sorted(set(out_before) & set(out_after))
    if not keys:
        raise ImpactUnavailable("The two policies were not evaluated in any common condition cell.")
    # The curves as known before the round predict what its episodes should do.
    history_rows = EvaluationRows(
        cell=np.arange(len(keys), dtype=np.int64),
        train_count=np.array([n_before.get(k, 0.0) for k in keys]),
        trials=np.array([out_before[k][0] for k in keys]),
        successes=np.array([out_before[k][1] for k in keys]),
        n_cells=len(keys),
    )
    n0 = np.array([n_before.get(k, 0.0) for k in keys])
    k_added = np.array([added.get(k, 0.0) for k in keys])
    curves = fit_curve_set(history_rows, n0)
    predicted_f = predicted_failure_rate(curves, n0, k_added)
    result = round_impact(
        trials_before=[out_before[k][0] for k in keys],
        successes_before=[out_before[k][1] for k in keys],
        trials_after=[out_after[k][0] for k in keys],
        successes_after=[out_after[k][1] for k in keys],
        episodes_added=k_added,
        predicted_failure_after=predicted_f,
        label=f"Round {round.number}",
    )
    impact, did = result.cells, result.did
    labels = [space.label(k) for k in keys]
    groups: list[dict[str, Any]] = []
    for d, dim in enumerate(space.dimensions):
        members: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            members.setdefault(
                f"{space.values[d][k[d]].label.lower()} {dim.name.lower()}", []
            ).append(i)
        for g in group_impact(result, members):
            if g.episodes_added > 0:
                groups.append(
                    {
                        "dimension": dim.name,
                        "group": g.label,
                        "episodes": g.episodes_added,
                        "sentence": g.sentence,
                        "before": _f(g.success_before),
                        "after": _f(g.success_after),
                        "after_low": _f(g.after_low),
                        "after_high": _f(g.after_high),
                        "predicted": _f(g.predicted_success_after),
                    }
                )
    groups.sort(key=lambda g: -g["episodes"])
    sentences = [g["sentence"] for g in groups[:6]]
    cells = [
        {
            "label": labels[i],
            "values": space.slugs(k),
            "episodes_added": float(impact.episodes_added[i]),
            "before": _f(impact.success_before[i]),
            "before_low": _f(impact.before_low[i]),
            "before_high": _f(impact.before_high[i]),
            "after": _f(impact.success_after[i]),
            "after_low": _f(impact.after_low[i]),
            "after_high": _f(impact.after_high[i]),
            "change": _f(impact.change[i]),
            "change_low": _f(impact.change_low[i]),
            "change_high": _f(impact.change_high[i]),
            "predicted_after": _f(impact.predicted_success_after[i]),
            "trials_before": float(impact.trials_before[i]),
            "trials_after": float(impact.trials_after[i]),
            "treated": bool(impact.treated[i]),
        }
        for i, k in enumerate(keys)
    ]
    cells.sort(key=lambda c: -float(c["episodes_added"] or 0))  # type: ignore[arg-type]
    sites = _site_impact(before, after, space, dep_ids, round)
    summary = {
        "round": round.number,
        "before": before.name,
        "after": after.name,
        "episodes_added": float(k_added.sum()),
        "cells": len(keys),
        "treated_cells": int(impact.treated.sum()),
        "did": {
            "estimate": _f(did.estimate),
            "low": _f(did.low),
            "high": _f(did.high),
            "treated_before": _f(did.treated_before),
            "treated_after": _f(did.treated_after),
            "control_before": _f(did.control_before),
            "control_after": _f(did.control_after),
            "reason": did.reason,
            "sentence": describe_did(did, f"Round {round.number}"),
        },
        "sentences": sentences,
        "groups": groups[:20],
    }
    report = RoundImpactReport.objects.create(
        round=round,
        before_policy=before,
        after_policy=after,
        dimension_slugs=[d.slug for d in space.dimensions],
        summary=summary,
        cells=cells,
        sites=sites,
    )
    if round.status == CollectionRound.Status.LABELLING:
        from campaigns.services import round_transition

        round_transition(round=round, to_status=CollectionRound.Status.EVALUATED)
    return report


def _site_impact(
    before: PolicyVersion,
    after: PolicyVersion,
    space: DimensionSpace,
    dep_ids: list[int],
    round: CollectionRound,
) -> list[dict[str, Any]]:
    from analytics.intervals import wilson_interval
    from sites.models import Site

    b = _outcomes(before, space, dep_ids, by_site=True)
    a = _outcomes(after, space, dep_ids, by_site=True)
    totals: dict[int, list[float]] = {}
    for (_key, site), (t, s) in b.items():
        acc = totals.setdefault(site, [0, 0, 0, 0])
        acc[0] += t
        acc[1] += s
    for (_key, site), (t, s) in a.items():
        acc = totals.setdefault(site, [0, 0, 0, 0])
        acc[2] += t
        acc[3] += s
    names = dict(Site.objects.filter(pk__in=list(totals)).values_list("pk", "name"))
    out = []
    for site, (tb, sb, ta, sa) in sorted(totals.items()):
        if not tb or not ta:
            continue
        lo_b, hi_b = wilson_interval(sb, tb)
        lo_a, hi_a = wilson_interval(sa, ta)
        out.append(
            {
                "site": names.get(site, "bench"),
                "before": sb / tb,
                "before_low": float(lo_b),
                "before_high": float(hi_b),
                "after": sa / ta,
                "after_low": float(lo_a),
                "after_high": float(hi_a),
                "trials_before": tb,
                "trials_after": ta,
            }
        )
    return out


def _f(x: Any) -> float | None:
    value = float(x)
    return None if not np.isfinite(value) else value


# ------------------------------------------------------------------ recommendation and economics


RECOMMEND_TRANSFER_CELLS = 1000
"""With transfer, the recommendation weighs at most this many of a report's cells (its
highest-value ones): its allocation compares every candidate cell with every other."""


def next_round_recommendation(
    *,
    campaign: Campaign,
    budget: float | None = None,
    report: GapReport | None = None,
    seed: int = 0,
    production_shifts: bool = True,
) -> dict[str, Any]:
    """Recommend episodes per cell for the next round from the latest gap report, with economics.

    Without a ``budget`` it recommends for the episodes the campaign has left after its
    rounds (all but the newest one still being planned), and says so.

    With ``production_shifts`` the change detector's flags on the campaign's deployments
    (:func:`analytics.selectors_reliability.campaign_shift_adjustment`) feed in: a cell where
    a flagged rise is concentrated gets its failure-rate estimate raised by the rise (its
    recent rate of the flagged failures minus its baseline rate, where at least two fell in
    it; the largest over overlapping flags; averaged over deployments by recent cycles), so
    it is worth more episodes; each flag that moved a cell is a note, and the cell's
    rationale says by how much.

    Returns the recommendation (exploration: an upper-confidence bound on each cell's
    learning-curve amplitude, so thinly evaluated cells get the benefit of the doubt), the
    projection to the reliability target, and what the planner needs to turn it into a plan.
    """
    from analytics.curves import LearningCurve
    from analytics.gap import gap_curves
    from analytics.models import GapCell
    from analytics.selectors_reliability import campaign_shift_adjustment
    from analytics.steering.economics import project_campaign
    from analytics.steering.recommend import CellInput, recommend
    from campaigns.selectors import campaign_remaining

    budget_note = None
    if budget is None:
        # The round a recommendation is for is the newest one still being planned (its own
        # plan, if any, is replaced when it is planned again): it does not count as spent.
        editable = (CollectionRound.Status.DRAFT, CollectionRound.Status.PLANNED)
        nxt = campaign.rounds.filter(status__in=editable).order_by("-number").first()
        left = campaign_remaining(campaign=campaign, exclude=nxt)
        if left.episodes is None:
            raise ImpactUnavailable(
                f"{campaign.name} has no episode budget: give the recommendation a budget."
            )
        if left.episodes < 1:
            raise ImpactUnavailable(
                f"{campaign.name}'s episode budget is used up by its rounds: raise it or give "
                "the recommendation a budget."
            )
        budget = float(left.episodes)
        budget_note = (
            f"Budget: the campaign's remaining {left.episodes:,.0f} of "
            f"{campaign.budget_episodes:,} episodes after its other rounds."
        )
    report = report or gap_report_latest(campaign=campaign)
    if report is None:
        raise ImpactUnavailable(f"{campaign.name} has no gap report yet: compute one first.")
    stored = list(
        GapCell.objects.filter(report=report)
        .order_by("rank")
        .values(
            "rank",
            "label",
            "value_ids",
            "target_share",
            "train_count",
            "effective_count",
            "trials",
            "successes",
            "failure_rate",
        )
    )
    # One per-cell model: the cells' curves read back from the report's own cells, pooled
    # curve and transfer between cells, so the recommendation and the gap page agree about
    # every cell.
    curve = report.summary.get("curve") or {}
    pooled = (
        LearningCurve(f_inf=curve["f_inf"], a=curve["a"], b=curve["b"])
        if {"f_inf", "a", "b"} <= curve.keys()
        else None
    )
    effective = [
        r["train_count"] if r["effective_count"] is None else r["effective_count"] for r in stored
    ]
    all_curves = gap_curves(
        effective, [r["trials"] for r in stored], [r["successes"] for r in stored], pooled
    )
    stored_transfer = report.summary.get("transfer")
    if stored_transfer:
        # An episode also trains the cells that share its conditions, so a cell without
        # production of its own can be worth capturing: every cell is a candidate (the
        # report's highest-value ones when there are very many: the allocation weighs each
        # candidate against every other).
        chosen = list(range(min(len(stored), RECOMMEND_TRANSFER_CELLS)))
    else:
        chosen = [i for i, r in enumerate(stored) if r["target_share"] > 0]
    rows = [stored[i] for i in chosen]
    space = DimensionSpace.build(
        organization_id=campaign.organization_id, slugs=report.dimension_slugs or None
    )
    structure = space.structure([space.project(list(r["value_ids"])) for r in rows])
    transfer = TransferModel.from_stored(structure, stored_transfer) if stored_transfer else None
    total = sum(r["target_share"] for r in rows)
    cells = [
        CellInput(
            id=str(r["rank"]),
            target_share=r["target_share"] / total,
            train_count=r["train_count"],
            trials=int(r["trials"]),
            successes=int(r["successes"]),
            conditions={
                structure.dimensions[d]: structure.values[d][code]
                for d, code in enumerate(structure.codes[i].tolist())
                if code >= 0
            },
        )
        for i, r in enumerate(rows)
    ]
    cycles = float(report.summary.get("cycles_per_day", 0.0))
    shifts = (
        campaign_shift_adjustment(
            campaign=campaign,
            cells=[list(r["value_ids"]) for r in rows],
            labels=[r["label"] for r in rows],
        )
        if production_shifts
        else None
    )
    rec = recommend(
        cells,
        budget,
        cycles,
        seed=seed,
        curves=all_curves.subset(chosen),
        extra_failure_rate=shifts.extra if shifts is not None and shifts.any else None,
        transfer=transfer,
    )
    n_now = [float(effective[i]) for i in chosen]
    projection = project_campaign(
        rec.curves,
        train_count=n_now,
        target_share=[c.target_share for c in cells],
        cycles_per_day=cycles,
        reliability_target=campaign.reliability_goal,
        budget_per_round=budget,
        max_rounds=30,
        first_round=rec.episodes,
        transfer=transfer,
    )
    by_id = {str(r["rank"]): r for r in rows}
    shift_notes = shifts.cell_notes if shifts is not None else {}
    rationale = {a.id: a.rationale + shift_notes.get(i, "") for i, a in enumerate(rec.allocations)}
    allocations = [
        {
            "label": by_id[a.id]["label"],
            "value_ids": by_id[a.id]["value_ids"],
            "episodes": a.episodes,
            "avoided": a.expected_interventions_avoided_per_day,
            "rationale": rationale[a.id],
            "failure_now": a.failure_rate_now,
            "failure_after": a.failure_rate_after,
        }
        for a in sorted(rec.allocations, key=lambda a: -a.expected_interventions_avoided_per_day)
        if a.episodes > 0
    ]
    p = projection.campaign
    return {
        "report": report.pk,
        "budget": budget,
        "budget_note": budget_note,
        "spent": rec.spent,
        "exploration": rec.exploration.describe(),
        "before": rec.interventions_per_day_before,
        "after": rec.interventions_per_day_after,
        "allocations": allocations,
        "notes": (shifts.notes if shifts is not None else [])
        + ([f"Transfer: {transfer.describe()}."] if transfer is not None else []),
        "transfer": transfer.stored() if transfer is not None else None,
        "shift_flags": shifts.flags if shifts is not None else [],
        "projection": {
            "sentences": p.sentences(),
            "rounds_to_target": p.rounds_to_target,
            "episodes_to_target": p.episodes_to_target,
            "reachable": p.reachable,
            "interventions_per_day": p.interventions_per_day,
            "episodes": p.episodes,
            "demonstration_trials": p.demonstration.trials,
            "reason": p.reason,
        },
        "planner": {
            "f_inf": rec.curves.f_inf,
            "b": rec.curves.b,
            "cells": [
                {
                    "value_ids": by_id[c.id]["value_ids"],
                    "label": by_id[c.id]["label"],
                    "weight": cycles * c.target_share,
                    "n0": n_now[i],
                    "failure_rate": float(rec.planner_failure_rates[i]),
                    "priority": float(rec.ranking_amplitude[i]),
                    "episodes": int(rec.episodes[i]),
                    "rationale": rationale.get(c.id, ""),
                }
                for i, c in enumerate(cells)
                if rec.episodes[i] > 0
            ],
        },
    }


def round_plan_from_recommendation(
    *, round: CollectionRound, recommendation: dict[str, Any], actor: Any = None, **options: Any
) -> CollectionRound:
    """Plan a round from a recommendation: its per-cell counts become the round's targets.

    The recommender decided how many episodes each cell gets; the planner only places them
    at sites and in team calendars (within what the campaign has left) and says, per cell,
    what it could not place and why — it does not re-decide the counts with another
    allocator.
    """
    from campaigns.services.plan import PlanCell, PlanRequest, round_plan

    planner = recommendation["planner"]
    counts = {
        tuple(sorted(a["value_ids"])): int(a["episodes"])
        for a in recommendation.get("allocations", [])
    }
    request = PlanRequest(
        cells=[
            PlanCell(
                value_ids=tuple(c["value_ids"]),
                label=c["label"],
                weight=c["weight"],
                n0=c["n0"],
                failure_rate=c["failure_rate"],
                priority=c["priority"],
                rationale=c["rationale"],
                episodes=int(c.get("episodes", counts.get(tuple(sorted(c["value_ids"])), 0))),
            )
            for c in planner["cells"]
        ],
        f_inf=planner["f_inf"],
        b=planner["b"],
        source=f"recommendation from gap report #{recommendation['report']} (exploration: {recommendation['exploration']})",
        interventions_before=recommendation["before"],
        extra={
            "recommendation": {
                "before": recommendation["before"],
                "after": recommendation["after"],
                "episodes": sum(counts.values()),
            }
        },
        **options,
    )
    return round_plan(round=round, request=request, actor=actor)
