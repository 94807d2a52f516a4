"""Benchmark: allocating a round with transfer over a gap report's thousands of cells.

Run: ``/work/main/.venv/bin/python bench/transfer_allocation.py [--budget 5000]`` (no Django,
no database, deterministic).

Each episode counts in every cell that shares its conditions, so choosing where the next
block of episodes goes weighs each candidate cell's block in every cell it helps. The
baseline does that literally, as the allocation did before 2026-12-03: it forms the
cells x cells transfer matrix and weighs every block exactly at every step
(``waterfill_with_transfer(..., matrix, weigh_all=True)``), which is why the recommendation
used to weigh at most a report's 1,000 highest-value cells. The allocation now bounds each
block's gain from above (exact in its own cell, the slope times what reaches the others,
summed without the matrix over the grid of every combination of values or over groups of
cells, whichever is cheaper) and weighs exactly only the blocks whose
bound beats the best found (:func:`analytics.steering.waterfill.waterfill_with_transfer`).

Worlds: four condition dimensions, every combination a cell (512 to 20,000 cells), 30%
without production share, 40% without training episodes of their own, costs from 0.5 to 5
per episode, transfer strengths 0.3, 0.15, 0.5 and 0.1 per dimension, every cell starting
from its effective count (its own episodes and what transfers, as in the recommendation).
Prints per size the seconds and peak memory of each way, whether they buy the same
episodes, and baseline / bounded ratios; above 2,000 cells only the bounded allocation runs
(the baseline's matrix alone would take 3.2 GB at 20,000 cells).

Then seven dimensions (1,728 cells, one strength per dimension as the demo's refit learns
them), where forming the bound's reach (a sum over the cells per set of transferring
dimensions, 128 of them) costs about as much as weighing 128 blocks: the greedy keeps a
reach formed at an earlier step (counts only grow, so it still bounds every block) until a
step weighs more than 64 blocks. Baseline: the reach formed again after every step that
weighed a second batch, as before 2026-12-06. Prints both times, their ratio, and whether
they buy the same episodes. (Since the reach is formed on the grid where that is cheaper, a
pass over it per dimension, here about seven blocks' worth, both ways form it again at the
same steps: what the section still shows is that they buy the same episodes. Keeping the
reach matters where the cells are few of many combinations and it is formed by groups.)

Last, what a round avoids under each plan over the same worlds (up to 4,096 cells, and the
seven dimensions): the greedy alone, the waterfill as if each cell learnt only from its own
episodes (its transfer credited), and :func:`~analytics.steering.waterfill.allocate_with_transfer`,
the best of those and the greedy after half that waterfill, which the recommendation uses;
then the seven dimensions again with every cell worth a few episodes, the strengths the
demo's refit learns and twice the budget (a gap report's shape, near the demo's round of
9,369 episodes, where the best plan is thin over many cells and the greedy's blocks are too
coarse for it).
Prints what each avoids, the ratio chosen / greedy (never below 1) and the seconds.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _util import measured

from analytics.steering.transfer import CellStructure, TransferModel
from analytics.steering.waterfill import allocate_with_transfer, waterfill, waterfill_with_transfer
from campaigns.planning.gain import power_gain

STRENGTH = np.array([0.3, 0.15, 0.5, 0.1])
SHAPES = (
    (8, 8, 4, 2),
    (10, 10, 5, 2),
    (10, 10, 5, 4),
    (16, 16, 4, 4),
    (25, 20, 5, 4),
    (25, 25, 8, 4),
)
SEVEN = (4, 4, 3, 3, 3, 2, 2)
SEVEN_STRENGTH = np.array([0.03, 0.04, 0.1, 0.33, 0.16, 0.11, 0.1])
DEMO_STRENGTH = np.array([0.017, 0.026, 0.059, 0.24, 0.105, 0.075, 0.065])  # refit, 2026-12-06
BASELINE_UP_TO = 2000
B = 0.6


def world(
    shape: tuple[int, ...], seed: int = 0, strength: np.ndarray = STRENGTH, thin: bool = False
) -> tuple[TransferModel, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    conditions = [
        {f"d{d}": f"v{v}" for d, v in enumerate(combo)}
        for combo in itertools.product(*[range(size) for size in shape])
    ]
    structure = CellStructure.of(conditions)
    size = structure.n_cells
    model = TransferModel(
        structure=structure, strength=strength, low=strength, high=strength, evaluations=4
    )
    amplitude = rng.lognormal(0.0, 1.0, size) * (rng.random(size) < 0.7) / size * 500
    own = (rng.integers(0, 400, size) * (rng.random(size) < 0.6)).astype(float)
    cost = rng.choice([0.5, 1.0, 2.0, 5.0], size)
    if thin:  # every cell worth a few episodes, as on a gap report: the best plan is thin
        amplitude = rng.lognormal(0.0, 0.5, size) / size * 500
        own = rng.integers(0, 50, size).astype(float)
        cost = np.ones(size)
    n = model.effective(own)  # the counts the allocation starts from, as in the recommendation
    return model, amplitude, n, cost


def avoided(model: TransferModel, amplitude: np.ndarray, n: np.ndarray, k: np.ndarray) -> float:
    """What ``k`` episodes per cell avoid over every cell they help."""
    own = k.astype(np.float64)
    return float(power_gain(amplitude, n, B, own + model.spread(own)).sum())


def bounded(model, amplitude, n, cost, budget):  # type: ignore[no-untyped-def]
    return waterfill_with_transfer(amplitude, n, cost, B, budget, model)


def baseline(model, amplitude, n, cost, budget):  # type: ignore[no-untyped-def]
    matrix = model.matrix()
    return waterfill_with_transfer(amplitude, n, cost, B, budget, matrix, weigh_all=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=5000.0)
    args = parser.parse_args()
    print(
        f"{'cells':>7} {'baseline s':>11} {'bounded s':>10} {'time ratio':>11} "
        f"{'baseline MiB':>13} {'bounded MiB':>12} {'mem ratio':>10}  same episodes"
    )
    for shape in SHAPES:
        model, amplitude, n, cost = world(shape)
        size = model.structure.n_cells
        inputs = (model, amplitude, n, cost, args.budget)
        mine, seconds, peak = measured(bounded, *inputs)
        if size <= BASELINE_UP_TO:
            every, base_seconds, base_peak = measured(baseline, *inputs)
            print(
                f"{size:>7,} {base_seconds:>11.2f} {seconds:>10.2f} "
                f"{base_seconds / seconds:>11.1f} {base_peak:>13.1f} {peak:>12.1f} "
                f"{base_peak / peak:>10.1f}  {bool(np.array_equal(every, mine))}"
            )
        else:
            print(
                f"{size:>7,} {'-':>11} {seconds:>10.2f} {'-':>11} {'-':>13} {peak:>12.1f} "
                f"{'-':>10}  (baseline not run)"
            )
        assert float(np.dot(cost, mine)) <= args.budget + 1e-9

    model, amplitude, n, cost = world(SEVEN, strength=SEVEN_STRENGTH)
    inputs = (amplitude, n, cost, B, args.budget)
    lazy, seconds, _ = measured(waterfill_with_transfer, *inputs, model)
    eager, eager_seconds, _ = measured(waterfill_with_transfer, *inputs, _Eager(model))
    print(
        f"seven dimensions, {model.structure.n_cells:,} cells: reach formed after every step "
        f"that weighed a second batch {eager_seconds:.2f} s, only when loose {seconds:.2f} s "
        f"({eager_seconds / seconds:.1f}x); same episodes {bool(np.array_equal(lazy, eager))}"
    )

    print(
        "\nwhat the round avoids (interventions a day, amplitudes as above): the greedy alone, "
        "the waterfill as if cells were independent (its transfer credited), and "
        "allocate_with_transfer (the best of those and the greedy after half the waterfill)"
    )
    print(f"{'cells':>7} {'greedy':>9} {'alone':>9} {'chosen':>9} {'chosen/greedy':>14} {'s':>6}")
    cases: list[tuple[tuple[int, ...], np.ndarray, bool]] = [
        (each, STRENGTH, False) for each in SHAPES[:4]
    ]
    cases += [(SEVEN, SEVEN_STRENGTH, False), (SEVEN, DEMO_STRENGTH, True)]
    for dims, strength, thin in cases:
        model, amplitude, n, cost = world(dims, strength=strength, thin=thin)
        budget = 2 * args.budget if thin else args.budget
        greedy = bounded(model, amplitude, n, cost, budget)
        alone = waterfill(amplitude, n, cost, B, budget)
        chosen, seconds, _ = measured(allocate_with_transfer, amplitude, n, cost, B, budget, model)
        assert float(np.dot(cost, chosen)) <= budget + 1e-9
        by_greedy, by_alone, by_chosen = (
            avoided(model, amplitude, n, k) for k in (greedy, alone, chosen)
        )
        print(
            f"{model.structure.n_cells:>7,} {by_greedy:>9.3f} {by_alone:>9.3f} "
            f"{by_chosen:>9.3f} {by_chosen / by_greedy:>14.4f} {seconds:>6.2f}"
            + ("  (thin: the demo's strengths, twice the budget, costs 1)" if thin else "")
        )


class _Eager:
    """The model, its reach taken as costing one batch: formed again as before 2026-12-06."""

    reach_cost = 0

    def __init__(self, model: TransferModel) -> None:
        self.columns, self.reach = model.columns, model.reach


if __name__ == "__main__":
    main()
