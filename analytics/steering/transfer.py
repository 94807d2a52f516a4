"""Transfer between condition cells: how much an episode in one cell trains another.

Model. Cells are combinations of condition values (lighting x clutter x ...). An episode
captured in cell ``j`` counts as ``T[i, j]`` of an episode in cell ``i``:

    T[i, j] = product over the dimensions d in which i and j differ of s_d      (i != j)

with one strength ``s_d`` in [0, 1) per dimension: the share of an episode that survives a
change of that one condition. Cells that differ in one dimension help each other by that
dimension's strength, cells that differ in all of them by the product (little); a dimension
a cell does not state counts as different. That is the model's extent :data:`EXTENT_ANY`;
under :data:`EXTENT_NEIGHBOURS` an episode helps only cells one condition away (and cells
with the same conditions), and :mod:`analytics.steering.levels` chooses between the two by
what the evaluations' levels say. A cell's effective training is its own episodes
plus what transfers, ``n_eff = n + T @ n``; the learning curves
(:mod:`analytics.learning`) are read at ``n_eff``, and an episode's value is the failures it
avoids in every cell it helps (:mod:`analytics.steering.recommend`).

Learning the strengths. Only history can say how much transfers: a cell that received no
episodes between two evaluations but failed less afterwards learnt from its neighbours, and
cells that got episodes show how fast learning goes. The evidence is every evaluation so far
with the training counts of the policy evaluated. For candidate strengths, where each cell's
failures fell among its own evaluations is scored at their effective counts (a likelihood
that needs no per-cell amplitude, :class:`_Score`), with each cell's own exponent
integrated out around the pool's (the pool's at its best): a cell that learns faster than
the pool would otherwise pass for one its neighbours helped. Each strength the model acts
on is the mean of its marginal posterior on :data:`STRENGTH_GRID`, the other strengths
integrated out (below): the evidence stays thin for many rounds, and the mode, which the
prior pins to "none" until the evidence is overwhelming, would value a cell with few
episodes of its own as if its neighbours had taught it nothing; the mean with the other
strengths held at their most probable lets one dimension take up what thin evidence says
of several (it is the benches' baseline, ``bench/_util.py``'s ``conditional_reading``,
some ten to forty times cheaper, and no longer what anything in the app acts on). The
prior puts 70% of its mass on no transfer and spreads the rest
log-uniformly over the grid, preferring no scale of transfer (spread evenly over the grid's
points, which crowd at the top, it put twice as much on 40-80% as on 2-5%, and a few dozen
failures that could not tell 10% from 80% read as 30%): with no history the strengths are
0 and every cell learns from its own episodes only (the recommendation is exactly what it
was without transfer); from the second evaluation on each strength is what the evidence and
the prior make of it, small where they say little. Each strength comes with an interval
from its marginal posterior, the other strengths integrated out by Gibbs sampling over the
grid (:func:`_marginals`), which narrows as evaluations accumulate. Strengths of different
dimensions can stand in for each other, and a cell's own exponent for them: the profile
intervals used before (the others at their most probable for each value) missed that, and
in synthetic worlds of seven dimensions (about 730 cells, three evaluations of 200 trials,
each cell's exponent its own; 24 of them) their 90% held the truth 138 times in 168, the
marginal ones 149, for about the same work.

Django-free: numpy arrays in, numpy arrays out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from analytics.learning.posteriors import EXPONENT_SPREADS

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

STRENGTH_GRID: FloatArray = np.array([0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.65, 0.8])
"""Candidate strengths per dimension (the share of an episode that survives one change)."""

PRIOR_NO_TRANSFER = 0.7
"""Prior probability that a dimension transfers nothing; the rest is log-uniform over the
non-zero strengths (:func:`_log_prior`)."""

EXTENT_ANY = "any"
"""Transfer reaches every cell: the product of the strengths of the dimensions that differ."""

EXTENT_NEIGHBOURS = "neighbours"
"""Transfer reaches only cells that differ in one condition (and cells with the same ones)."""

EXTENTS: tuple[str, ...] = (EXTENT_ANY, EXTENT_NEIGHBOURS)

INTERVAL_LEVEL = 0.9
"""The level of the strengths' reported intervals."""

GIBBS_SWEEPS = 60
"""Sweeps of the Gibbs sampler behind the intervals (:func:`_marginals`): each weighs every
strength of every dimension once, about what the profile intervals it replaced cost with
seven dimensions."""

_PASSES = 3  # rounds of one-dimension-at-a-time updates (they settle in one or two)
_DENSE_CELLS = 400  # up to this many cells the estimate forms the transfer matrix


