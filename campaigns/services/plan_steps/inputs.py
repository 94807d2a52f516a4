"""What a plan is built from: the validated inputs and the sites as the allocator sees them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from campaigns.models import (
    CaptureTarget,
    CollectionRound,
    CollectionTask,
)
from campaigns.planning.allocation import (
    Budget,
    SiteSpec,
)
from campaigns.selectors import PlanWorld, site_costs
from sites.models import ConditionValue, Embodiment, Site


@dataclass
class PlanInputs:
    """Everything a plan is built from, validated (see ``plan.plan_inputs``)."""

    round: CollectionRound
    world: PlanWorld
    start: date
    days: int
    budget: Budget
    notes: list[str]
    min_batch: int
    embodiment: Embodiment
    cells: list[Any]  # PlanCell
    index: dict[tuple[int, ...], int]
    excluded: set[tuple[int, ...]]
    sites: list[Site]
    site_index: dict[int, int]
    specs: list[SiteSpec]
    locked_targets: list[CaptureTarget]
    locked_tasks: list[CollectionTask]
    values: list[ConditionValue]
    f_inf: float
    b: float

    def cell_of(self, target: CaptureTarget) -> int:
        return self.index[tuple(sorted(target.condition_set.value_ids))]


def _open_days(site: Site, start: date, days: int) -> list[date]:
    weekdays = {w.weekday for w in site.access_windows.all()}
    return [
        start + timedelta(days=d)
        for d in range(days)
        if (start + timedelta(days=d)).weekday() in weekdays
    ]


def site_specs(
    *, world: PlanWorld, sites: Sequence[Site], start: date, days: int
) -> list[SiteSpec]:
    """The allocator's view of each candidate site: what it presents, costs and can take.

    Capacity is the site's episodes per day on each open day of the horizon, less what
    other rounds already hold on that day.
    """
    held = world.site_day_episodes()
    out = []
    for s in sites:
        costs = site_costs(site=s, team_rate=world.team_rate)
        capacity = sum(
            max(s.capacity_episodes_per_day - held.get((s.slug, d), 0), 0)
            for d in _open_days(s, start, days)
        )
        out.append(
            SiteSpec(
                key=s.slug,
                present_values=frozenset(v.pk for v in s.presents.all()),
                capacity_episodes=capacity,
                hours_per_episode=costs.hours_per_episode,
                cost_per_episode=costs.cost_per_episode,
                setup_hours_per_visit=costs.setup_hours,
                cost_per_visit=costs.cost_per_visit,
            )
        )
    return out
