"""Recommend the next round from the latest gap report, and plan a round from a
recommendation (part of :mod:`analytics.services.steering`).
"""

from __future__ import annotations

from typing import Any

from analytics.models import (
    GapReport,
)
from analytics.selectors import gap_report_latest
from analytics.services.gap_inputs import DimensionSpace
from analytics.services.steering.impact import ImpactUnavailable
from analytics.steering.transfer import TransferModel
from campaigns.models import Campaign, CollectionRound


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
    from analytics.learning import curves_from_quantiles
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
            "log_multiplier",
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
    history = report.summary.get("history") or {}
    kept: list[list[float]] = [r["log_multiplier"] for r in stored if r["log_multiplier"]]
    if pooled is not None and history and stored and len(kept) == len(stored):
        # The report read every cell on the campaign's history of outcomes: the quantiles it
        # stored give back the curves it scored.
        all_curves = curves_from_quantiles(
            pooled,
            float(history["tau"]),
            kept,
            effective,
            [r["trials"] for r in stored],
            [r["successes"] for r in stored],
        )
        curves_note: str | None = (
            f"Curves: every cell is read on the campaign's history of outcomes, every "
            f"policy's evaluations and logged production (the refit of "
            f"{history.get('cells', 0):,} cells, each with its own learning pace and its "
            "conditions), plus the production logged since the refit and any evaluation "
            "imported after it."
        )
    else:
        all_curves = gap_curves(
            effective, [r["trials"] for r in stored], [r["successes"] for r in stored], pooled
        )
        curves_note = None
    stored_transfer = report.summary.get("transfer")
    if stored_transfer:
        # An episode also trains the cells that share its conditions, so a cell without
        # production of its own can be worth capturing: every cell is a candidate (the
        # allocation never forms the cells x cells transfer matrix, so a report's tens of
        # thousands of cells are weighed whole).
        chosen = list(range(len(stored)))
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
        "notes": ([curves_note] if curves_note else [])
        + (shifts.notes if shifts is not None else [])
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
