"""Benchmark: plan a collection round of 5,000 cells x 50 sites, then schedule it.

Run: ``.venv/bin/python bench/plan_round.py`` (deterministic seeds). It first plays
``--instances`` (200) random multi-round campaigns through the real planning services in
the database (rolled back) and prints the share of stored plans with zero violations of the
feasibility checker and of an independent oracle (target 100%); then the Django-free
5,000-cell round below.
Prints solve times (allocation, scheduling), objective, the relaxation's upper bound, the
gap, and ratio lines: objective against the bound and against a naive baseline measured in
the same run (episodes split pro rata to interventions per day over placeable cells).
Target: total under 10 s on 2 cores, within 5% of the bound.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from datetime import date
from datetime import time as dtime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from campaigns.planning.allocation import (
    AllocationResult,
    Budget,
    CellSpec,
    SiteSpec,
    allocate,
)
from campaigns.planning.feasibility import feasibility_matrix
from campaigns.planning.gain import gain
from campaigns.planning.repair import solve_until_placed
from campaigns.planning.scheduling import (
    AccessWindow,
    ScheduleSite,
    Task,
    Team,
    schedule,
    validate_schedule,
)

SEED = 20250611
N_CELLS, N_SITES, N_TEAMS, N_DAYS = 5_000, 50, 20, 30
F_INF, B = 0.002, 0.45
MIN_BATCH = 20
START = date(2025, 6, 2)

# Dimension name -> (value labels, stageable?). The first value of each is the 'lab' one.
DIMENSIONS: list[tuple[str, list[str], bool]] = [
    ("lighting", ["bright LED", "dim sodium", "daylight glare", "flicker"], True),
    ("clutter", ["tidy", "moderate", "dense"], True),
    ("camera pose", ["nominal", "low mount", "high mount", "offset 15deg"], True),
    ("object wear", ["new", "scuffed", "worn"], False),
    ("packaging", ["cardboard", "shrink wrap", "polybag"], False),
    ("human activity", ["none", "occasional", "busy aisle"], False),
    ("floor", ["dry concrete", "epoxy", "wet floor"], False),
    ("region", ["NL", "DE", "US-IL", "JP"], False),
]
REGIONS = {
    "NL": ((52.0, 4.5), "Europe/Amsterdam"),
    "DE": ((51.2, 7.5), "Europe/Berlin"),
    "US-IL": ((41.9, -87.9), "America/Chicago"),
    "JP": ((35.6, 139.7), "Asia/Tokyo"),
}


def make_instance(rng: np.random.Generator) -> dict[str, object]:
    """Build cells, sites and budgets shaped like a real round (lab-skewed counts)."""
    value_ids: list[list[int]] = []
    labels: dict[int, str] = {}
    stageable: set[int] = set()
    next_id = 0
    for _, values, can_stage in DIMENSIONS:
        ids = []
        for label in values:
            labels[next_id] = label
            if can_stage:
                stageable.add(next_id)
            ids.append(next_id)
            next_id += 1
        value_ids.append(ids)
    combos = list(itertools.product(*[range(len(v)) for v in value_ids]))
    chosen = rng.choice(len(combos), size=N_CELLS, replace=False)
    cycles_per_day = 5_000.0
    shares = rng.lognormal(0.0, 1.5, size=N_CELLS)
    shares /= shares.sum()
    cells = []
    for i, idx in enumerate(sorted(chosen.tolist())):
        combo = combos[idx]
        off_lab = sum(1 for v in combo[:7] if v != 0)
        # Lab data piles up where conditions match the lab; the field is thin.
        n0 = float(rng.poisson(400 * 0.35**off_lab)) if rng.random() < 0.8 else 0.0
        rate = min(0.02 + 0.03 * off_lab * rng.random() + 0.2 * (n0 < 5) * rng.random(), 0.6)
        cells.append(
            CellSpec(
                key=f"cell-{i}",
                value_ids=tuple(value_ids[d][v] for d, v in enumerate(combo)),
                weight=cycles_per_day * float(shares[i]),
                n0=n0,
                failure_rate=rate,
            )
        )
    sites = []
    site_geo = []
    region_names = list(REGIONS)
    for s in range(N_SITES):
        region = region_names[s % len(region_names)]
        present = {value_ids[7][region_names.index(region)]}
        for d in range(3, 7):
            k = int(rng.integers(1, len(value_ids[d]) + 1))
            present |= set(rng.choice(value_ids[d], size=k, replace=False).tolist())
        (lat, lon), tz = REGIONS[region]
        site_geo.append((lat + rng.normal(0, 1.0), lon + rng.normal(0, 1.5), tz))
        sites.append(
            SiteSpec(
                key=f"site-{s:02d}-{region.lower()}",
                present_values=frozenset(present),
                capacity_episodes=int(rng.integers(300, 2_500)),
                hours_per_episode=float(rng.uniform(0.04, 0.09)),
                cost_per_episode=float(rng.uniform(4.0, 14.0)),
                setup_hours_per_visit=float(rng.uniform(0.5, 1.5)),
                cost_per_visit=float(rng.uniform(100.0, 300.0)),
            )
        )
    budget = Budget(episodes=30_000, hours=2_600.0, money=420_000.0)
    return {
        "cells": cells,
        "sites": sites,
        "site_geo": site_geo,
        "labels": labels,
        "stageable": frozenset(stageable),
        "budget": budget,
    }


def naive_baseline(inst: dict[str, object], feasible: np.ndarray) -> float:
    """Split the episode budget pro rata to interventions/day over placeable cells."""
    cells = inst["cells"]
    budget = inst["budget"]
    assert isinstance(cells, list)
    assert isinstance(budget, Budget)
    placeable = feasible.any(axis=1)
    cost = np.array([c.weight * c.failure_rate for c in cells]) * placeable
    episodes_budget = float(budget.episodes or 0)
    # Scale down so that hours and money fit at average site rates.
    k = np.floor(episodes_budget * 0.8 * cost / cost.sum())
    k = np.where(k >= MIN_BATCH, k, 0.0)
    amp = np.array([c.weight * max(c.failure_rate - F_INF, 0.0) for c in cells])
    n0 = np.array([c.n0 for c in cells])
    return float(gain(amp, n0, B, k).sum())


def make_tasks(
    inst: dict[str, object], result: AllocationResult, rng: np.random.Generator
) -> tuple[list[Task], list[ScheduleSite], list[Team]]:
    """Turn the allocation into one task per (site, embodiment); build sites and teams.

    A task is one team's work at one site for all its targets there, as a collection task
    is; big ones span several day-visits.
    """
    sites = inst["sites"]
    site_geo = inst["site_geo"]
    assert isinstance(sites, list)
    assert isinstance(site_geo, list)
    hours: dict[tuple[int, int], float] = {}
    value: dict[tuple[int, int], float] = {}
    for a in result.allocations:
        site = sites[a.site]
        key = (a.site, a.cell % 2)  # cells alternate between two embodiments
        hours[key] = hours.get(key, 0.0) + a.episodes * site.hours_per_episode
        hours[key] += site.setup_hours_per_visit
        value[key] = value.get(key, 0.0) + a.gain
    tasks = [
        Task(
            key=f"s{s:02d}-e{e}",
            site=s,
            embodiment=e,
            hours=round(h, 2),
            priority=round(value[(s, e)] / h, 4),
        )
        for (s, e), h in sorted(hours.items())
    ]
    sched_sites = []
    for s, (lat, lon, tz) in enumerate(site_geo):
        days = [0, 1, 2, 3, 4] if s % 3 else [0, 1, 2, 3, 4, 5]
        start = dtime(7 + s % 3, 0)
        windows = tuple(AccessWindow(d, start, dtime(start.hour + 9, 0)) for d in days)
        # A site hosts one team's full day at a time: two teams on one site-day may not
        # together exceed the window (the scheduler's site capacity per day).
        minutes = 9 * 60
        sched_sites.append(
            ScheduleSite(
                key=sites[s].key, lat=lat, lon=lon, tz=tz, windows=windows, minutes_per_day=minutes
            )
        )
    teams = []
    region_names = list(REGIONS)
    for t in range(N_TEAMS):
        (lat, lon), _ = REGIONS[region_names[t % len(region_names)]]
        # Per region: two teams per embodiment and one that operates both.
        kind = t // len(region_names)
        embodiments = frozenset({0, 1}) if kind == 4 else frozenset({kind % 2})
        off = frozenset({date(2025, 6, 2 + int(rng.integers(0, 25)))})
        teams.append(
            Team(
                key=f"team-{t:02d}",
                home_lat=lat + rng.normal(0, 0.5),
                home_lon=lon + rng.normal(0, 0.5),
                hours_per_day=9.0,
                embodiments=embodiments,
                unavailable_dates=off,
                speed_kmh=70.0,
                max_travel_hours_per_day=4.0,
            )
        )
    return tasks, sched_sites, teams


def textbook_lp_bound(inst: dict[str, object], feasible: np.ndarray, segments: int = 30) -> float:
    """Return the usual LP relaxation: tangent segments, continuous x, big-M setup indicators.

    Only for comparison (``--lp``): a valid bound, but far looser than the allocator's.
    """
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    cells, sites, budget = inst["cells"], inst["sites"], inst["budget"]
    assert isinstance(cells, list)
    assert isinstance(sites, list)
    assert isinstance(budget, Budget)
    amp = np.array([c.weight * max(c.failure_rate - F_INF, 0.0) for c in cells])
    n0 = np.array([c.n0 for c in cells])
    pc, ps = np.nonzero(feasible & (amp > 0)[:, None])
    act, cidx = np.unique(pc, return_inverse=True)
    n_pairs, n_cells = len(pc), len(act)
    cap = np.array([float(s.capacity_episodes) for s in sites])
    upper = np.minimum(np.bincount(cidx, weights=cap[ps], minlength=n_cells), budget.episodes)
    big_m = np.minimum(cap[ps], upper[cidx])
    hours = np.array([[s.hours_per_episode, s.setup_hours_per_visit] for s in sites])
    money = np.array([[s.cost_per_episode, s.cost_per_visit] for s in sites])
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    rhs: list[float] = []

    def add(r: np.ndarray, c: np.ndarray, v: np.ndarray) -> None:
        rows.append(r)
        cols.append(c)
        vals.append(v)

    r = 0
    x, v, t = np.arange(n_pairs), n_pairs + np.arange(n_pairs), 2 * n_pairs + np.arange(n_cells)
    for j in range(segments):  # t_c <= g(k) + g'(k) (y_c - k) at k spread over [0, upper]
        k = upper * (j / (segments - 1)) ** 2
        g = gain(amp[act], n0[act], B, k)
        slope = amp[act] * B * (n0[act] + 1) ** B * (n0[act] + k + 1) ** (-B - 1)
        add(r + np.arange(n_cells), t, np.ones(n_cells))
        add(r + cidx, x, -slope[cidx])
        rhs += list(g - slope * k)
        r += n_cells
    add(r + np.arange(n_pairs), x, np.ones(n_pairs))  # x <= M v
    add(r + np.arange(n_pairs), v, -big_m)
    rhs += [0.0] * n_pairs
    r += n_pairs
    for per, limit in (
        (np.ones((len(sites), 2)) * [1, 0], budget.episodes),
        (hours, budget.hours),
        (money, budget.money),
    ):
        add(
            np.full(2 * n_pairs, r),
            np.concatenate([x, v]),
            np.concatenate([per[ps, 0], per[ps, 1]]),
        )
        rhs.append(float(limit or 0.0))
        r += 1
    add(r + ps, x, np.ones(n_pairs))  # site capacities
    rhs += list(cap)
    r += len(sites)
    matrix = coo_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(r, 2 * n_pairs + n_cells),
    ).tocsr()
    objective = np.concatenate([np.zeros(2 * n_pairs), -np.ones(n_cells)])
    bounds = [(0, None)] * n_pairs + [(0, 1)] * n_pairs + [(0, None)] * n_cells
    lp = linprog(objective, A_ub=matrix, b_ub=np.array(rhs), bounds=bounds, method="highs")
    return float(-lp.fun)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--stress", action="store_true", help="also allocate with every value stageable everywhere"
    )
    parser.add_argument("--lp", action="store_true", help="also solve the textbook LP bound")
    parser.add_argument(
        "--instances",
        type=int,
        default=200,
        help="random multi-round instances for the feasibility share (0: skip; needs the DB)",
    )
    args = parser.parse_args()
    if args.instances > 0:
        feasibility_share(args.instances)
    rng = np.random.default_rng(SEED)
    inst = make_instance(rng)
    cells, sites = inst["cells"], inst["sites"]
    assert isinstance(cells, list)
    assert isinstance(sites, list)

    baseline_started = time.perf_counter()
    feasible = feasibility_matrix(
        [c.value_ids for c in cells],
        [s.present_values for s in sites],
        inst["stageable"],  # type: ignore[arg-type]
    )
    baseline = naive_baseline(inst, feasible)
    baseline_seconds = time.perf_counter() - baseline_started

    timings = {"allocation": 0.0, "scheduling": 0.0, "passes": 0.0}
    team_rng_state = rng.bit_generator.state
    bounds: list[float] = []

    def solve(specs: list[SiteSpec]) -> tuple[tuple[Any, ...], dict[int, int]]:
        """Allocate and schedule one pass; per site short of its share, what was placed."""
        rng.bit_generator.state = team_rng_state  # the same teams every pass
        started = time.perf_counter()
        result = run_allocation({**inst, "sites": specs}, inst["stageable"])  # type: ignore[arg-type]
        timings["allocation"] += time.perf_counter() - started
        bounds.append(result.upper_bound)
        tasks, sched_sites, teams = make_tasks({**inst, "sites": specs}, result, rng)
        started = time.perf_counter()
        plan = schedule(tasks=tasks, sites=sched_sites, teams=teams, start=START, days=N_DAYS)
        timings["scheduling"] += time.perf_counter() - started
        timings["passes"] += 1
        allocated: dict[int, int] = {}
        for a in result.allocations:
            allocated[a.site] = allocated.get(a.site, 0) + a.episodes
        short: dict[int, int] = {}
        for u in plan.unscheduled:
            site = int(u.task[1:3])
            lost = math.ceil(u.hours / specs[site].hours_per_episode - 1e-9)
            short[site] = max(short.get(site, allocated.get(site, 0)) - lost, 0)
        return (result, tasks, sched_sites, teams, plan), short

    (result, tasks, sched_sites, teams, plan), _ = solve_until_placed(sites=sites, solve=solve)
    alloc_seconds, sched_seconds = timings["allocation"], timings["scheduling"]
    violations = validate_schedule(
        result=plan,
        tasks=tasks,
        sites=sched_sites,
        teams=teams,
        start=START,
        days=N_DAYS,
    )

    total = alloc_seconds + sched_seconds
    use = result.budget_use
    print(f"instance: {len(cells):,} cells x {len(sites)} sites, {N_TEAMS} teams, {N_DAYS} days")
    print(
        f"feasible pairs: {int(feasible.sum()):,}; placeable cells: {int(feasible.any(1).sum()):,}"
    )
    print(
        f"allocation: {alloc_seconds:.2f} s, {len(result.allocations):,} batches "
        f"({timings['passes']:.0f} passes: capacities cut to what the schedule placed)"
    )
    print(
        f"scheduling: {sched_seconds:.2f} s, {len(plan.placements):,} visits, "
        f"{len(plan.unscheduled)} tasks (partly) unscheduled, {len(violations)} violations"
    )
    asked = sum(t.hours for t in tasks)
    left = sum(u.hours for u in plan.unscheduled)
    print(
        f"scheduled: {100 * (asked - left) / asked:.1f} % of the allocated {asked:,.0f} h fit "
        "team calendars and site days (the planning service re-allocates what does not)"
    )
    print(f"objective: {result.objective:,.3f} interventions/day avoided")
    print(f"upper bound (Lagrangian relaxation): {result.upper_bound:,.3f}")
    print(f"gap: {100 * result.gap:.2f} %")
    print(f"budget use: {use.episodes:,} episodes, {use.hours:,.1f} h, {use.money:,.0f} money")
    for line in result.binding_constraints[:6]:
        print(f"  binding: {line}")
    for u in result.unplaced[:4]:
        print(f"  unplaced: {u.message}")
    travel_km = sum(t.travel_km for t in plan.team_totals)
    travel_days = sum(t.travel_days for t in plan.team_totals)
    print(f"travel: {travel_km:,.0f} km, {travel_days} travel days")
    print(
        f"total: {total:.2f} s (target < 10 s: {'ok' if total < 10 else 'MISSED'}); "
        f"gap target < 5%: {'ok' if result.gap < 0.05 else 'MISSED'}"
    )
    ratio = result.objective / baseline if baseline > 0 else math.inf
    print(
        f"ratio: objective/bound = {result.objective / result.upper_bound:.4f}; "
        f"objective/naive baseline = {ratio:.2f}x "
        f"(baseline {baseline:,.3f} in {baseline_seconds:.2f} s)"
    )
    print(
        f"against the first pass's bound ({bounds[0]:,.3f}, horizon capacities before the "
        f"schedule): {result.objective / bounds[0]:.4f}"
    )
    if args.lp:
        started = time.perf_counter()
        lp = textbook_lp_bound(inst, feasible)
        print(
            f"textbook LP bound: {lp:,.3f} ({time.perf_counter() - started:.2f} s); gap against "
            f"it {100 * (lp - result.objective) / lp:.2f} % (ours {100 * result.gap:.2f} %)"
        )
    if args.stress:
        everything = frozenset(inst["labels"])  # type: ignore[call-overload]
        started = time.perf_counter()
        dense = run_allocation(inst, everything)
        print(
            f"stress (every value stageable everywhere, {len(cells) * len(sites):,} pairs): "
            f"{time.perf_counter() - started:.2f} s, gap {100 * dense.gap:.2f} %"
        )


def feasibility_share(instances: int) -> None:
    """Play random multi-round campaigns through the real services; print the share of stored
    plans with no violation (checker and an independent oracle) and what refusals said.

    Every change (plan, lock, manual move, re-solve) runs in a transaction that is rolled
    back, so the database is left as it was.
    """
    from _util import setup_django

    setup_django()
    from django.db import transaction

    from tests.campaigns.plan_worlds import play

    stored = refused = bad = silent = 0
    examples: list[str] = []
    started = time.perf_counter()
    for seed in range(instances):
        with transaction.atomic():
            outcome = play(np.random.default_rng(SEED + seed), tag=f"bench{seed}")
            transaction.set_rollback(True)
        stored += outcome.stored
        refused += outcome.refused
        bad += len(outcome.bad_stored)
        silent += len(outcome.bad_refusals)
        examples += outcome.bad_stored[:1]
    seconds = time.perf_counter() - started
    share = (stored - bad) / stored if stored else 0.0
    print(
        f"feasibility: {instances} random multi-round instances, {stored:,} stored plans and "
        f"changes, {refused:,} refused with a reason ({silent} without), in {seconds:.1f} s"
    )
    print(
        f"feasibility share: {100 * share:.2f} % of stored plans with zero violations "
        f"(target 100%: {'ok' if bad == 0 else 'MISSED'})"
    )
    for line in examples[:5]:
        print(f"  violation: {line}")


def run_allocation(inst: dict[str, object], stageable: frozenset[int]) -> AllocationResult:
    """Allocate the instance's round with the given stageable values."""
    return allocate(
        cells=inst["cells"],  # type: ignore[arg-type]
        sites=inst["sites"],  # type: ignore[arg-type]
        budget=inst["budget"],  # type: ignore[arg-type]
        f_inf=F_INF,
        b=B,
        stageable_values=stageable,
        value_labels=inst["labels"],  # type: ignore[arg-type]
        min_batch=MIN_BATCH,
    )


if __name__ == "__main__":
    main()
