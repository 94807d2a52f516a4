"""Recommend the next round: whole episodes per cell that avoid the most interventions.

Value. ``k`` more episodes in cell ``c`` avoid ``cycles * p_c * a_c * ((n_c + 1) ** -b -
(n_c + k + 1) ** -b)`` interventions a day, with the shared ``f_inf``, ``b`` and the cell
amplitude ``a_c`` from :func:`analytics.learning.fit_curve_set` (pooled curve with a
partially pooled per-cell multiplier). The plan maximises the total within the budget, with
each cell's episodes priced at its ``cost_per_episode`` (:func:`waterfill`).

Exploration. Where evidence is thin the amplitude is uncertain, and a plan built on the
posterior mean under-invests in cells that look fine only because nobody has looked. The
default is an **upper-confidence bound on the curve**: cells are valued at the ``level``
(default 0.8) posterior quantile of their amplitude. A cell with thousands of trials has a
narrow posterior, so its quantile is its mean; a cell with a handful of trials is valued
optimistically until evaluation says otherwise — the bonus shrinks exactly as evidence
arrives, is deterministic, and can be explained in one sentence. ``Exploration("thompson")``
instead values each cell at one posterior draw (seeded; Thompson sampling), and
``Exploration("mean")`` turns exploration off. Whatever ranks the cells, the *reported*
expected interventions avoided are always posterior means, so the figures stay honest.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from analytics.intervals import wilson_interval
from analytics.learning import CurveSet, EvaluationRows, fit_curve_set
from analytics.steering.text import format_count, format_interventions, format_percent
from analytics.steering.transfer import CellStructure, TransferModel, estimate_transfer
from analytics.steering.waterfill import waterfill, waterfill_with_transfer
from campaigns.planning.gain import power_gain

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

SHARE_TOLERANCE = 0.01
"""Target shares may sum to 1 within this (rounded survey figures); they are renormalised."""


class RecommendationInputError(ValueError):
    """Input a recommendation cannot be computed from; the message names cell and field."""


@dataclass(frozen=True)
class Exploration:
    """How uncertainty is valued: ``"ucb"`` (posterior quantile ``level``), ``"thompson"``
    (one seeded posterior draw per cell) or ``"mean"`` (no exploration).

    Raises ValueError for an unknown method or a level outside (0, 1).
    """

    method: Literal["ucb", "thompson", "mean"] = "ucb"
    level: float = 0.8

    def __post_init__(self) -> None:
        if self.method not in ("ucb", "thompson", "mean"):
            raise ValueError(f"unknown exploration method {self.method!r}")
        if not 0 < self.level < 1:
            raise ValueError(f"exploration level must be in (0, 1), got {self.level}")

    def describe(self) -> str:
        """Return one sentence on how this exploration values uncertain cells."""
        if self.method == "ucb":
            return (
                f"cells are ranked at the upper {self.level:.0%} bound of their learning "
                "curve, so thinly evaluated cells get the benefit of the doubt"
            )
        if self.method == "thompson":
            return "cells are ranked at one draw from their posterior (Thompson sampling)"
        return "cells are ranked at their expected learning curve (no exploration bonus)"


@dataclass(frozen=True)
class CellInput:
    """One condition cell as the recommender sees it.

    ``target_share`` of production cycles, (transfer-weighted) ``train_count``, evaluation
    ``trials`` / ``successes`` of the current policy, and ``cost_per_episode`` in budget units.
    """

    id: str
    target_share: float
    train_count: float
    trials: int
    successes: int
    cost_per_episode: float = 1.0
    conditions: Mapping[str, str] | None = None  # {dimension: value}: what transfer follows


@dataclass(frozen=True)
class HistoryRound:
    """An earlier round: the evaluation it started from and the episodes added after it,
    per cell id (cells it does not name were not evaluated and got nothing)."""

    round: int
    cells: Mapping[str, tuple[int, int, int]]  # id -> (trials, successes, added)


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
        "how": transfer.describe(),
    }


def _round(x: float, places: int = 3) -> float:
    return float(round(x, places))


# --- validation ----------------------------------------------------------------------


def _where(cell_id: str | None, index: int) -> str:
    return f"cell {cell_id!r}" if cell_id is not None else f"cell #{index + 1}"


def _number(
    value: object,
    *,
    what: str,
    minimum: float | None = 0.0,
    whole: bool = False,
    positive: bool = False,
) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecommendationInputError(f"{what} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise RecommendationInputError(f"{what} must be a finite number, got {value!r}")
    if positive and number <= 0:
        raise RecommendationInputError(f"{what} must be > 0, got {value!r}")
    if minimum is not None and number < minimum:
        raise RecommendationInputError(f"{what} must be >= {minimum:g}, got {value!r}")
    if whole and number != round(number):
        raise RecommendationInputError(f"{what} must be a whole number, got {value!r}")
    return number


_REQUIRED = ("id", "target_share", "train_count", "trials", "successes")


def parse_cells(raw_cells: object) -> list[CellInput]:
    """Return validated cells from the JSON ``cells`` list.

    Raises RecommendationInputError naming the cell (by id, else position) and the field:
    missing fields, non-numeric, negative or non-finite values, fractional trials,
    successes above trials, non-positive costs, duplicate ids.
    """
    if not isinstance(raw_cells, list) or not raw_cells:
        raise RecommendationInputError("'cells' must be a non-empty list of cell objects")
    cells: list[CellInput] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_cells):
        if not isinstance(raw, Mapping):
            raise RecommendationInputError(f"cell #{index + 1} must be an object, got {raw!r}")
        raw_id = raw.get("id")
        cell_id = None if raw_id is None else str(raw_id)
        where = _where(cell_id, index)
        for name in _REQUIRED:
            if name not in raw or raw[name] is None:
                raise RecommendationInputError(f"{where}: missing field {name!r}")
        if not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool) or str(raw_id) == "":
            raise RecommendationInputError(f"{where}: 'id' must be a non-empty string")
        cell_id = str(raw_id)
        if cell_id in seen:
            raise RecommendationInputError(f"{where}: duplicate id")
        seen.add(cell_id)
        share = _number(raw["target_share"], what=f"{where}: 'target_share'")
        if share > 1:
            raise RecommendationInputError(
                f"{where}: 'target_share' must be a share between 0 and 1, got {share:g}"
            )
        train = _number(raw["train_count"], what=f"{where}: 'train_count'")
        trials = _number(raw["trials"], what=f"{where}: 'trials'", whole=True)
        successes = _number(raw["successes"], what=f"{where}: 'successes'", whole=True)
        if successes > trials:
            raise RecommendationInputError(
                f"{where}: 'successes' ({successes:g}) exceeds 'trials' ({trials:g})"
            )
        cost = 1.0
        if raw.get("cost_per_episode") is not None:
            cost = _number(
                raw["cost_per_episode"], what=f"{where}: 'cost_per_episode'", positive=True
            )
        cells.append(
            CellInput(
                id=cell_id,
                target_share=share,
                train_count=train,
                trials=int(trials),
                successes=int(successes),
                cost_per_episode=cost,
                conditions=_conditions(raw.get("conditions"), where),
            )
        )
    total = sum(c.target_share for c in cells)
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise RecommendationInputError(
            f"target shares sum to {total:.4g}, expected about 1 (within {SHARE_TOLERANCE:g}); "
            "normalise the condition profile"
        )
    return cells


def _conditions(raw: object, where: str) -> dict[str, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not raw:
        raise RecommendationInputError(
            f'{where}: \'conditions\' must be an object {{"<dimension>": "<value>", ...}}'
        )
    for dimension, value in raw.items():
        if not isinstance(value, str) or not value or not dimension:
            raise RecommendationInputError(
                f"{where}: 'conditions.{dimension}' must be a value name (a non-empty string), "
                f"got {value!r}"
            )
    return dict(raw)


def parse_history(raw: object, cells: Sequence[CellInput]) -> list[HistoryRound]:
    """Return the validated ``history`` (earlier rounds, oldest first).

    Raises RecommendationInputError naming the round, the cell and the field: unknown cell
    ids, rounds out of order, successes above trials, and more episodes added to a cell over
    the rounds than it holds now.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise RecommendationInputError(
            "'history' must be a list of rounds, oldest first: "
            '[{"round": r, "cells": [{"id", "trials", "successes", "added"}, ...]}, ...]'
        )
    known = {cell.id for cell in cells}
    rounds: list[HistoryRound] = []
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise RecommendationInputError(f"history #{index + 1} must be an object")
        if "round" not in item:
            raise RecommendationInputError(f"history #{index + 1}: missing field 'round'")
        number = int(_number(item["round"], what=f"history #{index + 1}: 'round'", whole=True))
        where = f"history round {number}"
        if rounds and number <= rounds[-1].round:
            raise RecommendationInputError(
                f"{where}: rounds must be oldest first (it follows round {rounds[-1].round})"
            )
        raw_cells = item.get("cells")
        if not isinstance(raw_cells, list):
            raise RecommendationInputError(f"{where}: 'cells' must be a list")
        entries: dict[str, tuple[int, int, int]] = {}
        for position, entry in enumerate(raw_cells):
            if not isinstance(entry, Mapping) or "id" not in entry:
                raise RecommendationInputError(
                    f"{where}: cell #{position + 1} must be an object with an 'id'"
                )
            cell_id = str(entry["id"])
            at = f"{where}, cell {cell_id!r}"
            if cell_id not in known:
                raise RecommendationInputError(f"{at}: not one of the cells")
            if cell_id in entries:
                raise RecommendationInputError(f"{at}: listed twice")
            values = []
            for name in ("trials", "successes", "added"):
                value = entry.get(name, 0)
                values.append(int(_number(value, what=f"{at}: {name!r}", whole=True)))
            trials, successes, added = values
            if successes > trials:
                raise RecommendationInputError(
                    f"{at}: 'successes' ({successes}) exceeds 'trials' ({trials})"
                )
            entries[cell_id] = (trials, successes, added)
        rounds.append(HistoryRound(round=number, cells=entries))
    evaluations(cells, rounds)  # more added than a cell holds is an error
    return rounds


