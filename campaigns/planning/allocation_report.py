"""Explain an allocation: demand it could not place, and the constraints that bind.

'Wanted' episodes per cell come from a budget-only relaxation (any site presents any cell,
no site capacities, each cell at its cheapest site): what the money and hours would buy
if sites were no object. The shortfall against the plan is attributed, per cell, to the
first of: no feasible site, site capacity exhausted, a budget exhausted (named), or
outweighed by higher-value cells.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence

import numpy as np

from campaigns.planning.allocation_types import (
    Allocation,
    Budget,
    BudgetUse,
    CellSpec,
    SiteSpec,
    UnplacedDemand,
)
from campaigns.planning.feasibility import explain_no_site, offering_sites
from campaigns.planning.gain import FloatArray
from campaigns.planning.relaxation import DualProblem, solve_dual

# A budget or capacity counts as binding when less than this share of it is left.
_BINDING_SHARE = 0.01
_INF = math.inf


def fmt(number: float) -> str:
    """Format a count or amount for a person: thousands separators, at most one decimal."""
    if abs(number - round(number)) < 1e-6:
        return f"{round(number):,}"
    return f"{number:,.1f}"


def label_of(value_id: int, labels: Mapping[int, str]) -> str:
    """Return the person-facing label of a condition value id."""
    return labels.get(value_id, f"value {value_id}")


def _quoted(labels: Sequence[str], joiner: str) -> str:
    return f" {joiner} ".join(f"'{label}'" for label in labels)


def describe_infeasible_pair(
    cell: CellSpec, site: SiteSpec, labels: Mapping[int, str], stageable: Collection[int]
) -> str:
    """Say which of a cell's values a site neither has nor can stage."""
    offered = set(site.present_values) | set(
        site.stageable_values if site.stageable_values is not None else stageable
    )
    lacking = [label_of(v, labels) for v in cell.value_ids if v not in offered]
    return f"site {site.key!r} can neither present nor stage {_quoted(lacking, 'or')}"


def wanted_episodes(
    *,
    sites: Sequence[SiteSpec],
    budget: Budget,
    amp: FloatArray,
    n0: FloatArray,
    b: float,
    min_batch: int,
    base: FloatArray,
    locked_use: BudgetUse,
) -> list[int]:
    """Return per cell the episodes a budget-only allocation gives (locked ones included)."""
    remaining = {
        "episodes": _INF if budget.episodes is None else budget.episodes - locked_use.episodes,
        "hours": _INF if budget.hours is None else budget.hours - locked_use.hours,
        "money": _INF if budget.money is None else budget.money - locked_use.money,
    }
    remaining = {k: max(r, 0.0) for k, r in remaining.items()}
    if not any(math.isfinite(r) for r in remaining.values()):
        # Budgets unlimited: pool the site capacities into one episode budget instead.
        caps = [s.capacity_episodes for s in sites]
        if not sites or any(c is None for c in caps):
            return [round(v) for v in base]
        pooled = sum(c for c in caps if c is not None) - locked_use.episodes
        remaining["episodes"] = float(pooled)
    per = {
        "episodes": np.ones(len(sites)),
        "hours": np.array([s.hours_per_episode for s in sites]),
        "money": np.array([s.cost_per_episode for s in sites]),
    }
    per_visit = {
        "episodes": np.zeros(len(sites)),
        "hours": np.array([s.setup_hours_per_visit for s in sites]),
        "money": np.array([s.cost_per_visit for s in sites]),
    }
    rows = [name for name, r in remaining.items() if math.isfinite(r) and r > 0]
    if any(math.isfinite(r) and r <= 0 for r in remaining.values()) or not sites:
        return [round(v) for v in base]
    # Never normalise by less than a crumb: that would overflow, and more only loosens.
    norm = {name: max(remaining[name], 1e-12) for name in rows}
    use = np.stack([per[name] / norm[name] for name in rows], axis=1)
    setup = np.stack([per_visit[name] / norm[name] for name in rows], axis=1)
    keep = _pareto_sites(np.hstack([use, setup]))
    use, setup = use[keep], setup[keep]
    active = np.flatnonzero(amp > 1e-200)
    upper = np.full(len(active), remaining["episodes"])
    for name in ("hours", "money"):
        lowest = float(per[name].min())
        if lowest > 0:
            upper = np.minimum(upper, remaining[name] / lowest)
    active = active[upper >= min_batch]
    upper = upper[upper >= min_batch]
    if len(active) == 0 or not np.all(np.isfinite(upper)):
        return [round(v) for v in base]
    problem = DualProblem(
        amp=amp[active],
        n0=n0[active],
        base=base[active],
        upper=upper,
        b=b,
        min_batch=float(min_batch),
        feasible=np.ones((len(active), len(keep)), dtype=np.bool_),
        site_use=use,
        site_setup=setup,
        site_cap_use=np.zeros(len(keep)),
        site_cap_row=np.full(len(keep), -1, dtype=np.int64),
        n_cap_rows=0,
    )
    z = solve_dual(problem, max_iter=40).z
    wanted = base.copy()
    wanted[active] += z
    return [math.floor(v + 1e-9) for v in wanted]


