"""Benchmark: the steering refit on a campaign's evaluation history, at a gap report's scale.

Run: ``/work/main/.venv/bin/python bench/history_refit.py [--evaluations 3]`` (no Django, no
database, deterministic).

After every evaluation import the app refits the campaign's curves with
:func:`analytics.learning.fit_history`: an exponent per cell and an amplitude prior from its
conditions (cells x exponent offsets x grid points per cell). The baseline is the
shared-exponent fit the refit ran before 2026-12-06 (cells x grid). Both run on the same
synthetic history: four condition dimensions of four values, cells with 0-500 episodes
growing over the evaluations, 0-40 trials per cell and evaluation. Prints per size the
seconds and peak traced memory of each, and their ratios. The per-cell posteriors are formed
1,024 cells at a time; forming them all at once took 2.3 GB at 10,000 cells.

Then the gap report's scoring of the same cells (:func:`analytics.gap.compute_gap`, the
refit's pooled curve given): read on the refit's history (each cell's stored quantiles,
updated by production the refit does not hold, here 0-200 cycles per cell) against the
baseline, every cell read from its current outcomes alone (what the report did before).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _util import measured

from analytics.gap import CellHistory, GapInputs, compute_gap
from analytics.learning import EvaluationRows, fit_curve_set, fit_history, posterior_quantiles

SIZES = (500, 2_000, 10_000, 20_000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'cells':>7} {'shared s':>9} {'MiB':>6} {'history s':>10} {'MiB':>6} {'time x':>7} "
        f"{'memory x':>9} {'report s':>9} {'on history s':>13} {'x':>5}"
    )
    for cells in SIZES:
        rng = np.random.default_rng(cells)
        codes = rng.integers(0, 4, size=(cells, 4))
        growth = np.arange(1, args.evaluations + 1)[:, None]
        counts = (rng.integers(0, 500, cells)[None, :] * growth).astype(np.float64)
        rate = np.minimum(0.3 * rng.lognormal(0.0, 0.5, cells) * (counts + 1) ** -0.7, 1.0)
        trials = rng.integers(0, 40, size=counts.shape).astype(np.float64)
        successes = trials - rng.binomial(trials.astype(np.int64), rate)
        rows = EvaluationRows.of_evaluations(counts, trials, successes)
        _, *shared = measured(fit_curve_set, rows, counts[-1])
        curves, *history = measured(
            lambda: fit_history(counts, trials, successes, counts[-1], conditions=codes)  # noqa: B023
        )
        production = rng.integers(0, 200, cells)
        failures = rng.binomial(production, rate[-1])
        now_trials = (trials[-1] + production).astype(np.int64)
        now_successes = (successes[-1] + production - failures).astype(np.int64)
        common = {
            "labels": [str(c) for c in range(cells)],
            "target_share": np.full(cells, 1.0 / cells),
            "train_count": counts[-1],
            "trials": now_trials,
            "successes": now_successes,
            "cycles_per_day": 5000.0,
            "curve": curves.pooled,
        }
        held = CellHistory(
            quantiles=posterior_quantiles(curves.posterior),
            tau=curves.tau,
            trials=trials[-1],
            successes=successes[-1],
        )
        _, report_s, _ = measured(lambda: compute_gap(GapInputs(**common)))  # noqa: B023
        _, history_s, _ = measured(
            lambda: compute_gap(GapInputs(**common, history=held))  # noqa: B023
        )
        print(
            f"{cells:>7,} {shared[0]:>9.2f} {shared[1]:>6.0f} {history[0]:>10.2f} "
            f"{history[1]:>6.0f} {history[0] / shared[0]:>7.1f} {history[1] / shared[1]:>9.1f} "
            f"{report_s:>9.3f} {history_s:>13.3f} {history_s / report_s:>5.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
