"""Whole-episode water-filling over concave power-law gains with per-cell costs.

Cell ``c`` gains ``g_c(k) = A_c * ((n_c + 1) ** -b - (n_c + k + 1) ** -b)`` (the one formula,
:func:`campaigns.planning.gain.power_gain`) from ``k`` more
episodes at ``cost_c`` each (``A_c >= 0`` in interventions per day, shared ``b > 0``). We
maximise ``sum_c g_c(k_c)`` subject to ``sum_c cost_c * k_c <= budget`` over whole ``k_c``.

Method: the continuous problem is solved exactly by its Lagrangian — at price ``lam`` per
unit of budget each cell takes ``k_c = max(0, (A_c * b / (lam * cost_c)) ** (1 / (b + 1)) -
n_c - 1)``, and ``lam`` is found by bisection in log space so the cost just fits. Rounding
every ``k_c`` down keeps the plan within budget; a greedy top-up then spends what is left
one episode at a time on the best marginal gain per unit cost that still fits. Rounding down
can leave a whole episode whose gain beats the last one taken in another cell (an episode's
gain is the average slope over it, not the slope at its end), so an exchange pass then moves
episodes from the cell whose last one gains least per cost to the cell whose next one gains
most, while that fits and gains. With equal costs the result is the exact integer optimum
(every episode taken gains at least as much as any left out); with unequal costs it is within
one episode per cell of the continuous optimum (which bounds the integer one). Deterministic
(ties break by cell index).
"""

from __future__ import annotations

import heapq
import math
from typing import Protocol, cast

import numpy as np
import numpy.typing as npt