def _pareto_sites(use: FloatArray) -> list[int]:
    """Return the sites not dominated in every resource by another (ties keep the first)."""
    keep = []
    for i in range(len(use)):
        dominated = np.all(use <= use[i], axis=1) & np.any(use < use[i], axis=1)
        earlier_equal = np.all(use == use[i], axis=1) & (np.arange(len(use)) < i)
        if not dominated.any() and not earlier_equal.any():
            keep.append(i)
    return keep


def explain_shortfall(
    *,
    cells: Sequence[CellSpec],
    sites: Sequence[SiteSpec],
    budget: Budget,
    feasible: np.ndarray,
    labels: Mapping[int, str],
    stageable_values: Collection[int],
    amp: FloatArray,
    n0: FloatArray,
    b: float,
    min_batch: int,
    base: FloatArray,
    totals: Sequence[int],
    allocations: Sequence[Allocation],
    use: BudgetUse,
) -> tuple[list[int], list[UnplacedDemand], list[str]]:
    """Return (wanted per cell, unplaced demand grouped by cause, binding constraints)."""
    locked = [a for a in allocations if a.locked]
    locked_use = BudgetUse(
        episodes=sum(a.episodes for a in locked),
        hours=sum(a.episodes * sites[a.site].hours_per_episode for a in locked)
        + sum(sites[a.site].setup_hours_per_visit for a in locked),
        money=sum(a.episodes * sites[a.site].cost_per_episode for a in locked)
        + sum(sites[a.site].cost_per_visit for a in locked),
    )
    wanted = wanted_episodes(
        sites=sites,
        budget=budget,
        amp=amp,
        n0=n0,
        b=b,
        min_batch=min_batch,
        base=base,
        locked_use=locked_use,
    )
    used_at = [0] * len(sites)
    placed: dict[tuple[int, int], Allocation] = {}
    for a in allocations:
        used_at[a.site] += a.episodes
        placed[(a.cell, a.site)] = a
    cap_left = [
        _INF if s.capacity_episodes is None else s.capacity_episodes - used_at[i]
        for i, s in enumerate(sites)
    ]
    left = {
        "episode": _INF if budget.episodes is None else budget.episodes - use.episodes,
        "field-hours": _INF if budget.hours is None else budget.hours - use.hours,
        "money": _INF if budget.money is None else budget.money - use.money,
    }
    site_stageable = {
        i: s.stageable_values for i, s in enumerate(sites) if s.stageable_values is not None
    }
    offering = offering_sites(
        {v for cell in cells for v in cell.value_ids},
        [s.present_values for s in sites],
        stageable_values,
        site_stageable,
    )
    groups: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for c, cell in enumerate(cells):
        short = wanted[c] - totals[c]
        if short < 1:
            continue
        feasible_sites = np.flatnonzero(feasible[c]).tolist()
        if not feasible_sites:
            subject = explain_no_site(cell.value_ids, offering, labels)
            groups[("no_feasible_site", subject)].append((c, short))
            continue
        openable = [s for s in feasible_sites if (c, s) not in placed or not placed[(c, s)].locked]
        # An open batch can grow by one episode; elsewhere a new batch must fit min_batch.
        room = [
            (s, (c, s) in placed)
            for s in openable
            if cap_left[s] >= (1 if (c, s) in placed else min_batch)
        ]
        if not room:
            groups[("site_capacity", _capacity_subject(sites, feasible_sites))].append((c, short))
            continue
        blocking = _blocking_budgets(left, sites, room, min_batch)
        if blocking:
            plural = "budgets" if len(blocking) > 1 else "budget"
            subject = f"{' and '.join(blocking)} {plural} exhausted"
            groups[("budget", subject)].append((c, short))
            continue
        groups[("outweighed", "outweighed by higher-value cells under the binding limits")].append(
            (c, short)
        )
    unplaced = [
        UnplacedDemand(
            reason=reason,
            message=f"{subject}; {fmt(sum(k for _, k in members))} episodes unplaced",
            episodes=sum(k for _, k in members),
            cells=tuple(c for c, _ in members),
        )
        for (reason, subject), members in groups.items()
    ]
    unplaced.sort(key=lambda u: (-u.episodes, u.message))
    binding = _binding(budget, use, sites, used_at, allocations)
    return wanted, unplaced, binding