def evaluations(
    cells: Sequence[CellInput], history: Sequence[HistoryRound]
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(training counts, trials, successes), one row per evaluation (the history's, oldest
    first, then the current one) and one column per cell. A round's counts are today's less
    what was added in it and after it. Raises RecommendationInputError when that would be
    negative."""
    size = len(cells)
    index = {cell.id: i for i, cell in enumerate(cells)}
    rows = len(history) + 1
    counts = np.zeros((rows, size))
    trials = np.zeros((rows, size))
    successes = np.zeros((rows, size))
    counts[-1] = [cell.train_count for cell in cells]
    trials[-1] = [cell.trials for cell in cells]
    successes[-1] = [cell.successes for cell in cells]
    for r in range(len(history) - 1, -1, -1):
        added = np.zeros(size)
        for cell_id, (t, s, a) in history[r].cells.items():
            trials[r, index[cell_id]] = t
            successes[r, index[cell_id]] = s
            added[index[cell_id]] = a
        counts[r] = counts[r + 1] - added
        short = np.flatnonzero(counts[r] < 0)
        if short.size:
            cell = cells[int(short[0])]
            raise RecommendationInputError(
                f"history round {history[r].round}, cell {cell.id!r}: more episodes were added "
                f"from this round on than the cell holds now ({cell.train_count:g})"
            )
    return counts, trials, successes


@dataclass(frozen=True)
class RecommendationRequest:
    """A parsed ``recommend`` input file."""

    cells: list[CellInput]
    budget: float
    cycles_per_day: float
    history: list[HistoryRound] = field(default_factory=list)


def parse_request(data: object) -> RecommendationRequest:
    """Return the validated request from a decoded JSON document.

    Expects ``{"budget": B, "cycles_per_day": C, "cells": [...], "history"?: [...]}``;
    raises RecommendationInputError naming the first problem.
    """
    if not isinstance(data, Mapping):
        raise RecommendationInputError(
            "input must be a JSON object with budget, cycles_per_day and cells"
        )
    for name in ("budget", "cycles_per_day", "cells"):
        if name not in data or data[name] is None:
            raise RecommendationInputError(f"missing field {name!r}")
    budget = _number(data["budget"], what="'budget'")
    cycles = _number(data["cycles_per_day"], what="'cycles_per_day'")
    cells = parse_cells(data["cells"])
    return RecommendationRequest(
        cells=cells,
        budget=budget,
        cycles_per_day=cycles,
        history=parse_history(data.get("history"), cells),
    )


def _check_cells(cells: Sequence[CellInput], budget: float, cycles_per_day: float) -> None:
    # Programmatic callers get the same checks as the JSON path.
    parse_cells([dataclasses.asdict(c) for c in cells])
    _number(budget, what="'budget'")
    _number(cycles_per_day, what="'cycles_per_day'")


# --- recommendation ------------------------------------------------------------------


def ranking_amplitude(curves: CurveSet, exploration: Exploration, seed: int) -> FloatArray:
    """Return the per-cell amplitude that ranks cells under ``exploration``."""
    if exploration.method == "mean":
        return curves.amplitude.copy()
    if exploration.method == "ucb":
        # Never below the mean: a skewed posterior's quantile can be.
        return np.maximum(curves.amplitude_quantile(exploration.level), curves.amplitude)
    return curves.sample_amplitude(np.random.default_rng(seed))


def recommend(
    cells: Sequence[CellInput],
    budget: float,
    cycles_per_day: float,
    *,
    seed: int = 0,
    exploration: Exploration | None = None,
    curves: CurveSet | None = None,
    extra_failure_rate: npt.ArrayLike | None = None,
    history: Sequence[HistoryRound] = (),
    transfer: TransferModel | None = None,
) -> Recommendation:
    """Recommend whole episodes per cell for the next round, within ``budget``.

    ``history`` (earlier rounds, oldest first) adds their evaluations to the evidence; with
    the cells' ``conditions`` it also teaches how much an episode in one cell helps another
    (:func:`analytics.steering.transfer.estimate_transfer`; ``transfer`` gives that model
    instead). With transfer the curves are read at each cell's effective training and an
    episode is valued for the failures it avoids in every cell it helps, per unit of its
    cost (:func:`waterfill_with_transfer`); without (no history, no conditions, or history
    that shows none) the allocation is exactly the one without these inputs.

    ``curves`` is a curve set refitted on the full evaluation history (see
    :func:`analytics.learning.fit_curve_set`), at effective counts when there is transfer;
    without it one is fitted from the evaluations. ``extra_failure_rate`` (failures per
    cycle, one per cell, >= 0) is failure seen in production beyond what the evaluations
    show, e.g. a flagged rise (:mod:`analytics.reliability`): it is added to the cell's
    current rate by scaling the cell's curve amplitude, so the extra failures are assumed to
    fall with training data like the rest of the cell's. The result is deterministic for a
    given ``seed`` (only Thompson sampling uses it). Raises RecommendationInputError on
    invalid cells, budget or cycles, an extra rate of the wrong length or sign, or when
    ``curves`` or ``transfer`` covers a different number of cells.
    """
    _check_cells(cells, budget, cycles_per_day)
    how = exploration if exploration is not None else Exploration()
    p = np.array([c.target_share for c in cells], dtype=np.float64)
    p = p / p.sum()
    trials = np.array([c.trials for c in cells], dtype=np.float64)
    successes = np.array([c.successes for c in cells], dtype=np.float64)
    cost = np.array([c.cost_per_episode for c in cells], dtype=np.float64)
    counts, eval_trials, eval_successes = evaluations(cells, history)
    if transfer is None and history and any(c.conditions for c in cells):
        structure = CellStructure.of([c.conditions or {} for c in cells])
        transfer = estimate_transfer(structure, counts, eval_trials, eval_successes)
    if transfer is not None and transfer.structure.n_cells != len(cells):
        raise RecommendationInputError(
            f"transfer model covers {transfer.structure.n_cells} cells but {len(cells)} were given"
        )
    spread: FloatArray | None = None
    effective = counts
    if transfer is not None and transfer.transfers:
        spread, effective = transfer.matrix(), transfer.effective(counts)
    n = effective[-1]
    if curves is None:
        curves = fit_curve_set(_rows(effective, eval_trials, eval_successes), n)
    elif curves.n_cells != len(cells):
        raise RecommendationInputError(
            f"curve set covers {curves.n_cells} cells but {len(cells)} were given"
        )
    weight = cycles_per_day * p
    rank_amp = ranking_amplitude(curves, how, seed)
    if extra_failure_rate is not None:
        scale = _amplitude_scale(curves, n, extra_failure_rate)
        curves = dataclasses.replace(curves, amplitude=curves.amplitude * scale)
        rank_amp = rank_amp * scale
    if spread is None:
        episodes = waterfill(weight * rank_amp, n, cost, curves.b, budget)
        added = episodes.astype(np.float64)
    else:
        episodes = waterfill_with_transfer(weight * rank_amp, n, cost, curves.b, budget, spread)
        added = episodes + spread @ episodes

    rate_now = curves.rate(n)
    rate_after = curves.rate(n + added)
    avoided_in = weight * power_gain(curves.amplitude, n, curves.b, added)
    avoided = _by_source(avoided_in, episodes, spread)
    before = float(np.dot(weight, rate_now))
    after = float(before - avoided_in.sum())
    marginal = weight * power_gain(curves.amplitude, n + added, curves.b, 1.0) / cost
    fail_low, fail_high = wilson_interval(trials - successes, trials)
    helps = _helps(transfer, spread, p, episodes)
    rows = [
        CellRecommendation(
            id=cell.id,
            episodes=int(episodes[i]),
            cost=float(episodes[i] * cost[i]),
            expected_interventions_avoided_per_day=float(avoided[i]),
            failure_rate_now=float(rate_now[i]),
            failure_rate_after=float(rate_after[i]),
            interventions_per_day_now=float(weight[i] * rate_now[i]),
            rationale=_rationale(
                cell,
                share=float(p[i]),
                episodes=int(episodes[i]),
                avoided=float(avoided[i]),
                rate_now=float(rate_now[i]),
                floor=curves.f_inf,
                optimistic=bool(how.method == "ucb" and rank_amp[i] > 1.5 * curves.amplitude[i]),
                level=how.level,
                marginal=float(marginal[i]),
                interval=(float(fail_low[i]), float(fail_high[i])),
                cost=_cost_words(cost, i),
                helps=helps.get(i, ""),
            ),
        )
        for i, cell in enumerate(cells)
    ]
    notes = [f"Exploration: {how.describe()}."]
    if transfer is not None:
        notes.append(f"Transfer: {transfer.describe()}.")
    if curves.fit.source == "prior":
        notes.append(f"Learning curve: {curves.fit.reason}.")
    return Recommendation(
        allocations=rows,
        budget=float(budget),
        spent=float(np.dot(cost, episodes)),
        cycles_per_day=float(cycles_per_day),
        interventions_per_day_before=before,
        interventions_per_day_after=after,
        exploration=how,
        seed=seed,
        curves=curves,
        episodes=episodes,
        ranking_amplitude=rank_amp,
        planner_failure_rates=curves.rate(n, rank_amp),
        notes=notes,
        transfer=transfer,
    )


def _rows(counts: FloatArray, trials: FloatArray, successes: FloatArray) -> EvaluationRows:
    """The evaluations (one row each of counts, trials, successes) as curve-fit rows."""
    if counts.shape[0] == 1:  # no history: today's snapshot, row for row
        return EvaluationRows.snapshot(counts[0], trials[0], successes[0])
    return EvaluationRows.of_evaluations(counts, trials, successes)


def _by_source(avoided_in: FloatArray, episodes: IntArray, spread: FloatArray | None) -> FloatArray:
    """What each cell's episodes avoid: every cell's avoided interventions shared among the
    cells whose episodes reached it, in proportion to what each contributed."""
    if spread is None:
        return avoided_in
    contribution = spread * episodes[None, :]
    np.fill_diagonal(contribution, episodes)
    total = contribution.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(total[:, None] > 0, contribution / total[:, None], 0.0)
    return np.asarray(avoided_in @ share, dtype=np.float64)


HELP_THRESHOLD = 0.05
"""A cell is said to be helped by another's episodes when one of them counts this much."""


def _helps(
    transfer: TransferModel | None,
    spread: FloatArray | None,
    share: FloatArray,
    episodes: IntArray,
) -> dict[int, str]:
    """Per allocated cell, the words for the other cells its episodes help."""
    if transfer is None or spread is None:
        return {}
    structure = transfer.structure
    out = {}
    for j in np.flatnonzero(episodes > 0).tolist():
        helped = [
            i for i in np.flatnonzero(spread[:, j] >= HELP_THRESHOLD).tolist() if share[i] > 0
        ]
        if not helped:
            continue
        codes = structure.codes
        common = [
            structure.values[d][codes[j, d]]
            for d in range(len(structure.dimensions))
            if codes[j, d] >= 0 and all(codes[i, d] == codes[j, d] for i in helped)
        ]
        under = f" under {' · '.join(common)}" if common else ""
        noun = "cell" if len(helped) == 1 else "cells"
        out[j] = (
            f"also help {len(helped)} {noun}{under} that hold "
            f"{format_percent(float(share[helped].sum()))} of production"
        )
    return out


def _cost_words(cost: FloatArray, i: int) -> str:
    """ "cheap to stage (0.3x the median cost)" and the like, when costs differ."""
    median = float(np.median(cost))
    if median <= 0 or np.allclose(cost, cost[0]):
        return ""
    ratio = float(cost[i]) / median
    if ratio <= 0.67:
        return f"cheap to stage ({ratio:.1f}x the median cost)"
    if ratio >= 1.5:
        return f"costly to stage ({ratio:.1f}x the median cost)"
    return ""


def _amplitude_scale(curves: CurveSet, n: FloatArray, extra: npt.ArrayLike) -> FloatArray:
    """The amplitude multiplier that adds ``extra`` to each cell's current failure rate."""
    add = np.asarray(extra, dtype=np.float64)
    if add.shape != n.shape or not np.all(np.isfinite(add)) or np.any(add < 0):
        raise RecommendationInputError(
            f"extra_failure_rate must be {n.size} finite rates >= 0, one per cell"
        )
    learnable = curves.amplitude * np.power(n + 1.0, -curves.b)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(add > 0, (learnable + add) / np.maximum(learnable, 1e-12), 1.0)
    return np.asarray(scale, dtype=np.float64)


def _rationale(
    cell: CellInput,
    *,
    share: float,
    episodes: int,
    avoided: float,
    rate_now: float,
    floor: float,
    optimistic: bool,
    level: float,
    marginal: float,
    interval: tuple[float, float],
    cost: str = "",
    helps: str = "",
) -> str:
    """Return e.g. "12% of production cycles, 340 training episodes; 7 failures in 120
    trials (5.8%, 95% 2.9–11.5%); 420 more episodes avoid about 3.1 interventions a day."."""
    training = f"{format_count(cell.train_count)} training episodes"
    if cell.train_count == 0:
        training = "no training episodes"
    head = f"{format_percent(share)} of production cycles, {training}"
    if cell.trials:
        failures = cell.trials - cell.successes
        low, high = interval
        noun = "failure" if failures == 1 else "failures"
        evidence = (
            f"{format_count(failures)} {noun} in {format_count(cell.trials)} trials "
            f"({_pct(failures / cell.trials)}, 95% {_pct(low, False)}–{_pct(high)})"
        )
    else:
        evidence = f"no trials yet, learning-curve estimate {_pct(rate_now)}"
    if episodes > 0:
        noun = "episode" if episodes == 1 else "episodes"
        action = f"{format_count(episodes)} more {noun}"
        if cost:
            action += f", {cost},"
        if helps:
            action += f" {helps};"
        action += f" avoid {format_interventions(avoided)}"
        if optimistic:
            action += f" (little evidence: valued at the upper {level:.0%} bound of its curve)"
    elif share == 0:
        action = "no episodes: not seen in production"
    elif rate_now - floor <= 1e-6 or marginal <= 0:
        action = "no episodes: already at the learning-curve floor"
    else:
        action = "no episodes: other cells avoid more interventions per unit of budget"
    return f"{head}; {evidence}; {action}."


def _pct(rate: float, sign: bool = True) -> str:
    text = f"{100.0 * rate:.1f}"
    if text == "0.0" and rate > 0:
        text = f"{100.0 * rate:.2f}"
    return f"{text}%" if sign else text