from campaigns.planning.gain import (
    level_from_amplitude,
    marginal,
    power_gain,
    power_gain_one,
    stationary_log_total,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Float noise in sum(cost * k) must never make an exact fit look over budget.
_BUDGET_SLACK = 1e-9


def _continuous(
    amp: FloatArray, n: FloatArray, cost: FloatArray, b: float, lam: float
) -> FloatArray:
    # Each cell's total where its marginal gain per cost meets the price lam.
    log_total = stationary_log_total(level_from_amplitude(amp, n, b), n, b, lam * cost)
    return np.maximum(np.exp(np.minimum(log_total, 700.0)) - n - 1.0, 0.0)


def _checked(
    amplitude: npt.ArrayLike, n: npt.ArrayLike, cost: npt.ArrayLike, b: float, budget: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The inputs as arrays; raises ValueError as :func:`waterfill` says."""
    amp = np.asarray(amplitude, dtype=np.float64)
    n_arr = np.asarray(n, dtype=np.float64)
    cost_arr = np.asarray(cost, dtype=np.float64)
    if not (amp.shape == n_arr.shape == cost_arr.shape) or amp.ndim != 1:
        raise ValueError("amplitude, n and cost must be 1-d and equally long")
    if not (np.all(np.isfinite(amp)) and np.all(amp >= 0)):
        raise ValueError("amplitudes must be finite and >= 0")
    if not (np.all(np.isfinite(n_arr)) and np.all(n_arr >= 0)):
        raise ValueError("training counts must be finite and >= 0")
    if not (np.all(np.isfinite(cost_arr)) and np.all(cost_arr > 0)):
        raise ValueError("costs per episode must be finite and > 0")
    if not (b > 0 and math.isfinite(b)):
        raise ValueError(f"b must be > 0, got {b}")
    if not (budget >= 0 and math.isfinite(budget)):
        raise ValueError(f"budget must be finite and >= 0, got {budget}")
    return amp, n_arr, cost_arr


def waterfill(
    amplitude: npt.ArrayLike,
    n: npt.ArrayLike,
    cost: npt.ArrayLike,
    b: float,
    budget: float,
    *,
    max_topup: int = 1_000_000,
) -> IntArray:
    """Return whole episodes per cell maximising total gain within ``budget``.

    Cells with ``amplitude == 0`` get nothing; ``sum(cost * k) <= budget`` always holds.
    Raises ValueError for negative amplitudes or counts, non-positive costs, ``b <= 0`` or a
    negative budget.
    """
    amp, n_arr, cost_arr = _checked(amplitude, n, cost, b, budget)
    k = np.zeros(amp.size, dtype=np.int64)
    live = amp > 0
    if not live.any() or budget < float(cost_arr.min()):
        return k

    a_l, n_l, c_l = amp[live], n_arr[live], cost_arr[live]
    # Price at which no cell wants anything: the largest marginal gain per cost at k = 0.
    lam_high = float(np.max(marginal(level_from_amplitude(a_l, n_l, b), n_l, b, 0.0) / c_l))
    lam_low = lam_high
    for _ in range(400):
        lam_low /= 16.0
        if float(np.dot(c_l, _continuous(a_l, n_l, c_l, b, lam_low))) > budget:
            break
    else:
        lam_low = 0.0  # even a vanishing price does not spend the budget (cannot happen for b>0)
    if lam_low > 0:
        log_lo, log_hi = math.log(lam_low), math.log(lam_high)
        for _ in range(200):
            mid = 0.5 * (log_lo + log_hi)
            spend = float(np.dot(c_l, _continuous(a_l, n_l, c_l, b, math.exp(mid))))
            if spend > budget:
                log_lo = mid
            else:
                log_hi = mid
            if log_hi - log_lo < 1e-12:
                break
        k_cont = _continuous(a_l, n_l, c_l, b, math.exp(log_hi))
    else:
        k_cont = np.zeros_like(a_l)
    k_live = np.floor(k_cont + 1e-9).astype(np.int64)
    # Guard the floor against float noise that would overspend.
    while float(np.dot(c_l, k_live)) > budget + _BUDGET_SLACK and k_live.any():
        worst = int(np.argmax(np.where(k_live > 0, c_l, -np.inf)))
        k_live[worst] -= 1
    k[live] = k_live
    _top_up(k, amp, n_arr, cost_arr, b, budget, max_topup)
    if _exchange(k, amp, n_arr, cost_arr, b, budget, max_steps=4 * int(live.sum()) + 16):
        _top_up(k, amp, n_arr, cost_arr, b, budget, max_topup)
    return k


def _exchange(
    k: IntArray,
    amp: FloatArray,
    n: FloatArray,
    cost: FloatArray,
    b: float,
    budget: float,
    max_steps: int,
) -> int:
    """Move single episodes from the cell whose last episode gains least per cost to the cell
    whose next one gains most, while the move fits the budget and raises the total gain.
    Returns how many moves it made."""
    moves = 0
    live = amp > 0
    for _ in range(max_steps):
        next_gain = power_gain(amp, n + k, b, 1)  # gain of one more episode
        last_gain = np.where(k > 0, power_gain(amp, n + np.maximum(k - 1, 0), b, 1), np.inf)
        next_ratio = np.where(live, next_gain / cost, -np.inf)
        last_ratio = last_gain / cost
        give, take = int(np.argmin(last_ratio)), int(np.argmax(next_ratio))
        if give == take or not np.isfinite(last_ratio[give]):
            break
        if next_ratio[take] <= last_ratio[give] * (1 + 1e-12):
            break
        left = budget - float(np.dot(cost, k)) + float(cost[give])
        if cost[take] > left + _BUDGET_SLACK or next_gain[take] <= last_gain[give]:
            break
        k[give] -= 1
        k[take] += 1
        moves += 1
    return moves


def _top_up(
    k: IntArray,
    amp: FloatArray,
    n: FloatArray,
    cost: FloatArray,
    b: float,
    budget: float,
    max_steps: int,
) -> None:
    """Spend the rest of the budget one episode at a time on the best gain per cost."""
    left = budget - float(np.dot(cost, k))
    amp_l = amp.tolist()
    n_l = n.tolist()
    cost_l = cost.tolist()

    def ratio(c: int) -> float:
        return power_gain_one(amp_l[c], n_l[c] + k[c], b, 1.0) / cost_l[c]

    heap = [(-ratio(c), c) for c in range(k.size) if amp_l[c] > 0]
    heapq.heapify(heap)
    steps = 0
    while heap and steps < max_steps:
        neg, c = heapq.heappop(heap)
        if cost_l[c] > left + _BUDGET_SLACK:
            continue  # never fits again: the budget only shrinks
        if -neg <= 0:
            break
        k[c] += 1
        left -= cost_l[c]
        steps += 1
        heapq.heappush(heap, (-ratio(c), c))


GREEDY_STEPS = 64
"""A greedy step spends about 1/GREEDY_STEPS of what is left (then single episodes)."""


class Transfer(Protocol):
    """How episodes in one cell train the others, without forming their matrix ``T``
    (:class:`analytics.steering.transfer.TransferModel` is one). One may also say what a
    :meth:`reach` costs in columns (``reach_cost``, read with a default of one batch): the
    greedy then keeps a reach until it has grown that loose."""

    def columns(self, cells: npt.ArrayLike, rows: npt.ArrayLike | None = None) -> FloatArray:
        """``T[rows][:, cells]``: what one episode in each of ``cells`` counts for each cell
        of ``rows`` (all cells when None; 0 in its own)."""
        ...

    def reach(self, x: npt.ArrayLike) -> FloatArray:
        """``T.T @ x``: for values ``x`` per cell, what an episode in each cell is worth in
        the other cells it helps."""
        ...

    def spread(self, x: npt.ArrayLike) -> FloatArray:
        """``T @ x``: what ``x`` episodes per cell give every other cell."""
        ...


class DenseTransfer:
    """A :class:`Transfer` given as its matrix (finite, >= 0, square; diagonal ignored)."""

    def __init__(self, matrix: npt.ArrayLike) -> None:
        self.matrix = np.array(matrix, dtype=np.float64)
        np.fill_diagonal(self.matrix, 0.0)

    def columns(self, cells: npt.ArrayLike, rows: npt.ArrayLike | None = None) -> FloatArray:
        js = np.asarray(cells, dtype=np.int64).reshape(-1)
        if rows is None:
            return self.matrix[:, js]
        return self.matrix[np.ix_(np.asarray(rows, dtype=np.int64).reshape(-1), js)]

    def reach(self, x: npt.ArrayLike) -> FloatArray:
        return np.asarray(self.matrix.T @ np.asarray(x, dtype=np.float64), dtype=np.float64)

    def spread(self, x: npt.ArrayLike) -> FloatArray:
        return np.asarray(self.matrix @ np.asarray(x, dtype=np.float64), dtype=np.float64)


# Rounding in the bounds must never hide the best block: a bound this close to the best
# exact gain is looked at too.
_BOUND_SLACK = 1e-9
_FIRST_BATCH = 16  # candidates weighed exactly at once (then twice as many, and so on)
_MAX_BATCH = 256  # so a batch holds at most 256 columns of T
_DENSE_CELLS = 512  # up to this many cells a model's matrix is formed (quicker than sums)


def _as_transfer(transfer: npt.ArrayLike | Transfer, size: int) -> Transfer:
    """``transfer`` as a :class:`Transfer` over ``size`` cells: a model as it is (its
    matrix, when it can form one, for few cells: small and quicker), a matrix checked.
    Raises ValueError for a matrix that is not square, finite and >= 0."""
    if hasattr(transfer, "columns") and hasattr(transfer, "reach"):
        form = getattr(transfer, "matrix", None)
        if size <= _DENSE_CELLS and callable(form):
            return DenseTransfer(form())
        return cast(Transfer, transfer)
    t = np.asarray(transfer, dtype=np.float64)
    if t.shape != (size, size) or not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError("transfer must be a finite, non-negative cells x cells matrix")
    return DenseTransfer(t)


def waterfill_with_transfer(
    amplitude: npt.ArrayLike,
    n: npt.ArrayLike,
    cost: npt.ArrayLike,
    b: float,
    budget: float,
    transfer: npt.ArrayLike | Transfer,
    *,
    weigh_all: bool = False,
    steps: int = GREEDY_STEPS,
) -> IntArray:
    """Whole episodes per cell maximising total gain within ``budget`` when episodes in one
    cell also train others: ``k`` episodes in cell ``j`` add ``T[i, j] * k`` to cell
    ``i``'s (effective) count ``n_i``, and cell ``i`` gains ``amplitude_i * ((n_i + 1) ** -b
    - (n_i + added_i + 1) ** -b)``. ``transfer`` is ``T`` as a matrix or a :class:`Transfer`.

    The total is concave in the allocation but no longer a sum over cells, so there is no
    price that settles each cell on its own: the budget is spent greedily, each step buying
    the block of episodes (about a ``steps``-th of what is left, at least one; default
    :data:`GREEDY_STEPS`)
    that gains most per unit of cost over every cell it helps, until nothing affordable
    gains. ``sum(cost * k) <= budget`` always holds.

    Each step finds that block without weighing every cell against every other (a gap
    report's thousands of cells would make that millions of terms a step): a block's gain
    in its own cell is exact, and in every other cell at most the slope there times what
    reaches it (the gain is concave), which :meth:`Transfer.reach` gives for all cells at
    once. Blocks are then weighed exactly (a column of ``T`` each), in order of that bound,
    until the best exact gain beats every bound left: the block chosen is the one weighing
    them all would choose. ``weigh_all`` weighs every block exactly instead (``cells ** 2``
    terms a step): the reference the bounds are tested and benchmarked against. Raises
    ValueError as :func:`waterfill` and for a transfer matrix that is not square, finite
    and >= 0.
    """
    amp, n_arr, cost_arr = _checked(amplitude, n, cost, b, budget)
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    spread = _as_transfer(transfer, amp.size)
    k = np.zeros(amp.size, dtype=np.int64)
    # Only cells that can still gain are weighed (every cell is a candidate to buy in).
    live = np.flatnonzero(amp > 0)
    position = np.full(amp.size, -1, dtype=np.int64)
    position[live] = np.arange(live.size)
    amp_live, m = amp[live], n_arr[live].copy()
    slope = np.zeros(amp.size)
    own = np.zeros(amp.size)
    reach = np.zeros(amp.size)
    stale = True  # whether ``reach`` must be formed again before the next step
    # Blocks weighed in a step beyond which the reach is formed again: half of what forming
    # it costs in blocks weighed (a bound grown loose keeps later steps weighing more too),
    # and at least one batch. bench/transfer_allocation.py measures the choice.
    loose = max(_FIRST_BATCH, int(getattr(spread, "reach_cost", _FIRST_BATCH)) // 2)
    left = float(budget)
    while live.size:
        most = np.floor(left / cost_arr + 1e-9)
        if not np.any(most >= 1):
            break
        step = np.minimum(np.maximum(np.floor(left / cost_arr / steps), 1.0), most)
        step = np.where(most >= 1, step, 0.0)
        outlay = np.maximum(step * cost_arr, 1e-300)
        own[live] = power_gain(amp_live, m, b, step[live])
        if stale:
            # What a block reaches elsewhere, at the slopes now. Counts only grow, so every
            # slope only falls: a reach formed at an earlier step still bounds the gain from
            # above, and is formed again only when it has grown loose (a step weighed more
            # than ``loose`` blocks). The block chosen is the same either way: every block
            # whose bound could beat the best is weighed exactly.
            slope[live] = amp_live * b * np.power(m + 1.0, -b - 1.0)
            reach = spread.reach(slope)
        bound = np.where(step > 0, (own + step * reach) / outlay, 0.0)
        best, j, best_reach = 0.0, -1, np.zeros(0)
        order = np.argsort(-bound, kind="stable")
        start, batch = 0, order.size if weigh_all else _FIRST_BATCH
        while start < order.size:
            # The next candidates by bound, weighed exactly together.
            chosen = order[start : start + batch]
            chosen = chosen[bound[chosen] >= max(best * (1.0 - _BOUND_SLACK), 1e-300)]
            if chosen.size == 0:
                break
            reached = spread.columns(chosen, live) * step[chosen][None, :]
            inside = position[chosen] >= 0
            reached[position[chosen][inside], np.flatnonzero(inside)] = step[chosen][inside]
            exact = power_gain(amp_live[:, None], m[:, None], b, reached).sum(axis=0)
            exact /= outlay[chosen]
            top = int(np.argmax(exact))
            if exact[top] > best or (exact[top] == best and j >= 0 and chosen[top] < j):
                best, j, best_reach = float(exact[top]), int(chosen[top]), reached[:, top]
            start, batch = start + batch, min(batch * 2, _MAX_BATCH)
        stale = start > loose
        if j < 0 or not best > 0:
            break  # no block gains: the exact gains say so whatever the bounds
        k[j] += int(step[j])
        m += best_reach
        left -= float(step[j] * cost_arr[j])
    return k


def allocate_with_transfer(
    amplitude: npt.ArrayLike,
    n: npt.ArrayLike,
    cost: npt.ArrayLike,
    b: float,
    budget: float,
    transfer: npt.ArrayLike | Transfer,
    *,
    steps: int = GREEDY_STEPS,
    from_nothing: bool = True,
) -> IntArray:
    """Whole episodes per cell within ``budget`` when episodes in one cell also train others
    (the problem of :func:`waterfill_with_transfer`): of three allocations, the one that
    avoids most over every cell it helps.

    * the greedy over blocks (:func:`waterfill_with_transfer` with ``steps``; skipped when
      ``from_nothing`` is false);
    * :func:`waterfill` of the whole budget as if each cell learnt only from its own
      episodes, their transfer credited;
    * the greedy after half the budget is spent that way.

    The greedy buys a block of about a ``steps``-th of what is left at a time: where the
    best plan spreads the budget thinly over thousands of cells (a gap report's), its blocks
    are too coarse for it (on the demo's 2,587 cells it avoided 24.6 interventions a day
    where the waterfill alone avoided 25.1 and the greedy after the half 25.4). Where a few
    cheap cells help many (the simulator's worlds), the greedy from nothing is best, and
    level with the one after the half within 0.01%: that one is formed only when the greedy
    from nothing does not beat the waterfill (its blocks too coarse), and wins only when it
    avoids strictly more. Raises ValueError as :func:`waterfill_with_transfer`.
    """
    amp, n_arr, cost_arr = _checked(amplitude, n, cost, b, budget)
    model = _as_transfer(transfer, amp.size)

    def received(k: IntArray) -> FloatArray:
        own = k.astype(np.float64)
        return own + np.asarray(model.spread(own), dtype=np.float64)

    def avoided(k: IntArray) -> float:
        return float(power_gain(amp, n_arr, b, received(k)).sum())

    own = waterfill(amp, n_arr, cost_arr, b, budget)
    best, best_value = own, avoided(own)
    if from_nothing:
        greedy = waterfill_with_transfer(amp, n_arr, cost_arr, b, budget, model, steps=steps)
        greedy_value = avoided(greedy)
        if greedy_value > best_value:
            # The greedy's blocks were fine enough to beat spending as if cells were
            # independent: the greedy after the half is level with it there (within 0.01%
            # in the simulator's worlds) and not worth a second greedy.
            return greedy
        if greedy_value == best_value:
            best = greedy  # level: the greedy's, as without this choice
    half = waterfill(amp, n_arr, cost_arr, b, budget / 2.0)
    rest = max(float(budget) - float(np.dot(cost_arr, half)), 0.0)
    after_half = half + waterfill_with_transfer(
        amp, n_arr + received(half), cost_arr, b, rest, model, steps=steps
    )
    return after_half if avoided(after_half) > best_value else best
