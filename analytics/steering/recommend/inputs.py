"""What a recommendation takes: cells, history and exploration, checked and parsed from
JSON with errors that name the round, cell and field (part of
:mod:`analytics.steering.recommend`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

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
