"""A synthetic campaign: a world with hidden learning curves, and rounds run by a strategy.

The world (:func:`make_world`) is a deployment over four condition dimensions (lighting,
clutter, camera pose, object wear: 108 cells). It is built to look like the situation
DESIGN.md describes, not to flatter any strategy:

* **Target shares** are products of per-dimension deployment marginals (the sites see
  mostly non-lab conditions) with a log-normal interaction per cell, so a few cells hold
  most production cycles and there is a long tail of rare combinations.
* **Training data** starts lab-skewed: 20,000 episodes concentrated in cells close to the
  lab values (bright LED, tidy, nominal mount, new parts); most far cells have none.
* **Hidden learning curves** ``f_c(n) = f_inf_c + a_c * (n_eff + 1) ** -b_c`` differ per
  cell: the amplitude is a product of per-value difficulties (dim light, dense clutter and
  worn parts are hard) with log-normal noise, so a few cells are much harder than the rest
  (a new policy fails about 30% of production cycles); the exponent varies between 0.6 and
  1.0 and the floor around 1e-4.
* **Transfer**: an episode in a neighbouring cell (one condition different) also counts
  ``transfer`` (default 0.05) of an episode here, so ``n_eff`` is a little above the cell's
  own count, as data from "dim light, tidy" helps a bit under "dim light, dense".

The strategies' model (per-cell counts only, shared ``b`` and ``f_inf``) is thus only an
approximation of the truth, as it would be in reality. With the defaults the reliability
target (99.9%) needs tens to hundreds of thousands of episodes, depending on the seed.

A round: the strategy gets an :class:`~analytics.steering.observation.Observation` (built
here from observable state only), returns whole episodes per cell within budget, training
counts grow, the new policy is evaluated with sampling noise (``eval_trials`` trials spread
by target share, binomial failures from the hidden curves), and the next round starts.
Reported figures — interventions per day, reliability, episodes to reach the target — are
computed from the hidden curves, which only this module holds (in :class:`HiddenCurves`,
kept in a private attribute of :class:`World` and never passed to a strategy).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from analytics.steering.observation import FloatArray, IntArray, Observation, Strategy
from analytics.steering.recommend import Exploration
from analytics.steering.strategies import get_strategy
from campaigns.planning.gain import curve_rate

DIMENSIONS: tuple[tuple[str, tuple[str, ...], tuple[float, ...]], ...] = (
    # name, values (the first is the lab value), difficulty multiplier per value
    (
        "lighting",
        ("bright LED", "fluorescent", "dim sodium", "daylight glare"),
        (1.0, 1.3, 2.6, 2.0),
    ),
    ("clutter", ("tidy", "moderate", "dense"), (1.0, 1.4, 2.3)),
    ("camera pose", ("nominal mount", "low mount", "high mount"), (1.0, 1.6, 1.4)),
    ("object wear", ("new", "scuffed", "worn"), (1.0, 1.2, 1.9)),
)


@dataclass(frozen=True)
class WorldConfig:
    """Knobs of the synthetic world; the defaults are the benchmark's world."""

    cycles_per_day: float = 5_000.0
    reliability_target: float = 0.999
    initial_episodes: int = 20_000
    eval_trials: int = 2_000
    base_amplitude: float = 0.05
    b_range: tuple[float, float] = (0.6, 1.0)
    floor: float = 1e-4
    interaction_sigma: float = 0.8
    difficulty_sigma: float = 0.4
    transfer: float = 0.05


@dataclass(frozen=True, eq=False)
class HiddenCurves:
    """The truth: each cell's learning curve. Only :class:`World` holds one.

    ``transfer[c, d]`` is how much one episode in cell ``d`` counts as training for cell
    ``c`` (neighbours that differ in one condition help a little); ``None`` for none.
    """

    f_inf: FloatArray
    a: FloatArray
    b: FloatArray
    transfer: FloatArray | None = None

    def effective(self, n: npt.ArrayLike) -> FloatArray:
        """Return the training each cell effectively has, its own plus what transfers."""
        n_arr = np.asarray(n, dtype=np.float64)
        if self.transfer is None:
            return n_arr
        return n_arr + self.transfer @ n_arr

    def rate(self, n: npt.ArrayLike) -> FloatArray:
        """Return each cell's true failure rate after ``n`` training episodes."""
        n_eff = self.effective(n)
        return np.minimum(curve_rate(self.f_inf, self.a, self.b, n_eff), 1.0)


