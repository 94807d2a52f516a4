"""Benchmark: which per-cell curve model predicts held-out failure rates better.

Run: ``/work/main/.venv/bin/python bench/curve_models.py [--seeds 10] [--rounds 8]`` (no
Django, no database, deterministic).

Two candidates shared the pooled ``f_inf`` and ``b``: a Beta posterior around the pooled
curve with a fixed prior strength of 20 pseudo-trials, read from the latest evaluation (what
the gap report used), and the partially pooled log-normal multiplier fitted over the whole
evaluation history with a learned spread (:func:`analytics.learning.fit_curve_set`, what the
recommender used). On the simulator's worlds each round allocates the budget by target
share; both models are fitted on the evaluations so far and predict every cell's failure
rate after the round's data. Scores, averaged over rounds:

* log loss per trial of the next evaluation (held out; a proper score on observable data),
* target-weighted mean |log(predicted / true rate)| (relative error: what ranks cells whose
  rates are small, as reliable robots' are),
* |predicted - true total failure mass| (the headline interventions per day),
* target-weighted |predicted - true gain| from the round's data (the value of capture, what
  both the gap report's priority and the recommendation decide by),
* target-weighted squared error of the rates (dominated by the few high-rate cells).

Decision (kept in the product): the log-normal model, now the one model of the gap report
and the recommendation (:func:`analytics.gap.gap_curves`). Prints each score and the ratio
Beta / log-normal (> 1: the log-normal model is better).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics.learning import EvaluationRows, fit_curve_set
from analytics.steering.simulate import _truth_of, make_world
from campaigns.planning.gain import amplitude_from_level, curve_rate

EPS = 1e-9
PRIOR_STRENGTH = 20.0
SCORES = ("log loss/trial", "w |log ratio|", "|mass error|", "w |gain error|", "w sq. error")


def beta_rate(pooled_rate, trials, successes):
    """The rejected model: Beta(s r, s (1 - r)) prior at the pooled rate, posterior mean."""
    r = np.clip(pooled_rate, EPS, 1 - EPS)
    failures = trials - successes
    return (PRIOR_STRENGTH * r + failures) / (PRIOR_STRENGTH + trials)


def scores(now, after, truth_now, truth_after, trials, failures, share):
    r = np.clip(after, EPS, 1 - EPS)
    loss = -float(np.sum(failures * np.log(r) + (trials - failures) * np.log1p(-r)))
    ratio = np.abs(np.log(np.maximum(after, 1e-6) / np.maximum(truth_after, 1e-6)))
    gain_error = np.abs((now - after) - (truth_now - truth_after))
    return np.array(
        [
            loss / float(trials.sum()),
            float(np.dot(share, ratio)),
            abs(float(np.dot(share, after - truth_after))),
            float(np.dot(share, gain_error)),
            float(np.dot(share, (after - truth_after) ** 2)),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    totals = {"beta": np.zeros(len(SCORES)), "log-normal": np.zeros(len(SCORES))}
    count = 0
    for seed in range(args.seeds):
        world = make_world(seed)
        for _ in range(args.rounds):
            seen = world.observe()
            size = seen.n_cells
            rows = EvaluationRows(
                cell=np.tile(np.arange(size), seen.eval_trials.shape[0]),
                train_count=seen.eval_train_count.reshape(-1),
                trials=seen.eval_trials.reshape(-1),
                successes=seen.eval_successes.reshape(-1),
                n_cells=size,
            ).merged()
            n_now = seen.train_count
            curves = fit_curve_set(rows, n_now)
            pooled = curves.pooled
            level = np.maximum(
                beta_rate(pooled.rate(n_now), seen.eval_trials[-1], seen.eval_successes[-1])
                - pooled.f_inf,
                0.0,
            )
            beta_amp = amplitude_from_level(level, n_now, pooled.b)
            truth_now = _truth_of(world).rate(n_now)

            world.train(np.floor(seen.budget * seen.target_share).astype(np.int64))
            world.evaluate()
            held = world.observe()
            n_next = held.train_count
            trials = held.eval_trials[-1]
            failures = trials - held.eval_successes[-1]
            truth_after = _truth_of(world).rate(n_next)

            def beta_at(n, amp=beta_amp, pooled=pooled):
                return np.minimum(curve_rate(pooled.f_inf, amp, pooled.b, n), 1.0)

            predictions = {
                "beta": (beta_at(n_now), beta_at(n_next)),
                "log-normal": (curves.rate(n_now), curves.rate(n_next)),
            }
            for name, (now, after) in predictions.items():
                totals[name] += scores(
                    now, after, truth_now, truth_after, trials, failures, held.target_share
                )
            count += 1
    print(f"{args.seeds} seeds x {args.rounds} rounds, held-out next evaluation per round")
    print(f"{'model':<12}" + "".join(f"{s:>17}" for s in SCORES))
    for name, total in totals.items():
        print(f"{name:<12}" + "".join(f"{v / count:>17.4e}" for v in total))
    ratio = totals["beta"] / totals["log-normal"]
    print(
        "ratio beta / log-normal: "
        + ", ".join(f"{s} {r:.3f}" for s, r in zip(SCORES, ratio, strict=True))
    )


if __name__ == "__main__":
    main()
