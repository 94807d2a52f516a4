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

Harder worlds (:class:`WorldConfig` knobs whose defaults leave the world above unchanged,
draw for draw; the named families are :data:`WORLDS`):

* **Shared transfer** (``transfer_model="shared"``): an episode in cell ``d`` counts
  ``prod tau_dim`` over the dimensions where ``d`` differs from ``c`` as training for
  ``c`` (``tau_dim`` drawn per world in ``transfer_range``, log-normal noise per pair of
  cells, capped at 0.9), so cells sharing three of four conditions help each other a lot.
* **Costs** (``cost_spread``): each condition value has a cost multiplier, a cell's cost
  per episode is their product, the median cell costs 1 and the dearest ``cost_spread``
  times the cheapest.
* **Noisy evaluation**: a small ``eval_trials``.
* **Drift** (``drift_round``): from that round on a new failure mode multiplies the
  amplitude of a few cells by ``1 + drift_amplitude``; it falls with data on the same curve.

:func:`make_oracle` is a strategy that reads the hidden truth (only this module can build
it), and :func:`excess_failures` measures a campaign against the floor, so a strategy's
excess over the oracle's is what not knowing the truth costs.

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
from collections.abc import Callable, Mapping
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


TRANSFER_MODELS: tuple[str, ...] = ("neighbours", "shared")


@dataclass(frozen=True)
class WorldConfig:
    """Knobs of the synthetic world; the defaults are the benchmark's world.

    ``transfer`` is the neighbours' share under ``transfer_model="neighbours"`` and ignored
    under ``"shared"`` (which uses ``transfer_range`` and ``transfer_noise``).
    ``cost_spread`` 0 makes every episode cost 1. ``drift_round`` ``None`` means no drift.
    Raises ValueError for a knob out of its range.
    """

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
    transfer_model: str = "neighbours"
    transfer_range: tuple[float, float] = (0.1, 0.5)
    transfer_noise: float = 0.3
    cost_spread: float = 0.0
    drift_round: int | None = None
    drift_cells: float = 0.15
    drift_amplitude: float = 2.0

    def __post_init__(self) -> None:
        if self.transfer_model not in TRANSFER_MODELS:
            raise ValueError(
                f"unknown transfer model {self.transfer_model!r}; "
                f"choose from {', '.join(TRANSFER_MODELS)}"
            )
        low, high = self.transfer_range
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"transfer_range must be 0 <= low <= high <= 1, got {low}, {high}")
        if self.transfer_noise < 0:
            raise ValueError(f"transfer_noise must be >= 0, got {self.transfer_noise}")
        if self.cost_spread != 0 and self.cost_spread < 1:
            raise ValueError(f"cost_spread must be 0 (no spread) or >= 1, got {self.cost_spread}")
        if self.drift_round is not None and self.drift_round < 0:
            raise ValueError(f"drift_round must be >= 0, got {self.drift_round}")
        if not 0.0 <= self.drift_cells <= 1.0:
            raise ValueError(f"drift_cells must be a fraction in [0, 1], got {self.drift_cells}")
        if self.drift_amplitude < 0:
            raise ValueError(f"drift_amplitude must be >= 0, got {self.drift_amplitude}")


# Transfer from the lab-heavy starting data lifts every cell: at strengths of 0.1-0.5 a new
# policy would already be 99.6% reliable. Weaker transfer and harder cells keep the family a
# campaign (about 95% at the start, as the others start at 70-85%).
_SHARED = WorldConfig(transfer_model="shared", transfer_range=(0.02, 0.25), base_amplitude=0.15)
WORLDS: Mapping[str, WorldConfig] = {
    "independent": WorldConfig(transfer=0.0),
    "transfer": _SHARED,
    "cost": WorldConfig(cost_spread=5.0),
    "noise": WorldConfig(eval_trials=300),
    "drift": WorldConfig(drift_round=4),
    "all": dataclasses.replace(_SHARED, cost_spread=5.0, eval_trials=300, drift_round=4),
}
"""Named world families: the benchmark's world with one hardship each, or all of them."""


