"""Campaigns: rounds of capture, training and evaluation under a strategy, and what they
cost in failures (part of :mod:`analytics.steering.simulate`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from analytics.steering.observation import IntArray, Observation, Strategy
from analytics.steering.recommend import Exploration
from analytics.steering.simulate.informed import (
    INFORMED,
    INFORMED_LEARNING_TRANSFER,
    INFORMED_WITHOUT_TRANSFER,
    LEARNT_TRANSFER,
    make_informed,
)
from analytics.steering.simulate.oracle import ORACLE, make_oracle
from analytics.steering.simulate.world import World, WorldConfig, make_world
from analytics.steering.strategies import get_strategy


@dataclass(frozen=True)
class CampaignResult:
    """One simulated campaign under one strategy, figures from the hidden truth.

    Lists are indexed by round (0 = before the first round). ``episodes_to_target`` is
    the cumulative spend at which the true reliability reaches the target, interpolated
    inside the round where it is crossed (``None`` when not reached within the rounds;
    ``reachable`` says whether any amount of data could reach it). ``floor_mass`` is the
    share of cycles that would fail with unlimited data; ``stopped_early`` says the
    campaign stopped at the target before its rounds ran out.
    """

    strategy: str
    seed: int
    budget: float
    rounds: int
    reliability_target: float
    cycles_per_day: float
    interventions_per_day: list[float]
    reliability: list[float]
    episodes: list[float]
    episodes_to_target: float | None
    rounds_to_target: int | None
    reachable: bool
    floor_mass: float
    stopped_early: bool = False
    allocations: list[list[int]] = field(repr=False, default_factory=list)


def _crossing(world: World, k: IntArray, target_mass: float) -> float:
    """Return the fraction t of the last round's allocation ``k`` at which the target is hit.

    The world already holds ``k``; the state part-way through the round is ``n - (1 - t) k``.
    True failure mass falls monotonically in t, so bisection finds the crossing.
    """
    low, high = 0.0, 1.0
    for _ in range(50):
        mid = 0.5 * (low + high)
        if world.failure_mass((mid - 1.0) * k) > target_mass:
            low = mid
        else:
            high = mid
    return high


def run_campaign(
    world: World,
    strategy: Strategy,
    rounds: int,
    *,
    name: str = "",
    stop_at_target: bool = False,
    on_round: Callable[[int], None] | None = None,
) -> CampaignResult:
    """Run ``rounds`` rounds of capture, training and evaluation under ``strategy``.

    The strategy sees only ``world.observe()``; ``on_round`` is told each round's number
    once it is played (progress of a long run). Raises ValueError when the strategy returns
    an allocation that is not whole, non-negative and within budget.
    """
    if rounds < 0:
        raise ValueError(f"rounds must be >= 0, got {rounds}")
    target_mass = 1.0 - world.config.reliability_target
    cycles = world.config.cycles_per_day
    mass = world.failure_mass()
    interventions = [cycles * mass]
    reliability = [1.0 - mass]
    spent = [0.0]
    allocations: list[list[int]] = []
    to_target: float | None = 0.0 if mass <= target_mass else None
    rounds_to: int | None = 0 if to_target is not None else None
    stopped = False
    for r in range(1, rounds + 1):
        if stop_at_target and to_target is not None:
            stopped = True
            break
        k = np.asarray(strategy(world.observe()))
        world.train(k)
        cost = float(np.dot(world.cost_per_episode, k))
        mass_after = world.failure_mass()
        if to_target is None and mass_after <= target_mass:
            t = _crossing(world, k, target_mass)
            to_target = spent[-1] + t * cost
            rounds_to = r
        world.evaluate()
        interventions.append(cycles * mass_after)
        reliability.append(1.0 - mass_after)
        spent.append(spent[-1] + cost)
        allocations.append([int(x) for x in k])
        if on_round is not None:
            on_round(r)
    return CampaignResult(
        strategy=name,
        seed=-1,
        budget=world.budget,
        rounds=len(allocations),
        reliability_target=world.config.reliability_target,
        cycles_per_day=cycles,
        interventions_per_day=interventions,
        reliability=reliability,
        episodes=spent,
        episodes_to_target=to_target,
        rounds_to_target=rounds_to,
        reachable=world.floor_reliability() >= world.config.reliability_target,
        floor_mass=world.floor_mass(),
        stopped_early=stopped,
        allocations=allocations,
    )


def excess_failures(result: CampaignResult) -> float:
    """Return the campaign's failures beyond the floor, counting each round as one day.

    The sum over rounds 1..R of (true failure mass after the round - floor mass) *
    cycles per day: the production failures the policy trained in each round causes in
    one day of production that a policy with unlimited data would not. Compare campaigns
    of the same number of rounds. Raises ValueError for a campaign stopped at the target
    (its later rounds are missing).
    """
    if result.stopped_early:
        raise ValueError("excess failures need every round: run without stop_at_target")
    after = np.asarray(result.interventions_per_day[1:], dtype=np.float64)
    return float(np.sum(after - result.cycles_per_day * result.floor_mass))


REFERENCES: dict[str, Callable[[World], Strategy]] = {
    ORACLE: make_oracle,
    INFORMED: make_informed,
    INFORMED_LEARNING_TRANSFER: lambda world: make_informed(world, transfer=LEARNT_TRANSFER),
    INFORMED_WITHOUT_TRANSFER: lambda world: make_informed(world, transfer=None),
}
"""The strategies that read the world's hidden truth, by name: built from the world itself."""

