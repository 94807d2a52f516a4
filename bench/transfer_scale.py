"""Benchmark: the transfer estimate at the in-app refit's scale, with its marginals.

Run: ``/work/main/.venv/bin/python bench/transfer_scale.py [--sizes 500,2000,5000,10000,20000]
[--evaluations 3,8]`` (no Django, no database, deterministic; a few minutes on one core).

The campaign refit after every evaluation import learns the transfer between its cells with
:func:`analytics.steering.transfer.estimate_transfer`, each strength the mean of its marginal
posterior (the other strengths integrated out by Gibbs sampling on the grid) with a 90%
interval. Before 2026-12-06 (ninth session) a refit of more than 2,000 cells skipped the
marginals as too dear and took each strength with the others at their most probable, without
an interval: that reading (``_util.conditional_reading``) is the baseline here, from the same score,
prior and evaluations.

Worlds: distinct cells drawn from the combinations of seven condition dimensions (5 x 4 x 4
x 3 x 3 x 4 x 8 values), true strengths 5%, 0, 20%, 0, 5%, 10% and 0; each cell's amplitude
log-normal around 0.2 and its exponent uniform in 0.6-1.0; training growing by 0-100 episodes
a cell before each evaluation; 1-39 trials a cell an evaluation. Prints per size and number
of evaluations the seconds of each way, their ratio, how many cells speak for the strengths
(cells with failures evaluated more than once), how many times the estimate with marginals
read the score along one dimension (the ascent's, then each conditional the sampler met, at
most 60 sweeps x 7 of those: one it meets again is not read again), and each way's mean
distance from the true strengths.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _util import conditional_reading  # noqa: E402

from analytics.steering import transfer as tr  # noqa: E402

SHAPE = (5, 4, 4, 3, 3, 4, 8)
TRUTH = np.array([0.05, 0.0, 0.2, 0.0, 0.05, 0.1, 0.0])


def world(
    cells: int, evaluations: int, seed: int
) -> tuple[tr.CellStructure, np.ndarray, np.ndarray, np.ndarray]:
    """A world's structure and evaluations (counts, trials, successes)."""
    rng = np.random.default_rng(seed)
    picked = rng.choice(int(np.prod(SHAPE)), size=cells, replace=False)
    codes = np.stack(np.unravel_index(picked, SHAPE), axis=1)
    structure = tr.CellStructure.of(
        [{f"d{d}": f"v{v}" for d, v in enumerate(row)} for row in codes.tolist()]
    )
    model = tr.TransferModel(structure, TRUTH, TRUTH, TRUTH, evaluations)
    counts = np.cumsum(rng.integers(0, 100, (evaluations, cells)), axis=0).astype(np.float64)
    amplitude = 0.2 * rng.lognormal(0.0, 0.5, cells)
    exponent = rng.uniform(0.6, 1.0, cells)
    rate = np.minimum(amplitude * (model.effective(counts) + 1.0) ** -exponent, 1.0)
    trials = rng.integers(1, 40, (evaluations, cells)).astype(np.float64)
    successes = trials - rng.binomial(trials.astype(np.int64), rate)
    return structure, counts, trials, successes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,2000,5000,10000,20000")
    parser.add_argument("--evaluations", default="3,8")
    args = parser.parse_args()
    print(
        f"{'cells':>7} {'evals':>5} {'speaking':>8} {'marginals s':>12} {'baseline s':>11} "
        f"{'x':>6} {'reads':>6} {'error':>6} {'base error':>10}"
    )
    for cells in (int(x) for x in args.sizes.split(",")):
        for evaluations in (int(x) for x in args.evaluations.split(",")):
            structure, counts, trials, successes = world(cells, evaluations, seed=cells)
            failures = trials - successes
            speaking = int(np.count_nonzero((failures.sum(axis=0) > 0) & ((trials > 0).sum(0) > 1)))
            started = time.perf_counter()
            quick = conditional_reading(structure, counts, trials, successes)
            base_s = time.perf_counter() - started
            weighed = _count_alongs()
            started = time.perf_counter()
            model = tr.estimate_transfer(structure, counts, trials, successes)
            marginal_s = time.perf_counter() - started
            along_calls = _count_alongs() - weighed
            error = float(np.abs(model.strength - TRUTH).mean())
            base_error = float(np.abs(quick - TRUTH).mean())
            print(
                f"{cells:>7,} {evaluations:>5} {speaking:>8,} {marginal_s:>12.2f} {base_s:>11.2f} "
                f"{marginal_s / base_s:>6.1f} {along_calls:>6} {error:>6.3f} {base_error:>10.3f}",
                flush=True,
            )
    return 0


_ALONG_CALLS = [0]
_along = tr._Score.along


def _counted(self: tr._Score, strength: np.ndarray, dimension: int) -> np.ndarray:
    _ALONG_CALLS[0] += 1
    return _along(self, strength, dimension)


tr._Score.along = _counted  # type: ignore[method-assign]


def _count_alongs() -> int:
    return _ALONG_CALLS[0]


if __name__ == "__main__":
    raise SystemExit(main())
