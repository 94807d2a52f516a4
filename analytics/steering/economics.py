"""Reliability economics: interventions per day now and ahead, and the way to the target.

:func:`project_campaign` plays successive rounds of a fixed budget forward on *expected*
values: each round is the recommender's allocation on the posterior-mean curves (no
exploration bonus, no sampling noise), training counts grow, and the expected failure
rate follows each cell's curve. It reports, for the campaign and for each deployment (its
own target shares, cycles and target, on the same allocation path), interventions per day
now and after the next round, and the rounds and episodes until the target is reached —
interpolated inside the round where it is crossed — or why it is not reached.

The demonstration figures answer "how would we know": the evaluation trials that show the
target at 95% confidence (zero failures in 2,995 trials for 99.9%, more if a failure or two
is allowed, :func:`analytics.intervals.trials_to_demonstrate`) and the chance that
a policy at its expected reliability after the next round passes such a run (a policy
exactly at the target passes only 5% of the time: demonstrating needs headroom).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy import stats

from analytics.intervals import trials_to_demonstrate
from analytics.learning import CurveSet
from analytics.steering.text import format_count, format_rate
from analytics.steering.transfer import TransferModel
from analytics.steering.waterfill import allocate_with_transfer, waterfill

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class DeploymentProfile:
    """A deployment's share of production cycles per cell, its cycles and its target."""

    target_share: FloatArray
    cycles_per_day: float
    reliability_target: float


@dataclass(frozen=True)
class Demonstration:
    """Evaluation trials that show a target, and the chance a policy passes them.

    ``trials[k]`` is the fewest trials that show ``target`` at ``confidence`` with at most
    ``k`` failures; ``pass_probability[k]`` the chance that a policy of reliability
    ``assumed_reliability`` has at most ``k`` failures in that many trials.
    """

    target: float
    confidence: float
    assumed_reliability: float
    trials: dict[int, int]
    pass_probability: dict[int, float]


@dataclass(frozen=True)
class Projection:
    """The way to the target for one scope (the campaign, or one deployment).

    ``interventions_per_day[r]`` is after round ``r`` (0 = now) on the projected path,
    ``episodes[r]`` and ``spend[r]`` cumulative. ``episodes_to_target`` is interpolated
    inside the crossing round; ``None`` when not reached within the projected rounds, in
    which case ``reason`` says why (``reachable`` is False when even unlimited data could
    not: the curves' floor alone is above the target).
    """

    name: str
    cycles_per_day: float
    reliability_target: float
    reliability_now: float
    reliability_after_next: float
    interventions_per_day_now: float
    interventions_per_day_after_next: float
    interventions_per_day_at_target: float
    floor_reliability: float
    reachable: bool
    rounds_to_target: int | None
    episodes_to_target: float | None
    spend_to_target: float | None
    interventions_per_day: list[float]
    episodes: list[float]
    spend: list[float]
    demonstration: Demonstration
    reason: str = ""

    def sentences(self) -> list[str]:
        """Return a manager's summary of this projection in plain sentences."""
        places = 2 if self.reliability_target >= 0.99 else 1
        now = (
            f"{self.name}: {_per_day(self.interventions_per_day_now)} interventions a day now "
            f"({format_rate(self.reliability_now, places)} success), "
            f"{_per_day(self.interventions_per_day_after_next)} expected after the next round; "
            f"the target of {format_rate(self.reliability_target, places)} allows "
            f"{_per_day(self.interventions_per_day_at_target)}."
        )
        if self.rounds_to_target == 0:
            reach = "The target is already met on expected values."
        elif self.episodes_to_target is not None:
            rounds = self.rounds_to_target
            reach = (
                f"At this budget the target is reached in about {rounds} "
                f"round{'s' if rounds != 1 else ''} "
                f"({format_count(self.episodes_to_target)} more episodes)."
            )
        else:
            reach = self.reason
        demo = self.demonstration
        zero = demo.trials[0]
        show = (
            f"Showing {format_rate(demo.target, places)} with {demo.confidence:.0%} confidence "
            f"takes {format_count(zero)} trials without a failure "
            f"({format_count(demo.trials.get(1, zero))} if one failure is allowed)."
        )
        return [now, reach, show]


@dataclass(frozen=True)
class CampaignProjection:
    """The campaign's projection, each deployment's on the same path, and that path.

    ``allocations[r]`` are the episodes per cell in round ``r + 1``.
    """

    campaign: Projection
    deployments: dict[str, Projection]
    allocations: list[IntArray] = field(repr=False)


