"""Reads that span models or feed pages and charts."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.db import connection
from django.db.models import Sum

from analytics.models import EvaluationResult, EvaluationRun
from sites.models import Deployment

PRODUCTION_WINDOW_DAYS = 28


def wilson_interval(
    successes: float, trials: float, z: float = 1.959963984540054
) -> tuple[float, float]:
    """Return the Wilson score interval for a binomial proportion (0..1 bounds)."""
    if trials <= 0:
        return (0.0, 1.0)
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True)
class Reliability:
    deployment_id: int
    success_rate: float | None
    low: float | None
    high: float | None
    interventions_per_day: float | None
    target: float
    target_interventions_per_day: float
    source: str  # "production (28 days)", "evaluation <label>", or "no data"
    observations: int

    @property
    def meets_target(self) -> bool:
        return self.success_rate is not None and self.success_rate >= self.target

    @property
    def gap_interventions_per_day(self) -> float | None:
        if self.interventions_per_day is None:
            return None
        return max(0.0, self.interventions_per_day - self.target_interventions_per_day)


def deployments_reliability(*, deployments: list[Deployment]) -> dict[int, Reliability]:
    """Reliability now per deployment: logged production when there is some, else its latest evaluation.

    Interventions per day are the observed failure rate times the deployment's cycles per day.
    A fixed number of queries whatever the number of deployments.
    """
    ids = [d.pk for d in deployments]
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH last AS (
                SELECT deployment_id, MAX(day) AS last_day FROM sites_productionlog
                WHERE deployment_id = ANY(%s) GROUP BY deployment_id
            )
            SELECT p.deployment_id, SUM(p.cycles), SUM(p.failures), COUNT(DISTINCT p.day)
            FROM sites_productionlog p JOIN last ON last.deployment_id = p.deployment_id
            WHERE p.day > last.last_day - %s
            GROUP BY p.deployment_id
            """,
            [ids, PRODUCTION_WINDOW_DAYS],
        )
        production = {row[0]: (int(row[1]), int(row[2]), int(row[3])) for row in cursor.fetchall()}
    latest_runs = {
        run.deployment_id: run
        for run in EvaluationRun.objects.filter(deployment_id__in=ids)
        .order_by("deployment_id", "-evaluated_on", "-id")
        .distinct("deployment_id")
    }
    eval_totals = {
        row["run_id"]: (row["trials"], row["successes"])
        for row in EvaluationResult.objects.filter(run__in=list(latest_runs.values()))
        .values("run_id")
        .annotate(trials=Sum("trials"), successes=Sum("successes"))
    }
    result = {}
    for dep in deployments:
        target_ipd = dep.cycles_per_day * (1 - dep.reliability_target)
        run = latest_runs.get(dep.pk)
        if dep.pk in production and production[dep.pk][0]:
            cycles, failures, days = production[dep.pk]
            successes, trials, source = cycles - failures, cycles, f"production, last {days} days"
        elif run is not None and eval_totals.get(run.pk, (0, 0))[0]:
            trials, successes = eval_totals[run.pk]
            source = f"evaluation: {run.label}"
        else:
            result[dep.pk] = Reliability(
                dep.pk, None, None, None, None, dep.reliability_target, target_ipd, "no data", 0
            )
            continue
        rate = successes / trials
        low, high = wilson_interval(successes, trials)
        result[dep.pk] = Reliability(
            dep.pk,
            rate,
            low,
            high,
            dep.cycles_per_day * (1 - rate),
            dep.reliability_target,
            target_ipd,
            source,
            trials,
        )
    return result
