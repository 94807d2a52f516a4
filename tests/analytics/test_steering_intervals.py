import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from analytics.intervals import (
    beta_interval,
    difference_interval,
    trials_to_demonstrate,
    wilson_interval,
    zero_failure_trials,
)

counts = st.integers(0, 5000).flatmap(lambda t: st.tuples(st.integers(0, t), st.just(t)))


# --- known values ------------------------------------------------------------------------


def test_wilson_95_for_81_of_263_matches_the_textbook_value():
    low, high = wilson_interval(81, 263)

    assert float(low) == pytest.approx(0.2553, abs=5e-5)
    assert float(high) == pytest.approx(0.3662, abs=5e-5)


def test_wilson_for_7_failures_in_120_trials_is_the_rationale_example():
    low, high = wilson_interval(7, 120)

    assert (round(100 * float(low), 1), round(100 * float(high), 1)) == (2.9, 11.6)


def test_wilson_at_the_edges_is_one_sided_and_empty_trials_are_uninformative():
    low0, high0 = wilson_interval([0, 10, 0], [10, 10, 0])

    # 0/10: upper limit z^2 / (n + z^2) = 3.8415 / 13.8415
    assert low0.tolist()[0] == 0.0
    assert high0[0] == pytest.approx(3.841459 / 13.841459, abs=1e-6)
    assert high0[1] == 1.0
    assert (low0[2], high0[2]) == (0.0, 1.0)


def test_beta_interval_is_the_posterior_quantiles_and_jeffreys_follows_the_convention():
    low, high = beta_interval(81, 263, prior="uniform")
    j_low, j_high = beta_interval(0, 10, prior="jeffreys")

    assert float(low) == pytest.approx(stats.beta.ppf(0.025, 82, 183), rel=1e-9)
    assert float(high) == pytest.approx(stats.beta.ppf(0.975, 82, 183), rel=1e-9)
    assert float(j_low) == 0.0
    assert float(j_high) == pytest.approx(stats.beta.ppf(0.975, 0.5, 10.5), rel=1e-9)


def test_newcombe_interval_reproduces_his_worked_examples():
    # Newcombe (1998), Statistics in Medicine 17:873, table II, method 10.
    change, low, high = difference_interval(48, 80, 56, 70)
    change2, low2, high2 = difference_interval(9, 10, 3, 10)

    assert float(change) == pytest.approx(0.2)
    assert (float(low), float(high)) == pytest.approx((0.0524, 0.3339), abs=1e-4)
    assert float(change2) == pytest.approx(-0.6)
    assert (float(low2), float(high2)) == pytest.approx((-0.8090, -0.1705), abs=1e-4)


def test_zero_failure_trials_for_99_9_percent_is_2995():
    assert zero_failure_trials(0.999) == 2995
    assert zero_failure_trials(0.99) == 299
    assert zero_failure_trials(0.999, confidence=0.9) == 2302


def test_trials_to_demonstrate_with_failures_allowed_is_the_smallest_passing_count():
    for k in (1, 2, 5):
        n = trials_to_demonstrate(0.999, 0.95, allowed_failures=k)

        assert stats.binom.cdf(k, n, 0.001) <= 0.05
        assert stats.binom.cdf(k, n - 1, 0.001) > 0.05
    assert trials_to_demonstrate(0.999, 0.95, allowed_failures=1) == 4742
    assert trials_to_demonstrate(0.999, 0.95, allowed_failures=0) == 2995


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: wilson_interval(5, 4), "successes"),
        (lambda: wilson_interval(1, 4, level=1.0), "level"),
        (lambda: zero_failure_trials(1.0), "target"),
        (lambda: trials_to_demonstrate(0.99, 0.95, allowed_failures=-1), "allowed_failures"),
        (lambda: beta_interval(1, 2, prior="flat"), "prior"),
    ],
)
def test_bad_arguments_raise_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- properties --------------------------------------------------------------------------


@given(counts, st.sampled_from([0.8, 0.9, 0.95, 0.99]))
@settings(max_examples=200, deadline=None)
def test_wilson_and_beta_intervals_contain_the_observed_rate(case, level):
    s, t = case

    intervals = [wilson_interval(s, t, level), beta_interval(s, t, level, prior="jeffreys")]

    for low, high in intervals:
        assert 0.0 <= float(low) <= float(high) <= 1.0
        if t:
            assert float(low) - 1e-12 <= s / t <= float(high) + 1e-12


@given(counts, counts)
@settings(max_examples=200, deadline=None)
def test_difference_interval_contains_the_observed_change(before, after):
    (s1, t1), (s2, t2) = before, after

    change, low, high = difference_interval(s1, t1, s2, t2)

    assert -1.0 <= float(low) <= float(change) + 1e-12
    assert float(change) - 1e-12 <= float(high) <= 1.0


@given(st.floats(0.9, 0.99999), st.integers(0, 3))
@settings(max_examples=60, deadline=None)
def test_more_allowed_failures_or_a_stricter_target_need_more_trials(target, k):
    n = trials_to_demonstrate(target, 0.95, allowed_failures=k)

    assert trials_to_demonstrate(target, 0.95, allowed_failures=k + 1) > n
    stricter = 1.0 - (1.0 - target) / 2.0
    assert trials_to_demonstrate(stricter, 0.95, allowed_failures=k) > n
    if k == 0:
        assert n == math.ceil(math.log(0.05) / math.log(target) - 1e-9)


def test_intervals_are_vectorised():
    low, high = wilson_interval(np.array([1, 2, 3]), np.array([10, 10, 10]))

    assert low.shape == high.shape == (3,)
    assert np.all(np.diff(low) > 0)