@dataclass(frozen=True, eq=False)
class CellStructure:
    """Which condition values each cell has: ``codes[c, d]`` indexes ``values[d]`` (-1 where
    the cell does not state dimension ``d``)."""

    dimensions: tuple[str, ...]
    values: tuple[tuple[str, ...], ...]
    codes: IntArray

    @classmethod
    def of(cls, conditions: Sequence[Mapping[str, str]]) -> CellStructure:
        """The structure of cells given as ``{dimension: value}`` each (dimensions in order of
        first appearance, values likewise)."""
        dimensions: dict[str, dict[str, int]] = {}
        for cell in conditions:
            for dimension, value in cell.items():
                dimensions.setdefault(dimension, {}).setdefault(value, len(dimensions[dimension]))
        names = tuple(dimensions)
        codes = np.full((len(conditions), len(names)), -1, dtype=np.int64)
        for c, cell in enumerate(conditions):
            for d, name in enumerate(names):
                if name in cell:
                    codes[c, d] = dimensions[name][cell[name]]
        return cls(
            dimensions=names,
            values=tuple(tuple(dimensions[name]) for name in names),
            codes=codes,
        )

    @property
    def n_cells(self) -> int:
        return int(self.codes.shape[0])

    def differ(
        self, rows: npt.ArrayLike | None = None, cells: npt.ArrayLike | None = None
    ) -> npt.NDArray[np.bool_]:
        """``[i, j, d]``: cell ``rows[i]`` and cell ``cells[j]`` differ in dimension d (or
        either does not state it); every cell where ``rows`` or ``cells`` is None."""
        mine = self.codes if rows is None else self.codes[np.asarray(rows, dtype=np.int64)]
        theirs = self.codes if cells is None else self.codes[np.asarray(cells, dtype=np.int64)]
        unknown = (mine < 0)[:, None, :] | (theirs < 0)[None, :, :]
        return (mine[:, None, :] != theirs[None, :, :]) | unknown

    def group(self, inside: tuple[bool, ...]) -> tuple[IntArray, IntArray, int]:
        """The cells that state every dimension marked ``inside`` and, for each of them,
        its group among them by their values there, with the number of groups (cached:
        :meth:`TransferModel.spread` asks for the same few sets again and again)."""
        cache: dict[tuple[bool, ...], tuple[IntArray, IntArray, int]] = self.__dict__.setdefault(
            "_groups", {}
        )
        if inside not in cache:
            mask = np.array(inside, dtype=bool)
            eligible = np.flatnonzero((self.codes[:, mask] >= 0).all(axis=1))
            group = np.zeros(eligible.size, dtype=np.int64)
            if mask.any() and eligible.size:
                _, inverse = np.unique(self.codes[eligible][:, mask], axis=0, return_inverse=True)
                group = inverse.reshape(-1).astype(np.int64)
            cache[inside] = (eligible, group, int(group.max()) + 1 if group.size else 0)
        return cache[inside]

    def grid_shape(self) -> tuple[int, ...]:
        """The number of slots per dimension on the grid of every combination: its values,
        and one more where some cell does not state it."""
        return tuple(
            len(values) + int(bool(np.any(self.codes[:, d] < 0)))
            for d, values in enumerate(self.values)
        )

    def one_hot(self) -> tuple[FloatArray, IntArray]:
        """``cells x values``: 1 where a cell has the value (every dimension's values side by
        side; a dimension a cell does not state has none), and each column's dimension
        (cached, like :meth:`group`)."""
        if "_one_hot" not in self.__dict__:
            sizes = [len(values) for values in self.values]
            first = np.cumsum([0, *sizes[:-1]]).astype(np.int64)
            table = np.zeros((self.n_cells, int(sum(sizes))))
            for d in range(len(sizes)):
                known = np.flatnonzero(self.codes[:, d] >= 0)
                table[known, first[d] + self.codes[known, d]] = 1.0
            dimension = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
            self.__dict__["_one_hot"] = (table, dimension)
        cached: tuple[FloatArray, IntArray] = self.__dict__["_one_hot"]
        return cached

    def label(self, cell: int) -> str:
        """The cell's values joined, e.g. "dim sodium · sparse"."""
        return " · ".join(
            self.values[d][code] for d, code in enumerate(self.codes[cell].tolist()) if code >= 0
        )


