"""Measure what a round did: its policies before and after, per cell and per site (part of
:mod:`analytics.services.steering`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db import transaction

from analytics.learning import EvaluationRows, fit_curve_set
from analytics.models import (
    PolicyVersion,
    RoundImpactReport,
)
from analytics.services.gap_inputs import DimensionSpace
from analytics.services.steering.curves import _outcomes, _space, policy_datasets, train_counts
from campaigns.models import CollectionRound


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