FIRST_ROUND_BOUNDS: dict[str, str] = {
    "steered-then-oracle": ORACLE,
    "steered-then-informed": INFORMED,
    "steered-then-informed-learning-transfer": INFORMED_LEARNING_TRANSFER,
    "steered-then-informed-without-transfer": INFORMED_WITHOUT_TRANSFER,
}
"""Bounds on any strategy whose first round is the steered one, by name: steered in the
first round (no history yet, where a recommendation is today's, unless the record starts
with the release before the campaign, ``earlier_release``), then the named reference.
``steered-then-informed`` is the least such a strategy that learns from evaluations can
expect to lose, ``steered-then-oracle`` the least any can;
``steered-then-informed-learning-transfer`` learns the transfer as steered does, by the
evaluations' levels (its first round has one evaluation, which shows no transfer, hence
steered's), and knows the rest: what learning the transfer costs. It bounds steered only
as far as the transfer's errors cost both alike; where cells share values, they cost this
reference more (measured on 2026-12-07 it was behind steered there), as it reads each cell
under the true priors at the effective training the learnt model gives, while steered
refits its curves under that model.
``steered-then-informed-without-transfer`` is no bound but a measure: what knowing the
transfer is worth to the informed reference. Told nothing of it, the reference reads every
cell under the true priors as if it learnt only from its own episodes, which the world
contradicts; a strategy that learns its priors absorbs some of that (measured on 2026-12-06,
``steered-no-transfer`` did as well or better where only neighbours share)."""


def _first_round_then(reference: Strategy, first: Strategy) -> Strategy:
    """Return the strategy playing ``first`` in round 0 and ``reference`` after it."""

    def strategy(observation: Observation) -> IntArray:
        return first(observation) if observation.round == 0 else reference(observation)

    return strategy


def simulate(
    strategy_name: str,
    *,
    seed: int,
    rounds: int,
    budget: float = 5_000.0,
    config: WorldConfig | None = None,
    stop_at_target: bool = False,
    exploration: Exploration | None = None,
    on_round: Callable[[int], None] | None = None,
) -> CampaignResult:
    """Build the world for ``seed`` and run the named strategy on it.

    Every strategy facing the same seed faces the same world and the same evaluation
    noise stream; ``exploration`` configures the steered strategy; ``on_round`` goes to
    :func:`run_campaign`. ``"oracle"`` (:data:`ORACLE`) is the strategy that knows this
    world's truth, ``"informed"`` (:data:`INFORMED`) the one that knows all of it but each
    cell's own amplitude and exponent; :data:`FIRST_ROUND_BOUNDS` play the steered first
    round and then one of those. Raises ValueError for an unknown strategy.
    """
    world = make_world(seed, budget=budget, config=config)
    reference = REFERENCES.get(strategy_name)
    strategy: Strategy
    if strategy_name in FIRST_ROUND_BOUNDS:
        strategy = _first_round_then(
            REFERENCES[FIRST_ROUND_BOUNDS[strategy_name]](world),
            get_strategy("steered", seed=seed, exploration=exploration),
        )
    elif reference is not None:
        strategy = reference(world)
    else:
        strategy = get_strategy(strategy_name, seed=seed, exploration=exploration)
    result = run_campaign(
        world,
        strategy,
        rounds,
        name=strategy_name,
        stop_at_target=stop_at_target,
        on_round=on_round,
    )
    return dataclasses.replace(result, seed=seed)


def median_or_none(values: list[float | None]) -> float | None:
    """Return the median of the values, counting ``None`` (not reached) as infinite.

    ``None`` when at least half did not reach the target.
    """
    finite = sorted(math.inf if v is None else v for v in values)
    if not finite:
        return None
    middle = float(np.median(finite))
    return None if math.isinf(middle) else middle
