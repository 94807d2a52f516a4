"""Fixed items of a plan: what locked visits hold, and counts decided upstream placed at sites."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from campaigns.planning.allocation import (
    BudgetUse,
    LockedItem,
    SiteSpec,
)
from campaigns.planning.feasibility import explain_no_site, feasibility_matrix, offering_sites
from campaigns.services.plan_steps.inputs import PlanInputs

# ---- fixed items: locked visits, locked targets, counts decided upstream ---------------------


@dataclass
class FixedItems:
    """Episodes whose (cell, site) the plan does not choose, or whose count it does not.

    ``in_tasks`` is what locked visits hold per (cell, site); ``placed`` what this plan
    places per (cell, site) for a count fixed upstream; ``demand`` that count per cell.
    """

    in_tasks: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))
    placed: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))
    demand: dict[int, int] = field(default_factory=dict)
    shortfalls: list[str] = field(default_factory=list)

    def locked_items(self) -> list[LockedItem]:
        pairs: dict[tuple[int, int], int] = defaultdict(int)
        for store in (self.in_tasks, self.placed):
            for pair, n in store.items():
                pairs[pair] += n
        return [
            LockedItem(cell=c, site=s, episodes=n) for (c, s), n in sorted(pairs.items()) if n > 0
        ]


def fixed_items(*, inputs: PlanInputs) -> FixedItems:
    """Charge locked visits, then place every count fixed upstream at sites.

    Locked targets come first (in priority order), then recommended counts. Each count goes
    to the sites that can present its cell — the sites its earlier visits used first, then
    the cheapest — in batches of at least the minimum, within site capacity and what is
    left of the budgets. What cannot be placed is said in words with the constraint and
    by how much.
    """
    fixed = FixedItems()
    locked_task_ids = {t.pk for t in inputs.locked_tasks}
    for task in inputs.locked_tasks:
        site_i = inputs.site_index.get(task.site_id)
        if site_i is None:
            continue
        for tt in task.task_targets.all():
            fixed.in_tasks[(inputs.cell_of(tt.target), site_i)] += tt.episodes_planned
    in_cell: dict[int, int] = defaultdict(int)
    for (c, _), n in fixed.in_tasks.items():
        in_cell[c] += n

    # (cell, label, wanted, preferred site indices)
    wants: list[tuple[int, str, int, list[int], str]] = []
    taken: set[int] = set()
    for target in sorted(inputs.locked_targets, key=lambda t: (-t.priority, t.pk)):
        c = inputs.cell_of(target)
        taken.add(c)
        preferred = sorted(
            {
                inputs.site_index[tt.task.site_id]
                for tt in target.task_targets.all()
                if tt.task_id not in locked_task_ids and tt.task.site_id in inputs.site_index
            }
        )
        wants.append((c, target.label, target.episodes_wanted, preferred, "locked target"))
    order = sorted(
        (i for i, cell in enumerate(inputs.cells) if cell.episodes is not None and i not in taken),
        key=lambda i: (-inputs.cells[i].priority, i),
    )
    for i in order:
        cell = inputs.cells[i]
        wants.append((i, cell.label, int(cell.episodes), [], "recommended"))

    specs = inputs.specs
    feasible = feasibility_matrix(
        [c.value_ids for c in inputs.cells],
        [s.present_values for s in specs],
        {v.pk for v in inputs.values if v.is_stageable},
    )
    cap = [math.inf if s.capacity_episodes is None else float(s.capacity_episodes) for s in specs]
    for (_, s), n in fixed.in_tasks.items():
        cap[s] -= n
    use = use_of(fixed.in_tasks, specs)
    left = {
        "episodes": math.inf
        if inputs.budget.episodes is None
        else inputs.budget.episodes - use.episodes,
        "hours": math.inf if inputs.budget.hours is None else inputs.budget.hours - use.hours,
        "money": math.inf if inputs.budget.money is None else inputs.budget.money - use.money,
    }
    labels = {v.pk: v.label.lower() for v in inputs.values}
    mb = inputs.min_batch
    small: list[tuple[str, int]] = []
    for c, label, wanted, preferred, kind in wants:
        need = wanted - in_cell[c]
        fixed.demand[c] = max(need, 0)
        if need <= 0:
            continue
        if kind == "recommended" and need < mb:
            small.append((label, need))
            continue
        placed = 0
        limits: list[str] = []
        sites_ok = [s for s in range(len(specs)) if feasible[c, s]]
        ranked = sorted(sites_ok, key=lambda s: (s not in preferred, specs[s].cost_per_episode, s))
        for s in ranked:
            rest = need - placed
            if rest <= 0:
                break
            spec = specs[s]
            opened = (c, s) in fixed.in_tasks or (c, s) in fixed.placed
            setup_h = 0.0 if opened else spec.setup_hours_per_visit
            setup_m = 0.0 if opened else spec.cost_per_visit
            by = {
                "site capacity": cap[s],
                "episode budget": left["episodes"],
                "field-hours budget": _room(left["hours"] - setup_h, spec.hours_per_episode),
                "money budget": _room(left["money"] - setup_m, spec.cost_per_episode),
            }
            room = min(rest, *by.values())
            if room < rest:
                limits.append(min(by, key=lambda k: by[k]))
            if room < mb:
                continue
            take = piece_of(rest, int(room), mb)
            if take <= 0:
                continue
            fixed.placed[(c, s)] += take
            placed += take
            cap[s] -= take
            left["episodes"] -= take
            left["hours"] -= take * spec.hours_per_episode + setup_h
            left["money"] -= take * spec.cost_per_episode + setup_m
        short = need - placed
        if short > 0:
            if not sites_ok:
                offering = offering_sites(
                    inputs.cells[c].value_ids,
                    [s.present_values for s in specs],
                    {v.pk for v in inputs.values if v.is_stageable},
                )
                why = explain_no_site(list(inputs.cells[c].value_ids), offering, labels)
            elif short < mb and not limits:
                why = f"the rest is below the minimum batch of {mb}"
            elif limits:
                worst = max(sorted(set(limits)), key=limits.count)
                why = (
                    f"the {worst} is spent"
                    if "budget" in worst
                    else "site capacity is full at every site that can present it"
                )
            else:
                why = f"batches below the minimum of {mb} are not planned"
            fixed.shortfalls.append(
                f"{kind.capitalize()} '{label}': {wanted - short:,} of {wanted:,} episodes "
                f"planned — {why} ({short:,} short)."
            )
    if small:
        names = ", ".join(f"'{label}' ({n})" for label, n in small[:5])
        more = f" and {len(small) - 5} more" if len(small) > 5 else ""
        fixed.shortfalls.append(
            f"{len(small):,} recommended cell{'s' if len(small) != 1 else ''} "
            f"({sum(n for _, n in small):,} episodes) below the minimum batch of {mb} "
            f"{'are' if len(small) != 1 else 'is'} not planned: {names}{more}."
        )
    return fixed


def _room(left: float, per: float) -> float:
    if per <= 0:
        return math.inf if left >= 0 else 0.0
    return max(left, 0.0) / per


def use_of(pairs: dict[tuple[int, int], int], specs: Sequence[SiteSpec]) -> BudgetUse:
    episodes = sum(pairs.values())
    hours = sum(
        n * specs[s].hours_per_episode + specs[s].setup_hours_per_visit
        for (_, s), n in pairs.items()
        if n > 0
    )
    money = sum(
        n * specs[s].cost_per_episode + specs[s].cost_per_visit
        for (_, s), n in pairs.items()
        if n > 0
    )
    return BudgetUse(episodes=episodes, hours=hours, money=money)


def piece_of(left: int, room: int, min_batch: int) -> int:
    """Episodes of a cell a visit with ``room`` takes: 0, or a piece that leaves no sliver.

    Every piece holds at least ``min_batch`` (a cell smaller than a batch travels whole),
    and what stays behind is either nothing or a whole batch for a later visit.
    """
    take = min(left, room)
    if take < left and left - take < min_batch:
        take = left - min_batch
    return take if take >= min(min_batch, left) and take > 0 else 0
