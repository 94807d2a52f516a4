"""Steering in the database: refit learning curves, measure round impact, recommend the next round.

All aggregation is SQL GROUP BY; the numbers come from :mod:`analytics.steering`. Parts:
:mod:`.curves` (the refit and training counts), :mod:`.impact` (a round's impact),
:mod:`.recommendation` (the next round and its plan).
"""

from analytics.services.steering.curves import (
    curves_refit,
    curves_refit_for_run,
    policy_datasets,
    train_counts,
)
from analytics.services.steering.impact import (
    ImpactUnavailable,
    round_impact_compute,
    round_impact_policies,
)
from analytics.services.steering.recommendation import (
    next_round_recommendation,
    round_plan_from_recommendation,
)

__all__ = [
    "ImpactUnavailable",
    "curves_refit",
    "curves_refit_for_run",
    "next_round_recommendation",
    "policy_datasets",
    "round_impact_compute",
    "round_impact_policies",
    "round_plan_from_recommendation",
    "train_counts",
]
