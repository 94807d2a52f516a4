"""What a recommendation gives: episodes per cell with their figures and rationale, and the
whole plan as JSON (part of :mod:`analytics.steering.recommend`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analytics.learning import CurveSet
from analytics.steering.recommend.inputs import Exploration, FloatArray, IntArray
from analytics.steering.transfer import TransferModel


@dataclass(frozen=True)
class CellRecommendation:
    """Episodes for one cell, what they are expected to buy, and why."""

    id: str
    episodes: int
    cost: float
    expected_interventions_avoided_per_day: float
    failure_rate_now: float
    failure_rate_after: float
    interventions_per_day_now: float
    rationale: str


@dataclass(frozen=True, eq=False)
class Recommendation:
    """A recommended round: per-cell allocations in input order and the totals.

    ``interventions_per_day_before`` is ``sum cycles * p * f`` at the posterior-mean rates
    now; ``..._after`` the same after the allocation. ``ranking_amplitude`` is what ranked
    the cells (see :class:`Exploration`); hand ``planner_failure_rates`` with
    ``curves.f_inf`` and ``curves.b`` to the round planner to reproduce the valuation.
    """

    allocations: list[CellRecommendation]
    budget: float
    spent: float
    cycles_per_day: float
    interventions_per_day_before: float
    interventions_per_day_after: float
    exploration: Exploration
    seed: int
    curves: CurveSet
    episodes: IntArray
    ranking_amplitude: FloatArray
    planner_failure_rates: FloatArray
    notes: list[str] = field(default_factory=list)
    transfer: TransferModel | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form printed by ``manage.py recommend``."""
        curve = self.curves.pooled
        return {
            "allocations": [
                {
                    "id": a.id,
                    "episodes": a.episodes,
                    "cost": _round(a.cost),
                    "expected_interventions_avoided_per_day": _round(
                        a.expected_interventions_avoided_per_day
                    ),
                    "failure_rate_now": _round(a.failure_rate_now, 6),
                    "failure_rate_after": _round(a.failure_rate_after, 6),
                    "rationale": a.rationale,
                }
                for a in self.allocations
            ],
            "budget": _round(self.budget),
            "spent": _round(self.spent),
            "interventions_per_day_before": _round(self.interventions_per_day_before),
            "interventions_per_day_after": _round(self.interventions_per_day_after),
            "exploration": {
                "method": self.exploration.method,
                "level": self.exploration.level,
                "seed": self.seed,
                "how": self.exploration.describe(),
            },
            "curve": {
                "f_inf": _round(curve.f_inf, 6),
                "a": _round(curve.a, 6),
                "b": _round(curve.b, 4),
                "source": self.curves.fit.source,
                "cell_spread_tau": _round(self.curves.tau),
                "reason": self.curves.fit.reason,
            },
            "transfer": _transfer_dict(self.transfer),
            "notes": list(self.notes),
        }


def _transfer_dict(transfer: TransferModel | None) -> dict[str, Any] | None:
    if transfer is None:
        return None
    return {
        "strength_per_dimension": {
            name: {"strength": _round(s), "low": _round(low), "high": _round(high)}
            for name, s, low, high in zip(
                transfer.structure.dimensions,
                transfer.strength,
                transfer.low,
                transfer.high,
                strict=True,
            )
        },
        "evaluations": transfer.evaluations,
        "extent": transfer.extent,
        "how": transfer.describe(),
    }


def _round(x: float, places: int = 3) -> float:
    return float(round(x, places))
