"""Benchmark: which per-cell curve model predicts held-out failure rates better.

Run: ``/work/main/.venv/bin/python bench/curve_models.py [--seeds 5] [--rounds 8]`` (no
Django, no database, deterministic).

The gap report gives each cell a Beta-posterior amplitude (its latest evaluation shrunk
towards the pooled curve, :class:`analytics.gap.GapCells`); the recommender a log-normal
multiplier fitted over the whole evaluation history (:func:`analytics.steering.learning.
fit_curve_set`). Both share the pooled ``f_inf`` and ``b``. On the simulator's worlds, each
round allocates the budget by target share, both models are fitted on the evaluations so
far and predict every cell's failure rate after the round's data; they are scored on the
next evaluation (held out: binomial log loss per trial) and against the hidden truth
(target-weighted squared error). Prints both models' scores and the ratio beta / log-normal
(> 1 means the log-normal model predicts better).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics.curves import beta_posterior, posterior_mean
from analytics.steering.learning import EvaluationRows, fit_curve_set
from analytics.steering.simulate import _truth_of, make_world
from campaigns.planning.gain import amplitude_from_level, curve_rate

EPS = 1e-9


def _scores(rate, trials, failures, truth, share):
    r = np.clip(rate, EPS, 1 - EPS)
    loss = -float(np.sum(failures * np.log(r) + (trials - failures) * np.log1p(-r)))
    return loss / float(trials.sum()), float(np.dot(share, (rate - truth) ** 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    totals = {"beta": np.zeros(2), "lognormal": np.zeros(2)}
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
            # The gap report's cell curve: latest evaluation, Beta posterior around the pool.
            alpha, beta = beta_posterior(
                seen.eval_trials[-1], seen.eval_successes[-1], pooled.rate(n_now)
            )
            excess = np.maximum(posterior_mean(alpha, beta) - pooled.f_inf, 0.0)
            beta_amp = amplitude_from_level(excess, n_now, pooled.b)

            world.train(np.floor(seen.budget * seen.target_share).astype(np.int64))
            world.evaluate()
            held = world.observe()
            n_next = held.train_count
            trials = held.eval_trials[-1]
            failures = trials - held.eval_successes[-1]
            truth = _truth_of(world).rate(n_next)
            predictions = {
                "beta": np.minimum(curve_rate(pooled.f_inf, beta_amp, pooled.b, n_next), 1.0),
                "lognormal": curves.rate(n_next),
            }
            for name, rate in predictions.items():
                totals[name] += _scores(rate, trials, failures, truth, held.target_share)
            count += 1
    print(f"{args.seeds} seeds x {args.rounds} rounds, held-out next evaluation per round")
    print(f"{'model':<12}{'log loss/trial':>18}{'weighted sq. error vs truth':>30}")
    for name, (loss, err) in totals.items():
        print(f"{name:<12}{loss / count:>18.6f}{err / count:>30.3e}")
    beta_s, logn_s = totals["beta"], totals["lognormal"]
    print(
        f"ratio beta / log-normal: log loss {beta_s[0] / logn_s[0]:.4f}, "
        f"squared error {beta_s[1] / logn_s[1]:.3f}"
    )


if __name__ == "__main__":
    main()
