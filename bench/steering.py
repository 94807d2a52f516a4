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
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from multiprocessing import Pool
from pathlib import Path

# One BLAS thread per process: the arrays are small, and idle BLAS threads spinning next to
# the worker processes only steal their CPU. Must be set before numpy is imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics.steering.recommend import Exploration  # noqa: E402
from analytics.steering.simulate import WorldConfig, median_or_none, simulate  # noqa: E402
from analytics.steering.strategies import STRATEGY_NAMES  # noqa: E402

TARGET_RATIO = 0.5


Job = tuple[int, float, int, WorldConfig, Exploration]


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


def _fmt(x: float | None) -> str:
    return "not reached" if x is None else f"{x:,.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--budget", type=float, default=5_000.0)
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--transfer",
        type=float,
        default=WorldConfig().transfer,
        help="hidden transfer between neighbouring cells (world realism)",
    )
    parser.add_argument("--exploration", choices=["ucb", "thompson", "mean"], default="ucb")
    parser.add_argument("--level", type=float, default=Exploration().level)
    args = parser.parse_args()

    started = time.perf_counter()
    config = WorldConfig(transfer=args.transfer)
    exploration = Exploration(args.exploration, args.level)
    jobs: list[Job] = [
        (seed, args.budget, args.rounds, config, exploration) for seed in range(1, args.seeds + 1)
    ]
    if args.workers > 1:
        with Pool(args.workers) as pool:
            rows = pool.map(run_seed, jobs, chunksize=1)
    else:
        rows = [run_seed(job) for job in jobs]
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