def _capacity_subject(sites: Sequence[SiteSpec], full: Sequence[int]) -> str:
    names = [repr(sites[s].key) for s in full[:3]]
    more = f" and {len(full) - 3} more" if len(full) > 3 else ""
    return f"site capacity exhausted at {', '.join(names)}{more}"


def _blocking_budgets(
    left: Mapping[str, float],
    sites: Sequence[SiteSpec],
    room: Sequence[tuple[int, bool]],
    min_batch: int,
) -> list[str]:
    """Name the budgets that stop every site with room from taking more of a cell.

    Empty unless each such site is blocked by at least one budget: then the cell is short
    for want of budget, and these are the budgets to raise.
    """
    blocked: set[str] = set()
    for s, grows in room:
        site = sites[s]
        k = 1 if grows else min_batch
        need = {
            "episode": float(k),
            "field-hours": k * site.hours_per_episode
            + (0 if grows else site.setup_hours_per_visit),
            "money": k * site.cost_per_episode + (0 if grows else site.cost_per_visit),
        }
        here = {name for name, amount in left.items() if amount < need[name] - 1e-9}
        if not here:
            return []
        blocked |= here
    return [name for name in ("episode", "field-hours", "money") if name in blocked]


def _binding(
    budget: Budget,
    use: BudgetUse,
    sites: Sequence[SiteSpec],
    used_at: Sequence[int],
    allocations: Sequence[Allocation],
) -> list[str]:
    """List the budgets and site capacities that are (nearly) used up."""
    in_use = {a.site for a in allocations} or set(range(len(sites)))
    min_hours = min((sites[s].hours_per_episode for s in in_use), default=0.0)
    min_money = min((sites[s].cost_per_episode for s in in_use), default=0.0)
    rows = []
    for name, used, limit, unit, step in (
        ("episode budget", float(use.episodes), budget.episodes, "", 1.0),
        ("field-hours budget", use.hours, budget.hours, " h", min_hours),
        ("money budget", use.money, budget.money, "", min_money),
    ):
        if limit is None:
            continue
        if limit - used < max(step, _BINDING_SHARE * limit) or limit - used <= 0:
            rows.append(f"{name}: {fmt(used)}{unit} of {fmt(limit)}{unit} used")
    for s, site in enumerate(sites):
        cap = site.capacity_episodes
        if cap is None or used_at[s] == 0:
            continue
        if cap - used_at[s] < max(1.0, _BINDING_SHARE * cap):
            rows.append(f"site {site.key!r} capacity: {fmt(used_at[s])} of {fmt(cap)}")
    return rows
