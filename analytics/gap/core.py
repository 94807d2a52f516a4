"""Per-cell gap scoring and campaign summary over numpy arrays (see package docstring)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol

import numpy as np
import numpy.typing as npt
from scipy import special

from analytics.curves import CurveFit, LearningCurve
from analytics.gap.divergence import js_divergence, psi
from analytics.learning import CurveSet, EvaluationRows, curves_on_history, fit_curve_set
from campaigns.planning.gain import gain

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Rounding in upstream share computations; beyond this a profile is simply wrong.
_SHARE_TOLERANCE = 1e-6


class Transfer(Protocol):
    """How much an episode in one cell trains another (in practice
    :class:`analytics.steering.transfer.TransferModel`, the one model of it)."""

    def effective(self, n: npt.ArrayLike) -> FloatArray:
        """Each cell's own episodes plus what the others' transfer to it."""
        ...

    def spread(self, x: npt.ArrayLike) -> FloatArray:
        """``T @ x``: for values per cell, what an episode in each cell is worth in the
        cells it helps (``T`` is symmetric)."""
        ...


class Coverage(IntEnum):
    """How well training data covers a cell, by transfer-weighted episode count."""

    UNCOVERED = 0
    THIN = 1
    COVERED = 2


@dataclass(frozen=True, eq=False)
class Dimension:
    """One condition dimension for PSI: its value labels and each cell's value code.

    ``codes[c]`` indexes ``values`` for cell ``c``; marginals of target and training mass per
    value are derived from the cells, so they always agree with the per-cell figures.
    """

    name: str
    values: Sequence[str]
    codes: IntArray

    def __post_init__(self) -> None:
        codes = np.asarray(self.codes)
        if codes.ndim != 1 or codes.dtype.kind not in "iu":
            raise ValueError(f"dimension {self.name!r}: codes must be a 1-d integer array")
        object.__setattr__(self, "values", tuple(self.values))
        object.__setattr__(self, "codes", codes.astype(np.int64))


def _integral_counts(x: npt.ArrayLike, name: str) -> IntArray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
        raise ValueError(f"{name} must hold whole numbers")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0")
    return arr.astype(np.int64)


@dataclass(frozen=True, eq=False)
class CellHistory:
    """Each cell's curve as a refit over the campaign's evaluation history read it.

    ``quantiles`` (cells x :data:`analytics.learning.POSTERIOR_LEVELS`) is each cell's
    posterior of ``log m`` (a row of NaN: the refit did not see the cell), ``tau`` the
    refit's spread, and ``trials`` / ``successes`` the outcomes per cell the refit already
    holds (the report adds only the rest: production since, evaluations imported after it).
    """

    quantiles: FloatArray
    tau: float
    trials: FloatArray
    successes: FloatArray


@dataclass(frozen=True, eq=False)
class GapInputs:
    """Everything the gap engine needs, one entry per condition cell in every array.

    * ``target_share`` p: share of production cycles per cell; must sum to 1 (within 1e-6,
      then renormalised exactly).
    * ``train_count`` n: training episodes per cell, already transfer-weighted upstream.
    * ``trials`` / ``successes``: observed evaluation or production outcomes per cell.
    * ``cycles_per_day``: campaign total across the target deployments.
    * ``uncovered_below`` / ``thin_below``: coverage thresholds on n (``n < uncovered_below``
      is uncovered, ``n < thin_below`` thin, else covered).
    * ``curve``: a pooled curve to use as-is; ``None`` fits one from these cells.
    * ``dimensions``: optional condition dimensions for PSI.
    * ``transfer``: how much an episode in one cell trains another (``None``: nothing
      transfers). The curves are then read at each cell's effective training, and an
      episode's value of capture counts the failures it avoids in every cell it helps.
    * ``history``: each cell's curve as the refit over the evaluation history read it
      (with ``curve``, the refit's pooled curve): every cell is then read on its history
      plus the outcomes the refit does not hold, not from its current outcomes alone.

    Any array-like is accepted and stored as a float64/int64 copy (labels as a tuple).
    Raises ValueError naming the first problem.
    """

    labels: Sequence[str]
    target_share: FloatArray
    train_count: FloatArray
    trials: IntArray
    successes: IntArray
    cycles_per_day: float
    reliability_target: float = 0.999
    uncovered_below: float = 1.0
    thin_below: float = 50.0
    curve: LearningCurve | CurveFit | None = None
    dimensions: Sequence[Dimension] = ()
    transfer: Transfer | None = None
    history: CellHistory | None = None

    def __post_init__(self) -> None:
        labels = tuple(str(label) for label in self.labels)
        size = len(labels)
        if size == 0:
            raise ValueError("no condition cells given")
        p = np.array(self.target_share, dtype=np.float64)
        n = np.array(self.train_count, dtype=np.float64)
        trials = _integral_counts(self.trials, "trials")
        successes = _integral_counts(self.successes, "successes")
        for name, arr in (("target_share", p), ("train_count", n), ("trials", trials)):
            if arr.shape != (size,):
                raise ValueError(f"{name} has shape {arr.shape}, expected ({size},) like labels")
        if successes.shape != (size,):
            raise ValueError(f"successes has shape {successes.shape}, expected ({size},)")
        if not np.all(np.isfinite(p)) or np.any(p < 0):
            raise ValueError("target_share must be finite and >= 0 in every cell")
        total = float(p.sum())
        if abs(total - 1.0) > _SHARE_TOLERANCE:
            raise ValueError(
                f"target_share sums to {total:.6g}, expected 1; normalise the condition profile"
            )
        p /= total
        if not np.all(np.isfinite(n)) or np.any(n < 0):
            raise ValueError("train_count must be finite and >= 0 in every cell")
        if np.any(successes > trials):
            bad = int(np.argmax(successes > trials))
            raise ValueError(
                f"cell {labels[bad]!r} has {successes[bad]} successes in {trials[bad]} trials"
            )
        if not (math.isfinite(self.cycles_per_day) and self.cycles_per_day >= 0):
            raise ValueError(f"cycles_per_day must be finite and >= 0, got {self.cycles_per_day}")
        if not 0 < self.reliability_target <= 1:
            raise ValueError(f"reliability_target must be in (0, 1], got {self.reliability_target}")
        if not 0 <= self.uncovered_below <= self.thin_below:
            raise ValueError(
                f"need 0 <= uncovered_below <= thin_below, got "
                f"{self.uncovered_below} and {self.thin_below}"
            )
        if self.history is not None:
            if self.curve is None:
                raise ValueError("a cell history needs the pooled curve it was read around")
            h = self.history
            if np.shape(h.quantiles)[0] != size or np.shape(h.trials) != (size,):
                raise ValueError(f"the cell history must have {size} cells like labels")
        dims = tuple(self.dimensions)
        for dim in dims:
            codes = dim.codes
            if codes.shape != (size,):
                raise ValueError(f"dimension {dim.name!r}: codes must be {size} integers")
            if codes.min() < 0 or codes.max() >= len(dim.values):
                raise ValueError(
                    f"dimension {dim.name!r}: codes must index its {len(dim.values)} values"
                )
        for name, value in (
            ("labels", labels),
            ("target_share", p),
            ("train_count", n),
            ("trials", trials),
            ("successes", successes),
            ("dimensions", dims),
        ):
            object.__setattr__(self, name, value)

    @property
    def size(self) -> int:
        """Return the number of cells."""
        return len(self.labels)


@dataclass(frozen=True, eq=False)
class GapCells:
    """Per-cell results; every array has one entry per cell in input order.

    ``failure_rate`` is the cell's curve at its n under the per-cell model the recommender
    uses (:func:`analytics.learning.fit_curve_set`: the pooled curve scaled by the cell's
    partially pooled multiplier, so thin evidence stays near ``prior_rate``, the pooled
    curve at the cell's n), with a 95% posterior interval; ``interventions*`` are per day;
    ``excess`` is ``failure_rate - f_inf``, the part more data can remove, and
    ``amplitude`` the matching cell-curve amplitude ``a_c``; ``effective_count`` is the
    cell's own training plus what transfers to it from the others (the ``n`` its curve is
    read at; ``train_count`` without transfer). ``priority``, the value of capture, is
    interventions avoided per day by one more episode in the cell: in the cell itself plus
    ``priority_elsewhere``, in the cells it helps (each of which gains the share of an
    episode that transfers to it). ``log_multiplier`` holds, when the cells were read on a
    history (``GapInputs.history``), the quantiles of each cell's posterior of ``log m``
    at :data:`analytics.learning.POSTERIOR_LEVELS` it was scored with (``None`` otherwise).
    """

    target_share: FloatArray
    train_count: FloatArray
    train_share: FloatArray
    coverage: npt.NDArray[np.int8]
    prior_rate: FloatArray
    failure_rate: FloatArray
    failure_low: FloatArray
    failure_high: FloatArray
    interventions: FloatArray
    interventions_low: FloatArray
    interventions_high: FloatArray
    excess: FloatArray
    amplitude: FloatArray
    priority: FloatArray
    effective_count: FloatArray
    priority_elsewhere: FloatArray
    log_multiplier: FloatArray | None = None


@dataclass(frozen=True)
class GapSummary:
    """Campaign-level figures.

    Masses are shares of production cycles. ``psi`` maps dimension name to PSI.
    ``excess_interventions_per_day`` is signed: interventions now minus the budget the
    reliability target allows (> 0 means short of target, < 0 means headroom).
    ``*_interval`` are approximate 95% intervals from the cell posteriors (the pooled curve
    is taken as known).
    """

    n_cells: int
    total_train: float
    uncovered_mass: float
    thin_mass: float
    covered_mass: float
    n_uncovered: int
    n_thin: int
    js_divergence: float
    psi: dict[str, float]
    reliability_now: float
    reliability_interval: tuple[float, float]
    reliability_target: float
    interventions_per_day: float
    interventions_interval: tuple[float, float]
    interventions_at_target: float
    excess_interventions_per_day: float
    meets_target: bool


@dataclass(frozen=True, eq=False)
class GapResult:
    """Inputs, the curve used, per-cell arrays and the summary of one gap computation."""

    inputs: GapInputs
    fit: CurveFit
    cells: GapCells
    summary: GapSummary
    labels: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", tuple(self.inputs.labels))

    @property
    def curve(self) -> LearningCurve:
        """Return the pooled learning curve used for the priors."""
        return self.fit.curve

    def avoided(self, k: npt.ArrayLike) -> FloatArray:
        """Return interventions per day avoided in each cell by ``k`` more effective
        episodes there (its own, or what transfers to it).

        ``k`` is a scalar or one value per cell (>= 0; fractional allowed). Concave and
        non-decreasing in ``k``; ``avoided(1)`` is ``cells.priority`` less what the episode
        is worth elsewhere. Raises ValueError for negative ``k``.
        """
        k_arr = np.asarray(k, dtype=np.float64)
        if np.any(k_arr < 0):
            raise ValueError("k must be >= 0")
        return _avoided(
            self.inputs, self.fit.curve, self.cells.excess, self.cells.effective_count, k_arr
        )


def _avoided(
    inputs: GapInputs, curve: LearningCurve, excess: FloatArray, n: FloatArray, k: FloatArray
) -> FloatArray:
    # The excess is the cell curve's level at its n: cycles * p * a_c * ((n+1)^-b - (n+1+k)^-b)
    # without forming the amplitude a_c = excess * (n+1)^b and its inverse.
    return inputs.cycles_per_day * inputs.target_share * gain(excess, n, curve.b, k)


def gap_curves(
    train_count: npt.ArrayLike,
    trials: npt.ArrayLike,
    successes: npt.ArrayLike,
    curve: LearningCurve | CurveFit | None = None,
) -> CurveSet:
    """Return every cell's curve posterior from its current outcomes at its training count.

    The one per-cell model of the gap report and the recommendation: a stored report's cells
    and pooled curve give back exactly the curves it was scored with. ``curve`` fixes the
    pooled curve; ``None`` fits it from the cells.
    """
    n = np.asarray(train_count, dtype=np.float64)
    return fit_curve_set(EvaluationRows.snapshot(n, trials, successes), n, curve=curve)


def _gamma_interval(mean: float, variance: float, level: float = 0.95) -> tuple[float, float]:
    # A sum of skewed, positive per-cell rates: a moment-matched Gamma keeps the interval
    # above zero and lopsided where one cell dominates, unlike a normal approximation.
    if mean <= 0 or variance <= 0:
        return mean, mean
    shape = mean * mean / variance
    scale = variance / mean
    tail = (1.0 - level) / 2.0
    low = float(special.gammaincinv(shape, tail)) * scale
    high = float(special.gammaincinv(shape, 1.0 - tail)) * scale
    return low, high


def compute_gap(inputs: GapInputs) -> GapResult:
    """Score every cell's coverage gap and its cost, and summarise the campaign.

    Fits the pooled learning curve from the inputs unless ``inputs.curve`` is given.
    Assumes validated :class:`GapInputs` (its constructor raises on bad data).
    """
    p, n = inputs.target_share, inputs.train_count
    n_eff = n if inputs.transfer is None else inputs.transfer.effective(n)
    kept: FloatArray | None = None
    if inputs.history is None or inputs.curve is None:
        curves = gap_curves(n_eff, inputs.trials, inputs.successes, inputs.curve)
    else:
        h = inputs.history
        curves, kept = curves_on_history(
            inputs.curve,
            h.tau,
            h.quantiles,
            h.trials,
            h.successes,
            n_eff,
            inputs.trials,
            inputs.successes,
        )
    fit = curves.fit
    curve = fit.curve
    cycles = float(inputs.cycles_per_day)

    total_train = float(n.sum())
    q = n / total_train if total_train > 0 else np.zeros_like(n)
    coverage = np.full(n.shape, Coverage.COVERED, dtype=np.int8)
    coverage[n < inputs.thin_below] = Coverage.THIN
    coverage[n < inputs.uncovered_below] = Coverage.UNCOVERED

    prior_rate = curve.rate(n_eff)
    rate = curves.rate(n_eff)
    low, high = curves.rate_interval(n_eff, 0.95)
    weight = cycles * p
    excess = np.maximum(rate - curve.f_inf, 0.0)
    own = _avoided(inputs, curve, excess, n_eff, np.ones_like(n))
    # An episode in cell c counts T[i, c] of one in cell i: a small share of an episode
    # avoids that share of one episode's failures there (the chord, which concavity keeps
    # at or below the exact gain).
    elsewhere = np.zeros_like(own) if inputs.transfer is None else inputs.transfer.spread(own)
    amplitude = curves.amplitude

    cells = GapCells(
        target_share=p,
        train_count=n,
        train_share=q,
        coverage=coverage,
        prior_rate=prior_rate,
        failure_rate=rate,
        failure_low=low,
        failure_high=high,
        interventions=weight * rate,
        interventions_low=weight * low,
        interventions_high=weight * high,
        excess=excess,
        amplitude=amplitude,
        priority=own + elsewhere,
        effective_count=np.asarray(n_eff, dtype=np.float64),
        priority_elsewhere=elsewhere,
        log_multiplier=kept,
    )

    failure_mass = float(np.dot(p, rate))
    failure_var = float(np.dot(p * p, curves.rate_variance(n_eff)))
    mass_low, mass_high = _gamma_interval(failure_mass, failure_var)
    mass_high = min(mass_high, 1.0)
    at_target = cycles * (1.0 - inputs.reliability_target)
    now = cycles * failure_mass
    has_mass = p > 0
    marginals = {
        dim.name: psi(
            np.bincount(dim.codes, weights=p, minlength=len(dim.values)),
            np.bincount(dim.codes, weights=n, minlength=len(dim.values)),
        )
        for dim in inputs.dimensions
    }
    summary = GapSummary(
        n_cells=inputs.size,
        total_train=total_train,
        uncovered_mass=float(p[coverage == Coverage.UNCOVERED].sum()),
        thin_mass=float(p[coverage == Coverage.THIN].sum()),
        covered_mass=float(p[coverage == Coverage.COVERED].sum()),
        n_uncovered=int(np.count_nonzero(has_mass & (coverage == Coverage.UNCOVERED))),
        n_thin=int(np.count_nonzero(has_mass & (coverage == Coverage.THIN))),
        js_divergence=js_divergence(p, n),
        psi=marginals,
        reliability_now=1.0 - failure_mass,
        reliability_interval=(1.0 - mass_high, 1.0 - mass_low),
        reliability_target=inputs.reliability_target,
        interventions_per_day=now,
        interventions_interval=(cycles * mass_low, cycles * mass_high),
        interventions_at_target=at_target,
        excess_interventions_per_day=now - at_target,
        meets_target=1.0 - failure_mass >= inputs.reliability_target,
    )
    return GapResult(inputs=inputs, fit=fit, cells=cells, summary=summary)
