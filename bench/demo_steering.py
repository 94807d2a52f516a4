"""Benchmark: the steering refit and the next round's recommendation on the demo programme.

Run: ``DATABASE_URL=... /work/main/.venv/bin/python bench/demo_steering.py [--runs 3]``
(``make bench`` starts the embedded PostgreSQL when ``DATABASE_URL`` is unset).

Seeds the demo and plays its round 1 as ``make run`` does (``seed_demo``, ``demo_round
--import``), so the campaign ``northwind-2027-h1`` holds two evaluations over the cells of
its gap report (and π-MM7 v1's production at Rotterdam, which the refit reads beside its
evaluations since 2026-12-07). Then, on the evidence its refit reads
(:func:`analytics.services.steering.curves.refit_evidence`):

* **the refit**: the transfer chosen by the evaluations' levels and the curves under it
  (:func:`analytics.steering.levels.fit_transfer`, what the job an evaluation import queues
  runs since 2026-12-07) against the refit before it in the same process (the changes'
  per-dimension reading, then one curve refit), with what each chose;
* **the recommendation** for the campaign's remaining episodes
  (:func:`analytics.services.steering.next_round_recommendation`, the recommend job's work)
  on the stored refit, ``--runs`` times, and the interventions a day its round avoids
  against the greedy over blocks alone (``allocate_with_transfer``'s best of three plans
  against its first).

No acceptance threshold: it prints the seconds, the ratio and what was chosen.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import tempfile
import time
from typing import Any

from _util import refit_before_levels, setup_django


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    # Jobs are queued to a broker nobody reads: the bench runs the work itself, timed.
    os.environ["CELERY_BROKER_URL"] = "memory://"
    setup_django()

    from django.conf import settings
    from django.core.management import call_command

    settings.CELERY_TASK_ALWAYS_EAGER = False

    from analytics.services.steering import next_round_recommendation
    from analytics.services.steering.curves import curves_refit, refit_evidence
    from analytics.steering.levels import fit_transfer
    from campaigns.models import Campaign

    print("Seeding the demo (seed_demo, demo_round --import)…")
    call_command("migrate", verbosity=0)
    call_command("seed_demo", verbosity=0)
    with tempfile.TemporaryDirectory() as out:
        call_command("demo_round", "--import", "--out", out, "--recordings", "0", verbosity=0)
    campaign = Campaign.objects.get(slug="northwind-2027-h1")

    evidence = refit_evidence(campaign=campaign)
    structure = evidence.structure
    assert structure is not None, "the demo's refit reads cells"
    arrays = (evidence.counts, evidence.trials, evidence.successes, evidence.n_now)
    evaluations = int((evidence.trials.sum(axis=1) > 0).sum())
    produced = sum(c for cells in evidence.production.values() for c, _ in cells.values())
    print(
        f"{len(evidence.keys):,} cells, {evaluations} policies with outcomes: "
        f"{evidence.trials.sum():,.0f} trials, {produced:,.0f} of them logged production"
    )

    started = time.perf_counter()
    before = refit_before_levels(structure, *arrays)
    before_s = time.perf_counter() - started
    steps: list[int] = []
    started = time.perf_counter()
    chosen, _ = fit_transfer(structure, *arrays, on_step=lambda d, t: steps.append(t))
    after_s = time.perf_counter() - started
    same = chosen.stored() == before.stored()
    print(
        f"refit: the levels' choice {after_s:.1f} s ({steps[-1] if steps else 0} curve refits) "
        f"against {before_s:.1f} s before, {after_s / before_s:.1f}x; "
        f"{'the same transfer' if same else 'a different transfer'}: {chosen.describe()}"
    )

    # The refit the recommendation reads, stored as the import's job stores it (or the one
    # stored already, when it read the same evidence).
    curves_refit(campaign=campaign)

    seconds: list[float] = []
    result: dict[str, Any] = {}
    for _ in range(max(1, args.runs)):
        started = time.perf_counter()
        result = next_round_recommendation(campaign=campaign)
        seconds.append(time.perf_counter() - started)
    best = result["before"] - result["after"]

    # The same recommendation with the greedy over blocks alone, for what the best of three
    # plans buys on the demo's thin, wide gap report.
    core = importlib.import_module("analytics.steering.recommend.core")
    waterfill = importlib.import_module("analytics.steering.waterfill")
    best_of_three = core.allocate_with_transfer

    def greedy_alone(amp: Any, n: Any, cost: Any, b: Any, budget: Any, transfer: Any) -> Any:
        model = waterfill._as_transfer(transfer, len(amp))
        return waterfill.waterfill_with_transfer(amp, n, cost, b, budget, model)

    core.allocate_with_transfer = greedy_alone
    try:
        greedy = next_round_recommendation(campaign=campaign)
    finally:
        core.allocate_with_transfer = best_of_three
    alone = greedy["before"] - greedy["after"]
    print(
        f"recommendation of {result['budget']:,.0f} episodes: median "
        f"{statistics.median(seconds):.1f} s over {len(seconds)} runs "
        f"({', '.join(f'{s:.1f}' for s in seconds)}); its round avoids {best:.1f} "
        f"interventions a day, the greedy alone {alone:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
