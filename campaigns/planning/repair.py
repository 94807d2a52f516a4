"""Allocate, schedule, and re-allocate where the schedule cannot hold a site's share.

The allocator sees each site's capacity over the whole horizon; the scheduler finds what
team calendars and site days really allow. Where the schedule leaves part of a site's share
unplaced, that site's capacity becomes what was placed there, and the allocation runs again
so the budget goes where it can be carried out (Django-free).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from campaigns.planning.allocation_types import SiteSpec

T = TypeVar("T")


def solve_until_placed(
    *,
    sites: Sequence[SiteSpec],
    solve: Callable[[list[SiteSpec]], tuple[T, Mapping[int, int]]],
    passes: int = 3,
) -> tuple[T, list[SiteSpec]]:
    """Return the last outcome of ``solve`` and the site capacities it was solved with.

    ``solve`` allocates and schedules with the given sites and returns its outcome and,
    for each site index whose share did not all fit, the episodes it placed there (empty
    when everything fit). At most ``passes`` solves; capacities only ever shrink, to what
    a schedule placed, so each pass is feasible where the previous one was placed.
    """
    current = list(sites)
    for attempt in range(passes):
        outcome, short = solve(current)
        if not short or attempt == passes - 1:
            return outcome, current
        current = [
            replace(spec, capacity_episodes=max(int(short[i]), 0)) if i in short else spec
            for i, spec in enumerate(current)
        ]
    raise AssertionError("unreachable: passes must be at least 1")