@dataclass(frozen=True, eq=False)
class HiddenCurves:
    """The truth: each cell's learning curve. Only :class:`World` holds one.

    ``transfer[c, d]`` is how much one episode in cell ``d`` counts as training for cell
    ``c`` (neighbours that differ in one condition help a little); ``None`` for none.
    ``drift`` multiplies ``a`` from round ``drift_round`` on (``None``: no drift); the
    curves in force after a number of rounds are :meth:`at` that round, while
    :meth:`rate` reads ``a`` as it is, without drift.
    """

    f_inf: FloatArray
    a: FloatArray
    b: FloatArray
    transfer: FloatArray | None = None
    drift: FloatArray | None = None
    drift_round: int | None = None

    def at(self, round: int) -> HiddenCurves:
        """Return the curves in force once ``round`` rounds are trained, drift applied."""
        if self.drift is None or self.drift_round is None:
            return self
        if round < self.drift_round:
            return dataclasses.replace(self, drift=None, drift_round=None)
        return HiddenCurves(
            f_inf=self.f_inf, a=self.a * self.drift, b=self.b, transfer=self.transfer
        )

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


def _conditions_of(codes: IntArray) -> tuple[dict[str, str], ...]:
    """Return each cell's {dimension: value} from its codes into :data:`DIMENSIONS`."""
    return tuple(
        {DIMENSIONS[d][0]: DIMENSIONS[d][1][code] for d, code in enumerate(row)}
        for row in codes.tolist()
    )


def _codes_from_labels(labels: tuple[str, ...]) -> IntArray | None:
    """Return the codes of labels made by :func:`make_world` (``None`` for other labels)."""
    rows = []
    for label in labels:
        names = label.split(", ")
        if len(names) != len(DIMENSIONS):
            return None
        try:
            rows.append([dim[1].index(name) for dim, name in zip(DIMENSIONS, names, strict=True)])
        except ValueError:
            return None
    return np.array(rows, dtype=np.int64).reshape(len(labels), len(DIMENSIONS))