@dataclass(frozen=True, eq=False)
class TransferModel:
    """Per-dimension transfer strengths, their intervals and what they were learnt from.

    ``evaluations`` counts the evaluations behind the estimate (0 or 1: no history, the
    prior's answer of no transfer). ``extent`` says how far an episode carries:
    :data:`EXTENT_ANY`, to every cell by the product of the strengths where it differs, or
    :data:`EXTENT_NEIGHBOURS`, only to cells one condition away (by that dimension's
    strength) and to cells with the same conditions (fully, as the product has it).
    """

    structure: CellStructure
    strength: FloatArray
    low: FloatArray
    high: FloatArray
    evaluations: int
    extent: str = EXTENT_ANY

    def __post_init__(self) -> None:
        if self.extent not in EXTENTS:
            raise ValueError(f"unknown extent {self.extent!r}; choose from {', '.join(EXTENTS)}")

    @classmethod
    def none(cls, structure: CellStructure, evaluations: int = 0) -> TransferModel:
        """No transfer (the prior's answer before any history), with the prior's interval."""
        size = len(structure.dimensions)
        high = _prior_quantile(INTERVAL_LEVEL)
        return cls(
            structure=structure,
            strength=np.zeros(size),
            low=np.zeros(size),
            high=np.full(size, high),
            evaluations=evaluations,
        )

    @property
    def transfers(self) -> bool:
        """Whether any episode helps a cell other than its own."""
        return bool(np.any(self.strength > 0))

    def matrix(self, strength: npt.ArrayLike | None = None) -> FloatArray:
        """``T[i, j]``: what one episode in cell j counts for cell i (zero diagonal)."""
        s = self.strength if strength is None else np.asarray(strength, dtype=np.float64)
        if self.extent == EXTENT_NEIGHBOURS:
            _check_strength(self.structure, s)
            return np.asarray(_neighbour_matrix(self.structure, s).toarray(), dtype=np.float64)
        return transfer_matrix(self.structure, s)

    def _neighbours(self) -> Any:
        """The sparse matrix of :data:`EXTENT_NEIGHBOURS` (cached)."""
        if "_sparse" not in self.__dict__:
            self.__dict__["_sparse"] = _neighbour_matrix(self.structure, self.strength)
        return self.__dict__["_sparse"]

    def effective(self, n: npt.ArrayLike) -> FloatArray:
        """Each cell's effective training: own episodes plus what transfers (the last axis
        is the cells)."""
        counts = np.asarray(n, dtype=np.float64)
        if not self.transfers:
            return counts.copy()
        return counts + self.spread(counts)

    def spread(self, x: npt.ArrayLike) -> FloatArray:
        """``T @ x`` over the last axis (what ``x`` per cell gives every other cell), without
        forming ``T`` (a gap report's thousands of cells would need a matrix of their
        square): in ``O(grid * dimensions)`` over the grid of every combination of values,
        or ``O(cells * 2 ** dimensions)`` by groups of cells where the grid is much larger
        than the cells or would not fit in memory (:func:`_spread`). ``T`` is symmetric, so this is also
        ``T.T @ x``: for values ``x`` per cell, what an episode in each cell is worth in
        the cells it helps."""
        values = np.asarray(x, dtype=np.float64)
        if values.shape[-1] != self.structure.n_cells:
            raise ValueError(f"need one value per cell ({self.structure.n_cells})")
        if not self.transfers:
            return np.zeros_like(values)
        if self.extent == EXTENT_NEIGHBOURS:
            flat = values.reshape(-1, self.structure.n_cells)
            return np.asarray((self._neighbours() @ flat.T).T, dtype=np.float64).reshape(
                values.shape
            )
        return _spread(self.structure, self.strength, values)

    def reach(self, x: npt.ArrayLike) -> FloatArray:
        """``T.T @ x``: for values ``x`` per cell, what one episode in each cell is worth in
        the other cells it helps (``T`` is symmetric, so this is :meth:`spread`)."""
        return self.spread(x)

    @property
    def reach_cost(self) -> int:
        """What one :meth:`reach` costs, in columns of :meth:`columns` (about: a column is
        one pass over the cells; the reach is a pass over the grid per dimension or one over
        the cells per set of transferring dimensions, whichever :func:`_spread` takes, or one
        over the neighbours' sparse matrix)."""
        if self.extent == EXTENT_NEIGHBOURS:
            return max(1, math.ceil(self._neighbours().nnz / max(self.structure.n_cells, 1)))
        if not _on_grid(self.structure, self.strength, rows=1):
            return 2 ** int(np.count_nonzero(self.strength > 0))
        return max(1, math.ceil(_grid_work(self.structure) / max(self.structure.n_cells, 1)))

    def columns(self, cells: npt.ArrayLike, rows: npt.ArrayLike | None = None) -> FloatArray:
        """``T[rows][:, cells]``: what one episode in each of ``cells`` counts for each cell of
        ``rows`` (all cells when None; 0 in its own), in ``O(rows * cells * dimensions)``."""
        js = np.asarray(cells, dtype=np.int64).reshape(-1)
        at = np.arange(self.structure.n_cells) if rows is None else np.asarray(rows, np.int64)
        if self.extent == EXTENT_NEIGHBOURS:
            return np.asarray(self._neighbours()[at][:, js].toarray(), dtype=np.float64)
        # log T[i, j] = the sum of log s_d over the dimensions where i and j differ: all of
        # them, less those where they share a value (one product of the cells' values).
        table, dimension = self.structure.one_hot()
        positive = self.strength > 0
        logs = np.log(np.where(positive, self.strength, 1.0))
        mine, theirs = table[at], table[js]
        out = np.exp(logs.sum() - (mine * logs[dimension]) @ theirs.T)
        if not positive.all():  # a dimension that transfers nothing: only cells that agree
            nothing = ~positive[dimension]
            agree = mine[:, nothing] @ theirs[:, nothing].T
            out[agree < np.count_nonzero(~positive) - 0.5] = 0.0
        out[at[:, None] == js[None, :]] = 0.0
        return out

    def stored(self) -> dict[str, Any]:
        """The model as JSON (strengths by dimension name, what they were learnt from)."""
        return {
            "dimensions": [
                {
                    "name": name,
                    "strength": float(s),
                    "low": None if np.isnan(low) else float(low),
                    "high": None if np.isnan(high) else float(high),
                }
                for name, s, low, high in zip(
                    self.structure.dimensions, self.strength, self.low, self.high, strict=True
                )
            ],
            "evaluations": self.evaluations,
            "extent": self.extent,
            "how": self.describe(),
        }

    @classmethod
    def from_stored(cls, structure: CellStructure, data: Mapping[str, Any] | None) -> TransferModel:
        """The stored model (:meth:`stored`) over other cells: each of ``structure``'s
        dimensions takes the stored strength of the same name, none where it has none
        (no stored model: no transfer)."""
        if not data:
            return cls.none(structure)
        by_name = {d["name"]: d for d in data.get("dimensions", [])}
        size = len(structure.dimensions)
        strength, low, high = np.zeros(size), np.zeros(size), np.zeros(size)
        for i, name in enumerate(structure.dimensions):
            entry = by_name.get(name)
            if entry is None:
                continue
            strength[i] = float(entry["strength"])
            low[i] = np.nan if entry.get("low") is None else float(entry["low"])
            high[i] = np.nan if entry.get("high") is None else float(entry["high"])
        if np.any(strength < 0) or np.any(strength >= 1):
            raise ValueError("stored transfer strengths must be in [0, 1)")
        return cls(
            structure=structure,
            strength=strength,
            low=low,
            high=high,
            evaluations=int(data.get("evaluations", 0)),
            extent=str(data.get("extent", EXTENT_ANY)),
        )

    def describe(self) -> str:
        """One sentence: what transfers, how sure, from how much evidence."""
        if self.evaluations < 2:
            return (
                "transfer between cells: none assumed until a second policy's outcomes show "
                "it (no earlier round to learn from; the evaluation or production of the "
                "release before could show it now)"
            )
        known = not np.any(np.isnan(self.low))
        parts = [
            f"{name} {s:.0%}" + (f" ({low:.0%}–{high:.0%})" if known else "")
            for name, s, low, high in zip(
                self.structure.dimensions, self.strength, self.low, self.high, strict=True
            )
        ]
        intervals = f"{INTERVAL_LEVEL:.0%} intervals, " if known else ""
        beyond = (
            "; nothing in cells that differ in two or more"
            if self.extent == EXTENT_NEIGHBOURS
            else ""
        )
        return (
            "an episode counts in a cell that differs in one condition by: "
            + ", ".join(parts)
            + beyond
            + f" ({intervals}learnt from {self.evaluations} evaluations)"
        )