class World:
    """A campaign's state: observable record plus hidden curves (kept private).

    Strategies never receive a World; :meth:`observe` hands out an Observation built from
    the observable record alone.
    """

    def __init__(
        self,
        *,
        labels: tuple[str, ...],
        target_share: FloatArray,
        train_count: FloatArray,
        truth: HiddenCurves,
        config: WorldConfig,
        budget: float,
        cost_per_episode: FloatArray | None = None,
        seed: int = 0,
    ) -> None:
        self.labels = labels
        self.target_share = np.array(target_share, dtype=np.float64)
        self.train_count = np.array(train_count, dtype=np.float64)
        self.cost_per_episode = (
            np.ones(len(labels)) if cost_per_episode is None else np.array(cost_per_episode)
        )
        self.config = config
        self.budget = float(budget)
        self.round = 0
        self.__truth = truth
        self._noise = np.random.default_rng([seed, 0x5EED])
        self._eval_n: list[FloatArray] = []
        self._eval_trials: list[FloatArray] = []
        self._eval_successes: list[FloatArray] = []
        self.evaluate()

    # --- observable ------------------------------------------------------------------

    def observe(self) -> Observation:
        """Return what a strategy may see now (copies, read-only)."""
        size = len(self.labels)
        return Observation(
            round=self.round,
            labels=self.labels,
            target_share=self.target_share,
            train_count=self.train_count,
            cost_per_episode=self.cost_per_episode,
            budget=self.budget,
            cycles_per_day=self.config.cycles_per_day,
            reliability_target=self.config.reliability_target,
            eval_train_count=np.array(self._eval_n).reshape(-1, size),
            eval_trials=np.array(self._eval_trials).reshape(-1, size),
            eval_successes=np.array(self._eval_successes).reshape(-1, size),
        )

    def evaluation_trials(self) -> FloatArray:
        """Return this round's evaluation trials per cell: ``eval_trials`` by target share."""
        exact = self.config.eval_trials * self.target_share
        trials = np.floor(exact)
        left = int(self.config.eval_trials - trials.sum())
        order = np.lexsort((np.arange(exact.size), -(exact - trials)))
        trials[order[:left]] += 1
        return trials

    def evaluate(self) -> None:
        """Evaluate the current policy: binomial failures from the hidden curves."""
        trials = self.evaluation_trials()
        failures = self._noise.binomial(
            trials.astype(np.int64), self.__truth.rate(self.train_count)
        )
        self._eval_n.append(self.train_count.copy())
        self._eval_trials.append(trials)
        self._eval_successes.append(trials - failures)

    def train(self, episodes: npt.ArrayLike) -> None:
        """Add a round's episodes, checking they are whole, non-negative and within budget.

        Raises ValueError for an allocation a strategy should never return.
        """
        k = np.asarray(episodes)
        if k.shape != self.train_count.shape:
            raise ValueError(f"allocation has shape {k.shape}, expected {self.train_count.shape}")
        if k.dtype.kind not in "iu" and not np.all(k == np.round(k)):
            raise ValueError("allocation must be whole episodes")
        if np.any(k < 0):
            raise ValueError("allocation must be >= 0 in every cell")
        spend = float(np.dot(self.cost_per_episode, k))
        if spend > self.budget + 1e-6:
            raise ValueError(f"allocation costs {spend:g}, over the budget of {self.budget:g}")
        self.train_count = self.train_count + k
        self.round += 1

    # --- hidden (reporting only) -----------------------------------------------------

    def failure_mass(self, extra: npt.ArrayLike | float = 0.0) -> float:
        """Return the true share of production cycles that fail (after ``extra`` episodes)."""
        n = self.train_count + np.asarray(extra, dtype=np.float64)
        return float(np.dot(self.target_share, self.__truth.rate(n)))

    def interventions_per_day(self) -> float:
        """Return the true expected interventions per day of the current policy."""
        return self.config.cycles_per_day * self.failure_mass()

    def floor_reliability(self) -> float:
        """Return the best reliability any amount of data could reach."""
        return 1.0 - float(np.dot(self.target_share, self.__truth.f_inf))


