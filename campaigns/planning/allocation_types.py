"""Inputs and outputs of the allocator (plain data, Django-free)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CellSpec:
    """A condition cell: its value ids and the numbers the gap engine gives for it.

    ``weight`` is ``cycles_per_day * p(c)``; ``n0`` the current (transfer-weighted)
    training count; ``failure_rate`` the cell's current failure rate ``r_c``; ``spill`` the
    level of what an episode here is worth in the cells it also trains (cells sharing its
    conditions), added to the cell's own so that its first episode is worth both (0: none).
    """

    key: str
    value_ids: tuple[int, ...]
    weight: float
    n0: float
    failure_rate: float
    spill: float = 0.0

    def level(self, f_inf: float) -> float:
        """The cell's gain level ``amp``: interventions a day above the floor, plus its spill."""
        return self.weight * max(self.failure_rate - f_inf, 0.0) + self.spill


@dataclass(frozen=True)
class SiteSpec:
    """A collection site: present condition values, capacity and per-episode/visit costs.

    ``capacity_episodes`` is over the whole horizon (``None``: unlimited).
    ``stageable_values`` replaces the global stageable set for this site when given.
    """

    key: str
    present_values: frozenset[int]
    capacity_episodes: int | None
    hours_per_episode: float
    cost_per_episode: float = 0.0
    setup_hours_per_visit: float = 0.0
    cost_per_visit: float = 0.0
    stageable_values: frozenset[int] | None = None


@dataclass(frozen=True)
class Budget:
    """Round budgets; ``None`` means unlimited."""

    episodes: int | None = None
    hours: float | None = None
    money: float | None = None


@dataclass(frozen=True)
class LockedItem:
    """A (cell, site, episodes) triple the re-solve must keep exactly as it is."""

    cell: int
    site: int
    episodes: int


@dataclass(frozen=True)
class Allocation:
    """Episodes of one cell at one site; ``gain`` is its pro-rata share of the cell's gain."""

    cell: int
    site: int
    episodes: int
    gain: float
    locked: bool = False


@dataclass(frozen=True)
class BudgetUse:
    """Resources a plan uses (setup included)."""

    episodes: int
    hours: float
    money: float


@dataclass(frozen=True)
class UnplacedDemand:
    """Episodes the budget alone would buy for some cells but the plan could not place.

    ``reason`` is one of ``no_feasible_site``, ``site_capacity``, ``budget``,
    ``outweighed``; ``message`` says it for a person, e.g.
    ``"no site can stage 'wet floor'; 320 episodes unplaced"``.
    """

    reason: str
    message: str
    episodes: int
    cells: tuple[int, ...]


@dataclass(frozen=True)
class AllocationResult:
    """A plan, its value, how far it can be from optimal, and what limits it.

    ``objective`` and ``upper_bound`` are interventions per day avoided; ``gap`` is
    ``(upper_bound - objective) / upper_bound`` (0 when the bound is 0). ``wanted`` is per
    cell what a budget-only allocation (any site presents any cell, no capacities) would
    give; ``unplaced`` explains the shortfall against it.
    """

    allocations: list[Allocation]
    cell_totals: list[int]
    cell_gains: list[float]
    objective: float
    upper_bound: float
    gap: float
    budget_use: BudgetUse
    wanted: list[int]
    unplaced: list[UnplacedDemand]
    binding_constraints: list[str]
    solve_seconds: float = 0.0
    stats: dict[str, float] = field(default_factory=dict)