def _check_strength(structure: CellStructure, s: FloatArray) -> None:
    if s.shape != (len(structure.dimensions),):
        raise ValueError(f"need one strength per dimension ({len(structure.dimensions)})")
    if np.any(s < 0) or np.any(s >= 1):
        raise ValueError("transfer strengths must be in [0, 1)")


def _neighbour_matrix(structure: CellStructure, strength: FloatArray) -> Any:
    """The sparse ``T`` of :data:`EXTENT_NEIGHBOURS`: ``strength[d]`` between cells that
    differ in dimension ``d`` only (a dimension either does not state counts as different,
    as in :meth:`CellStructure.differ`), 1 between cells with the same conditions, stated in
    every dimension, 0 elsewhere and on the diagonal. Built from the groups of cells that
    agree on every dimension but one, in ``O(pairs)``."""
    from scipy import sparse

    size, dims = structure.n_cells, len(structure.dimensions)
    rows: list[IntArray] = []
    cols: list[IntArray] = []
    vals: list[FloatArray] = []

    def pairs(inside: tuple[bool, ...]) -> tuple[IntArray, IntArray]:
        eligible, group, _ = structure.group(inside)
        order = np.argsort(group, kind="stable")
        cells, sorted_group = eligible[order], group[order]
        bounds = np.flatnonzero(np.diff(sorted_group)) + 1
        left: list[IntArray] = []
        right: list[IntArray] = []
        for members in np.split(cells, bounds):
            if members.size > 1:
                i, j = np.meshgrid(members, members, indexing="ij")
                keep = i != j
                left.append(i[keep])
                right.append(j[keep])
        if not left:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(left), np.concatenate(right)

    if dims and np.any(strength > 0):
        same_i, same_j = pairs((True,) * dims)
        rows.append(same_i)
        cols.append(same_j)
        vals.append(np.ones(same_i.size))
        codes = structure.codes
        for d in np.flatnonzero(strength > 0).tolist():
            i, j = pairs(tuple(e != d for e in range(dims)))
            differ = (codes[i, d] != codes[j, d]) | (codes[i, d] < 0) | (codes[j, d] < 0)
            rows.append(i[differ])
            cols.append(j[differ])
            vals.append(np.full(int(differ.sum()), float(strength[d])))
    if not rows:
        return sparse.csr_matrix((size, size))
    return sparse.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(size, size)
    )


def transfer_matrix(structure: CellStructure, strength: npt.ArrayLike) -> FloatArray:
    """``T[i, j] = prod over the dimensions where i and j differ of strength[d]``, diagonal 0."""
    s = np.asarray(strength, dtype=np.float64)
    _check_strength(structure, s)
    size = structure.n_cells
    return _matrix(structure.differ().reshape(size * size, -1).astype(np.float64), s, size)


def _matrix(
    differ: FloatArray, strength: FloatArray, size: int, rows: IntArray | None = None
) -> FloatArray:
    """The transfer matrix from ``differ`` (cell pairs x dimensions, 1 where they differ):
    the product of the strengths where a pair differs, 0 where one of those is 0, and 0
    from a cell to itself. ``rows``: only those cells' rows (``differ`` then holds their
    pairs with every cell, as :meth:`CellStructure.differ` gives them)."""
    at = np.arange(size) if rows is None else rows
    matrix = np.exp(differ @ np.log(np.where(strength > 0, strength, 1.0)))
    matrix[differ @ (strength <= 0).astype(np.float64) > 0] = 0.0
    matrix = matrix.reshape(at.size, size)
    matrix[np.arange(at.size), at] = 0.0
    return matrix


