"""Greedy water-filling for the allocation, priced by the relaxation's dual multipliers.

Batches and increments go in order of marginal gain per priced resource use; every step
keeps every budget, site capacity and the minimum batch, so any stopping point is a valid
plan. Deterministic: ties break by cell and site index.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from campaigns.planning.allocation_types import SiteSpec
from campaigns.planning.gain import FloatArray, gain, gain_one
from campaigns.planning.relaxation import DualProblem

_INF = math.inf


@dataclass
class GreedyState:
    """Mutable greedy state: remaining resources, cell totals and open batches."""

    episodes: float
    hours: float
    money: float
    cap: list[float]
    total: list[float]
    x: dict[tuple[int, int], int]
    open_sites: list[list[int]]


# Hours and money may be overrun by this much, so that float noise never refuses a batch
# that fits exactly.
SLACK = 1e-12


def max_episodes(remaining: float, per_episode: float, per_visit: float) -> float:
    """Return how many episodes of a new batch fit a remaining amount of one resource."""
    room = remaining + SLACK - per_visit
    if room < 0:
        return 0.0
    if per_episode <= 0:
        return _INF
    return room / per_episode


# Greedy re-runs with adjusted budget prices. A budget the dual prices at (nearly) zero can
# still run out first in the integer plan, because the greedy breaks ties blindly; raising
# the price of what ran out and lowering that of what was left over fixes it in a few runs.
_PRICE_ROUNDS = 5


def best_greedy(
    problem: DualProblem,
    active: np.ndarray,
    multipliers: FloatArray,
    sites: Sequence[SiteSpec],
    start: GreedyState,
    amp: FloatArray,
    n0: FloatArray,
    b: float,
    min_batch: int,
    step: int,
    target: FloatArray,
) -> tuple[GreedyState, int]:
    """Run the greedy under a few price vectors, starting from the dual's; keep the best.

    ``target`` is the relaxation's extra episodes per active cell, used to rank sites.
    """
    u = np.array(multipliers, dtype=np.float64)
    n_glob = problem.site_use.shape[1]
    # The dual's budget rows, in its order: the finite budgets with something left.
    rows = [
        name
        for name in ("episodes", "hours", "money")
        if math.isfinite(getattr(start, name)) and getattr(start, name) > 0
    ]
    best = start
    best_value = -math.inf
    rounds = 0
    while rounds < _PRICE_ROUNDS:
        rounds += 1
        trial = GreedyState(
            episodes=start.episodes,
            hours=start.hours,
            money=start.money,
            cap=list(start.cap),
            total=list(start.total),
            x=dict(start.x),
            open_sites=[list(o) for o in start.open_sites],
        )
        prices = _site_prices(problem, u)
        _greedy(problem, active, prices, sites, trial, amp, n0, b, min_batch, step, target)
        value = float(gain(amp, n0, b, np.array(trial.total)).sum())
        if value > best_value + 1e-12:
            best, best_value = trial, value
        glob = u[:n_glob]
        top_price = float(u.max()) if len(u) else 0.0
        nudge = 0.1 * top_price if top_price > 0 else 1e-3 * float(amp.max(initial=1.0))
        changed = False
        for r, name in enumerate(rows):
            fraction = getattr(trial, name) / getattr(start, name)
            # Too little left to open even a minimum batch anywhere: this budget stopped
            # the greedy, so it deserves a price even if the relaxation gave it none.
            smallest = problem.site_use[:, r] * min_batch + problem.site_setup[:, r]
            if fraction < max(0.005, float(smallest.min(initial=np.inf))):
                glob[r] = max(glob[r], nudge) * 1.5
                changed = True
            elif fraction > 0.02 and glob[r] > 0:
                glob[r] *= 0.7
                changed = True
        if not changed:
            break
    return best, rounds


def _site_prices(problem: DualProblem, u: FloatArray) -> tuple[list[float], list[float]]:
    """Return each site's price per episode and per visit under multipliers ``u``."""
    n_glob = problem.site_use.shape[1]
    glob = u[:n_glob]
    price = problem.site_use @ glob if n_glob else np.zeros(len(problem.site_cap_use))
    setup = problem.site_setup @ glob if n_glob else np.zeros(len(problem.site_cap_use))
    has_cap = problem.site_cap_row >= 0
    cap = np.zeros(len(price))
    cap[has_cap] = u[n_glob:][problem.site_cap_row[has_cap]]
    return (price + cap * problem.site_cap_use).tolist(), setup.tolist()


