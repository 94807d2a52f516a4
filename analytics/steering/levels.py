"""The transfer steering acts on, chosen by what the evaluations' levels say, with the curves
read under it.

Why levels. :func:`analytics.steering.transfer.estimate_transfer` scores where each cell's
failures fell among its own evaluations: a likelihood that needs no amplitude per cell, and
so sees transfer only through cells that improved between evaluations without episodes of
their own. With a round's evaluation trials spread over a hundred cells or more, a cell's
changes say next to nothing. Its level says much more: a cell with no episodes of its own
whose neighbours hold hundreds fails far less than its conditions' difficulty predicts, and
the curve refit already models that difficulty (each condition value centres the cells'
amplitude prior, :func:`analytics.learning.fit_history`). So each candidate transfer is
scored by the refit's log marginal likelihood at the effective training it gives
(:attr:`CurveSet.log_evidence`, every cell integrated out), and the candidates are:

* no transfer (prior :data:`~analytics.steering.transfer.PRIOR_NO_TRANSFER`);
* one strength for every dimension, each of :data:`LEVEL_STRENGTHS`, under each extent:
  :data:`~analytics.steering.transfer.EXTENT_ANY` (the product of the strengths where cells
  differ) or :data:`~analytics.steering.transfer.EXTENT_NEIGHBOURS` (only cells one condition
  apart), log-uniform over the strengths like the estimator's prior;
* the per-dimension strengths :func:`estimate_transfer` reads from the changes, under the
  product, weighted as one candidate more.

The extent with more posterior mass is kept and, within it, the strength is the posterior
mean (no transfer counted as 0), with an interval from the same posterior. The extent
matters as much as the strength: under the product, the lab's thousands of episodes reach
the far cells at the square or cube of the strength, which their levels refute where only
neighbours share, and the strength read under it comes out at half the truth.

The candidates are scored with the cells' exponents spread by
:data:`SCORING_EXPONENT_SPREAD` around the pool's, not by the spread the evidence prefers;
the curves of the transfer kept are refitted as every refit is, the spread averaged over
:data:`~analytics.learning.EXPONENT_SPREADS`. From two or three evaluations the cells' own
exponents are barely identified, and when their spread is free they absorb what stronger
transfer would explain: where cells share values, the levels read the strength at about a
third of the truth (a common 0.05 against true strengths whose geometric mean is 0.16,
scored on the same outcomes drawn again; with one exponent for every cell the truth scored
best). One moderate spread keeps cells that learn faster or slower than the pool apart
without letting them stand in for the transfer.

With fewer than two evaluations there is no history: no transfer, and the curves are what
the recommendation always read (a recommendation without history is unchanged).

Measured (``bench/steering.py --oracle``, 2026-12-07, held-out seeds): the steered strategy's
excess failures over the oracle's fell from 1.118 / 1.138 / 1.137 to 1.099 / 1.127 / 1.122
in the worlds where only neighbours share (cost, noise, drift), and stayed within 0.002
elsewhere. The cost is ten or eleven curve refits where there was one: 3.0-5.2x the refit
before it on synthetic histories of 500 to 20,000 cells (``bench/transfer_levels.py``), 4.9-6.6x
on the demo's (``bench/demo_steering.py``).

Scoring under one exponent spread (:data:`SCORING_EXPONENT_SPREAD`; tuning seeds 500-509, a
day of production and the release before in the record, 12 rounds): where cells share values
steered went from 1.034 to 1.029 (transfer) and from 1.052 to 1.046 (all), cost, noise and
drift within 0.002 (at 0.02 instead: 1.028 and 1.044, but one seed lost 0.03-0.04 in the
worlds where only neighbours share, whose strength it read at about half the truth for five
evaluations). On the held-out seeds (``bench/steering.py --oracle --only steered``, the same
record, 2026-12-08): 1.036, 1.029, 1.046, 1.048, 1.054, 1.042 against 1.036, 1.032, 1.045,
1.049, 1.055, 1.048; on evaluations alone within 0.003. A scoring refit averages over one
exponent spread instead of six: the choice cost 2.2x and 3.9x the refit before it at 500 and
2,000 cells (``bench/transfer_levels.py``), 4.6x on the demo's.

Django-free.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from analytics.learning import CurveSet, fit_history
from analytics.steering.transfer import (
    EXTENT_ANY,
    EXTENTS,
    PRIOR_NO_TRANSFER,
    CellStructure,
    TransferModel,
    equal_tailed_interval,
    estimate_transfer,
)

FloatArray = npt.NDArray[np.float64]

SCORING_EXPONENT_SPREAD = 0.05
"""The spread of the cells' exponents around the pool's under which the candidates are
scored (one of :data:`~analytics.learning.EXPONENT_SPREADS`; see the module docstring)."""

LEVEL_STRENGTHS: FloatArray = np.array([0.02, 0.05, 0.1, 0.2])
"""The common strengths the levels are scored at (in a prototype on the tuning seeds, a finer
grid of nine moved the simulated campaigns by less than 0.002 of the oracle's excess
failures)."""


def candidate_count(evaluations: int) -> int:
    """The curve refits :func:`fit_transfer` runs for this many evaluations: every candidate
    scored, then the one kept (one fewer where the changes show no transfer)."""
    if evaluations < 2:
        return 1
    return 1 + LEVEL_STRENGTHS.size * len(EXTENTS) + 1 + 1


def fit_transfer(
    structure: CellStructure,
    eval_train_count: npt.ArrayLike,
    eval_trials: npt.ArrayLike,
    eval_successes: npt.ArrayLike,
    current_train_count: npt.ArrayLike,
    *,
    on_step: Callable[[int, int], None] | None = None,
    on_sweep: Callable[[int, int], None] | None = None,
) -> tuple[TransferModel, CurveSet]:
    """Choose the transfer by the evaluations' levels and refit the curves under it.

    The evaluations are one row each, oldest first, with each policy's own training counts;
    ``current_train_count`` is each cell's own training now. Returns the model and the
    curves at the effective counts it gives. ``on_step(done, total)`` is told after every
    refit (for a job's progress), and ``on_sweep(done, total)`` after every sweep of the
    sampler that reads the changes (:func:`estimate_transfer`; tens of seconds at 20,000
    cells, before the refits). Raises ValueError on malformed input.
    """
    counts = np.atleast_2d(np.asarray(eval_train_count, dtype=np.float64))
    trials = np.atleast_2d(np.asarray(eval_trials, dtype=np.float64))
    successes = np.atleast_2d(np.asarray(eval_successes, dtype=np.float64))
    n_now = np.asarray(current_train_count, dtype=np.float64)
    if not counts.shape == trials.shape == successes.shape:
        raise ValueError("evaluation arrays must agree in shape (evaluations x cells)")
    if counts.shape[1] != structure.n_cells or n_now.shape != (structure.n_cells,):
        raise ValueError(f"evaluations and counts must cover the {structure.n_cells} cells")
    evaluations = int(np.count_nonzero(trials.sum(axis=1) > 0))
    dims = len(structure.dimensions)
    total = candidate_count(evaluations if dims else 0)
    done = 0

    def refit(model: TransferModel, scoring: bool = False) -> CurveSet:
        nonlocal done
        live = model.transfers
        curves = fit_history(
            model.effective(counts) if live else counts,
            trials,
            successes,
            model.effective(n_now) if live else n_now,
            conditions=structure.codes,
            exponent_spreads=(SCORING_EXPONENT_SPREAD,) if scoring else None,
        )
        done += 1
        if on_step is not None:
            on_step(done, total)
        return curves

    none = TransferModel.none(structure, evaluations)
    if evaluations < 2 or dims == 0:
        return none, refit(none)

    width = np.gradient(np.log(LEVEL_STRENGTHS))
    log_weight = np.log((1.0 - PRIOR_NO_TRANSFER) * width / width.sum() / len(EXTENTS))
    models = [none]
    log_prior = [float(np.log(PRIOR_NO_TRANSFER))]
    for extent in EXTENTS:
        for s, weight in zip(LEVEL_STRENGTHS.tolist(), log_weight.tolist(), strict=True):
            models.append(_common(structure, s, evaluations, extent))
            log_prior.append(weight)
    changes = estimate_transfer(structure, counts, trials, successes, on_sweep=on_sweep)
    if changes.transfers:
        models.append(changes)
        log_prior.append(float(log_weight.mean()))
    else:  # one refit fewer than candidate_count says
        total -= 1
    fits = [refit(m, scoring=True) for m in models]
    log_post = np.array([_evidence(f) + p for f, p in zip(fits, log_prior, strict=True)])
    posterior = np.exp(log_post - log_post.max())
    posterior /= posterior.sum()
    best = int(np.argmax(posterior))
    if models[best] is changes:
        # The per-dimension reading of the changes explains the levels best: keep it.
        return changes, refit(changes)
    extents = [m.extent for m in models]
    mass = {
        r: sum(
            p for p, m, x in zip(posterior, models, extents, strict=True) if x == r and m.transfers
        )
        for r in EXTENTS
    }
    extent = max(EXTENTS, key=lambda r: mass[r])
    keep = np.array(
        [
            not m.transfers or (x == extent and m is not changes)
            for m, x in zip(models, extents, strict=True)
        ]
    )
    weights = posterior[keep] / posterior[keep].sum()
    strengths = np.array(
        [
            float(m.strength[0]) if m.transfers else 0.0
            for m, k in zip(models, keep, strict=True)
            if k
        ]
    )
    strength = float(weights @ strengths)
    low, high = equal_tailed_interval(strengths, weights)
    model = _common(structure, strength, evaluations, extent, interval=(low, high))
    return model, refit(model)


def _common(
    structure: CellStructure,
    s: float,
    evaluations: int,
    extent: str,
    interval: tuple[float, float] | None = None,
) -> TransferModel:
    """One strength ``s`` for every dimension (its interval ``interval``, or ``s`` itself)."""
    dims = len(structure.dimensions)
    low, high = interval if interval is not None else (s, s)
    return TransferModel(
        structure=structure,
        strength=np.full(dims, s),
        low=np.full(dims, low),
        high=np.full(dims, high),
        evaluations=evaluations,
        extent=extent,
    )


def _evidence(curves: CurveSet) -> float:
    """The refit's log evidence (every refit here computes it)."""
    if curves.log_evidence is None:
        raise ValueError("a curve refit without its log evidence cannot be weighed")
    return curves.log_evidence


__all__ = [
    "EXTENT_ANY",
    "LEVEL_STRENGTHS",
    "SCORING_EXPONENT_SPREAD",
    "candidate_count",
    "fit_transfer",
]
