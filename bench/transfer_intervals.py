"""Benchmark: do the transfer strengths' 90% intervals hold the truth 90% of the time?

Run: ``/work/main/.venv/bin/python bench/transfer_intervals.py [--worlds 24] [--workers 2]``
(no Django, no database, deterministic; about 15 s a world and a way on one core).

Worlds: seven condition dimensions (4 x 3 x 3 x 3 x 2 x 2 x 2 values, about 84% of the
combinations a cell, some 730 cells), true strengths 2%, 3%, 5%, 10%, 20%, 5% and 25%;
half the cells start with up to 300 episodes of their own, and before each of the second
and third evaluations 40% get up to 100 more; 200 trials a cell an evaluation; each cell's
amplitude log-normal around 0.3 and its exponent its own, uniform in 0.6-1.0 (the case where
a cell's own pace can stand in for transfer). World ``w`` is drawn from seed ``10 + w``.

Each world's evaluations go to :func:`analytics.steering.transfer.estimate_transfer` as the
app calls it (intervals from each strength's marginal posterior, the others integrated out
by Gibbs sampling on the grid). The baseline is the interval the estimate reported before
2026-12-06: each strength's profile posterior, the other strengths at their most probable
(one pass of one-dimension-at-a-time ascent) for each of its values, from the same score,
prior and starting point, and as the strength acted on its posterior mean with the others
at their most probable (``_util.conditional_reading``: what the estimate acted on before the
marginal mean). Prints, per way, how many of the true
strengths fell inside the interval (of 7 per world), the mean width in grid steps, the mean
distance of the strength acted on from the truth, and the seconds.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from multiprocessing import Pool
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _util import conditional_reading  # noqa: E402

from analytics.steering import transfer as tr  # noqa: E402

SHAPE = (4, 3, 3, 3, 2, 2, 2)
TRUTH = np.array([0.02, 0.03, 0.05, 0.1, 0.2, 0.05, 0.25])
FIRST_SEED = 10


def world(seed: int) -> tuple[tr.CellStructure, np.ndarray, np.ndarray, np.ndarray]:
    """One world's structure and evaluations (counts, trials, successes; 3 evaluations)."""
    rng = np.random.default_rng(seed)
    conditions = [
        {f"d{i}": f"v{v}" for i, v in enumerate(combo)}
        for combo in itertools.product(*[range(size) for size in SHAPE])
        if rng.random() < 0.84
    ]
    structure = tr.CellStructure.of(conditions)
    size = structure.n_cells
    model = tr.TransferModel(
        structure=structure, strength=TRUTH, low=TRUTH, high=TRUTH, evaluations=3
    )
    counts = np.zeros((3, size))
    counts[0] = rng.integers(0, 300, size) * (rng.random(size) < 0.5)
    for e in (1, 2):
        counts[e] = counts[e - 1] + rng.integers(0, 100, size) * (rng.random(size) < 0.4)
    trials = np.full((3, size), 200.0)
    amplitude = rng.lognormal(np.log(0.3), 0.5, size)
    exponent = rng.uniform(0.6, 1.0, size)
    rate = np.minimum(amplitude * (model.effective(counts) + 1) ** -exponent, 1.0)
    successes = trials - rng.binomial(trials.astype(np.int64), rate)
    return structure, counts, trials, successes


def profile_intervals(
    structure: tr.CellStructure, counts: np.ndarray, trials: np.ndarray, successes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The baseline: each strength's profile-posterior interval, as reported before."""
    score = tr._Score(structure, counts, trials, successes)
    log_prior = tr._log_prior()
    grid = tr.STRENGTH_GRID
    peak = tr._ascend(score, log_prior, np.zeros(len(structure.dimensions)))
    low, high = np.zeros(peak.size), np.zeros(peak.size)
    for d in range(peak.size):
        profile = np.empty(grid.size)
        for k, value in enumerate(grid):
            strength = peak.copy()
            strength[d] = value
            for other in range(peak.size):
                if other != d:
                    conditional = log_prior + score.along(strength, other)
                    strength[other] = grid[int(np.argmax(conditional))]
            at = np.searchsorted(grid, strength)
            profile[k] = log_prior[at].sum() + score(strength)
        weights = np.exp(profile - profile.max())
        low[d], high[d] = tr.equal_tailed_interval(tr.STRENGTH_GRID, weights / weights.sum())
    return low, high


def run(w: int) -> dict[str, tuple[int, float, float, float]]:
    """Per way: true strengths inside, summed width in grid steps, summed distance of the
    strength acted on from the truth, seconds."""
    structure, counts, trials, successes = world(FIRST_SEED + w)
    out: dict[str, tuple[int, float, float, float]] = {}
    for name in ("profile (before)", "marginal (now)"):
        started = time.perf_counter()
        if name.startswith("profile"):
            low, high = profile_intervals(structure, counts, trials, successes)
        else:
            model = tr.estimate_transfer(structure, counts, trials, successes)
            low, high, strength = model.low, model.high, model.strength
        seconds = time.perf_counter() - started
        if name.startswith("profile"):  # the strength acted on before, timed with neither
            strength = conditional_reading(structure, counts, trials, successes)
        inside = int(np.sum((low - 1e-9 <= TRUTH) & (high + 1e-9 >= TRUTH)))
        steps = np.searchsorted(tr.STRENGTH_GRID, high) - np.searchsorted(tr.STRENGTH_GRID, low)
        error = float(np.abs(strength - TRUTH).sum())
        out[name] = (inside, float(steps.sum()), error, seconds)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=24)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    if args.workers > 1:
        with Pool(args.workers) as pool:
            rows = pool.map(run, range(args.worlds), chunksize=1)
    else:
        rows = [run(w) for w in range(args.worlds)]
    elapsed = time.perf_counter() - started
    strengths = TRUTH.size * args.worlds
    print(
        f"{args.worlds} worlds of seven dimensions (seeds {FIRST_SEED}.."
        f"{FIRST_SEED + args.worlds - 1}), 90% intervals, {strengths} true strengths "
        f"({elapsed:.0f} s)"
    )
    print(
        f"{'way':<20}{'inside':>12}{'share':>8}{'mean width (steps)':>20}"
        f"{'mean |strength - truth|':>25}{'s a world':>11}"
    )
    seconds = {}
    for name in rows[0]:
        inside = sum(row[name][0] for row in rows)
        width = sum(row[name][1] for row in rows) / strengths
        error = sum(row[name][2] for row in rows) / strengths
        seconds[name] = sum(row[name][3] for row in rows) / len(rows)
        print(
            f"{name:<20}{f'{inside}/{strengths}':>12}{inside / strengths:>8.0%}"
            f"{width:>20.2f}{error:>25.4f}{seconds[name]:>11.1f}"
        )
    before, now = seconds["profile (before)"], seconds["marginal (now)"]
    print(f"time marginal / profile: {now / before:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
