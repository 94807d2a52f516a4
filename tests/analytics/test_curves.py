import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from analytics.curves import (
    DEFAULT_PRIOR,
    LearningCurve,
    fit_learning_curve,
    log_likelihood,
)
from analytics.gap import GapInputs, compute_gap
from analytics.intervals import credible_interval
from campaigns.planning.gain import gain
from tests.analytics import curve_oracle

curves = st.builds(
    lambda f_inf, a_share, b: LearningCurve(f_inf=f_inf, a=(1 - f_inf) * a_share, b=b),
    st.floats(0, 0.5),
    st.floats(0, 1),
    st.floats(0.05, 2),
)


def _synthetic(curve: LearningCurve, *, cells: int, trials: int, seed: int):
    rng = np.random.default_rng(seed)
    n = np.round(np.geomspace(1, 5000, cells)) - 1
    t = np.full(cells, trials)
    failures = rng.binomial(t, curve.rate(n))
    return n, t, t - failures


def test_rate_is_the_power_law_and_vectorised():
    curve = LearningCurve(f_inf=0.01, a=0.4, b=0.5)

    rate = curve.rate(np.array([0.0, 3.0, 99.0]))

    # 0.01 + 0.4 / sqrt(1), 0.01 + 0.4 / sqrt(4), 0.01 + 0.4 / sqrt(100)
    assert rate == pytest.approx([0.41, 0.21, 0.05], abs=1e-12)


def test_gain_is_the_drop_in_rate():
    curve = LearningCurve(f_inf=0.01, a=0.4, b=0.5)

    gain = curve.gain(3.0, 96.0)

    assert float(gain) == pytest.approx(0.21 - 0.05, abs=1e-12)


def test_gain_of_one_episode_stays_positive_at_huge_counts():
    curve = LearningCurve(f_inf=0.0, a=0.5, b=0.5)

    gain = curve.gain(1e12, 1.0)

    assert float(gain) > 0


@given(curve=curves, n=st.floats(0, 1e5), k=st.floats(0.5, 1e4))
def test_gain_is_non_negative_and_concave_in_k(curve, n, k):
    ks = np.array([0.0, k, 2 * k])

    gains = curve.gain(n, ks)

    assert gains[0] == 0
    assert gains[1] >= 0
    assert gains[2] - gains[1] <= (gains[1] - gains[0]) * (1 + 1e-9) + 1e-15


@pytest.mark.parametrize(
    ("f_inf", "a", "b"),
    [(-0.1, 0.5, 0.5), (0.1, -0.5, 0.5), (0.1, 0.5, 0.0), (0.6, 0.5, 0.5), (math.nan, 0.1, 1)],
)
def test_curve_rejects_parameters_that_are_not_a_failure_rate(f_inf, a, b):
    with pytest.raises(ValueError):
        LearningCurve(f_inf=f_inf, a=a, b=b)


def test_fit_recovers_known_parameters_from_synthetic_binomial_data():
    truth = LearningCurve(f_inf=0.01, a=0.3, b=0.6)
    n, trials, successes = _synthetic(truth, cells=200, trials=2000, seed=7)

    fit = fit_learning_curve(n, trials, successes)

    assert fit.source == "fitted"
    assert fit.curve.f_inf == pytest.approx(truth.f_inf, abs=0.002)
    assert fit.curve.a == pytest.approx(truth.a, abs=0.02)
    assert fit.curve.b == pytest.approx(truth.b, abs=0.05)
    assert fit.n_cells == 200
    assert fit.n_trials == 400_000
    assert fit.log_likelihood >= log_likelihood(truth, n, trials, successes) - 1e-6


def test_fit_recovers_a_steep_curve_with_a_near_zero_floor():
    truth = LearningCurve(f_inf=0.0, a=0.6, b=1.2)
    n, trials, successes = _synthetic(truth, cells=60, trials=3000, seed=3)

    fit = fit_learning_curve(n, trials, successes)

    assert fit.curve.b == pytest.approx(1.2, abs=0.1)
    assert fit.curve.f_inf < 0.001


def test_fit_keeps_exponent_within_bounds():
    n = np.array([0.0, 10.0, 100.0, 1000.0])
    trials = np.array([100, 100, 100, 100])
    failures = np.array([50, 0, 0, 0])

    fit = fit_learning_curve(n, trials, trials - failures)

    assert 0.05 <= fit.curve.b <= 2.0
    assert fit.curve.f_inf + fit.curve.a <= 1.0


@st.composite
def outcomes(draw):
    size = draw(st.integers(0, 40))
    n = draw(st.lists(st.floats(0, 1e5, allow_subnormal=False), min_size=size, max_size=size))
    trials = draw(st.lists(st.integers(0, 500), min_size=size, max_size=size))
    successes = [draw(st.integers(0, t)) for t in trials]
    return np.array(n, dtype=float), np.array(trials, dtype=int), np.array(successes, dtype=int)


