"""The synthetic world: condition cells, hidden learning curves and the observable record
(part of :mod:`analytics.steering.simulate`, whose docstring describes the world)."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from analytics.steering.observation import FloatArray, IntArray, Observation
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
    ``production_days`` is how many days of each policy's production the fleet logs, per
    cell, as outcomes of that policy beside its evaluation (0: none, the record holds
    evaluations only); one day is the day a round is counted as (:func:`excess_failures`),
    so the failures the campaign is measured by are the failures its record shows.
    ``earlier_release`` is how many episodes the last collection before the campaign added
    to the starting data (0: none, the record starts with the campaign's first policy); when
    positive, the record starts with the release before it, trained on the starting data
    without them, evaluated and (``production_days``) logged in production like every
    policy: a fleet's record of the policy it replaced, the history a first round can learn
    the transfer from. The collection took them by target share from the cells the starting
    data covers (a cell gives no more than it holds).
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
    production_days: float = 0.0
    earlier_release: int = 0

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
        if not (math.isfinite(self.production_days) and self.production_days >= 0):
            raise ValueError(f"production_days must be >= 0, got {self.production_days}")
        if self.earlier_release < 0:
            raise ValueError(f"earlier_release must be >= 0 episodes, got {self.earlier_release}")


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

WORLD_FAMILIES: Mapping[str, str] = {
    "default": "the benchmark's world: neighbours one condition apart pass 5% of an episode",
    "independent": "each cell learns only from its own episodes",
    "transfer": "cells sharing condition values help each other, with strengths per dimension",
    "cost": "episodes cost per cell, the dearest five times the cheapest",
    "noise": "300 evaluation trials a round, not 2,000",
    "drift": "from round 4 a failure mode triples the amplitude in 15% of the cells",
    "all": "all of the above",
}
"""Every world a forecast can be played in (the benchmark's and :data:`WORLDS`), with what
is hard in it."""


def world_config(
    family: str = "default", *, production_days: float = 0.0, earlier_release: int = 0
) -> WorldConfig:
    """The configuration of a named world (:data:`WORLD_FAMILIES`) whose record also holds
    ``production_days`` of each policy's production and, when ``earlier_release`` is
    positive, the release before the campaign. Raises ValueError naming what is wrong."""
    if family not in WORLD_FAMILIES:
        raise ValueError(f"unknown world {family!r}; choose from {', '.join(WORLD_FAMILIES)}")
    base = WorldConfig() if family == "default" else WORLDS[family]
    return dataclasses.replace(
        base, production_days=production_days, earlier_release=earlier_release
    )


def describe_record(config: WorldConfig) -> str:
    """In words, the record a world's strategies read."""
    days = config.production_days
    record = (
        f"each policy's evaluation and {days:g} day{'' if days == 1 else 's'} of its production"
        if days
        else "each policy's evaluation"
    )
    if config.earlier_release:
        record += (
            ", from the release before the campaign's first policy (trained without the "
            f"last {config.earlier_release:,} episodes collected)"
        )
    return record


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

    def drift_at(self, round: int) -> FloatArray:
        """Return each cell's amplitude multiplier in force once ``round`` rounds are trained
        (1 before the drift, and everywhere without one)."""
        if self.drift is None or self.drift_round is None or round < self.drift_round:
            return np.ones(self.a.size)
        return self.drift

    def at(self, round: int) -> HiddenCurves:
        """Return the curves in force once ``round`` rounds are trained, drift applied."""
        if self.drift is None or self.drift_round is None:
            return self
        if round < self.drift_round:
            return dataclasses.replace(self, drift=None, drift_round=None)
        return HiddenCurves(
            f_inf=self.f_inf, a=self.a * self.drift_at(round), b=self.b, transfer=self.transfer
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
        # Production draws from a stream of its own: the evaluations stay the same draw for
        # draw whether or not the fleet's production is logged.
        self._production = np.random.default_rng([seed, 0x9D0C])
        self._eval_n: list[FloatArray] = []
        self._eval_trials: list[FloatArray] = []
        self._eval_successes: list[FloatArray] = []
        self._prod_cycles: list[FloatArray] = []
        self._prod_successes: list[FloatArray] = []
        # The release before the campaign's first policy, when the record holds it: its
        # training counts, and how many rows of outcomes precede the campaign's (0 or 1).
        self.earlier_train_count: FloatArray | None = None
        self.earlier_rows = 0
        if config.earlier_release > 0:
            self.earlier_train_count = self._earlier_counts()
            # Its own streams: the campaign's draws stay the same with or without it.
            self._record(
                self.earlier_train_count,
                truth.at(-1),  # before the campaign: before any drift
                np.random.default_rng([seed, 0xEA21]),
                np.random.default_rng([seed, 0xEA22]),
            )
            self.earlier_rows = 1
        self.evaluate()

    # --- observable ------------------------------------------------------------------

    def observe(self) -> Observation:
        """Return what a strategy may see now (copies, read-only).

        Each policy's outcomes are its evaluation's trials and successes plus, where the
        world logs production (``production_days``), its production cycles and successes.
        """
        size = len(self.labels)
        trials = np.array(self._eval_trials).reshape(-1, size)
        successes = np.array(self._eval_successes).reshape(-1, size)
        if self._prod_cycles:
            trials = trials + np.array(self._prod_cycles).reshape(-1, size)
            successes = successes + np.array(self._prod_successes).reshape(-1, size)
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
            eval_trials=trials,
            eval_successes=successes,
            conditions=self.conditions,
        )

    def _by_share(self, total: float) -> FloatArray:
        """Return ``total`` whole trials spread over the cells by target share (largest
        remainders)."""
        return _whole(total * self.target_share)

    def evaluation_trials(self) -> FloatArray:
        """Return this round's evaluation trials per cell: ``eval_trials`` by target share."""
        return self._by_share(float(self.config.eval_trials))

    def production_cycles(self) -> FloatArray:
        """Return the production cycles per cell the fleet logs of each policy:
        ``production_days`` days of ``cycles_per_day``, by target share."""
        return self._by_share(math.floor(self.config.production_days * self.config.cycles_per_day))

    def _earlier_counts(self) -> FloatArray:
        """Return the training counts of the release before the campaign's first policy:
        the starting data less ``earlier_release`` episodes, taken from the cells it covers
        by target share (by what they hold where none of them has a share), a cell giving
        no more than it holds (what it cannot give is taken from the others), rounded to
        whole episodes by largest remainders."""
        held = self.train_count
        total = float(min(self.config.earlier_release, held.sum()))
        full = held <= 0
        while True:  # cells that cannot give their share give all they hold
            weight = np.where(full, 0.0, self.target_share)
            if weight.sum() <= 0:
                weight = np.where(full, 0.0, held)
            if weight.sum() <= 0:  # every cell gives all it holds
                return held - _whole(held)
            left = total - float(held[full].sum())
            exact = np.where(full, held, left * weight / weight.sum())
            over = ~full & (exact >= held)
            if not over.any():
                return held - _whole(exact)
            full |= over

    def evaluate(self) -> None:
        """Evaluate the current policy: binomial failures from the hidden curves; and, where
        the world logs production, its production, binomial failures at the same rates."""
        self._record(self.train_count, self._truth_now(), self._noise, self._production)

    def _record(
        self,
        counts: FloatArray,
        truth: HiddenCurves,
        noise: np.random.Generator,
        production: np.random.Generator,
    ) -> None:
        """Append the outcomes of the policy trained on ``counts`` under the curves
        ``truth``, drawn from ``noise`` (its evaluation) and ``production`` (its production,
        where the world logs it)."""
        rate = truth.rate(counts)
        trials = self.evaluation_trials()
        failures = noise.binomial(trials.astype(np.int64), rate)
        self._eval_n.append(counts.copy())
        self._eval_trials.append(trials)
        self._eval_successes.append(trials - failures)
        if self.config.production_days > 0:
            cycles = self.production_cycles()
            failed = production.binomial(cycles.astype(np.int64), rate)
            self._prod_cycles.append(cycles)
            self._prod_successes.append(cycles - failed)

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


def _whole(exact: FloatArray) -> FloatArray:
    """Return ``exact`` rounded to whole numbers with the same (rounded) sum: each rounded
    down, then one more to the largest remainders, ties to the first. Where ``exact`` is
    below a whole bound in every cell, so is the result."""
    whole = np.floor(exact)
    left = round(float(exact.sum()) - float(whole.sum()))
    order = np.lexsort((np.arange(exact.size), -(exact - whole)))
    whole[order[:left]] += 1
    return whole


def _truth_of(world: World, round: int | None = None) -> HiddenCurves:
    """Return the curves in force at ``round`` (default: the world's current round)."""
    # For the oracle and for tests; strategies have no path to this.
    truth: HiddenCurves = world._World__truth  # type: ignore[attr-defined]
    return truth.at(world.round if round is None else round)


def _hidden_of(world: World) -> HiddenCurves:
    """Return the world's hidden curves with their drift still separate (for the
    simulator's references, which read the drift only once it is in force)."""
    truth: HiddenCurves = world._World__truth  # type: ignore[attr-defined]
    return truth


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
