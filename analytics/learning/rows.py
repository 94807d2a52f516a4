"""Evaluation evidence as rows: one per (cell, evaluation), with the cell's training then.

Part of :mod:`analytics.learning`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _sum_by(index: npt.ArrayLike, weights: FloatArray, size: int) -> FloatArray:
    return np.bincount(np.asarray(index), weights=weights, minlength=size).astype(np.float64)


@dataclass(frozen=True, eq=False)
class EvaluationRows:
    """Evaluation evidence: one row per (cell, evaluation), arrays of equal length.

    ``cell`` indexes cells ``0 .. n_cells - 1``; ``train_count`` is the cell's
    (transfer-weighted) training episodes when the evaluated policy was trained;
    ``trials`` / ``successes`` are its outcomes. Raises ValueError on malformed rows.
    """

    cell: IntArray
    train_count: FloatArray
    trials: FloatArray
    successes: FloatArray
    n_cells: int

    def __post_init__(self) -> None:
        cell = np.asarray(self.cell)
        n = np.asarray(self.train_count, dtype=np.float64)
        t = np.asarray(self.trials, dtype=np.float64)
        s = np.asarray(self.successes, dtype=np.float64)
        if not (cell.ndim == n.ndim == t.ndim == s.ndim == 1):
            raise ValueError("evaluation rows must be 1-d arrays")
        if not (cell.shape == n.shape == t.shape == s.shape):
            raise ValueError(
                f"evaluation rows must be equally long, got {cell.shape}, {n.shape}, "
                f"{t.shape}, {s.shape}"
            )
        if self.n_cells < 1:
            raise ValueError(f"need at least one cell, got n_cells={self.n_cells}")
        if cell.size and (cell.dtype.kind not in "iu" or cell.min() < 0):
            raise ValueError("cell indices must be integers >= 0")
        if cell.size and cell.max() >= self.n_cells:
            raise ValueError(f"cell index {int(cell.max())} out of range for {self.n_cells}")
        if not np.all(np.isfinite(n)) or np.any(n < 0):
            raise ValueError("training counts must be finite and >= 0")
        if not (np.all(np.isfinite(t)) and np.all(np.isfinite(s))):
            raise ValueError("trials and successes must be finite")
        if np.any(s < 0) or np.any(s > t):
            raise ValueError("need 0 <= successes <= trials in every row")
        object.__setattr__(self, "cell", cell.astype(np.int64))
        object.__setattr__(self, "train_count", n)
        object.__setattr__(self, "trials", t)
        object.__setattr__(self, "successes", s)

    @classmethod
    def snapshot(
        cls, train_count: npt.ArrayLike, trials: npt.ArrayLike, successes: npt.ArrayLike
    ) -> EvaluationRows:
        """Return one row per cell: the current policy's evaluation in every cell."""
        n = np.asarray(train_count, dtype=np.float64)
        return cls(
            cell=np.arange(n.size, dtype=np.int64),
            train_count=n,
            trials=np.asarray(trials, dtype=np.float64),
            successes=np.asarray(successes, dtype=np.float64),
            n_cells=int(n.size),
        )

    @classmethod
    def of_evaluations(
        cls, train_count: npt.ArrayLike, trials: npt.ArrayLike, successes: npt.ArrayLike
    ) -> EvaluationRows:
        """Return the rows of evaluations given as (evaluations x cells) arrays: the cells
        each evaluation tried, rows of equal (cell, training count) merged."""
        t = np.atleast_2d(np.asarray(trials, dtype=np.float64))
        evaluations, size = t.shape
        keep = t.reshape(-1) > 0
        return cls(
            cell=np.tile(np.arange(size, dtype=np.int64), evaluations)[keep],
            train_count=np.asarray(train_count, dtype=np.float64).reshape(-1)[keep],
            trials=t.reshape(-1)[keep],
            successes=np.asarray(successes, dtype=np.float64).reshape(-1)[keep],
            n_cells=size,
        ).merged()

    def merged(self) -> EvaluationRows:
        """Return the same evidence with rows of equal (cell, training count) summed.

        A cell that got no data between evaluations was evaluated twice at the same ``n``:
        the likelihood is the same with one row holding both, and the fits get faster.
        """
        if self.cell.size == 0:
            return self
        keys = np.stack([self.cell.astype(np.float64), self.train_count], axis=1)
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        return EvaluationRows(
            cell=unique[:, 0].astype(np.int64),
            train_count=unique[:, 1],
            trials=_sum_by(inverse, self.trials, len(unique)),
            successes=_sum_by(inverse, self.successes, len(unique)),
            n_cells=self.n_cells,
        )

    def trials_per_cell(self) -> FloatArray:
        """Return all trials per cell, summed over evaluations."""
        return _sum_by(self.cell, self.trials, self.n_cells)

    def failures_per_cell(self) -> FloatArray:
        """Return all failures per cell, summed over evaluations."""
        return _sum_by(self.cell, self.trials - self.successes, self.n_cells)
