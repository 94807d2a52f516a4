"""What a collection strategy may see of a campaign: the observable record, nothing else.

An :class:`Observation` holds what a programme manager actually has before a round: the
target shares, the training counts, the evaluation history (per evaluation: training counts
of the evaluated policy, trials and successes per cell), the budget, costs, cycles per day
and, where the world names them, each cell's conditions. The simulator builds it from its
world (:mod:`analytics.steering.simulate`); the truth behind the world never enters it, and
this module does not import the simulator, so strategies written against it cannot reach
the truth either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _frozen(x: npt.ArrayLike, ndim: int, name: str) -> FloatArray:
    arr = np.array(x, dtype=np.float64)  # a copy: the caller's array stays the caller's
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-d, got shape {arr.shape}")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Observation:
    """The observable state of a campaign before a round (read-only arrays, copied in).

    ``eval_*`` have one row per evaluation so far (the first is the starting policy) and one
    column per cell; ``eval_train_count[e]`` are the training counts of the policy evaluated
    in evaluation ``e``, and ``eval_trials[e]`` / ``eval_successes[e]`` all its outcomes: its
    evaluation's, plus the production the fleet logged under it where a world logs any. ``round`` counts rounds completed. ``conditions`` names each cell's
    condition per dimension (``{"lighting": "dim sodium", ...}``), or is empty when the
    cells are only labels. Raises ValueError on shapes or counts that do not agree.
    """

    round: int
    labels: Sequence[str]
    target_share: FloatArray
    train_count: FloatArray
    cost_per_episode: FloatArray
    budget: float
    cycles_per_day: float
    reliability_target: float
    eval_train_count: FloatArray
    eval_trials: FloatArray
    eval_successes: FloatArray
    conditions: Sequence[Mapping[str, str]] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", tuple(self.labels))
        for name in ("target_share", "train_count", "cost_per_episode"):
            object.__setattr__(self, name, _frozen(getattr(self, name), 1, name))
        for name in ("eval_train_count", "eval_trials", "eval_successes"):
            object.__setattr__(self, name, _frozen(getattr(self, name), 2, name))
        size = len(self.labels)
        for name in ("target_share", "train_count", "cost_per_episode"):
            if getattr(self, name).shape != (size,):
                raise ValueError(f"{name} must have one entry per cell ({size})")
        shape = self.eval_trials.shape
        if shape[1:] != (size,) or self.eval_train_count.shape != shape:
            raise ValueError("evaluation arrays must be (evaluations, cells) and agree")
        if self.eval_successes.shape != shape:
            raise ValueError("evaluation arrays must be (evaluations, cells) and agree")
        conditions = tuple(dict(cell) for cell in self.conditions)
        if conditions and len(conditions) != size:
            raise ValueError(
                f"conditions must be empty or one mapping per cell ({size}), got {len(conditions)}"
            )
        object.__setattr__(self, "conditions", conditions)

    @property
    def n_cells(self) -> int:
        """Return the number of cells."""
        return len(self.labels)

    @property
    def latest_trials(self) -> FloatArray:
        """Return the latest evaluation's trials per cell (zeros before any evaluation)."""
        if self.eval_trials.shape[0] == 0:
            return np.zeros(self.n_cells)
        return np.asarray(self.eval_trials[-1])

    @property
    def latest_successes(self) -> FloatArray:
        """Return the latest evaluation's successes per cell."""
        if self.eval_successes.shape[0] == 0:
            return np.zeros(self.n_cells)
        return np.asarray(self.eval_successes[-1])


Strategy = Callable[[Observation], IntArray]
"""A collection strategy: whole episodes per cell for the next round, from an Observation."""
