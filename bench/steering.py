"""Benchmark: episodes to reach the reliability target, steered against three baselines.

Run: ``/work/main/.venv/bin/python bench/steering.py [--seeds 50] [--budget 5000]
[--rounds 400] [--workers 2]`` (no Django, no database, deterministic).

For each seed the synthetic world of :mod:`analytics.steering.simulate` (108 condition cells,
lab-skewed training data, a long tail of target mass, hidden per-cell learning curves) is
run under each strategy — steered (refit curves + recommender), uniform, proportional to
target share, more-of-the-same — with the same budget per round and the same evaluation
noise, until the true reliability reaches the target or the rounds run out. Prints, per
strategy, the median episodes to target (a seed that never reaches it counts as infinite)
and how many seeds reached it, then the ratio steered / uniform of the medians and the
median of the per-seed ratios. Acceptance: ratio <= 0.5.

``--oracle [--seeds 16] [--rounds 12] [--budget 5000] [--bounds] [--only NAME,...]``: for
each world family of :data:`~analytics.steering.simulate.WORLDS` (independent cells, shared
transfer, costs, noisy evaluation, drift, all together) and each seed from 1000 on (seeds no
other bench or test tunes on), runs steered, proportional, uniform and the oracle that knows
the hidden truth for a fixed number of rounds, and prints per family the median over seeds of
each strategy's excess failures divided by the oracle's (10th-90th percentile in brackets). The
first column is the informed reference (:mod:`analytics.steering.simulate.informed`): it
knows everything but each cell's own amplitude and exponent and learns those by Bayes' rule
under the world's true priors, so its ratio is what learning from these evaluations costs
at least. ``--bounds`` adds the :data:`~analytics.steering.simulate.FIRST_ROUND_BOUNDS`:
steered in the first round (no history yet, where the recommendation is today's by the
issue's own test), then the informed reference or the oracle — the least a strategy that
plays today's first round can lose, learning or knowing the truth from the second round on —
and then the informed reference that learns the transfer between cells as steered does and
knows the rest (what learning the transfer costs; where only neighbours share, the rest of
steered's excess over it is the price of learning everything else; where cells share values
the transfer's errors cost it more than steered, which refits its curves under them), and
the informed reference told nothing of the
transfer, reading every cell as if it learnt only from its own episodes (no bound, but what
knowing the transfer is worth to the reference).
``--only`` measures only the strategies named (one column again, say) against the same oracle.
``--production DAYS`` plays every family with that many days of each policy's production
logged beside its evaluation (:class:`~analytics.steering.simulate.WorldConfig`'s
``production_days``; 0, evaluations only, by default), as the app's refit reads them.
``--earlier EPISODES`` starts every record with the release before the campaign's first
policy, trained without the last collection's EPISODES (``earlier_release``; 0, none, by
default): its evaluation and production are the history a first round learns the transfer
from, as a fleet's record of the policy it replaced is in the app.
Excess failures: the sum over rounds of (true failure mass after the round - floor mass) *
cycles per day, a round counted as one day of production. No acceptance threshold.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from multiprocessing import Pool
from pathlib import Path
from typing import TypeVar

# One BLAS thread per process: the arrays are small, and idle BLAS threads spinning next to
# the worker processes only steal their CPU. Must be set before numpy is imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics.steering.recommend import Exploration  # noqa: E402
from analytics.steering.simulate import (  # noqa: E402
    FIRST_ROUND_BOUNDS,
    INFORMED,
    ORACLE,
    WORLDS,
    WorldConfig,
    describe_record,
    excess_failures,
    median_or_none,
    simulate,
    world_config,
)
from analytics.steering.strategies import STEERED_WITHOUT_TRANSFER, STRATEGY_NAMES  # noqa: E402

TARGET_RATIO = 0.5
EPISODES_SEEDS, EPISODES_ROUNDS = 50, 400
ORACLE_SEEDS, ORACLE_ROUNDS, ORACLE_FIRST_SEED = 16, 12, 1000
AGAINST_ORACLE: tuple[str, ...] = (
    INFORMED,
    "steered",
    STEERED_WITHOUT_TRANSFER,
    "proportional",
    "uniform",
)


Job = tuple[int, float, int, WorldConfig, Exploration]
T = TypeVar("T")
R = TypeVar("R")


def run_seed(job: Job) -> dict[str, float | None]:
    """Return episodes to target per strategy for one seed (None: not reached)."""
    seed, budget, rounds, config, exploration = job
    return {
        name: simulate(
            name,
            seed=seed,
            rounds=rounds,
            budget=budget,
            config=config,
            exploration=exploration,
            stop_at_target=True,
        ).episodes_to_target
        for name in STRATEGY_NAMES
    }


OracleJob = tuple[str, int, float, int, Exploration, tuple[str, ...], float, int]


def run_against_oracle(job: OracleJob) -> tuple[str, dict[str, float], float, float]:
    """Return one seed's excess failures per strategy, and the oracle's first and last reliability."""
    family, seed, budget, rounds, exploration, names, production, earlier = job
    config = world_config(family, production_days=production, earlier_release=earlier)
    excess: dict[str, float] = {}
    first = last = math.nan
    for name in (*names, ORACLE):
        result = simulate(
            name,
            seed=seed,
            rounds=rounds,
            budget=budget,
            config=config,
            exploration=exploration,
        )
        excess[name] = excess_failures(result)
        if name == ORACLE:
            first, last = result.reliability[0], result.reliability[-1]
    return family, excess, first, last


def _map(worker: Callable[[T], R], jobs: list[T], workers: int) -> list[R]:
    if workers > 1:
        with Pool(workers) as pool:
            return pool.map(worker, jobs, chunksize=1)
    return [worker(job) for job in jobs]


def oracle_main(args: argparse.Namespace) -> int:
    """Print, per world family, each strategy's excess failures over the oracle's."""
    seeds = ORACLE_SEEDS if args.seeds is None else args.seeds
    rounds = ORACLE_ROUNDS if args.rounds is None else args.rounds
    exploration = Exploration(args.exploration, args.level)
    names = (*AGAINST_ORACLE, *(FIRST_ROUND_BOUNDS if args.bounds else ()))
    if args.only:
        # One column or a few measured again, each against the same oracle runs.
        only = tuple(name.strip() for name in args.only.split(",") if name.strip())
        unknown = [name for name in only if name not in (*AGAINST_ORACLE, *FIRST_ROUND_BOUNDS)]
        if unknown:
            known = ", ".join((*AGAINST_ORACLE, *FIRST_ROUND_BOUNDS))
            raise SystemExit(
                f"--only: unknown strategy {', '.join(unknown)}; expected some of {known}"
            )
        names = only
    started = time.perf_counter()
    jobs: list[OracleJob] = [
        (family, seed, args.budget, rounds, exploration, names, args.production, args.earlier)
        for seed in range(ORACLE_FIRST_SEED, ORACLE_FIRST_SEED + seeds)
        for family in WORLDS
    ]
    rows = _map(run_against_oracle, jobs, args.workers)
    elapsed = time.perf_counter() - started

    print(
        f"{seeds} seeds ({ORACLE_FIRST_SEED}..{ORACLE_FIRST_SEED + seeds - 1}), {rounds} rounds "
        f"of {args.budget:,.0f} episodes, steered with {exploration.method} "
        f"{exploration.level:g}, {args.workers} workers ({elapsed:.1f} s); the record "
        "strategies read: "
        + describe_record(
            world_config(production_days=args.production, earlier_release=args.earlier)
        )
    )
    print(
        "excess failures / oracle's: median [10th-90th percentile] over seeds; excess = sum "
        "over rounds of (true failure mass - floor) x cycles per day, a round = one day"
    )
    widths = {name: max(22, len(name) + 2) for name in names}
    header = "".join(f"{name:>{widths[name]}}" for name in names)
    print(f"{'family':<13}{'oracle excess':>14}{'oracle reliability':>24}{header}")
    for family in WORLDS:
        mine = [row for row in rows if row[0] == family]
        oracle = np.array([row[1][ORACLE] for row in mine])
        first = float(np.median([row[2] for row in mine]))
        last = float(np.median([row[3] for row in mine]))
        cells = ""
        for name in names:
            ratio = np.array([row[1][name] for row in mine]) / oracle
            p10, p50, p90 = np.percentile(ratio, [10, 50, 90])
            cells += f"{f'{p50:.3f} [{p10:.2f}-{p90:.2f}]':>{widths[name]}}"
        reliability = f"{first:.4f} -> {last:.4f}"
        print(f"{family:<13}{float(np.median(oracle)):>14,.0f}{reliability:>24}{cells}")
    return 0


def _fmt(x: float | None) -> str:
    return "not reached" if x is None else f"{x:,.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seeds",
        type=int,
        default=None,
        help=f"default {EPISODES_SEEDS}; with --oracle {ORACLE_SEEDS}",
    )
    parser.add_argument("--budget", type=float, default=5_000.0)
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help=f"default {EPISODES_ROUNDS}; with --oracle {ORACLE_ROUNDS} (fixed, no stop)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--transfer",
        type=float,
        default=WorldConfig().transfer,
        help="hidden transfer between neighbouring cells (world realism; not with --oracle)",
    )
    parser.add_argument("--exploration", choices=["ucb", "thompson", "mean"], default="ucb")
    parser.add_argument("--level", type=float, default=Exploration().level)
    parser.add_argument(
        "--oracle",
        action="store_true",
        help="excess failures against an oracle that knows the truth, per world family",
    )
    parser.add_argument(
        "--bounds",
        action="store_true",
        help="with --oracle: also steered's first round then the informed reference or the oracle",
    )
    parser.add_argument(
        "--only",
        default="",
        help="with --oracle: only these strategies (comma-separated), e.g. to measure one "
        "column of the table again",
    )
    parser.add_argument(
        "--production",
        type=float,
        default=0.0,
        help="with --oracle: days of each policy's production the fleet logs beside its "
        "evaluation (WorldConfig.production_days; default 0, evaluations only)",
    )
    parser.add_argument(
        "--earlier",
        type=int,
        default=0,
        help="with --oracle: the record starts with the release before the campaign's first "
        "policy, trained without the last collection's EPISODES (WorldConfig.earlier_release; "
        "default 0, none)",
        metavar="EPISODES",
    )
    args = parser.parse_args()
    if args.earlier < 0:
        parser.error(f"--earlier must be a number of episodes >= 0, got {args.earlier}")
    if args.earlier and not args.oracle:
        parser.error("--earlier goes with --oracle (the episodes-to-target run reads none)")
    if args.production < 0 or not math.isfinite(args.production):
        parser.error(f"--production must be a number of days >= 0, got {args.production:g}")
    if args.production and not args.oracle:
        parser.error("--production goes with --oracle (the episodes-to-target run reads none)")
    if args.oracle:
        return oracle_main(args)
    if args.seeds is None:
        args.seeds = EPISODES_SEEDS
    if args.rounds is None:
        args.rounds = EPISODES_ROUNDS

    started = time.perf_counter()
    config = WorldConfig(transfer=args.transfer)
    exploration = Exploration(args.exploration, args.level)
    jobs: list[Job] = [
        (seed, args.budget, args.rounds, config, exploration) for seed in range(1, args.seeds + 1)
    ]
    rows = _map(run_seed, jobs, args.workers)
    elapsed = time.perf_counter() - started

    print(
        f"{args.seeds} seeds, {args.budget:,.0f} episodes a round, up to {args.rounds} rounds, "
        f"target 99.9% success, transfer {args.transfer:g}, steered with "
        f"{exploration.method} {exploration.level:g} ({elapsed:.1f} s)"
    )
    print(f"{'strategy':<18}{'median episodes to target':>28}{'seeds reached':>16}")
    medians: dict[str, float | None] = {}
    for name in STRATEGY_NAMES:
        values = [row[name] for row in rows]
        medians[name] = median_or_none(values)
        reached = sum(v is not None for v in values)
        print(f"{name:<18}{_fmt(medians[name]):>28}{f'{reached}/{len(values)}':>16}")

    steered, uniform = medians["steered"], medians["uniform"]
    per_seed = [
        (row["steered"] if row["steered"] is not None else math.inf)
        / (row["uniform"] if row["uniform"] is not None else math.inf)
        for row in rows
        if row["uniform"] is not None
    ]
    if steered is None:
        print("ratio steered / uniform: steered did not reach the target in most seeds")
        return 1
    if uniform is None:
        print(
            f"ratio steered / uniform: < {steered / (args.budget * args.rounds):.3f} "
            "(uniform did not reach the target in most seeds)"
        )
        return 0
    ratio = steered / uniform
    print(f"ratio steered / uniform (medians): {ratio:.3f}  (target <= {TARGET_RATIO})")
    if per_seed:
        print(
            f"per-seed ratio steered / uniform: median {float(np.median(per_seed)):.3f}, "
            f"worst {max(per_seed):.3f} over {len(per_seed)} seeds where uniform reached it"
        )
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
