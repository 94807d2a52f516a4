import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from campaigns.planning.gain import (
    amplitude_from_level,
    curve_rate,
    gain,
    gain_one,
    marginal,
    power_gain,
    power_gain_one,
    stationary_log_total,
)

counts = st.floats(0, 1e5)
exponents = st.floats(0.05, 2)
amplitudes = st.floats(1e-6, 1.0)
extra = st.floats(0, 1e4)


def test_the_gain_of_three_episodes_is_checked_by_hand():
    # amp = 0.2 at n0 = 3, b = 1: 0.2 * (1 - 4 / 7) = 0.6 / 7.
    assert float(gain(0.2, 3.0, 1.0, 3.0)) == pytest.approx(0.6 / 7, rel=1e-15)


@given(amp=amplitudes, n0=counts, b=exponents, k=extra)
def test_the_gain_is_the_drop_of_the_curve(amp, n0, b, k):
    amplitude = float(amplitude_from_level(amp, n0, b))

    drop = curve_rate(0.0, amplitude, b, n0) - curve_rate(0.0, amplitude, b, n0 + k)

    assert float(gain(amp, n0, b, k)) == pytest.approx(float(drop), rel=1e-9, abs=1e-15)
    assert float(power_gain(amplitude, n0, b, k)) == pytest.approx(float(drop), rel=1e-9, abs=1e-15)


@given(amp=amplitudes, n0=counts, b=exponents, k=extra)
def test_the_scalar_paths_equal_the_vectorised_ones(amp, n0, b, k):
    assert gain_one(amp, n0, b, k) == pytest.approx(float(gain(amp, n0, b, k)), rel=1e-13)
    assert power_gain_one(amp, n0, b, k) == pytest.approx(
        float(power_gain(amp, n0, b, k)), rel=1e-12, abs=1e-300
    )


@given(amp=amplitudes, n0=counts, b=exponents, k=extra, step=st.floats(0.5, 50))
def test_the_gain_is_concave_and_never_falls(amp, n0, b, k, step):
    g0, g1, g2 = (float(gain(amp, n0, b, k + i * step)) for i in range(3))

    assert g1 >= g0
    assert g1 - g0 >= (g2 - g1) * (1 - 1e-9) - 1e-15


@given(amp=amplitudes, n0=st.floats(0, 1e3), b=exponents, k=st.floats(0, 1e3))
def test_the_marginal_is_the_slope_of_the_gain(amp, n0, b, k):
    h = 1e-4 * (n0 + k + 1)

    slope = (float(gain(amp, n0, b, k + h)) - float(gain(amp, n0, b, k))) / h

    assert float(marginal(amp, n0, b, k + h / 2)) == pytest.approx(slope, rel=1e-5, abs=1e-12)


@given(amp=amplitudes, n0=counts, b=exponents, share=st.floats(1e-6, 1.0))
def test_the_stationary_total_is_where_the_marginal_meets_the_price(amp, n0, b, share):
    price = share * float(marginal(amp, n0, b, 0.0))  # at most the first episode's worth

    total = math.exp(float(stationary_log_total(amp, n0, b, price)))

    assert float(marginal(amp, n0, b, total - n0 - 1.0)) == pytest.approx(price, rel=1e-6)


def test_a_cell_without_anything_to_remove_never_wants_episodes():
    assert float(stationary_log_total(0.0, 10.0, 0.5, 1e-3)) == -np.inf
    # Not even at a zero price (where -inf less -inf was NaN, with a warning).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(stationary_log_total(0.0, 10.0, 0.5, 0.0)) == -np.inf