def _per_day(x: float) -> str:
    if x >= 9.5:
        return f"{x:,.0f}"
    if x >= 0.095:
        return f"{x:.1f}"
    return f"{x:.2f}"


def demonstration(
    target: float, assumed_reliability: float, confidence: float = 0.95, max_failures: int = 2
) -> Demonstration:
    """Return the trials that show ``target`` with 0..``max_failures`` failures, and the
    chance a policy at ``assumed_reliability`` passes each. Raises ValueError on bad input."""
    trials = {
        k: trials_to_demonstrate(target, confidence, allowed_failures=k)
        for k in range(max_failures + 1)
    }
    q = min(max(1.0 - assumed_reliability, 0.0), 1.0)
    passing = {k: float(stats.binom.cdf(k, n, q)) for k, n in trials.items()}
    return Demonstration(
        target=target,
        confidence=confidence,
        assumed_reliability=assumed_reliability,
        trials=trials,
        pass_probability=passing,
    )


def _check_share(share: npt.ArrayLike, size: int, name: str) -> FloatArray:
    arr = np.asarray(share, dtype=np.float64)
    if arr.shape != (size,):
        raise ValueError(f"{name}: target_share must have {size} entries, got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or arr.sum() <= 0:
        raise ValueError(f"{name}: target_share must be finite, >= 0 and not all zero")
    return arr / arr.sum()


PROJECTION_GREEDY_STEPS = 16
"""With transfer, a projected round is the better of the waterfill as if cells were
independent and the greedy after half of it
(:func:`~analytics.steering.waterfill.allocate_with_transfer` without the greedy from
nothing, whose blocks are too coarse on a report's thousands of cells: 15% less avoided than
the waterfill in the demo's second round), that greedy buying blocks of about a 16th of what
is left (the recommended round's, a 64th: :data:`~analytics.steering.waterfill.GREEDY_STEPS`).
A forecast of up to 30 rounds needs the curve's course, not each last episode: on the demo,
blocks of a 64th lower the projected interventions per day by 0.6% in the round after next,
end within 0.01% of them at round 30, and double the recommendation job's time (37 s against 19 s); the
waterfill alone raises them by 0.2% by round 30."""


def project_campaign(
    curves: CurveSet,
    *,
    train_count: npt.ArrayLike,
    target_share: npt.ArrayLike,
    cycles_per_day: float,
    reliability_target: float,
    budget_per_round: float,
    cost_per_episode: npt.ArrayLike | None = None,
    max_rounds: int = 50,
    first_round: npt.ArrayLike | None = None,
    deployments: Mapping[str, DeploymentProfile] | None = None,
    confidence: float = 0.95,
    transfer: TransferModel | None = None,
) -> CampaignProjection:
    """Project rounds of ``budget_per_round`` forward on expected values until the target.

    ``first_round`` is the next round's allocation when already decided (else the
    recommender's); later rounds are the recommender's on posterior-mean curves for the
    campaign's target shares. Stops when the campaign and every deployment reach their
    targets, or after ``max_rounds``. With ``transfer`` the counts are effective ones
    (``train_count`` too), a round's episodes also train the cells sharing their
    conditions, and later rounds are allocated knowing it. Raises ValueError on
    mismatched shapes or values out of range.
    """
    size = curves.n_cells
    n0 = np.asarray(train_count, dtype=np.float64)
    if n0.shape != (size,) or not np.all(np.isfinite(n0)) or np.any(n0 < 0):
        raise ValueError(f"train_count must be {size} finite counts >= 0")
    p = _check_share(target_share, size, "campaign")
    cost = np.ones(size) if cost_per_episode is None else np.asarray(cost_per_episode, float)
    if cost.shape != (size,) or not np.all(cost > 0):
        raise ValueError(f"cost_per_episode must be {size} values > 0")
    if not 0 < reliability_target < 1:
        raise ValueError(f"reliability_target must be in (0, 1), got {reliability_target}")
    if not (budget_per_round >= 0 and math.isfinite(budget_per_round)):
        raise ValueError(f"budget_per_round must be finite and >= 0, got {budget_per_round}")
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
    scopes: dict[str, DeploymentProfile] = {
        "Campaign": DeploymentProfile(p, float(cycles_per_day), float(reliability_target))
    }
    for name, profile in (deployments or {}).items():
        scopes[name] = DeploymentProfile(
            _check_share(profile.target_share, size, name),
            float(profile.cycles_per_day),
            float(profile.reliability_target),
        )

    def mass(share: FloatArray, n: FloatArray) -> float:
        return float(np.dot(share, curves.rate(n)))

    path = [n0.copy()]
    allocations: list[IntArray] = []
    added: list[FloatArray] = []  # what each round adds to the effective counts
    live_transfer = transfer if transfer is not None and transfer.transfers else None
    amplitude = float(cycles_per_day) * p * curves.amplitude
    n = n0.copy()
    for r in range(max_rounds):
        if r > 0 and all(
            mass(s.target_share, n) <= 1.0 - s.reliability_target for s in scopes.values()
        ):
            break
        if r == 0 and first_round is not None:
            k = np.asarray(first_round, dtype=np.int64)
            if k.shape != (size,) or np.any(k < 0):
                raise ValueError(f"first_round must be {size} whole episode counts >= 0")
        elif live_transfer is None:
            k = waterfill(amplitude, n, cost, curves.b, budget_per_round)
        else:
            k = allocate_with_transfer(
                amplitude,
                n,
                cost,
                curves.b,
                budget_per_round,
                live_transfer,
                steps=PROJECTION_GREEDY_STEPS,
                from_nothing=False,
            )
        allocations.append(k)
        own = k.astype(np.float64)
        added.append(own + live_transfer.spread(own) if live_transfer is not None else own)
        n = n + added[-1]
        path.append(n.copy())
        if not k.any():
            break  # nothing left worth buying: more rounds change nothing

    projections = {
        name: _project_scope(name, scope, curves, path, allocations, added, cost, confidence)
        for name, scope in scopes.items()
    }
    campaign = projections.pop("Campaign")
    return CampaignProjection(campaign=campaign, deployments=projections, allocations=allocations)


def _project_scope(
    name: str,
    scope: DeploymentProfile,
    curves: CurveSet,
    path: list[FloatArray],
    allocations: list[IntArray],
    added: list[FloatArray],
    cost: FloatArray,
    confidence: float,
) -> Projection:
    share = scope.target_share
    allowed = 1.0 - scope.reliability_target
    masses = [float(np.dot(share, curves.rate(n))) for n in path]
    episodes = [0.0]
    spend = [0.0]
    for k in allocations:
        episodes.append(episodes[-1] + float(k.sum()))
        spend.append(spend[-1] + float(np.dot(cost, k)))
    floor = 1.0 - curves.f_inf  # shares sum to 1 and every cell shares the floor
    rounds_to: int | None = None
    episodes_to: float | None = None
    spend_to: float | None = None
    for r, m in enumerate(masses):
        if m <= allowed:
            rounds_to = r
            if r == 0:
                episodes_to, spend_to = 0.0, 0.0
            else:
                t = _crossing(curves, share, path[r - 1], added[r - 1], allowed)
                episodes_to = episodes[r - 1] + t * float(allocations[r - 1].sum())
                spend_to = spend[r - 1] + t * float(np.dot(cost, allocations[r - 1]))
            break
    reachable = floor > scope.reliability_target
    reason = ""
    if rounds_to is None:
        if not reachable:
            reason = (
                f"The target is out of reach on the current curves: their floor alone allows "
                f"at best {format_rate(floor, 3)} success; it needs a better policy or "
                "method, not more of the same data."
            )
        else:
            reason = (
                f"The target is not reached within {len(allocations)} projected rounds "
                f"at this budget (expected {format_rate(1.0 - masses[-1], 3)} by then)."
            )
    cycles = scope.cycles_per_day
    after_next = masses[1] if len(masses) > 1 else masses[0]
    return Projection(
        name=name,
        cycles_per_day=cycles,
        reliability_target=scope.reliability_target,
        reliability_now=1.0 - masses[0],
        reliability_after_next=1.0 - after_next,
        interventions_per_day_now=cycles * masses[0],
        interventions_per_day_after_next=cycles * after_next,
        interventions_per_day_at_target=cycles * allowed,
        floor_reliability=floor,
        reachable=reachable,
        rounds_to_target=rounds_to,
        episodes_to_target=episodes_to,
        spend_to_target=spend_to,
        interventions_per_day=[cycles * m for m in masses],
        episodes=episodes,
        spend=spend,
        demonstration=demonstration(scope.reliability_target, 1.0 - after_next, confidence),
        reason=reason,
    )


def _crossing(
    curves: CurveSet, share: FloatArray, n: FloatArray, k: FloatArray, allowed: float
) -> float:
    """Return the fraction of a round's addition ``k`` to ``n`` at which the mass hits ``allowed``."""
    low, high = 0.0, 1.0
    for _ in range(50):
        mid = 0.5 * (low + high)
        if float(np.dot(share, curves.rate(n + mid * k))) > allowed:
            low = mid
        else:
            high = mid
    return high
