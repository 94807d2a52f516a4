"""Relaxation internals: the factorised batch value agrees with the plain formula."""

from __future__ import annotations

import numpy as np
import pytest

from campaigns.planning.gain import batch_value, gain
from campaigns.planning.relaxation import DualProblem, _Dual


def test_factorised_pair_values_match_the_reference_batch_value() -> None:
    rng = np.random.default_rng(3)
    n_cells, n_sites, b, m = 40, 5, 0.7, 12.0
    amp = rng.uniform(0.1, 50.0, n_cells)
    n0 = rng.choice([0.0, 3.0, 250.0], n_cells)
    base = rng.choice([0.0, 20.0], n_cells)
    upper = rng.uniform(m, 500.0, n_cells)
    problem = DualProblem(
        amp=amp,
        n0=n0,
        base=base,
        upper=upper,
        b=b,
        min_batch=m,
        feasible=np.ones((n_cells, n_sites), dtype=bool),
        site_use=np.zeros((n_sites, 0)),
        site_setup=np.zeros((n_sites, 0)),
        site_cap_use=np.zeros(n_sites),
        site_cap_row=np.full(n_sites, -1),
        n_cap_rows=0,
    )
    price = rng.uniform(0.0, 0.5, n_sites)
    setup = rng.uniform(0.0, 2.0, n_sites)
    dual = _Dual(problem)

    y, value = dual._pair_values(price, setup)

    ref_y, ref_value = batch_value(
        amp[dual.cells],
        n0[dual.cells],
        base[dual.cells],
        b,
        m,
        upper[dual.cells],
        price[dual.sites],
    )
    assert np.allclose(y, ref_y, rtol=1e-9)
    assert np.allclose(value, ref_value - setup[dual.sites], rtol=1e-7, atol=1e-10)


def test_gain_is_concave_and_increasing_in_episodes() -> None:
    amp, n0 = np.array([3.0]), np.array([5.0])

    values = gain(amp, n0, 0.5, np.arange(0, 200, dtype=float))

    steps = np.diff(values)
    assert values[0] == pytest.approx(0.0)
    assert np.all(steps > 0)
    assert np.all(np.diff(steps) < 0)