def _greedy(
    problem: DualProblem,
    active: np.ndarray,
    prices: tuple[list[float], list[float]],
    sites: Sequence[SiteSpec],
    state: GreedyState,
    amp_all: FloatArray,
    n0_all: FloatArray,
    b: float,
    min_batch: int,
    step: int,
    target: FloatArray,
) -> None:
    """Add batches and increments by marginal gain per priced resource, keeping every limit.

    Prices come from the dual multipliers: a unit of budget or capacity costs what it is
    worth in the relaxation, so the greedy takes what the relaxation takes, in its order.
    """
    if len(active) == 0:
        return
    price_ep, price_visit = prices
    h = [s.hours_per_episode for s in sites]
    mo = [s.cost_per_episode for s in sites]
    sh = [s.setup_hours_per_visit for s in sites]
    sm = [s.cost_per_visit for s in sites]

    # Candidate sites per cell, cheapest first for the batch the relaxation gives the cell:
    # small batches care about setup, big ones about the per-episode price.
    size = np.maximum(target, min_batch)[:, None]
    cost = np.where(problem.feasible, size * np.array(price_ep) + np.array(price_visit), np.inf)
    order = np.argsort(cost, axis=1, kind="stable")
    counts = problem.feasible.sum(axis=1).tolist()
    candidates = [row[:n] for row, n in zip(order.tolist(), counts, strict=True)]
    cells = active.tolist()
    amp: list[float] = amp_all.tolist()
    n0: list[float] = n0_all.tolist()
    # Keeps ratios finite; with nothing priced at all, ratios order by gain alone.
    top_price = max(max(price_ep), max(price_visit))
    tiny = 1e-12 * top_price if top_price > 0 else 1.0

    def g(c: int, k: float) -> float:
        return gain_one(amp[c], n0[c], b, k)

    def fit(s: int, new: bool) -> float:
        return min(
            state.cap[s],
            state.episodes,
            max_episodes(state.hours, h[s], sh[s] if new else 0.0),
            max_episodes(state.money, mo[s], sm[s] if new else 0.0),
        )

    def best(i: int) -> tuple[float, int, int, bool] | None:
        c = cells[i]
        y = state.total[c]
        top: tuple[float, int, int, bool] | None = None
        for s in state.open_sites[c]:
            d = int(min(step, fit(s, False)))
            if d >= 1:
                ratio = (g(c, y + d) - g(c, y)) / (d * price_ep[s] + tiny)
                if top is None or ratio > top[0]:
                    top = (ratio, s, d, False)
        for s in candidates[i]:
            if (c, s) in state.x:
                continue
            if fit(s, True) >= min_batch:
                d = min_batch
                cost = d * price_ep[s] + price_visit[s] + tiny
                ratio = (g(c, y + d) - g(c, y)) / cost
                if top is None or ratio > top[0]:
                    top = (ratio, s, d, True)
                break
        return top

    heap: list[tuple[float, int]] = []
    for i in range(len(cells)):
        option = best(i)
        if option is not None:
            heap.append((-option[0], i))
    heapq.heapify(heap)
    while heap:
        neg_ratio, i = heapq.heappop(heap)
        option = best(i)
        if option is None:
            continue
        ratio, s, d, new = option
        if ratio <= 0:
            continue  # no gain left to buy (numerically saturated)
        if ratio < -neg_ratio * (1.0 - 1e-9) and heap and -heap[0][0] > ratio:
            heapq.heappush(heap, (-ratio, i))
            continue
        c = cells[i]
        state.x[(c, s)] = state.x.get((c, s), 0) + d
        if new:
            state.open_sites[c].append(s)
        state.total[c] += d
        state.cap[s] -= d
        state.episodes -= d
        state.hours -= d * h[s] + (sh[s] if new else 0.0)
        state.money -= d * mo[s] + (sm[s] if new else 0.0)
        option = best(i)
        if option is not None:
            heapq.heappush(heap, (-option[0], i))
