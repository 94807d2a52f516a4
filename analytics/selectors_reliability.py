"""Reads for the reliability page and the change detector: a deployment's production history.

A fixed number of queries per deployment however many days, cycles or interventions: the
production logs and the failure records are grouped in SQL (by day, condition set, policy
and failure mode), and the numbers come from :mod:`analytics.reliability`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
from django.db import connection

from analytics.models import PolicyVersion
from analytics.reliability import (
    PER,
    DailySeries,
    ProductionHistory,
    RateRow,
    ShiftCheck,
    condition_rows,
    daily_series,
    detect_shifts,
    excess_rate,
    flag_window_counts,
    mode_rows,
    rate_rows,
)
from sites.models import ConditionValue, Deployment

HISTORY_DAYS = 56
"""The page shows (and the detector reads) at most this many days up to the last logged day."""


@dataclass(frozen=True)
class ProductionWindow:
    """A deployment's production history and what the page needs besides the arrays."""

    history: ProductionHistory
    # value key -> dimension name, for grouping the condition breakdown by dimension.
    value_dimension: dict[int, str]
    dimension_order: list[str]
    policy_rows: list[RateRow]


@dataclass(frozen=True)
class DeploymentReliabilityView:
    """Everything the reliability page shows for one deployment."""

    deployment: Deployment
    window: ProductionWindow | None
    series: DailySeries | None
    check: ShiftCheck | None
    modes: list[RateRow] = field(default_factory=list)
    conditions: list[tuple[str, list[RateRow]]] = field(default_factory=list)
    policies: list[RateRow] = field(default_factory=list)
    mode_daily: list[tuple[str, list[float]]] = field(default_factory=list)


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def production_window(
    *, deployment: Deployment, days: int = HISTORY_DAYS
) -> ProductionWindow | None:
    """Return the deployment's last ``days`` logged days as a :class:`ProductionHistory`.

    Interventions count on their site-local day (the day production logs use); those outside
    the logged days are left out (no cycles to divide them by). None when nothing is logged.
    Assumes ``deployment.site`` is loaded or cheap to load (one query otherwise). Four
    queries: logs, failure records, condition values, policy versions.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH last AS (
                SELECT MAX(day) AS day FROM sites_productionlog WHERE deployment_id = %(d)s
            )
            SELECT p.day, p.condition_set_id, cs.value_ids, p.policy, SUM(p.cycles)
            FROM sites_productionlog p
            JOIN sites_conditionset cs ON cs.id = p.condition_set_id, last
            WHERE p.deployment_id = %(d)s AND p.day > last.day - %(n)s
            GROUP BY 1, 2, 3, 4
            """,
            {"d": deployment.pk, "n": days},
        )
        logs = cursor.fetchall()
        if not logs:
            return None
        first, last = min(r[0] for r in logs), max(r[0] for r in logs)
        zone = _zone(deployment.site.timezone)
        cursor.execute(
            """
            SELECT (r.occurred_at AT TIME ZONE %(tz)s)::date, fm.code, fm.name,
                   r.condition_set_id, cs.value_ids, r.policy, COUNT(*)
            FROM sites_failurerecord r
            JOIN sites_failuremode fm ON fm.id = r.failure_mode_id
            LEFT JOIN sites_conditionset cs ON cs.id = r.condition_set_id
            WHERE r.deployment_id = %(d)s AND r.occurred_at >= %(start)s AND r.occurred_at < %(end)s
            GROUP BY 1, 2, 3, 4, 5, 6
            """,
            {
                "d": deployment.pk,
                "tz": zone.key,
                "start": datetime.combine(first, time(0), tzinfo=zone),
                "end": datetime.combine(last + timedelta(days=1), time(0), tzinfo=zone),
            },
        )
        records = [r for r in cursor.fetchall() if first <= r[0] <= last]
    day_list = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    day_index = {d: i for i, d in enumerate(day_list)}
    set_ids: dict[int | None, int] = {}
    set_values: list[tuple[int, ...]] = []
    for set_id, values in [(r[1], r[2]) for r in logs] + [(r[3], r[4]) for r in records]:
        if set_id not in set_ids:
            set_ids[set_id] = len(set_values)
            set_values.append(tuple(sorted(values or ())))
    modes = sorted({(r[1], r[2]) for r in records})
    mode_index = {code: i for i, (code, _name) in enumerate(modes)}
    set_cycles = np.zeros((len(set_values), len(day_list)))
    counts = np.zeros((len(modes), len(set_values), len(day_list)))
    policy_cycles: dict[str, float] = {}
    policy_events: dict[str, float] = {}
    for day, set_id, _values, policy, cycles in logs:
        set_cycles[set_ids[set_id], day_index[day]] += float(cycles)
        policy_cycles[policy] = policy_cycles.get(policy, 0.0) + float(cycles)
    for day, code, _name, set_id, _values, policy, n in records:
        counts[mode_index[code], set_ids[set_id], day_index[day]] += float(n)
        policy_events[policy] = policy_events.get(policy, 0.0) + float(n)
    value_ids = sorted({v for values in set_values for v in values})
    value_label: dict[int, str] = {}
    value_dimension: dict[int, str] = {}
    dimension_rank: dict[str, tuple[int, str]] = {}
    for value in ConditionValue.objects.filter(pk__in=value_ids).select_related("dimension"):
        value_label[value.pk] = f"{value.label} {value.dimension.name}".lower()
        value_dimension[value.pk] = value.dimension.name
        dimension_rank[value.dimension.name] = (value.dimension.order, value.dimension.name)
    dimension_order = sorted(dimension_rank, key=dimension_rank.__getitem__)
    slugs = sorted(policy_cycles.keys() | policy_events.keys())
    names = dict(
        PolicyVersion.objects.filter(
            organization_id=deployment.organization_id, slug__in=[s for s in slugs if s]
        ).values_list("slug", "name")
    )
    policy_rows = rate_rows(
        slugs,
        [names.get(s, s) if s else "policy not reported" for s in slugs],
        [policy_events.get(s, 0.0) for s in slugs],
        [policy_cycles.get(s, 0.0) for s in slugs],
    )
    history = ProductionHistory(
        days=day_list,
        set_cycles=set_cycles,
        counts=counts,
        set_values=set_values,
        mode_keys=[code for code, _ in modes],
        mode_labels=[name for _, name in modes],
        value_labels=value_label,
        place=deployment.site.name,
    )
    return ProductionWindow(history, value_dimension, dimension_order, policy_rows)