class World:
    """A campaign's state: observable record plus hidden curves (kept private).

    Strategies never receive a World; :meth:`observe` hands out an Observation built from
    the observable record alone. ``codes`` index each cell's values in :data:`DIMENSIONS`;
    without them they are read from labels made by :func:`make_world`, and a world whose
    labels are something else shows no conditions.
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
        codes: IntArray | None = None,
    ) -> None:
        self.labels = labels
        cell_codes = _codes_from_labels(labels) if codes is None else np.asarray(codes)
        self.conditions = () if cell_codes is None else _conditions_of(cell_codes)
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
            conditions=self.conditions,
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
            trials.astype(np.int64), self._truth_now().rate(self.train_count)
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

    def _truth_now(self) -> HiddenCurves:
        return self.__truth.at(self.round)

    def failure_mass(self, extra: npt.ArrayLike | float = 0.0) -> float:
        """Return the true share of production cycles that fail (after ``extra`` episodes).

        The curves are those in force at the current round (drift included).
        """
        n = self.train_count + np.asarray(extra, dtype=np.float64)
        return float(np.dot(self.target_share, self._truth_now().rate(n)))

    def interventions_per_day(self) -> float:
        """Return the true expected interventions per day of the current policy."""
        return self.config.cycles_per_day * self.failure_mass()

    def floor_mass(self) -> float:
        """Return the share of cycles that fail however much data is collected."""
        return float(np.dot(self.target_share, self.__truth.f_inf))

    def floor_reliability(self) -> float:
        """Return the best reliability any amount of data could reach."""
        return 1.0 - self.floor_mass()


def _truth_of(world: World, round: int | None = None) -> HiddenCurves:
    """Return the curves in force at ``round`` (default: the world's current round)."""
    # For the oracle and for tests; strategies have no path to this.
    truth: HiddenCurves = world._World__truth  # type: ignore[attr-defined]
    return truth.at(world.round if round is None else round)


def _shared_transfer(codes: IntArray, cfg: WorldConfig, rng: np.random.Generator) -> FloatArray:
    """Return transfer[c, d] = prod of tau_dim where c and d differ, times pair noise."""
    tau = rng.uniform(*cfg.transfer_range, size=codes.shape[1])
    differ = codes[:, None, :] != codes[None, :, :]
    structure = np.prod(np.where(differ, tau, 1.0), axis=2)
    # One draw per pair of cells, the same both ways.
    noise = np.triu(rng.lognormal(0.0, cfg.transfer_noise, size=structure.shape), 1)
    transfer = np.minimum(structure * (noise + noise.T), 0.9)
    np.fill_diagonal(transfer, 0.0)
    return transfer


def _cell_costs(codes: IntArray, spread: float, rng: np.random.Generator) -> FloatArray:
    """Return each cell's cost per episode: a product of per-value multipliers.

    The multipliers are log-uniform, scaled so the dearest cell costs ``spread`` times the
    cheapest, and the costs are divided by their median (the median cell costs 1).
    """
    log_cost = np.zeros(codes.shape[0])
    for d, dim in enumerate(DIMENSIONS):
        log_cost += rng.uniform(0.0, 1.0, size=len(dim[1]))[codes[:, d]]
    span = float(log_cost.max() - log_cost.min())
    if span <= 0 or spread <= 1:
        return np.ones(codes.shape[0])
    cost = np.exp(log_cost * (math.log(spread) / span))
    return np.asarray(cost / np.median(cost), dtype=np.float64)


def _drift(share: FloatArray, cfg: WorldConfig, rng: np.random.Generator) -> FloatArray:
    """Return the amplitude multiplier per cell once drift is in force (1 where not hit).

    The hit cells are drawn uniformly among the cells with target share.
    """
    eligible = np.flatnonzero(share > 0)
    hit = rng.choice(eligible, size=round(cfg.drift_cells * eligible.size), replace=False)
    multiplier = np.ones(share.size)
    multiplier[hit] = 1.0 + cfg.drift_amplitude
    return multiplier


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
    # The harder worlds draw from generators of their own: the draws above stay the same.
    transfer: FloatArray | None
    if cfg.transfer_model == "shared":
        transfer = _shared_transfer(codes, cfg, np.random.default_rng([seed, 0x7A5F]))
    elif cfg.transfer > 0:
        neighbours = (codes[:, None, :] != codes[None, :, :]).sum(axis=2) == 1
        transfer = cfg.transfer * neighbours.astype(np.float64)
    else:
        transfer = None
    cost = (
        _cell_costs(codes, cfg.cost_spread, np.random.default_rng([seed, 0xC057]))
        if cfg.cost_spread > 0
        else None
    )
    drift = (
        _drift(share, cfg, np.random.default_rng([seed, 0xD21F7]))
        if cfg.drift_round is not None
        else None
    )
    truth = HiddenCurves(
        f_inf=f_inf, a=a, b=b, transfer=transfer, drift=drift, drift_round=cfg.drift_round
    )
    return World(
        labels=labels,
        target_share=share,
        train_count=train,
        truth=truth,
        config=cfg,
        budget=budget,
        cost_per_episode=cost,
        seed=seed,
        codes=codes,
    )


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


def _greedy_fill(
    truth: HiddenCurves,
    share: FloatArray,
    cost: FloatArray,
    base: FloatArray,
    k: IntArray,
    budget: float,
    chunk: float,
) -> IntArray:
    """Return ``k`` plus chunks of about ``chunk`` spend, each for the best cell then."""
    k = k.copy()
    # mix[c, d]: effective training cell c gains from one episode in cell d.
    mix = None if truth.transfer is None else np.eye(share.size) + truth.transfer
    n_eff = truth.effective(base + k)
    left = budget - float(np.dot(cost, k))
    full = np.maximum(np.floor(chunk / cost), 1.0)
    f_col, a_col, minus_b_col = truth.f_inf[:, None], truth.a[:, None], -truth.b[:, None]
    while True:
        x = np.minimum(full, np.floor((left + 1e-9) / cost))
        if x.max() < 1:
            return k
        now = np.minimum(curve_rate(truth.f_inf, truth.a, truth.b, n_eff), 1.0)
        if mix is None:
            after = np.minimum(curve_rate(truth.f_inf, truth.a, truth.b, n_eff + x), 1.0)
            gain = share * (now - after)
        else:
            # Column d: every cell's rate once x[d] episodes more are in cell d.
            trial = mix * x[None, :]
            trial += n_eff[:, None] + 1.0
            after = np.minimum(f_col + a_col * np.power(trial, minus_b_col), 1.0)
            gain = share @ (now[:, None] - after)
        spend = x * cost
        per_cost = np.divide(gain, spend, out=np.full(gain.size, -np.inf), where=x >= 1)
        best = int(np.argmax(per_cost))
        if not per_cost[best] > 0:
            return k
        step = int(x[best])
        k[best] += step
        left -= spend[best]
        if mix is None:
            n_eff[best] += step
        else:
            n_eff += step * mix[:, best]


def oracle_allocation(
    truth: HiddenCurves,
    *,
    target_share: npt.ArrayLike,
    train_count: npt.ArrayLike,
    cost_per_episode: npt.ArrayLike,
    budget: float,
    chunks: int = 20,
) -> IntArray:
    """Spend ``budget`` where it lowers the true failure mass most per unit cost, greedily.

    Chunks of ``budget / chunks`` spend (whole episodes, at least one) go one by one to the
    cell whose chunk lowers ``sum(target_share * rate)`` most per unit cost, counting what
    it transfers to every other cell, until nothing more fits; then every cell gives one
    chunk back, the chunk halves and the budget is spent again, down to single episodes
    (greedy with scaling: for cells that share nothing and cost the same this is the
    round's optimum, as greedy by single episodes is; with unequal costs the last few
    episodes are a knapsack it does not solve exactly). Myopic: the best round, not the
    best campaign. Assumes costs > 0; never over budget.
    """
    share = np.asarray(target_share, dtype=np.float64)
    cost = np.asarray(cost_per_episode, dtype=np.float64)
    base = np.asarray(train_count, dtype=np.float64)
    k = np.zeros(share.size, dtype=np.int64)
    chunk = float(budget) / chunks
    while True:
        k = _greedy_fill(truth, share, cost, base, k, float(budget), chunk)
        if chunk <= cost.min():
            return k
        k = np.maximum(k - np.maximum(np.floor(chunk / cost), 1.0).astype(np.int64), 0)
        chunk /= 2


def make_oracle(world: World, *, chunks: int = 20) -> Strategy:
    """Return a strategy that knows ``world``'s hidden truth (see :func:`oracle_allocation`).

    It reads the curves in force at the observed round, not later ones: it sees drift
    once drift has happened, never before. Only this module can build it.
    """

    def oracle(observation: Observation) -> IntArray:
        return oracle_allocation(
            _truth_of(world, observation.round),
            target_share=observation.target_share,
            train_count=observation.train_count,
            cost_per_episode=observation.cost_per_episode,
            budget=observation.budget,
            chunks=chunks,
        )

    return oracle


ORACLE = "oracle"


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
    world's truth. Raises ValueError for an unknown strategy.
    """
    if strategy_name == ORACLE:
        world = make_world(seed, budget=budget, config=config)
        strategy = make_oracle(world)
    else:
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