def _truth_of(world: World) -> HiddenCurves:
    # For tests that shuffle the truth; strategies have no path to this.
    truth: HiddenCurves = world._World__truth  # type: ignore[attr-defined]
    return truth


def make_world(seed: int, *, budget: float = 5_000.0, config: WorldConfig | None = None) -> World:
    """Build the synthetic world for ``seed`` (see the module docstring)."""
    cfg = config if config is not None else WorldConfig()
    rng = np.random.default_rng([seed, 0xF1E1D])
    values = [dim[1] for dim in DIMENSIONS]
    combos = list(itertools.product(*[range(len(v)) for v in values]))
    codes = np.array(combos, dtype=np.int64)
    labels = tuple(", ".join(values[d][code] for d, code in enumerate(combo)) for combo in combos)

    # Deployment marginals: the lab value is rare at the sites, the rest Dirichlet-random.
    share = np.ones(len(combos))
    for d, vals in enumerate(values):
        concentration = np.full(len(vals), 2.0)
        concentration[0] = 0.8
        marginal = rng.dirichlet(concentration)
        share *= marginal[codes[:, d]]
    share *= rng.lognormal(0.0, cfg.interaction_sigma, size=share.size)
    share /= share.sum()

    # Lab-skewed training data: weight falls fast with the number of non-lab values.
    distance = (codes != 0).sum(axis=1)
    lab_weight = np.exp(-1.6 * distance + rng.normal(0.0, 0.5, size=share.size))
    lab_weight[(distance >= 3) & (rng.random(share.size) < 0.85)] = 0.0
    train = np.floor(cfg.initial_episodes * lab_weight / lab_weight.sum())

    difficulty = np.ones(len(combos))
    for d, dim in enumerate(DIMENSIONS):
        difficulty *= np.asarray(dim[2])[codes[:, d]]
    a = cfg.base_amplitude * difficulty * rng.lognormal(0.0, cfg.difficulty_sigma, share.size)
    f_inf = cfg.floor * rng.lognormal(0.0, 0.5, share.size)
    a = np.minimum(a, 0.95 - f_inf)
    b = rng.uniform(*cfg.b_range, size=share.size)
    neighbours = (codes[:, None, :] != codes[None, :, :]).sum(axis=2) == 1
    transfer = cfg.transfer * neighbours.astype(np.float64) if cfg.transfer > 0 else None
    truth = HiddenCurves(f_inf=f_inf, a=a, b=b, transfer=transfer)
    return World(
        labels=labels,
        target_share=share,
        train_count=train,
        truth=truth,
        config=cfg,
        budget=budget,
        seed=seed,
    )


@dataclass(frozen=True)
class CampaignResult:
    """One simulated campaign under one strategy, figures from the hidden truth.

    Lists are indexed by round (0 = before the first round). ``episodes_to_target`` is
    the cumulative spend at which the true reliability reaches the target, interpolated
    inside the round where it is crossed (``None`` when not reached within the rounds;
    ``reachable`` says whether any amount of data could reach it).
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
    for r in range(1, rounds + 1):
        if stop_at_target and to_target is not None:
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
        allocations=allocations,
    )


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
    :func:`run_campaign`. Raises ValueError for an unknown strategy.
    """
    strategy = get_strategy(strategy_name, seed=seed, exploration=exploration)
    world = make_world(seed, budget=budget, config=config)
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
