"""Collection strategies compared by the campaign simulator: functions of an Observation.

Every strategy maps an :class:`~analytics.steering.observation.Observation` to whole
episodes per cell whose cost fits the round's budget. None of them can see how the world
really responds to data: they get the observable record only (this module imports nothing
from the simulator, and a test keeps it that way).

* **steered** — what ``manage.py recommend`` does given the observable record as its input
  (cells with conditions and costs, earlier evaluations as history): learn how much an
  episode in one cell helps another from the evaluation history, chosen by what the
  evaluations' levels say (:func:`analytics.steering.levels.fit_transfer`; none until a
  second evaluation shows it), refit the learning curves on that history at effective counts
  (:func:`analytics.learning.fit_history`: an exponent per cell and a prior on each cell's
  amplitude from its conditions, because what decides a round is every cell's failure rate
  now, and a shared exponent misreads it wherever a cell learns faster or slower than the
  pool) and spend the budget, in cost units, with the recommender
  (:func:`analytics.steering.recommend.recommend`).
* **uniform** — the same number of episodes in every cell with target mass.
* **proportional** — episodes in proportion to target share.
* **more-of-the-same** — episodes in proportion to the current training distribution
  (what a team does when it keeps collecting where it already collects).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from analytics.steering.levels import fit_transfer
from analytics.steering.observation import FloatArray, IntArray, Observation, Strategy
from analytics.steering.recommend import CellInput, Exploration, HistoryRound, recommend
from analytics.steering.transfer import CellStructure, TransferModel

STRATEGY_NAMES: tuple[str, ...] = ("steered", "uniform", "proportional", "more-of-the-same")


def split_budget(weights: npt.ArrayLike, cost: npt.ArrayLike, budget: float) -> IntArray:
    """Return whole episodes per cell proportional to ``weights`` within ``budget``.

    Spend is split in proportion to the weights (each cell's share of the budget buys
    ``share / cost`` episodes, rounded down), then leftover budget buys single episodes
    for the cells with the largest shortfall that still fit. Deterministic; all-zero
    weights give nothing.
    """
    w = np.asarray(weights, dtype=np.float64)
    c = np.asarray(cost, dtype=np.float64)
    k = np.zeros(w.size, dtype=np.int64)
    total = float(w.sum())
    if total <= 0 or budget <= 0:
        return k
    exact = budget * w / total / c
    k = np.floor(exact + 1e-9).astype(np.int64)
    left = budget - float(np.dot(c, k))
    shortfall = exact - k
    for i in np.lexsort((np.arange(w.size), -shortfall)).tolist():
        if w[i] > 0 and c[i] <= left + 1e-9:
            k[i] += 1
            left -= c[i]
    return k


def uniform(observation: Observation) -> IntArray:
    """Spend the budget equally over the cells with target mass."""
    has_mass = (observation.target_share > 0).astype(np.float64)
    # Equal episodes, not equal spend: weight each cell's spend by its cost.
    return split_budget(
        has_mass * observation.cost_per_episode, observation.cost_per_episode, observation.budget
    )


def proportional(observation: Observation) -> IntArray:
    """Spend the budget on episodes in proportion to target share."""
    return split_budget(
        observation.target_share * observation.cost_per_episode,
        observation.cost_per_episode,
        observation.budget,
    )


def more_of_the_same(observation: Observation) -> IntArray:
    """Collect in proportion to the training data already held (proportional if none)."""
    n = observation.train_count
    weights = n if n.sum() > 0 else observation.target_share
    return split_budget(
        weights * observation.cost_per_episode, observation.cost_per_episode, observation.budget
    )


def learn_transfer(observation: Observation) -> TransferModel | None:
    """The transfer the steered strategy acts on, learnt from the observation's evaluations
    (:func:`analytics.steering.levels.fit_transfer`: chosen by what their levels say among
    no transfer, one strength for every dimension under either extent, and the per-dimension
    reading of their changes; no transfer before a second evaluation). None when the cells
    name no conditions."""
    if not observation.conditions:
        return None
    counts = observation.eval_train_count
    transfer, _ = fit_transfer(
        CellStructure.of(observation.conditions),
        counts,
        observation.eval_trials,
        observation.eval_successes,
        counts[-1] if counts.shape[0] else observation.train_count,
    )
    return transfer


STEERED_WITHOUT_TRANSFER = "steered-no-transfer"
"""The steered strategy with cells taken as independent (for measuring what transfer adds);
not among :data:`STRATEGY_NAMES`."""


def history_of(observation: Observation) -> list[HistoryRound]:
    """The observation's earlier evaluations as a recommendation's ``history``: per round,
    oldest first, each cell's trials and successes and the episodes added after it (cells
    neither evaluated nor given episodes are not named)."""
    counts, trials, successes = (
        observation.eval_train_count,
        observation.eval_trials,
        observation.eval_successes,
    )
    rounds = []
    for e in range(counts.shape[0] - 1):
        added = counts[e + 1] - counts[e]
        named = np.flatnonzero((trials[e] > 0) | (added > 0))
        rounds.append(
            HistoryRound(
                round=e,
                cells={
                    observation.labels[i]: (
                        int(trials[e, i]),
                        int(successes[e, i]),
                        round(float(added[i])),
                    )
                    for i in named.tolist()
                },
            )
        )
    return rounds


def steered_cells(observation: Observation) -> list[CellInput]:
    """The observation's cells as the steered strategy hands them to the recommender: each
    cell's share, training, latest outcomes, cost and conditions."""
    conditions = observation.conditions
    return [
        CellInput(
            id=label,
            target_share=float(observation.target_share[i]),
            train_count=float(observation.train_count[i]),
            trials=int(observation.latest_trials[i]),
            successes=int(observation.latest_successes[i]),
            cost_per_episode=float(observation.cost_per_episode[i]),
            conditions=dict(conditions[i]) if conditions else None,
        )
        for i, label in enumerate(observation.labels)
    ]