def deployment_reliability(
    *, deployment: Deployment, top_modes: int = 8
) -> DeploymentReliabilityView:
    """Return the reliability page of one deployment: series, breakdowns and shift flags.

    ``mode_daily`` holds the ``top_modes`` most frequent failure modes per day, the rest
    summed as "other modes".
    """
    window = production_window(deployment=deployment)
    if window is None:
        return DeploymentReliabilityView(deployment, None, None, None)
    history = window.history
    modes = mode_rows(history)
    per_mode = history.counts.sum(axis=1)
    index = {k: i for i, k in enumerate(history.mode_keys)}
    mode_daily = [(r.label, per_mode[index[r.key]].tolist()) for r in modes[:top_modes]]
    if len(modes) > top_modes:
        rest = [index[r.key] for r in modes[top_modes:]]
        mode_daily.append(("other modes", per_mode[rest].sum(axis=0).tolist()))
    by_dimension: dict[str, list[RateRow]] = {}
    for row in condition_rows(history):
        by_dimension.setdefault(window.value_dimension.get(int(row.key), "?"), []).append(row)
    return DeploymentReliabilityView(
        deployment=deployment,
        window=window,
        series=daily_series(history),
        check=detect_shifts(history),
        modes=modes,
        conditions=[(d, by_dimension[d]) for d in window.dimension_order if d in by_dimension],
        policies=window.policy_rows,
        mode_daily=mode_daily,
    )


def deployments_shift_checks(
    *, deployments: list[Deployment]
) -> dict[int, tuple[ProductionHistory, ShiftCheck]]:
    """Return each deployment's production history and shift check (those with production)."""
    out: dict[int, tuple[ProductionHistory, ShiftCheck]] = {}
    for deployment in deployments:
        window = production_window(deployment=deployment)
        if window is not None:
            out[deployment.pk] = (window.history, detect_shifts(window.history))
    return out


# ------------------------------------------------------------------ shifts feed the next round
#
# Production shifts feed the next round: flagged rises become extra failure rates per cell.
#
# The rule. For each deployment of the campaign, the change detector
# (:func:`analytics.reliability.detect_shifts`) flags rates that rose. For each flag and each
# cell of the recommendation (a combination of the gap report's condition values), the cell's
# *excess* is its recent rate of the flagged failures (since the flag's onset) minus its
# baseline rate, never below 0, counted only where at least two flagged failures fell in the
# cell (:func:`analytics.reliability.excess_rate`) — so the raise lands where the shift is
# concentrated, not spread over the deployment. A cell takes the largest excess over the
# deployment's flags (flags overlap: a failure mode's rise under dim light is also a rise of
# the mode and of dim light), and across deployments the excesses are averaged weighted by
# each deployment's recent cycles in the cell. The recommender adds that excess to the cell's
# current failure rate (:func:`analytics.steering.recommend.recommend`, ``extra_failure_rate``),
# so the cell is worth more episodes; the evaluations alone had not seen the rise.


