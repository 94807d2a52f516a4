"""The recommendation itself: value every cell's next episodes on its curve (and in the
cells it helps) and spend the budget where they avoid most (part of
:mod:`analytics.steering.recommend`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from analytics.intervals import wilson_interval
from analytics.learning import CurveSet, fit_history
from analytics.steering.levels import fit_transfer
from analytics.steering.recommend.inputs import (
    CellInput,
    Exploration,
    FloatArray,
    HistoryRound,
    RecommendationInputError,
    _check_cells,
    evaluations,
)
from analytics.steering.recommend.rationale import _by_source, _cost_words, _helps, _rationale
from analytics.steering.recommend.result import CellRecommendation, Recommendation
from analytics.steering.transfer import CellStructure, TransferModel
from analytics.steering.waterfill import allocate_with_transfer, waterfill
from campaigns.planning.gain import power_gain

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
    the cells' ``conditions`` it also teaches how much an episode in one cell helps another,
    chosen by what the evaluations' levels say, and the curves are refitted under it
    (:func:`analytics.steering.levels.fit_transfer`; ``transfer`` gives that model
    instead). With transfer the curves are read
    at each cell's effective training and an episode is valued for the failures it avoids in
    every cell it helps, per unit of its cost (:func:`allocate_with_transfer`); without (no
    history, no conditions, or history that shows none) the allocation is exactly the one
    without these inputs.

    ``curves`` is a curve set refitted on the full evaluation history, at effective counts
    when there is transfer; without it one is fitted from the evaluations by
    :func:`analytics.learning.fit_history`, the refit the app and the simulated steered
    strategy run too (with history each cell has its own exponent and an amplitude prior
    from its conditions; without, each cell is read from its current outcomes).
    ``extra_failure_rate`` (failures per cycle, one per cell, >= 0) is failure seen in
    production beyond what the evaluations show, e.g. a flagged rise (:mod:`analytics.reliability`): it is added to the cell's
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
    structure = (
        CellStructure.of([c.conditions or {} for c in cells])
        if any(c.conditions for c in cells)
        else None
    )
    if transfer is None and history and structure is not None:
        # The transfer the levels show, and the curves read under it (unless given).
        transfer, refitted = fit_transfer(
            structure, counts, eval_trials, eval_successes, counts[-1]
        )
        curves = refitted if curves is None else curves
    if transfer is not None and transfer.structure.n_cells != len(cells):
        raise RecommendationInputError(
            f"transfer model covers {transfer.structure.n_cells} cells but {len(cells)} were given"
        )
    live_transfer = transfer if transfer is not None and transfer.transfers else None
    effective = live_transfer.effective(counts) if live_transfer is not None else counts
    n = effective[-1]
    if curves is None:
        curves = fit_history(
            effective,
            eval_trials,
            eval_successes,
            n,
            conditions=structure.codes if structure is not None else None,
        )
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
    if live_transfer is None:
        episodes = waterfill(weight * rank_amp, n, cost, curves.b, budget)
        added = episodes.astype(np.float64)
    else:
        episodes = allocate_with_transfer(
            weight * rank_amp, n, cost, curves.b, budget, live_transfer
        )
        added = episodes + live_transfer.spread(episodes.astype(np.float64))

    rate_now = curves.rate(n)
    rate_after = curves.rate(n + added)
    avoided_in = weight * power_gain(curves.amplitude, n, curves.b, added)
    avoided = _by_source(avoided_in, episodes, live_transfer)
    before = float(np.dot(weight, rate_now))
    after = float(before - avoided_in.sum())
    marginal = weight * power_gain(curves.amplitude, n + added, curves.b, 1.0) / cost
    fail_low, fail_high = wilson_interval(trials - successes, trials)
    helps = _helps(live_transfer, p, episodes)
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