def _spread(structure: CellStructure, strength: FloatArray, x: FloatArray) -> FloatArray:
    """``T @ x`` over the last axis, whichever way is cheaper: one pass per dimension over
    the grid of all value combinations (:func:`_spread_on_grid`) or sums over groups of
    cells (:func:`_spread_by_groups`), the grid only where it fits in :data:`_GRID_POINTS`
    (a grid per row of ``x``)."""
    if _on_grid(structure, strength, rows=int(np.prod(x.shape[:-1]))):
        return _spread_on_grid(structure, strength, x)
    return _spread_by_groups(structure, strength, x)


def _on_grid(structure: CellStructure, strength: FloatArray, *, rows: int) -> bool:
    """Whether :func:`_spread` takes the grid for ``rows`` rows: cheaper than the groups, and
    within :data:`_GRID_POINTS`."""
    by_groups = 2 ** int(np.count_nonzero(strength > 0)) * structure.n_cells
    fits = math.prod(structure.grid_shape()) * rows <= _GRID_POINTS
    return fits and _grid_work(structure) <= by_groups


_GRID_POINTS = 4_000_000
"""The most points :func:`_spread_on_grid` holds at once (32 MB): a report's many cells over
many dimensions, with a row per evaluation, would otherwise make grids of hundreds of MB."""


_GRID_PASS = 1 / 8
"""What a point of the grid costs in one pass of :func:`_spread_on_grid`, in cells of one set
of :func:`_spread_by_groups` (measured on the demo's 1,421 evaluated cells, a grid of 3,888
points: 0.37 ms on the grid whatever transfers, against 0.29 / 0.35 / 0.62 / 1.13 / 2.16 /
9.4 ms by groups with 1 / 2 / 3 / 4 / 5 / 7 dimensions transferring)."""


def _grid_work(structure: CellStructure) -> float:
    """The work of one :func:`_spread_on_grid`, in the units of :func:`_spread_by_groups`'s
    (a cell in one set of dimensions)."""
    grid = structure.grid_shape()
    return math.prod(grid) * len(grid) * _GRID_PASS


def _spread_on_grid(structure: CellStructure, strength: FloatArray, x: FloatArray) -> FloatArray:
    """``T @ x`` over the last axis through the grid of every combination of values.

    ``T'`` (``T`` with its diagonal) is the Kronecker product over the dimensions of
    ``M_d = s_d * J + (1 - s_d) * I``: two values agree (1) or differ (``s_d``); a cell
    that does not state a dimension sits in a slot of its own there that agrees with none,
    not even itself (its row of ``I`` is zero). Each cell's ``x`` is added into its point
    of the grid (cells at the same point agree everywhere they state, as ``T`` has it),
    ``M_d`` is applied along each axis in turn (a sum along the axis and a scaling), each
    cell reads its point, and the diagonal is taken off as in :func:`_spread_by_groups`.
    """
    size = structure.n_cells
    grid = structure.grid_shape()
    flat = x.reshape(-1, size)
    rows = flat.shape[0]
    codes = np.where(structure.codes >= 0, structure.codes, np.array(grid) - 1)
    point = np.ravel_multi_index(tuple(codes.T), grid) if grid else np.zeros(size, np.int64)
    cube = np.zeros((rows, math.prod(grid)))
    for row in range(rows):
        cube[row] = np.bincount(point, weights=flat[row], minlength=cube.shape[1])
    cube = cube.reshape(rows, *grid)
    for d, s in enumerate(strength.tolist()):
        axis = d + 1
        total = cube.sum(axis=axis, keepdims=True)
        cube = (1.0 - s) * cube + s * total
        if len(structure.values[d]) < grid[d]:  # the unstated slot agrees with nothing
            unstated = [slice(None)] * cube.ndim
            unstated[axis] = slice(grid[d] - 1, grid[d])
            cube[tuple(unstated)] = s * total
    out = cube.reshape(rows, -1)[:, point]
    diagonal = np.prod(np.where(structure.codes >= 0, 1.0, strength[None, :]), axis=1)
    out -= diagonal[None, :] * flat
    return out.reshape(x.shape)


def _spread_by_groups(structure: CellStructure, strength: FloatArray, x: FloatArray) -> FloatArray:
    """``T @ x`` over the last axis by sums over groups of cells.

    ``T[i, j]`` is the product over dimensions of ``s_d`` where the cells differ and 1
    where they agree, which expands as a sum over the sets ``S`` of dimensions of
    ``prod_{d in S} (1 - s_d) * prod_{d not in S} s_d`` times [i and j agree on every d in
    S]. So ``T' @ x`` (``T`` with its diagonal) is, for each such set, its coefficient times
    the sum of ``x`` over the cells that agree with ``i`` on it; a cell that does not state
    a dimension agrees with none on it (not even itself), and the diagonal, which ``T``
    leaves out, is taken off at the end. Only sets holding every dimension that transfers
    nothing have a coefficient: ``2 ** (dimensions that transfer)`` sets in all.
    """
    size = structure.n_cells
    flat = x.reshape(-1, size)
    out = np.zeros_like(flat)
    free = [d for d in range(strength.size) if strength[d] > 0]
    for chosen in itertools.product((False, True), repeat=len(free)):
        inside = strength <= 0
        inside[free] = chosen
        coefficient = float(np.prod(np.where(inside, 1.0 - strength, strength)))
        eligible, group, groups = structure.group(tuple(bool(v) for v in inside))
        if coefficient == 0.0 or eligible.size == 0:
            continue
        for row in range(flat.shape[0]):
            sums = np.bincount(group, weights=flat[row, eligible], minlength=groups)
            out[row, eligible] += coefficient * sums[group]
    # The diagonal of T': the product of the strengths of the dimensions a cell leaves unstated.
    diagonal = np.prod(np.where(structure.codes >= 0, 1.0, strength[None, :]), axis=1)
    out -= diagonal[None, :] * flat
    return out.reshape(x.shape)