def make_steered(
    *, seed: int = 0, exploration: Exploration | None = None, transfer: bool = True
) -> Callable[[Observation], IntArray]:
    """Return the steered strategy: what ``manage.py recommend`` does with the observable
    record as its input (each cell's share, training, cost, conditions and latest outcomes,
    and the earlier evaluations as ``history``). The recommender learns the transfer from
    that history and refits the curves under it itself
    (:func:`analytics.steering.levels.fit_transfer`; ``transfer`` false: cells taken as
    independent, the curves refitted by :func:`analytics.learning.fit_history`).

    The recommender's seed is ``seed`` plus the round number, so a campaign is
    reproducible and Thompson draws differ between rounds.
    """
    learns = transfer

    def steered(observation: Observation) -> IntArray:
        conditions = observation.conditions
        cells = steered_cells(observation)
        model: TransferModel | None
        if learns:  # the recommender chooses it by the evaluations' levels (fit_transfer)
            model = None
        else:  # the conditions still centre the curves' priors; nothing transfers
            model = (
                TransferModel.none(
                    CellStructure.of(conditions), int(observation.eval_trials.shape[0])
                )
                if conditions
                else None
            )
        result = recommend(
            cells,
            observation.budget,
            observation.cycles_per_day,
            seed=seed + observation.round,
            exploration=exploration,
            history=history_of(observation),
            transfer=model,
        )
        return result.episodes.copy()

    return steered


def get_strategy(name: str, *, seed: int = 0, exploration: Exploration | None = None) -> Strategy:
    """Return the strategy called ``name`` (one of :data:`STRATEGY_NAMES`).

    Raises ValueError for an unknown name.
    """
    if name == "steered":
        return make_steered(seed=seed, exploration=exploration)
    if name == STEERED_WITHOUT_TRANSFER:
        return make_steered(seed=seed, exploration=exploration, transfer=False)
    table: dict[str, Strategy] = {
        "uniform": uniform,
        "proportional": proportional,
        "more-of-the-same": more_of_the_same,
    }
    if name not in table:
        raise ValueError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGY_NAMES)}")
    return table[name]


__all__ = [
    "STEERED_WITHOUT_TRANSFER",
    "STRATEGY_NAMES",
    "FloatArray",
    "get_strategy",
    "history_of",
    "learn_transfer",
    "make_steered",
    "more_of_the_same",
    "proportional",
    "split_budget",
    "steered_cells",
    "uniform",
]
