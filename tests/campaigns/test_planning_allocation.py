"""Allocation core: hand-checked plans, named shortfalls, locks, and property tests."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaigns.planning.allocation import (
    AllocationResult,
    Budget,
    CellSpec,
    LockedItem,
    SiteSpec,
    allocate,
)
from campaigns.planning.errors import PlanInfeasible
from campaigns.planning.gain import gain

LIGHT_DIM, LIGHT_BRIGHT, FLOOR_DRY, FLOOR_WET = 1, 2, 3, 4
LABELS = {
    LIGHT_DIM: "dim sodium",
    LIGHT_BRIGHT: "bright LED",
    FLOOR_DRY: "dry",
    FLOOR_WET: "wet floor",
}
STAGEABLE = frozenset({LIGHT_DIM, LIGHT_BRIGHT})


def site(key: str, present: set[int], capacity: int | None = None, **costs: float) -> SiteSpec:
    return SiteSpec(
        key=key,
        present_values=frozenset(present),
        capacity_episodes=capacity,
        hours_per_episode=costs.get("hours", 0.0),
        cost_per_episode=costs.get("cost", 0.0),
        setup_hours_per_visit=costs.get("setup_hours", 0.0),
        cost_per_visit=costs.get("visit_cost", 0.0),
    )


def test_two_cells_split_the_budget_as_the_hand_computed_optimum() -> None:
    # b = 1 and f_inf = 0 make gain_c(k) = w*r * k / (n0 + k + 1).
    #   A: w*r = 100*0.1 = 10, n0 = 9  -> gain_A(k) = 10k / (k + 10)
    #   B: w*r =  40*0.1 =  4, n0 = 0  -> gain_B(k) =  4k / (k + 1)
    # 20 episodes, batches of at least 10, so the only plans are A20, B20 or A10 + B10:
    #   A20 = 200/30 = 6.667;  B20 = 80/21 = 3.810;  A10 + B10 = 100/20 + 40/11 = 8.636.
    cells = [
        CellSpec("A", (LIGHT_DIM,), weight=100.0, n0=9, failure_rate=0.1),
        CellSpec("B", (LIGHT_BRIGHT,), weight=40.0, n0=0, failure_rate=0.1),
    ]

    result = allocate(
        cells=cells,
        sites=[site("lab", set())],
        budget=Budget(episodes=20),
        f_inf=0.0,
        b=1.0,
        stageable_values=STAGEABLE,
        min_batch=10,
    )

    assert [(a.cell, a.site, a.episodes) for a in result.allocations] == [(0, 0, 10), (1, 0, 10)]
    assert result.objective == pytest.approx(5 + 40 / 11)
    assert result.cell_totals == [10, 10]
    assert result.upper_bound >= result.objective - 1e-9
    assert result.binding_constraints == ["episode budget: 20 of 20 used"]


def test_cell_with_a_value_no_site_can_stage_is_reported_with_its_label() -> None:
    cells = [
        CellSpec("dry-dim", (LIGHT_DIM, FLOOR_DRY), weight=500.0, n0=2, failure_rate=0.2),
        CellSpec("wet-dim", (LIGHT_DIM, FLOOR_WET), weight=800.0, n0=0, failure_rate=0.3),
    ]

    result = allocate(
        cells=cells,
        sites=[site("rotterdam-dc", {FLOOR_DRY}, capacity=400, hours=0.1)],
        budget=Budget(episodes=300, hours=100.0),
        f_inf=0.01,
        b=0.5,
        stageable_values=STAGEABLE,
        value_labels=LABELS,
        min_batch=20,
    )

    wet = next(u for u in result.unplaced if u.reason == "no_feasible_site")
    match = re.fullmatch(r"no site can stage 'wet floor'; ([\d,]+) episodes unplaced", wet.message)
    assert match is not None
    assert int(match.group(1).replace(",", "")) == wet.episodes == result.wanted[1] > 0
    assert wet.cells == (1,)
    assert result.cell_totals[1] == 0
    assert all(a.cell == 0 for a in result.allocations)


def test_site_capacity_that_runs_out_is_named_as_binding_and_as_the_shortfall() -> None:
    cells = [CellSpec("c", (FLOOR_DRY,), weight=1000.0, n0=0, failure_rate=0.3)]

    result = allocate(
        cells=cells,
        sites=[site("rotterdam-dc", {FLOOR_DRY}, capacity=40)],
        budget=Budget(episodes=1000),
        f_inf=0.0,
        b=0.5,
        stageable_values=STAGEABLE,
        min_batch=20,
    )

    assert result.cell_totals == [40]
    assert "site 'rotterdam-dc' capacity: 40 of 40" in result.binding_constraints
    assert result.unplaced[0].reason == "site_capacity"
    assert result.unplaced[0].message.startswith("site capacity exhausted at 'rotterdam-dc'")


def test_locked_items_are_kept_and_the_rest_is_solved_around_them() -> None:
    cells = [
        CellSpec("a", (FLOOR_DRY,), weight=100.0, n0=0, failure_rate=0.2),
        CellSpec("b", (FLOOR_DRY,), weight=900.0, n0=0, failure_rate=0.2),
    ]
    locked = [LockedItem(cell=0, site=0, episodes=30)]

    result = allocate(
        cells=cells,
        sites=[site("s0", {FLOOR_DRY}, capacity=100), site("s1", {FLOOR_DRY}, capacity=100)],
        budget=Budget(episodes=100),
        f_inf=0.0,
        b=0.5,
        stageable_values=STAGEABLE,
        min_batch=10,
        locked=locked,
    )

    kept = [a for a in result.allocations if a.locked]
    assert [(a.cell, a.site, a.episodes) for a in kept] == [(0, 0, 30)]
    assert sum(a.episodes for a in result.allocations) == 100
    assert not any(a.cell == 0 and a.site == 0 and not a.locked for a in result.allocations)


@pytest.mark.parametrize(
    ("locked", "budget", "message"),
    [
        (
            [LockedItem(0, 0, 50)],
            Budget(episodes=40),
            "locked items exceed the episode budget: 50 of 40",
        ),
        (
            [LockedItem(0, 0, 60)],
            Budget(episodes=999),
            "exceed site 'rotterdam-dc' capacity: 60 of 50",
        ),
        ([LockedItem(1, 0, 20)], Budget(episodes=999), "can neither present nor stage 'wet floor'"),
    ],
)
def test_locked_items_that_break_a_constraint_raise_plan_infeasible_naming_it(
    locked: list[LockedItem], budget: Budget, message: str
) -> None:
    cells = [
        CellSpec("dry", (FLOOR_DRY,), weight=10.0, n0=0, failure_rate=0.2),
        CellSpec("wet", (FLOOR_WET,), weight=10.0, n0=0, failure_rate=0.2),
    ]

    with pytest.raises(PlanInfeasible, match=re.escape(message)):
        allocate(
            cells=cells,
            sites=[site("rotterdam-dc", {FLOOR_DRY}, capacity=50)],
            budget=budget,
            f_inf=0.0,
            b=0.5,
            stageable_values=STAGEABLE,
            value_labels=LABELS,
            min_batch=20,
            locked=locked,
        )


def test_a_locked_item_below_the_minimum_batch_is_kept_as_it_was_locked() -> None:
    cells = [CellSpec("dry", (FLOOR_DRY,), weight=10.0, n0=0, failure_rate=0.2)]

    result = allocate(
        cells=cells,
        sites=[site("rotterdam-dc", {FLOOR_DRY}, capacity=50)],
        budget=Budget(episodes=999),
        f_inf=0.0,
        b=0.5,
        stageable_values=STAGEABLE,
        value_labels=LABELS,
        min_batch=20,
        locked=[LockedItem(0, 0, 5)],
    )

    kept = [a for a in result.allocations if a.locked]
    assert [(a.cell, a.site, a.episodes) for a in kept] == [(0, 0, 5)]


def test_site_override_of_stageable_values_makes_a_cell_presentable_there_only() -> None:
    cells = [CellSpec("wet", (LIGHT_DIM, FLOOR_WET), weight=100.0, n0=0, failure_rate=0.3)]
    sites = [
        site("plain", set()),
        replace(site("wet-lab", set()), stageable_values=frozenset({LIGHT_DIM, FLOOR_WET})),
    ]

    result = allocate(
        cells=cells,
        sites=sites,
        budget=Budget(episodes=50),
        f_inf=0.0,
        b=0.5,
        stageable_values=STAGEABLE,
        min_batch=10,
    )

    assert [(a.site, a.episodes) for a in result.allocations] == [(1, 50)]


def test_binding_field_hours_and_money_are_named_with_their_use() -> None:
    cells = [
        CellSpec(f"c{i}", (FLOOR_DRY,), weight=100.0, n0=0, failure_rate=0.3) for i in range(3)
    ]

    hours = allocate(
        cells=cells,
        sites=[site("s", {FLOOR_DRY}, hours=0.5, setup_hours=1.0)],
        budget=Budget(hours=31.0),
        f_inf=0.0,
        b=0.5,
        stageable_values=STAGEABLE,
        min_batch=10,
    )
    money = allocate(
        cells=cells,
        sites=[site("s", {FLOOR_DRY}, cost=10.0, visit_cost=100.0)],
        budget=Budget(money=1_000.0),
        f_inf=0.0,
        b=0.5,
        stageable_values=STAGEABLE,
        min_batch=10,
    )

    assert hours.binding_constraints == ["field-hours budget: 31 h of 31 h used"]
    assert hours.budget_use.hours == pytest.approx(31.0)
    assert money.binding_constraints[0].startswith("money budget: ")
    assert money.budget_use.money <= 1_000.0


def test_nothing_bounding_the_allocation_is_refused() -> None:
    cells = [CellSpec("c", (FLOOR_DRY,), weight=100.0, n0=0, failure_rate=0.3)]

    with pytest.raises(ValueError, match="unbounded"):
        allocate(
            cells=cells,
            sites=[site("s", {FLOOR_DRY})],
            budget=Budget(),
            f_inf=0.0,
            b=0.5,
            stageable_values=STAGEABLE,
        )


def test_allocation_is_deterministic() -> None:
    rng = np.random.default_rng(7)
    cells = [
        CellSpec(
            f"c{i}",
            (int(rng.integers(1, 3)), int(rng.integers(3, 5))),
            float(rng.uniform(1, 99)),
            float(rng.integers(0, 50)),
            float(rng.uniform(0, 0.4)),
        )
        for i in range(300)
    ]
    sites = [
        site(
            f"s{j}",
            {FLOOR_DRY} if j % 2 else {FLOOR_DRY, FLOOR_WET},
            capacity=int(rng.integers(50, 400)),
            hours=float(rng.uniform(0.05, 0.2)),
            setup_hours=1.0,
        )
        for j in range(8)
    ]
    kwargs = {
        "cells": cells,
        "sites": sites,
        "budget": Budget(episodes=2000, hours=250.0),
        "f_inf": 0.005,
        "b": 0.6,
        "stageable_values": STAGEABLE,
    }

    first, second = allocate(**kwargs), allocate(**kwargs)  # type: ignore[arg-type]

    assert first.allocations == second.allocations
    assert first.upper_bound == second.upper_bound
    assert first.unplaced == second.unplaced


# --- property tests -------------------------------------------------------------------

VALUES = (LIGHT_DIM, LIGHT_BRIGHT, FLOOR_DRY, FLOOR_WET)


@st.composite
def instances(draw: st.DrawFn, max_cells: int = 6, max_sites: int = 4) -> dict[str, object]:
    n_cells = draw(st.integers(1, max_cells))
    n_sites = draw(st.integers(1, max_sites))
    cells = [
        CellSpec(
            key=f"c{i}",
            value_ids=(
                draw(st.sampled_from((LIGHT_DIM, LIGHT_BRIGHT))),
                draw(st.sampled_from((FLOOR_DRY, FLOOR_WET))),
            ),
            weight=draw(st.floats(0.0, 500.0)),
            n0=draw(st.sampled_from((0.0, 1.0, 10.0, 300.0, 2.5))),
            failure_rate=draw(st.floats(0.0, 0.6)),
        )
        for i in range(n_cells)
    ]
    sites = [
        site(
            f"s{j}",
            set(draw(st.sets(st.sampled_from(VALUES), max_size=4))),
            capacity=draw(st.one_of(st.none(), st.integers(0, 120))),
            hours=draw(st.floats(0.0, 1.0)),
            cost=draw(st.floats(0.0, 20.0)),
            setup_hours=draw(st.floats(0.0, 3.0)),
            visit_cost=draw(st.floats(0.0, 50.0)),
        )
        for j in range(n_sites)
    ]
    min_batch = draw(st.integers(1, 25))
    feasible = [
        (c, s) for c in range(n_cells) for s in range(n_sites) if _presentable(cells[c], sites[s])
    ]
    chosen = draw(st.lists(st.sampled_from(feasible), unique=True, max_size=2)) if feasible else []
    locked = []
    used_cap = [0] * n_sites
    for c, s in chosen:
        k = draw(st.integers(min_batch, min_batch + 15))
        cap = sites[s].capacity_episodes
        if cap is None or used_cap[s] + k <= cap:
            used_cap[s] += k
            locked.append(LockedItem(c, s, k))
    locked_use = _use([(i.cell, i.site, i.episodes) for i in locked], sites)
    budget = Budget(
        episodes=int(locked_use[0]) + draw(st.integers(0, 300)),
        hours=draw(st.one_of(st.none(), st.floats(0.0, 200.0).map(lambda h: h + locked_use[1]))),
        money=draw(st.one_of(st.none(), st.floats(0.0, 3000.0).map(lambda m: m + locked_use[2]))),
    )
    return {
        "cells": cells,
        "sites": sites,
        "budget": budget,
        "f_inf": draw(st.floats(0.0, 0.05)),
        "b": draw(st.floats(0.1, 1.5)),
        "min_batch": min_batch,
        "locked": locked,
    }


def _presentable(cell: CellSpec, s: SiteSpec) -> bool:
    return all(v in s.present_values or v in STAGEABLE for v in cell.value_ids)


def _use(rows: list[tuple[int, int, int]], sites: list[SiteSpec]) -> tuple[float, float, float]:
    episodes = sum(k for _, _, k in rows)
    hours = sum(k * sites[s].hours_per_episode + sites[s].setup_hours_per_visit for _, s, k in rows)
    money = sum(k * sites[s].cost_per_episode + sites[s].cost_per_visit for _, s, k in rows)
    return episodes, hours, money


def _solve(inst: dict[str, object]) -> AllocationResult:
    return allocate(stageable_values=STAGEABLE, value_labels=LABELS, **inst)  # type: ignore[arg-type]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_every_plan_keeps_budgets_feasibility_batches_capacity_and_locks(
    inst: dict[str, object],
) -> None:
    result = _solve(inst)

    cells, sites, budget = inst["cells"], inst["sites"], inst["budget"]
    assert isinstance(cells, list)
    assert isinstance(sites, list)
    assert isinstance(budget, Budget)
    rows = [(a.cell, a.site, a.episodes) for a in result.allocations]
    episodes, hours, money = _use(rows, sites)
    assert budget.episodes is None or episodes <= budget.episodes
    assert budget.hours is None or hours <= budget.hours + 1e-6
    assert budget.money is None or money <= budget.money + 1e-6
    assert all(_presentable(cells[c], sites[s]) for c, s, _ in rows)
    assert all(k >= inst["min_batch"] for _, _, k in rows)  # type: ignore[operator]
    for s, spec in enumerate(sites):
        at_site = sum(k for _, ss, k in rows if ss == s)
        assert spec.capacity_episodes is None or at_site <= spec.capacity_episodes
    assert len({(c, s) for c, s, _ in rows}) == len(rows)
    for item in inst["locked"]:  # type: ignore[attr-defined]
        assert (item.cell, item.site, item.episodes) in rows
    amp = np.array([c.weight * max(c.failure_rate - inst["f_inf"], 0.0) for c in cells])  # type: ignore[operator]
    totals = np.zeros(len(cells))
    for c, _, k in rows:
        totals[c] += k
    recomputed = float(gain(amp, np.array([c.n0 for c in cells]), inst["b"], totals).sum())  # type: ignore[arg-type]
    assert result.objective == pytest.approx(recomputed, rel=1e-9, abs=1e-12)
    assert result.objective <= result.upper_bound + 1e-6
    assert 0.0 <= result.gap <= 1.0


@settings(max_examples=80, deadline=None)
@given(instances(max_cells=2, max_sites=2), st.integers(1, 12))
def test_upper_bound_is_at_least_the_brute_force_optimum(
    inst: dict[str, object], episodes: int
) -> None:
    budget = inst["budget"]
    assert isinstance(budget, Budget)
    # Small enough to enumerate: at most 4 pairs with 0 or min_batch..12 episodes each.
    inst = {
        **inst,
        "budget": Budget(episodes=episodes, hours=budget.hours, money=budget.money),
        "min_batch": min(int(inst["min_batch"]), 6),  # type: ignore[call-overload]
        "locked": [],
    }

    result = _solve(inst)

    optimum = _brute_force(inst)
    assert optimum <= result.upper_bound + 1e-6
    assert result.objective <= optimum + 1e-9


def _brute_force(inst: dict[str, object]) -> float:
    """Enumerate every plan with episodes per pair in {0} U [min_batch, episode budget]."""
    cells, sites, budget = inst["cells"], inst["sites"], inst["budget"]
    assert isinstance(cells, list)
    assert isinstance(sites, list)
    assert isinstance(budget, Budget)
    m, limit = int(inst["min_batch"]), int(budget.episodes or 0)  # type: ignore[call-overload]
    pairs = [
        (c, s)
        for c in range(len(cells))
        for s in range(len(sites))
        if _presentable(cells[c], sites[s])
    ]
    amp = np.array([c.weight * max(c.failure_rate - inst["f_inf"], 0.0) for c in cells])  # type: ignore[operator]
    n0 = np.array([c.n0 for c in cells])
    best = 0.0
    for combo in itertools.product([0, *range(m, limit + 1)], repeat=len(pairs)):
        rows = [(c, s, k) for (c, s), k in zip(pairs, combo, strict=True) if k]
        episodes, hours, money = _use(rows, sites)
        # The same slack the allocator allows a fixed visit cost: 1e-12.
        if episodes > limit or (budget.hours is not None and hours > budget.hours + 1e-12):
            continue
        if budget.money is not None and money > budget.money + 1e-12:
            continue
        if any(
            spec.capacity_episodes is not None
            and sum(k for _, s, k in rows if s == j) > spec.capacity_episodes
            for j, spec in enumerate(sites)
        ):
            continue
        totals = np.zeros(len(cells))
        for c, _, k in rows:
            totals[c] += k
        best = max(best, float(gain(amp, n0, inst["b"], totals).sum()))  # type: ignore[arg-type]
    assert math.isfinite(best)
    return best