def estimate_transfer(
    structure: CellStructure,
    eval_train_count: npt.ArrayLike,
    eval_trials: npt.ArrayLike,
    eval_successes: npt.ArrayLike,
    *,
    on_sweep: Callable[[int, int], None] | None = None,
) -> TransferModel:
    """Learn the strengths from the evaluations so far (one row per evaluation, oldest
    first; ``eval_train_count`` the own training counts of each evaluated policy). With
    fewer than two evaluations there is no history: no transfer. Each strength is the mean
    of its marginal posterior, and its interval that posterior's. ``on_sweep(done, total)``
    is told after every sweep of the sampler (the long part, for a job's progress).
    """
    counts = np.atleast_2d(np.asarray(eval_train_count, dtype=np.float64))
    trials = np.atleast_2d(np.asarray(eval_trials, dtype=np.float64))
    successes = np.atleast_2d(np.asarray(eval_successes, dtype=np.float64))
    if not counts.shape == trials.shape == successes.shape:
        raise ValueError("evaluation arrays must agree in shape (evaluations x cells)")
    if counts.shape[1] != structure.n_cells:
        raise ValueError(f"evaluations cover {counts.shape[1]} cells, not {structure.n_cells}")
    evaluations = int(np.count_nonzero(trials.sum(axis=1) > 0))
    dims = len(structure.dimensions)
    if evaluations < 2 or dims == 0:
        return TransferModel.none(structure, evaluations)
    score = _Score(structure, counts, trials, successes)
    log_prior = _log_prior()
    peak = _ascend(score, log_prior, np.zeros(dims))
    # Act on each strength's posterior mean, not on its mode: the evidence is thin for many
    # rounds, and the mode, pinned to "none" by the prior until the evidence is
    # overwhelming, values a cell with few episodes of its own as if it had learnt nothing
    # from its neighbours. The mean of the marginal posterior, the other strengths
    # integrated out, as the interval is: strengths of different dimensions stand in for
    # each other, and with the others held at their most probable one dimension takes up
    # what thin evidence says of several (in a simulated noisy history where each of four
    # dimensions passes 5%: 1%, 1%, 1% and 43% that way; 1%, 1%, 7% and 33% marginally).
    marginals = _marginals(score, log_prior, peak, on_sweep)
    strength = np.asarray(marginals @ STRENGTH_GRID, dtype=np.float64)
    low, high = np.empty(dims), np.empty(dims)
    for d, marginal in enumerate(marginals):
        low[d], high[d] = equal_tailed_interval(STRENGTH_GRID, marginal)
    return TransferModel(
        structure=structure, strength=strength, low=low, high=high, evaluations=evaluations
    )


B_GRID: FloatArray = np.round(np.arange(0.2, 1.55, 0.05), 2)
"""Learning-curve exponents the strengths are scored under: the pool's (the best one
counts) and, around it, each cell's own."""

_B_STEP = 0.05  # the spacing of B_GRID, which the score relies on


def _exponent_kernels() -> FloatArray:
    """``[k, p, q]``: the prior weight of a cell's exponent ``B_GRID[q]`` when the pool's is
    ``B_GRID[p]``, for the k-th spread of :data:`EXPONENT_SPREADS` (a normal around the
    pool's, renormalised over the grid), as the curve fits put each cell's exponent."""
    diff = B_GRID[None, :] - B_GRID[:, None]
    kernels = np.array([np.exp(-0.5 * (diff / spread) ** 2) for spread in EXPONENT_SPREADS])
    return np.asarray(kernels / kernels.sum(axis=2, keepdims=True), dtype=np.float64)


_KERNELS = _exponent_kernels()
_KERNEL_ROWS = np.ascontiguousarray(_KERNELS.reshape(-1, B_GRID.size))  # (spread, pool) x b

_SCORE_BLOCK = 2_000_000
"""The most points of spreads x pool exponents x cells a score holds at once (16 MB): the
candidates of a dimension are scored together, as many at a time as fit."""


