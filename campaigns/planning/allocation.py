"""Allocate a collection round's episodes to condition cells and sites (Django-free).

Maximise the interventions per day avoided, ``sum_c gain_c(sum_s x[c, s])``, over integer
episodes ``x[c, s]`` subject to the episode / field-hour / money budgets, which sites can
present which cells, site capacities, a minimum batch per visit and locked items. A *visit*
here is one batch: one cell captured at one site, charged its site's setup hours and fixed
cost once.

Method: the Lagrangian dual of the budgets and capacities (:mod:`relaxation`) gives both a
valid upper bound and a price per unit of every budget and site capacity. A greedy
water-filling (:mod:`allocation_greedy`) then adds batches and increments in order of
marginal gain per priced resource use, always keeping every constraint, so the plan is
feasible by construction; it is re-run a few times with re-balanced budget prices and the
best plan kept. Everything is deterministic (fixed iteration order, ties broken by index,
single-threaded BLAS).
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping, Sequence

import numpy as np

from campaigns.planning.allocation_greedy import SLACK, GreedyState, best_greedy, max_episodes
from campaigns.planning.allocation_report import describe_infeasible_pair, explain_shortfall, fmt
from campaigns.planning.allocation_types import (
    Allocation,
    AllocationResult,
    Budget,
    BudgetUse,
    CellSpec,
    LockedItem,
    SiteSpec,
    UnplacedDemand,
)
from campaigns.planning.errors import PlanInfeasible
from campaigns.planning.feasibility import feasibility_matrix
from campaigns.planning.gain import FloatArray, gain
from campaigns.planning.relaxation import DualProblem, solve_dual

__all__ = [
    "Allocation",
    "AllocationResult",
    "Budget",
    "BudgetUse",
    "CellSpec",
    "LockedItem",
    "SiteSpec",
    "UnplacedDemand",
    "allocate",
]

_INF = math.inf
# Budget rows are normalised by what is left, but never by less than this, so a crumb
# of budget cannot overflow the prices (dividing by more only loosens the relaxation).
_NORM_FLOOR = 1e-12


def allocate(
    *,
    cells: Sequence[CellSpec],
    sites: Sequence[SiteSpec],
    budget: Budget,
    f_inf: float,
    b: float,
    stageable_values: Collection[int],
    value_labels: Mapping[int, str] | None = None,
    min_batch: int = 20,
    locked: Sequence[LockedItem] = (),
) -> AllocationResult:
    """Allocate episodes to (cell, site) pairs to maximise interventions per day avoided.

    Raises PlanInfeasible when the locked items alone break a budget, a site capacity, the
    minimum batch or site feasibility; ValueError on malformed input or when nothing bounds
    the allocation (no budget and an unlimited-capacity site).
    """
    started = time.perf_counter()
    _check_inputs(cells, sites, budget, f_inf, b, min_batch)
    feasible = feasibility_matrix(
        [c.value_ids for c in cells],
        [s.present_values for s in sites],
        stageable_values,
        {i: s.stageable_values for i, s in enumerate(sites) if s.stageable_values is not None},
    )
    labels = dict(value_labels or {})
    state = _initial_state(
        cells, sites, budget, locked, feasible, labels, stageable_values, min_batch
    )
    amp = np.array([c.level(f_inf) for c in cells])
    n0 = np.array([float(c.n0) for c in cells])
    base = np.array(state.total, dtype=np.float64)

    locked_pairs = {(item.cell, item.site) for item in locked}
    problem, active = _dual_problem(
        amp, n0, base, b, min_batch, sites, state, feasible, locked_pairs
    )
    dual = solve_dual(problem)
    upper_bound = float(gain(amp, n0, b, base).sum()) + dual.value

    state, rounds = best_greedy(
        problem,
        active,
        dual.multipliers,
        sites,
        state,
        amp,
        n0,
        b,
        min_batch,
        # Coarser steps for bigger rounds keep the greedy near 6,000 moves.
        max(1, round(float(dual.z.sum()) / 6000.0)),
        dual.z,
    )

    totals = [round(t) for t in state.total]
    cell_gains = gain(amp, n0, b, np.array(totals, dtype=np.float64))
    objective = float(cell_gains.sum())
    allocations = _allocations(locked, state.x, totals, cell_gains)
    use = _budget_use(allocations, sites)
    gap = max(upper_bound - objective, 0.0) / upper_bound if upper_bound > 0 else 0.0
    wanted, unplaced, binding = explain_shortfall(
        cells=cells,
        sites=sites,
        budget=budget,
        feasible=feasible,
        labels=labels,
        stageable_values=stageable_values,
        amp=amp,
        n0=n0,
        b=b,
        min_batch=min_batch,
        base=base,
        totals=totals,
        allocations=allocations,
        use=use,
    )
    return AllocationResult(
        allocations=allocations,
        cell_totals=totals,
        cell_gains=[float(g) for g in cell_gains],
        objective=objective,
        upper_bound=upper_bound,
        gap=gap,
        budget_use=use,
        wanted=wanted,
        unplaced=unplaced,
        binding_constraints=binding,
        solve_seconds=time.perf_counter() - started,
        stats={
            "dual_evaluations": float(dual.evaluations),
            "greedy_rounds": float(rounds),
            "pairs": float(problem.feasible.sum()),
        },
    )


def _check_inputs(
    cells: Sequence[CellSpec],
    sites: Sequence[SiteSpec],
    budget: Budget,
    f_inf: float,
    b: float,
    min_batch: int,
) -> None:
    if not (b > 0 and math.isfinite(b)):
        raise ValueError(f"learning-curve exponent b must be > 0, got {b}")
    if not (0.0 <= f_inf < 1.0):
        raise ValueError(f"f_inf must lie in [0, 1), got {f_inf}")
    if min_batch < 1:
        raise ValueError(f"min_batch must be >= 1, got {min_batch}")
    for c in cells:
        # Written so that NaN fails too.
        if not (c.weight >= 0 and c.n0 >= 0 and 0.0 <= c.failure_rate <= 1.0):
            raise ValueError(f"cell {c.key!r}: weight and n0 must be >= 0, rate in [0, 1]")
    for s in sites:
        numbers = (
            s.hours_per_episode,
            s.cost_per_episode,
            s.setup_hours_per_visit,
            s.cost_per_visit,
        )
        if not all(n >= 0 for n in numbers) or (s.capacity_episodes or 0) < 0:
            raise ValueError(f"site {s.key!r}: costs, hours and capacity must be >= 0")
    for name, limit in (
        ("episode", budget.episodes),
        ("hours", budget.hours),
        ("money", budget.money),
    ):
        if limit is not None and not limit >= 0:
            raise ValueError(f"{name} budget must be >= 0, got {limit}")


def _initial_state(
    cells: Sequence[CellSpec],
    sites: Sequence[SiteSpec],
    budget: Budget,
    locked: Sequence[LockedItem],
    feasible: np.ndarray,
    labels: Mapping[int, str],
    stageable: Collection[int],
    min_batch: int,
) -> GreedyState:
    """Charge the locked items; raise PlanInfeasible naming the budget, site capacity or
    site feasibility they break (a locked item below the minimum batch is kept as it is)."""
    total = [0.0] * len(cells)
    used_cap = [0] * len(sites)
    hours = money = 0.0
    episodes = 0
    seen: set[tuple[int, int]] = set()
    for item in locked:
        if not (0 <= item.cell < len(cells) and 0 <= item.site < len(sites)):
            raise ValueError(f"locked item {item} refers to an unknown cell or site")
        cell, site = cells[item.cell], sites[item.site]
        where = f"locked item (cell {cell.key!r}, site {site.key!r})"
        if (item.cell, item.site) in seen:
            raise PlanInfeasible(f"{where} is locked twice; lock each pair once")
        seen.add((item.cell, item.site))
        # No minimum batch here: a locked item is the manager's decision, kept as it is (the
        # planner's own placements are whole batches by construction).
        if not feasible[item.cell, item.site]:
            reason = describe_infeasible_pair(cell, site, labels, stageable)
            raise PlanInfeasible(f"{where}: {reason}")
        total[item.cell] += item.episodes
        used_cap[item.site] += item.episodes
        episodes += item.episodes
        hours += item.episodes * site.hours_per_episode + site.setup_hours_per_visit
        money += item.episodes * site.cost_per_episode + site.cost_per_visit
    for s, site in enumerate(sites):
        if site.capacity_episodes is not None and used_cap[s] > site.capacity_episodes:
            raise PlanInfeasible(
                f"locked items exceed site {site.key!r} capacity: "
                f"{fmt(used_cap[s])} of {fmt(site.capacity_episodes)} episodes"
            )
    for name, used, limit in (
        ("episode budget", episodes, budget.episodes),
        ("field-hours budget", hours, budget.hours),
        ("money budget", money, budget.money),
    ):
        if limit is not None and used > limit + 1e-9:
            raise PlanInfeasible(f"locked items exceed the {name}: {fmt(used)} of {fmt(limit)}")
    cap = [
        _INF if s.capacity_episodes is None else float(s.capacity_episodes - used_cap[i])
        for i, s in enumerate(sites)
    ]
    return GreedyState(
        episodes=_left(budget.episodes, episodes),
        hours=_left(budget.hours, hours),
        money=_left(budget.money, money),
        cap=cap,
        total=total,
        x={},
        open_sites=[[] for _ in cells],
    )


def _left(limit: float | None, used: float) -> float:
    """Return what is left of a budget (infinite when unlimited, never negative)."""
    return _INF if limit is None else max(float(limit) - used, 0.0)


def _dual_problem(
    amp: FloatArray,
    n0: FloatArray,
    base: FloatArray,
    b: float,
    min_batch: int,
    sites: Sequence[SiteSpec],
    state: GreedyState,
    feasible: np.ndarray,
    locked_pairs: set[tuple[int, int]],
) -> tuple[DualProblem, np.ndarray]:
    """Build the relaxation over the pairs where a new batch can still open."""
    site_max = np.array(
        [
            min(
                state.cap[s],
                state.episodes,
                max_episodes(state.hours, site.hours_per_episode, site.setup_hours_per_visit),
                max_episodes(state.money, site.cost_per_episode, site.cost_per_visit),
            )
            for s, site in enumerate(sites)
        ]
    )
    open_ok = site_max >= min_batch
    # A gain too small to take a logarithm of is no gain: such cells are left out.
    mask = feasible & open_ok[None, :] & (amp > 1e-200)[:, None]
    for c, s in locked_pairs:
        mask[c, s] = False
    h = np.array([s.hours_per_episode for s in sites])
    m = np.array([s.cost_per_episode for s in sites])
    setup_h = np.array([s.setup_hours_per_visit for s in sites])
    setup_m = np.array([s.cost_per_visit for s in sites])
    # Upper bound on any cell's extra episodes: what all its sites and the budgets allow.
    cell_room = np.where(mask, site_max[None, :], 0.0).sum(axis=1)
    upper = np.minimum(cell_room, state.episodes)
    for remaining, per in ((state.hours, h), (state.money, m)):
        lowest = np.where(mask, per[None, :], np.inf).min(axis=1, initial=np.inf)
        if math.isfinite(remaining):
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                room = remaining + SLACK
                upper = np.minimum(upper, np.where(lowest > 0, room / lowest, np.inf))
    mask &= (upper >= min_batch)[:, None]
    if not np.all(np.isfinite(upper[mask.any(axis=1)])):
        raise ValueError(
            "allocation is unbounded: set an episode budget or give the sites capacities"
        )
    active = np.flatnonzero(mask.any(axis=1))
    use_cols, setup_cols = [], []
    if math.isfinite(state.episodes) and state.episodes > 0:
        use_cols.append(np.full(len(sites), 1.0 / state.episodes))
        setup_cols.append(np.zeros(len(sites)))
    for remaining, per, setup in ((state.hours, h, setup_h), (state.money, m, setup_m)):
        if math.isfinite(remaining) and remaining > 0:
            use_cols.append(per / max(remaining, _NORM_FLOOR))
            setup_cols.append(setup / max(remaining, _NORM_FLOOR))
    n_sites = len(sites)
    cap_sites = [s for s in range(n_sites) if math.isfinite(state.cap[s])]
    cap_row = np.full(n_sites, -1, dtype=np.int64)
    cap_row[cap_sites] = np.arange(len(cap_sites))
    cap_arr = np.array(state.cap)
    cap_use = np.where(cap_row >= 0, 1.0 / np.maximum(np.minimum(cap_arr, 1e300), 1e-300), 0.0)
    return DualProblem(
        amp=amp[active],
        n0=n0[active],
        base=base[active],
        upper=upper[active],
        b=b,
        min_batch=float(min_batch),
        feasible=np.ascontiguousarray(mask[active]),
        site_use=np.stack(use_cols, axis=1) if use_cols else np.zeros((n_sites, 0)),
        site_setup=np.stack(setup_cols, axis=1) if setup_cols else np.zeros((n_sites, 0)),
        site_cap_use=cap_use,
        site_cap_row=cap_row,
        n_cap_rows=len(cap_sites),
    ), active


def _allocations(
    locked: Sequence[LockedItem],
    x: Mapping[tuple[int, int], int],
    totals: Sequence[int],
    cell_gains: FloatArray,
) -> list[Allocation]:
    """List locked then new allocations, sorted by (cell, site), gains pro rata."""

    def share(c: int, k: int) -> float:
        return float(cell_gains[c]) * k / totals[c] if totals[c] else 0.0

    rows = [Allocation(i.cell, i.site, i.episodes, share(i.cell, i.episodes), True) for i in locked]
    rows += [Allocation(c, s, k, share(c, k)) for (c, s), k in x.items() if k > 0]
    return sorted(rows, key=lambda a: (a.cell, a.site))


def _budget_use(allocations: Sequence[Allocation], sites: Sequence[SiteSpec]) -> BudgetUse:
    episodes = sum(a.episodes for a in allocations)
    hours = sum(
        a.episodes * sites[a.site].hours_per_episode + sites[a.site].setup_hours_per_visit
        for a in allocations
    )
    money = sum(
        a.episodes * sites[a.site].cost_per_episode + sites[a.site].cost_per_visit
        for a in allocations
    )
    return BudgetUse(episodes=episodes, hours=hours, money=money)
