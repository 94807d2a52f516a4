"""The oracle: a strategy that reads the hidden truth and spends each round where it lowers
the true failure mass most (part of :mod:`analytics.steering.simulate`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from analytics.steering.observation import FloatArray, IntArray, Observation, Strategy
from analytics.steering.simulate.world import HiddenCurves, World, _truth_of
from campaigns.planning.gain import curve_rate


def _greedy_fill(
    truth: HiddenCurves,
    share: FloatArray,
    cost: FloatArray,
    base: FloatArray,
    k: IntArray,
    budget: float,
    chunk: float,
) -> IntArray:
    """Return ``k`` plus chunks of about ``chunk`` spend, each for the best cell then."""
    k = k.copy()
    # mix[c, d]: effective training cell c gains from one episode in cell d.
    mix = None if truth.transfer is None else np.eye(share.size) + truth.transfer
    n_eff = truth.effective(base + k)
    left = budget - float(np.dot(cost, k))
    full = np.maximum(np.floor(chunk / cost), 1.0)
    f_col, a_col, minus_b_col = truth.f_inf[:, None], truth.a[:, None], -truth.b[:, None]
    while True:
        x = np.minimum(full, np.floor((left + 1e-9) / cost))
        if x.max() < 1:
            return k
        now = np.minimum(curve_rate(truth.f_inf, truth.a, truth.b, n_eff), 1.0)
        if mix is None:
            after = np.minimum(curve_rate(truth.f_inf, truth.a, truth.b, n_eff + x), 1.0)
            gain = share * (now - after)
        else:
            # Column d: every cell's rate once x[d] episodes more are in cell d.
            trial = mix * x[None, :]
            trial += n_eff[:, None] + 1.0
            after = np.minimum(f_col + a_col * np.power(trial, minus_b_col), 1.0)
            gain = share @ (now[:, None] - after)
        spend = x * cost
        per_cost = np.divide(gain, spend, out=np.full(gain.size, -np.inf), where=x >= 1)
        best = int(np.argmax(per_cost))
        if not per_cost[best] > 0:
            return k
        step = int(x[best])
        k[best] += step
        left -= spend[best]
        if mix is None:
            n_eff[best] += step
        else:
            n_eff += step * mix[:, best]


def oracle_allocation(
    truth: HiddenCurves,
    *,
    target_share: npt.ArrayLike,
    train_count: npt.ArrayLike,
    cost_per_episode: npt.ArrayLike,
    budget: float,
    chunks: int = 20,
) -> IntArray:
    """Spend ``budget`` where it lowers the true failure mass most per unit cost, greedily.

    Chunks of ``budget / chunks`` spend (whole episodes, at least one) go one by one to the
    cell whose chunk lowers ``sum(target_share * rate)`` most per unit cost, counting what
    it transfers to every other cell, until nothing more fits; then every cell gives one
    chunk back, the chunk halves and the budget is spent again, down to single episodes
    (greedy with scaling: for cells that share nothing and cost the same this is the
    round's optimum, as greedy by single episodes is; with unequal costs the last few
    episodes are a knapsack it does not solve exactly). Myopic: the best round, not the
    best campaign. Assumes costs > 0; never over budget.
    """
    share = np.asarray(target_share, dtype=np.float64)
    cost = np.asarray(cost_per_episode, dtype=np.float64)
    base = np.asarray(train_count, dtype=np.float64)
    k = np.zeros(share.size, dtype=np.int64)
    chunk = float(budget) / chunks
    while True:
        k = _greedy_fill(truth, share, cost, base, k, float(budget), chunk)
        if chunk <= cost.min():
            return k
        k = np.maximum(k - np.maximum(np.floor(chunk / cost), 1.0).astype(np.int64), 0)
        chunk /= 2


def spending_on(curves: Callable[[Observation], HiddenCurves], *, chunks: int = 20) -> Strategy:
    """Return the strategy that spends each round as :func:`oracle_allocation` does on the
    curves ``curves`` gives for the round's observation."""

    def strategy(observation: Observation) -> IntArray:
        return oracle_allocation(
            curves(observation),
            target_share=observation.target_share,
            train_count=observation.train_count,
            cost_per_episode=observation.cost_per_episode,
            budget=observation.budget,
            chunks=chunks,
        )

    return strategy


def make_oracle(world: World, *, chunks: int = 20) -> Strategy:
    """Return a strategy that knows ``world``'s hidden truth (see :func:`oracle_allocation`).

    It reads the curves in force at the observed round, not later ones: it sees drift
    once drift has happened, never before. Only this package can build it.
    """
    return spending_on(lambda observation: _truth_of(world, observation.round), chunks=chunks)


ORACLE = "oracle"
