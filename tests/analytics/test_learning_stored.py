"""A cell's posterior kept as quantiles and read again (analytics.learning.stored): what a
refit and a gap report store, and the report's reading of every cell on its history."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.curves import LearningCurve
from analytics.gap import CellHistory, GapInputs, compute_gap
from analytics.learning import (
    LOG_MULTIPLIER_GRID,
    POSTERIOR_LEVELS,
    curves_on_history,
    fit_curve_set,
    fit_history,
    posterior_from_quantiles,
    posterior_quantiles,
)
from analytics.learning.rows import EvaluationRows

GRID = LOG_MULTIPLIER_GRID
CURVE = LearningCurve(f_inf=0.0, a=0.3, b=0.6)


def _history_posteriors(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    cells = 300
    n = np.vstack([rng.integers(0, 500, cells), rng.integers(200, 1500, cells)]).astype(float)
    trials = np.full((2, cells), 60.0)
    rate = np.minimum(0.3 * np.exp(rng.normal(0, 0.8, cells)) * (n + 1) ** -0.6, 1)
    successes = trials - rng.binomial(60, rate)
    return fit_history(n, trials, successes, n[1]).posterior


@pytest.mark.parametrize("seed", [1, 2])
def test_quantiles_keep_a_posterior_that_history_gave(seed):
    posterior = _history_posteriors(seed)
    kept = posterior_quantiles(posterior)
    back = posterior_from_quantiles(kept)

    assert kept.shape == (posterior.shape[0], POSTERIOR_LEVELS.size)
    assert np.all(np.diff(kept, axis=1) >= 0)
    np.testing.assert_allclose(back.sum(axis=1), 1.0)
    m = np.exp(GRID)
    np.testing.assert_allclose(back @ m, posterior @ m, rtol=0.01)
    np.testing.assert_allclose(back @ GRID, posterior @ GRID, atol=0.01)
    # Read again, the kept posterior gives back its quantiles within a grid step.
    assert np.abs(posterior_quantiles(back) - kept).max() < GRID[1] - GRID[0]


@pytest.mark.parametrize("spread", [0.15, 0.3, 0.6])
def test_evidence_far_from_a_kept_posterior_moves_it_as_it_moves_the_whole_one(spread):
    """A cell read at 0.27% that fails 4% of 3,000 production cycles: the update of the
    kept posterior must go where the update of the full one goes (its far tail decides)."""
    posterior = np.exp(-0.5 * (GRID / spread) ** 2)
    posterior /= posterior.sum()
    rate = np.clip(0.0027 * np.exp(GRID), 1e-12, 1 - 1e-12)
    log_likelihood = 120 * np.log(rate) + 2880 * np.log1p(-rate)

    def updated_multiplier(prior: np.ndarray) -> float:
        with np.errstate(divide="ignore"):
            log_post = np.log(prior) + log_likelihood
        weights = np.exp(log_post - log_post.max())
        return float(weights @ np.exp(GRID) / weights.sum())

    exact = updated_multiplier(posterior)
    kept = updated_multiplier(posterior_from_quantiles(posterior_quantiles(posterior))[0])
    assert exact > 3
    assert kept == pytest.approx(exact, rel=0.1)


def test_without_history_every_cell_is_read_as_from_its_current_outcomes():
    rng = np.random.default_rng(4)
    cells = 40
    n = rng.integers(0, 2000, cells).astype(float)
    trials = rng.integers(0, 400, cells).astype(float)
    successes = trials - rng.binomial(trials.astype(int), 0.01)

    curves, kept = curves_on_history(
        CURVE,
        0.6,
        np.full((cells, POSTERIOR_LEVELS.size), np.nan),
        np.zeros(cells),
        np.zeros(cells),
        n,
        trials,
        successes,
    )
    snapshot = fit_curve_set(EvaluationRows.snapshot(n, trials, successes), n, curve=CURVE, tau=0.6)

    np.testing.assert_allclose(curves.amplitude, snapshot.amplitude, rtol=0.01)
    np.testing.assert_allclose(posterior_quantiles(curves.posterior), kept, atol=0.1)


def test_what_the_history_holds_is_not_counted_again():
    """Held outcomes equal to the given ones leave the kept posterior as it was: a cell's
    evaluation is counted once, in the refit."""
    posterior = _history_posteriors(3)[:25]
    kept = posterior_quantiles(posterior)
    n = np.full(25, 800.0)
    trials = np.full(25, 500.0)
    successes = np.full(25, 495.0)

    curves, _ = curves_on_history(CURVE, 0.6, kept, trials, successes, n, trials, successes)

    np.testing.assert_allclose(
        curves.posterior @ np.exp(GRID), posterior_from_quantiles(kept) @ np.exp(GRID), rtol=0.01
    )
    # Counted again, the same outcomes would move every cell towards 1% at n = 800.
    twice, _ = curves_on_history(CURVE, 0.6, kept, np.zeros(25), np.zeros(25), n, trials, successes)
    assert not np.allclose(twice.amplitude, curves.amplitude, rtol=0.05)


def test_a_history_holding_more_than_the_cell_has_is_refused_naming_the_cell():
    with pytest.raises(ValueError, match="cell 1: the refit holds 50 trials"):
        curves_on_history(
            CURVE,
            0.6,
            np.full((2, POSTERIOR_LEVELS.size), np.nan),
            [0, 50],
            [0, 50],
            [10, 10],
            [10, 20],
            [10, 20],
        )


def test_the_gap_engine_takes_a_history_only_with_the_curve_it_was_read_around():
    history = CellHistory(
        quantiles=np.full((2, POSTERIOR_LEVELS.size), np.nan),
        tau=0.5,
        trials=np.zeros(2),
        successes=np.zeros(2),
    )
    common = {
        "labels": ["a", "b"],
        "target_share": [0.5, 0.5],
        "train_count": [10, 100],
        "trials": [100, 100],
        "successes": [95, 99],
        "cycles_per_day": 1000,
        "history": history,
    }
    with pytest.raises(ValueError, match="needs the pooled curve"):
        GapInputs(**common)
    result = compute_gap(GapInputs(**common, curve=CURVE))
    assert result.cells.log_multiplier is not None
    assert result.cells.log_multiplier.shape == (2, POSTERIOR_LEVELS.size)
    assert result.cells.failure_rate[0] > result.cells.failure_rate[1]