@settings(deadline=None)
@given(data=outcomes())
def test_fit_always_returns_a_valid_curve_and_says_where_it_came_from(data):
    n, trials, successes = data

    fit = fit_learning_curve(n, trials, successes)

    assert fit.source in {"prior", "fitted"}
    assert 0.05 <= fit.curve.b <= 2.0
    assert fit.curve.f_inf >= 0
    assert fit.curve.a >= 0
    assert fit.curve.f_inf + fit.curve.a <= 1 + 1e-12
    assert math.isfinite(fit.log_likelihood)
    assert fit.n_trials == int(trials.sum())
    assert fit.source == "fitted" or fit.reason


def test_fit_falls_back_to_the_default_prior_without_trials():
    n = np.array([0.0, 10.0, 100.0])
    zeros = np.zeros(3, dtype=int)

    fit = fit_learning_curve(n, zeros, zeros)

    assert fit.source == "prior"
    assert fit.curve == DEFAULT_PRIOR
    assert fit.n_trials == 0
    assert fit.log_likelihood == 0.0
    assert "no evaluation trials" in fit.reason


def test_fit_falls_back_to_the_given_prior_with_too_few_cells():
    prior = LearningCurve(f_inf=0.01, a=0.2, b=0.7)

    fit = fit_learning_curve([0.0, 50.0], [10, 10], [5, 9], prior=prior)

    assert fit.source == "prior"
    assert fit.curve is prior
    assert fit.n_cells == 2
    assert "need 3" in fit.reason


def test_fit_falls_back_when_all_cells_share_one_training_count():
    fit = fit_learning_curve([5.0, 5.0, 5.0], [10, 10, 10], [9, 8, 10])

    assert fit.source == "prior"
    assert "not identifiable" in fit.reason


def test_fit_falls_back_when_nothing_ever_failed():
    fit = fit_learning_curve([0.0, 5.0, 50.0], [10, 10, 10], [10, 10, 10])

    assert fit.source == "prior"
    assert "no failures" in fit.reason


def test_fit_rejects_more_successes_than_trials():
    with pytest.raises(ValueError, match="successes <= trials"):
        fit_learning_curve([0.0, 1.0, 2.0], [10, 10, 10], [11, 0, 0])


def test_credible_interval_matches_the_closed_form_for_beta_one_b():
    # For Beta(1, b) the CDF is 1 - (1 - x)^b, so the q-quantile is 1 - (1 - q)^(1/b).
    low, high = credible_interval(1.0, 4.0, level=0.95)

    assert float(low) == pytest.approx(1 - 0.975**0.25, abs=1e-12)
    assert float(high) == pytest.approx(1 - 0.025**0.25, abs=1e-12)


def test_credible_interval_agrees_with_scipy_beta_quantiles():
    alpha = np.array([0.1, 2.5, 9.1, 300.0])
    beta = np.array([19.9, 107.5, 10.9, 5000.0])

    low, high = credible_interval(alpha, beta, level=0.9)

    assert low == pytest.approx(stats.beta.ppf(0.05, alpha, beta), rel=1e-9)
    assert high == pytest.approx(stats.beta.ppf(0.95, alpha, beta), rel=1e-9)


def _gap_cells(curve, n, trials, successes):
    size = len(n)
    gap = compute_gap(
        GapInputs(
            labels=[f"cell {i}" for i in range(size)],
            target_share=np.full(size, 1.0 / size),
            train_count=np.asarray(n, dtype=float),
            trials=np.asarray(trials),
            successes=np.asarray(successes),
            cycles_per_day=1.0,
            curve=curve,
        )
    )
    return gap.cells


def test_cell_curves_pass_through_each_posterior_rate():
    curve = LearningCurve(f_inf=0.01, a=0.4, b=0.5)
    n = np.array([99.0, 3.0, 0.0])
    trials = np.array([100, 0, 10])
    successes = np.array([98, 0, 5])

    amplitude = _gap_cells(curve, n, trials, successes).amplitude

    through = curve.f_inf + amplitude * (n + 1) ** -curve.b
    oracle = [rate for rate, _, _ in curve_oracle.cell_rates(curve, n, trials, successes)]
    assert through == pytest.approx(oracle, rel=1e-9)


def test_a_cell_that_never_fails_sits_near_the_floor():
    curve = LearningCurve(f_inf=0.05, a=0.1, b=0.5)

    cells = _gap_cells(curve, [10.0, 10.0], [10_000, 0], [10_000, 0])

    assert cells.amplitude[0] < 1e-2 * curve.a
    assert cells.failure_rate[0] == pytest.approx(curve.f_inf, abs=1e-3)
    assert cells.amplitude[1] > 100 * cells.amplitude[0]


def test_the_gain_at_the_pooled_level_is_the_pooled_curves_gain():
    curve = LearningCurve(f_inf=0.01, a=0.4, b=0.5)
    n = np.array([0.0, 3.0, 99.0])

    pooled_level = curve.rate(n) - curve.f_inf

    assert gain(pooled_level, n, curve.b, 5.0) == pytest.approx(curve.gain(n, 5.0), rel=1e-12)
