"""Benchmark: the in-app refit's choice of the transfer by the evaluations' levels, at scale.

Run: ``/work/main/.venv/bin/python bench/transfer_levels.py [--sizes 500,2000,5000]
[--evaluations 3]`` (no Django, no database, deterministic).

Since 2026-12-07 the campaign refit after every evaluation import chooses the transfer by
the curve refit's evidence at the effective training each candidate gives
(:func:`analytics.steering.levels.fit_transfer`): no transfer, one strength for every
dimension under either extent, and the per-dimension reading of the changes
(:func:`analytics.steering.transfer.estimate_transfer`), then the curves once more under
the choice. The baseline is the refit before it, in the same process: that reading of the
changes, then one curve refit at its effective counts.

Worlds: ``bench/transfer_scale.py``'s (distinct cells of seven condition dimensions, true
strengths 5%, 0, 20%, 0, 5%, 10% and 0 under the product; per cell an amplitude and an
exponent of its own; no difficulty per condition value, so the levels say less here than in
the simulator's worlds). Prints per size the seconds of each way, their ratio, what each
chose and its mean distance from the true strengths (a reading under the neighbours' extent
is compared strength for strength all the same).
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

from _util import refit_before_levels  # noqa: E402
from transfer_scale import TRUTH, world  # noqa: E402

from analytics.steering.levels import fit_transfer  # noqa: E402


def _said(strength: np.ndarray) -> str:
    return " ".join(f"{s:.3f}" for s in strength)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500,2000,5000")
    parser.add_argument("--evaluations", type=int, default=3)
    args = parser.parse_args()
    print(f"truth (product): {_said(TRUTH)}")
    steps: list[int] = []
    for cells in [int(x) for x in args.sizes.split(",")]:
        structure, counts, trials, successes = world(cells, args.evaluations, seed=cells)
        n_now = counts[-1]

        started = time.perf_counter()
        changes = refit_before_levels(structure, counts, trials, successes, n_now)
        before = time.perf_counter() - started

        started = time.perf_counter()
        steps.clear()
        model, _ = fit_transfer(
            structure, counts, trials, successes, n_now, on_step=lambda d, t: steps.append(t)
        )
        after = time.perf_counter() - started
        print(
            f"{cells:>6} cells, {args.evaluations} evaluations: the levels' choice {after:.1f} s "
            f"({steps[-1]} curve refits) against {before:.1f} s, {after / before:.1f}x; "
            f"chose {model.extent} {_said(model.strength)}, "
            f"{np.abs(model.strength - TRUTH).mean():.3f} from the truth on average "
            f"(the changes' reading: {_said(changes.strength)}, "
            f"{np.abs(changes.strength - TRUTH).mean():.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