class _Score:
    """How well given strengths explain the evaluations: the log-likelihood of where each
    cell's failures fell among its evaluations.

    Far above the floor a cell fails at ``A_c * (n_eff + 1) ** -b``. Over its evaluations,
    its failures, given their total, are then multinomial with probabilities in proportion
    to ``trials * (n_eff + 1) ** -b`` whatever its amplitude ``A_c``: the score needs no
    amplitudes (a cell evaluated once says nothing) and weighs exactly how each cell
    improved, or did not, as training arrived in it and near it. A cell that got nothing
    but improved speaks for transfer; one that got episodes shows the pace of learning,
    the exponent ``b``. Cells learn at paces of their own, as the curve fits read them: each
    cell's exponent has a normal prior around the pool's on :data:`B_GRID` and is integrated
    out cell by cell, its spread averaged over :data:`EXPONENT_SPREADS`; the pool's exponent
    is the best of :data:`B_GRID` for each candidate. Under one shared exponent the cells
    that learn faster than the pool read as helped by their neighbours, and one dimension
    took up what was their own pace (0.15-0.3 where the truth was 0.05, on noiseless
    evaluations of the simulator's worlds).
    """

    def __init__(
        self,
        structure: CellStructure,
        counts: FloatArray,
        trials: FloatArray,
        successes: FloatArray,
    ) -> None:
        size = counts.shape[1]
        failures = trials - successes
        # Only a cell with failures, evaluated more than once, has a say: the others' terms
        # are 0 whatever the strengths.
        seen = trials > 0
        self._receivers = np.flatnonzero((failures.sum(axis=0) > 0) & (seen.sum(axis=0) > 1))
        at = self._receivers
        self._counts = counts
        self._own = counts[:, at]
        self._failures = failures[:, at]
        self._total_failures = self._failures.sum(axis=0)
        log_trials = np.log(np.where(seen[:, at], trials[:, at], 1.0))
        self._cell_constant = np.sum(self._failures * log_trials, axis=0)
        self._trials = np.where(seen[:, at], trials[:, at], 0.0)
        self._structure = structure
        # The receivers' rows of the matrix for the few cells of a simulated campaign
        # (fastest there); group sums for a gap report's thousands, whose matrix would not
        # fit.
        self._differ = (
            structure.differ(rows=at).reshape(at.size * size, -1).astype(np.float64)
            if size <= _DENSE_CELLS
            else None
        )
        self._size = size

    def _transferred(self, strength: FloatArray) -> FloatArray:
        """What transfers to each receiver at every evaluation (evaluations x receivers)."""
        at = self._receivers
        if self._differ is None:
            return np.asarray(_spread(self._structure, strength, self._counts)[:, at])
        return np.asarray(self._counts @ _matrix(self._differ, strength, self._size, at).T)

    def __call__(self, strength: FloatArray) -> float:
        if self._receivers.size == 0:
            return 0.0
        return self._of(self._transferred(strength))

    def _of(self, transferred: FloatArray) -> float:
        """The score given what transfers to each receiver (see :meth:`__call__`)."""
        return float(self._of_many(transferred[None])[0])

    def _of_many(self, transferred: FloatArray) -> FloatArray:
        """The scores given what transfers to each receiver, for several candidates at once
        (candidates x evaluations x receivers), in blocks of :data:`_SCORE_BLOCK` points."""
        at = self._receivers
        per = _KERNELS.size // B_GRID.size * at.size  # one candidate's spreads x pool x cells
        step = max(1, _SCORE_BLOCK // max(per, 1))
        out = np.empty(transferred.shape[0])
        for lo in range(0, transferred.shape[0], step):
            chunk = transferred[lo : lo + step]
            m = chunk.shape[0]
            # Evaluations first, exponents first below: every sum and product runs over
            # whole contiguous slices, and the kernels below are one matrix product.
            log_n = np.add(self._own[:, None, :], chunk.transpose(1, 0, 2), order="C")
            np.log1p(log_n, out=log_n)  # evaluations x candidates x cells
            # For every b at once: sum of failures * log(w / sum over evaluations of w),
            # with w = trials * (n_eff + 1) ** -b. The exponents are evenly spaced, so each
            # w is the one before times (n_eff + 1) ** -step: one product per exponent, not
            # an exponential (w never underflows: (n + 1) ** -b is 1e-18 at n = 1e12).
            w = self._trials[:, None, :] * np.exp(-B_GRID[0] * log_n)
            factor = np.exp(-_B_STEP * log_n)
            total = np.empty((B_GRID.size, m, at.size))
            for k in range(B_GRID.size):
                np.add.reduce(w, axis=0, out=total[k])
                w *= factor
            # Each cell's score at every exponent (exponents x candidates x cells).
            per_cell = np.log(total)
            per_cell *= -self._total_failures
            per_cell += self._cell_constant
            slope = (log_n * self._failures[:, None, :]).sum(axis=0)  # cand x cells
            per_cell -= B_GRID[:, None, None] * slope[None]
            # Cells learn at paces of their own around the pool's (as the curve fits read
            # them): each cell's exponent is integrated out under its prior around the
            # pool's, the spread averaged over its candidates; the pool's exponent is the
            # best.
            shift = per_cell.max(axis=0)  # candidates x cells
            per_cell -= shift
            np.exp(per_cell, out=per_cell)
            marginal = (_KERNEL_ROWS @ per_cell.reshape(B_GRID.size, -1)).reshape(
                *_KERNELS.shape[:2], m, at.size
            )  # spreads x pool x candidates x cells
            # A pool exponent under which some cell's outcomes are out of reach (its
            # marginal underflows at every spread) scores -inf: ruled out, quietly.
            with np.errstate(divide="ignore"):
                np.log(marginal, out=marginal)
                totals = marginal.sum(axis=3).transpose(2, 0, 1)  # candidates x spreads x pool
                peak = totals.max(axis=(1, 2))
                averaged = peak[:, None] + np.log(np.exp(totals - peak[:, None, None]).mean(axis=1))
            out[lo : lo + step] = averaged.max(axis=1) + shift.sum(axis=1)
        return out

    def along(self, strength: FloatArray, dimension: int) -> FloatArray:
        """The score at every grid strength of one dimension, the others as given.

        What transfers is linear in each strength (a pair of cells differs in a dimension
        or not, so its entry has that strength as a factor once or not at all), so it is
        formed at 0 and 1 and read in between for every point of the grid.
        """
        if self._receivers.size == 0:
            return np.zeros(STRENGTH_GRID.size)
        trial = strength.copy()
        trial[dimension] = 0.0
        none = self._transferred(trial)
        trial[dimension] = 1.0
        full = self._transferred(trial)
        return self._of_many(none[None] + STRENGTH_GRID[:, None, None] * (full - none)[None])


def _marginals(
    score: _Score,
    log_prior: FloatArray,
    start: FloatArray,
    on_sweep: Callable[[int, int], None] | None = None,
) -> FloatArray:
    """Each strength's marginal posterior on the grid (dimensions x grid), by Gibbs sampling
    from ``start`` over :data:`GIBBS_SWEEPS` sweeps, Rao-Blackwellised: the average over the
    sweeps of each strength's full conditional given the others as drawn. Seeded, so the
    same evidence gives the same intervals. ``on_sweep(done, total)`` after every sweep."""
    rng = np.random.default_rng(0)
    current = start.copy()
    total = np.zeros((start.size, STRENGTH_GRID.size))
    # A conditional depends on the other strengths only, and a chain on a grid comes back
    # to where it was, so each is weighed once per state of the others; the draws, and so
    # the result, are as without it (a simulated steered campaign of 20 rounds reads the
    # score along a dimension 2,250 times this way, the ascents' included, not 4,712;
    # diffuse posteriors over thousands of cells revisit fewer states).
    seen: dict[tuple[int, tuple[float, ...]], FloatArray] = {}
    for sweep in range(GIBBS_SWEEPS):
        for d in range(start.size):
            key = (d, tuple(np.delete(current, d).tolist()))
            weights = seen.get(key)
            if weights is None:
                conditional = log_prior + score.along(current, d)
                weights = np.exp(conditional - conditional.max())
                weights /= weights.sum()
                seen[key] = weights
            total[d] += weights
            current[d] = STRENGTH_GRID[int(rng.choice(STRENGTH_GRID.size, p=weights))]
        if on_sweep is not None:
            on_sweep(sweep + 1, GIBBS_SWEEPS)
    return total / GIBBS_SWEEPS


def _ascend(score: _Score, log_prior: FloatArray, strength: FloatArray) -> FloatArray:
    """The strengths of highest posterior reached one dimension at a time from ``strength``."""
    strength = strength.copy()
    for _ in range(_PASSES):
        moved = False
        for d in range(strength.size):
            best = STRENGTH_GRID[int(np.argmax(log_prior + score.along(strength, d)))]
            if best != strength[d]:
                strength[d] = best
                moved = True
        if not moved:
            break
    return strength


def _log_prior() -> FloatArray:
    """The prior on :data:`STRENGTH_GRID`: :data:`PRIOR_NO_TRANSFER` on none, the rest
    log-uniform over the others (each takes the stretch of log-strength nearer to it than to
    its neighbours, half a step beyond the outermost): no scale of transfer is preferred, so
    2-5% weighs as much as 32-80%."""
    logs = np.log(STRENGTH_GRID[1:])
    middles = (logs[1:] + logs[:-1]) / 2
    edges = np.concatenate(
        ([logs[0] - (logs[1] - logs[0]) / 2], middles, [logs[-1] + (logs[-1] - logs[-2]) / 2])
    )
    width = np.diff(edges)
    prior = np.empty(STRENGTH_GRID.size)
    prior[0] = PRIOR_NO_TRANSFER
    prior[1:] = (1.0 - PRIOR_NO_TRANSFER) * width / width.sum()
    return np.log(prior)


def _prior_quantile(level: float) -> float:
    prior = np.exp(_log_prior())
    return float(STRENGTH_GRID[min(int(np.searchsorted(np.cumsum(prior), level)), prior.size - 1)])


def equal_tailed_interval(values: FloatArray, weights: FloatArray) -> tuple[float, float]:
    """The equal-tailed :data:`INTERVAL_LEVEL` interval of a discrete posterior: ``weights``
    (summing to 1) on ``values`` (in any order)."""
    order = np.argsort(values, kind="stable")
    ordered, cdf = values[order], np.cumsum(weights[order])
    tail = (1.0 - INTERVAL_LEVEL) / 2.0
    low = ordered[min(int(np.searchsorted(cdf, tail)), cdf.size - 1)]
    high = ordered[min(int(np.searchsorted(cdf, 1.0 - tail)), cdf.size - 1)]
    return float(low), float(high)


__all__ = [
    "EXTENTS",
    "EXTENT_ANY",
    "EXTENT_NEIGHBOURS",
    "INTERVAL_LEVEL",
    "PRIOR_NO_TRANSFER",
    "STRENGTH_GRID",
    "CellStructure",
    "TransferModel",
    "equal_tailed_interval",
    "estimate_transfer",
    "transfer_matrix",
]