@dataclass(frozen=True)
class ShiftAdjustment:
    """Extra failures per cycle per cell from flagged production shifts, and why."""

    extra: list[float]
    notes: list[str] = field(default_factory=list)
    cell_notes: dict[int, str] = field(default_factory=dict)
    flags: list[dict[str, Any]] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return any(x > 0 for x in self.extra)


def _containment(cells: list[frozenset[int]], sets: list[tuple[int, ...]]) -> np.ndarray:
    """``[c, s]``: 1.0 where set ``s`` holds every value of cell ``c`` (a cell with no values
    lies in every set), as one product of value tables: a gap report's thousands of cells
    against a deployment's condition sets, where a subset test per pair took seconds."""
    ids = {v: i for i, v in enumerate(sorted({v for cell in cells for v in cell}))}
    mine = np.zeros((len(cells), len(ids)))
    for c, cell in enumerate(cells):
        mine[c, [ids[v] for v in cell]] = 1.0
    theirs = np.zeros((len(sets), len(ids)))
    for k, values in enumerate(sets):
        theirs[k, [ids[v] for v in values if v in ids]] = 1.0
    shared = mine @ theirs.T
    return (shared > mine.sum(axis=1)[:, None] - 0.5).astype(np.float64)


def campaign_shift_adjustment(
    *, campaign: Any, cells: list[list[int]], labels: list[str]
) -> ShiftAdjustment:
    """Return the extra failure rate of each cell (given by its value ids) from shift flags.

    ``campaign`` is a :class:`campaigns.models.Campaign`; the rule is in the comment above. A fixed number of queries per deployment.
    """
    deployments = list(campaign.deployments.select_related("site"))
    checks = deployments_shift_checks(deployments=deployments)
    wanted = [frozenset(c) for c in cells]
    weighted = np.zeros(len(cells))
    weights = np.zeros(len(cells))
    notes: list[str] = []
    flags: list[dict[str, Any]] = []
    raised_by: dict[int, tuple[float, str]] = {}
    for history, check in checks.values():
        if check.recent_start is None:
            continue
        # membership[c, s]: condition set s lies in cell c (has all of the cell's values).
        membership = _containment(wanted, history.set_values)
        recent = history.days.index(check.recent_start)
        cycles_recent = membership @ history.set_cycles[:, recent:].sum(axis=1)
        best = np.zeros(len(cells))
        for flag in check.flags:
            x_r, e_r, x_b, e_b = flag_window_counts(history, flag)
            excess = excess_rate(
                membership @ x_r,
                membership @ e_r,
                membership @ x_b,
                membership @ e_b,
                fallback_rate=flag.baseline_rate / PER,
            )
            moved = [i for i in np.argsort(-excess) if excess[i] > 0]
            flags.append(
                {"sentence": flag.sentence, "cells": [labels[i] for i in moved], "kind": flag.kind}
            )
            if not moved:
                continue
            for i in moved:
                if excess[i] > raised_by.get(int(i), (0.0, ""))[0]:
                    raised_by[int(i)] = (float(excess[i]), flag.sentence)
            if len(notes) < 5:
                shown = ", ".join(
                    f"{labels[i]} +{PER * excess[i]:.1f} per 1,000 cycles" for i in moved[:3]
                )
                more = f" and {len(moved) - 3} more" if len(moved) > 3 else ""
                notes.append(
                    f"{flag.sentence} The recommendation adds the rise to the failure rate of "
                    f"the cells where it is concentrated ({shown}{more}), so they get more "
                    "episodes than the evaluations alone would give them."
                )
            best = np.maximum(best, excess)
        weighted += best * cycles_recent
        weights += cycles_recent
    with np.errstate(divide="ignore", invalid="ignore"):
        extra = np.where(weights > 0, weighted / np.maximum(weights, 1e-300), 0.0)
    cell_notes = {
        i: (
            f" Production shift: failure rate raised by {PER * float(extra[i]):.1f} per 1,000 "
            f"cycles ({sentence.rstrip('.')})."
        )
        for i, (_, sentence) in raised_by.items()
        if extra[i] > 0
    }
    return ShiftAdjustment(
        extra=[float(x) for x in extra], notes=notes, cell_notes=cell_notes, flags=flags
    )
