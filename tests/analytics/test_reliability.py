"""The reliability core: daily rates with intervals, breakdowns and the change detector.

Simulated histories are seeded, so every rate measured here is the same on every run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.intervals import poisson_interval
from analytics.reliability import (
    ProductionHistory,
    condition_rows,
    daily_series,
    detect_shifts,
    excess_rate,
    flag_window_counts,
    holm,
    mode_rows,
    rate_rise_p,
)

START = date(2026, 11, 1)
# Four condition sets: lighting (1 bright, 2 dim) × activity (3 quiet, 4 busy).
SETS = [(1, 3), (1, 4), (2, 3), (2, 4)]
LABELS = {1: "bright lighting", 2: "dim lighting", 3: "quiet activity", 4: "busy activity"}
# Per-cycle rates of five failure modes (a sixth, "shrink-wrap snag", is absent at first).
BASE = np.array([2.0, 1.0, 0.6, 0.3, 0.1, 0.0]) / 1000.0
MODES = ["grasp", "drop", "collision", "misread", "timeout", "wrap-snag"]
NAMES = ["Grasp failure", "Drop", "Collision", "Label misread", "Timeout", "Shrink-wrap snag"]


def history(
    rng: np.random.Generator,
    *,
    days: int = 35,
    factor: float = 1.0,
    new_mode_rate: float = 0.0,
    overdispersion: float = 0.0,
) -> ProductionHistory:
    """A Venlo-like deployment: ~4,800 cycles a day; in the last 7 days grasp failures under
    dim light run at ``factor`` times their rate, and the snag at ``new_mode_rate``."""
    cycles = rng.poisson(1200, size=(len(SETS), days)).astype(float)
    rate = np.broadcast_to(BASE[:, None, None], (len(BASE), len(SETS), days)).copy()
    rate[0, 2:, days - 7 :] *= factor
    rate[5, 2:, days - 7 :] = new_mode_rate
    if overdispersion:
        rate *= rng.gamma(1 / overdispersion, overdispersion, size=(1, 1, days))
    counts = rng.poisson(rate * cycles[None]).astype(float)
    return ProductionHistory(
        days=[START + timedelta(days=d) for d in range(days)],
        set_cycles=cycles,
        counts=counts,
        set_values=SETS,
        mode_keys=MODES,
        mode_labels=NAMES,
        value_labels=LABELS,
        place="Venlo",
    )


def test_the_core_imports_no_django():
    code = (
        "import sys, analytics.reliability; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'sites', 'accounts', 'campaigns', 'labeling', 'frontend'}))"
    )
    root = Path(__file__).resolve().parents[2]

    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )

    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------ hand-checked


def test_a_small_case_checks_by_hand():
    h = ProductionHistory(
        days=[START, START + timedelta(days=1)],
        set_cycles=np.array([[1000.0, 2000.0], [0.0, 1000.0]]),
        counts=np.array([[[1.0, 4.0], [0.0, 2.0]]]),
        set_values=[(1,), (2,)],
        mode_keys=["grasp"],
        mode_labels=["Grasp failure"],
        value_labels={1: "bright lighting", 2: "dim lighting"},
    )

    series = daily_series(h)
    rows = {r.label: r for r in condition_rows(h)}
    (mode,) = mode_rows(h)

    assert series.cycles.tolist() == [1000.0, 3000.0]
    assert series.interventions.tolist() == [1.0, 6.0]
    assert series.rate.tolist() == pytest.approx([1.0, 2.0])
    # Garwood's exact interval for one event: 0.0253–5.572.
    assert series.low[0] == pytest.approx(0.02532, abs=1e-4)
    assert series.high[0] == pytest.approx(5.5716, abs=1e-4)
    assert rows["bright lighting"].rate == pytest.approx(5 / 3000 * 1000)
    assert rows["dim lighting"].rate == pytest.approx(2.0)
    assert mode.events == 7.0
    assert mode.rate == pytest.approx(7 / 4000 * 1000)


def test_the_rise_test_is_the_conditional_binomial_tail():
    from scipy import stats

    # 12 events in the recent fifth of the exposure, 18 before: P(X >= 12 | 30, 0.2).
    p = rate_rise_p(12, 18, 0.2)

    assert p == pytest.approx(stats.binom.sf(11, 30, 0.2), rel=1e-9)
    assert rate_rise_p(0, 10, 0.2) == 1.0


def test_holm_adjusts_by_hand():
    assert holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])


def test_excess_rate_counts_only_concentrated_cells():
    excess = excess_rate(
        [10, 1, 6], [1000, 1000, 1000], [5, 1, 0], [2000, 2000, 0], fallback_rate=0.001
    )

    assert excess.tolist() == pytest.approx([0.0075, 0.0, 0.005])


# ------------------------------------------------------------------ the detector


def test_the_detector_flags_a_threefold_rise_in_one_mode_under_one_condition():
    rng = np.random.default_rng(20)

    check = detect_shifts(history(rng, factor=3.0))

    flag = check.flags[0]
    assert flag.scope == "mode-condition"
    assert (flag.mode_key, flag.value) == ("grasp", "dim lighting")
    assert flag.kind == "rise"
    assert flag.ratio > 2
    assert flag.p_adjusted < 0.001
    assert flag.since >= START + timedelta(days=28)
    assert re.fullmatch(
        r"Grasp failure rose from 1\.\d to [4-7]\.\d per 1,000 cycles at Venlo under dim "
        r"lighting since ((29|30) Nov|[1-5] Dec) \(p < 0\.001\)\.",
        flag.sentence,
    ), flag.sentence
    assert not any(f.mode_key not in (None, "grasp") for f in check.flags)


def test_the_detector_flags_a_new_failure_mode():
    rng = np.random.default_rng(21)

    check = detect_shifts(history(rng, new_mode_rate=1.0 / 1000))

    new = [f for f in check.flags if f.kind == "new"]
    assert new
    assert {f.mode_key for f in new} == {"wrap-snag"}
    assert any(f.scope == "mode" for f in new)
    assert new[0].sentence.startswith("New failure mode at Venlo")
    assert "Shrink-wrap snag, absent in the 28 days before" in new[0].sentence


def test_false_alarm_rate_on_stationary_noise_is_below_the_stated_level():
    rng = np.random.default_rng(2026)
    runs = 500

    alarms = sum(bool(detect_shifts(history(rng)).flags) for _ in range(runs))

    # Holm over every rate keeps P(any flag) <= alpha = 5% per deployment check; the exact
    # test is discrete and conservative, so the measured rate sits well below it.
    assert alarms / runs <= 0.05


def test_overdispersed_noise_does_not_raise_the_false_alarm_rate_much():
    rng = np.random.default_rng(7)
    runs = 200

    alarms = sum(bool(detect_shifts(history(rng, overdispersion=0.05)).flags) for _ in range(runs))

    assert alarms / runs <= 0.10


def test_detection_rate_of_a_threefold_rise_is_high():
    rng = np.random.default_rng(99)
    runs = 200

    hits = sum(
        any(f.mode_key == "grasp" for f in detect_shifts(history(rng, factor=3.0)).flags)
        for _ in range(runs)
    )

    assert hits / runs >= 0.95


def test_a_short_history_is_not_checked_and_says_why():
    rng = np.random.default_rng(3)

    check = detect_shifts(history(rng, days=10))

    assert check.flags == []
    assert "10 days logged, 14 needed" in check.describe()


def test_flag_window_counts_split_recent_and_baseline_by_condition_set():
    rng = np.random.default_rng(20)
    h = history(rng, factor=3.0)
    flag = detect_shifts(h).flags[0]

    x_r, e_r, x_b, e_b = flag_window_counts(h, flag)

    since = h.days.index(flag.since)
    assert x_r[:2].tolist() == [0.0, 0.0]  # bright sets are not under the flag's condition
    assert x_r[2:].sum() == h.counts[0, 2:, since:].sum()
    assert e_b[2:].sum() == h.set_cycles[2:, :28].sum()


# ------------------------------------------------------------------ intervals


def test_poisson_intervals_cover_the_truth_at_about_the_nominal_rate():
    rng = np.random.default_rng(11)
    truth = np.repeat([0.5, 2.0, 8.0, 30.0], 2000)
    exposure = 1000.0

    counts = rng.poisson(truth * exposure / 1000.0)
    low, high = poisson_interval(counts, exposure / 1000.0)

    covered = (low <= truth) & (truth <= high)
    for rate in (0.5, 2.0, 8.0, 30.0):
        share = covered[truth == rate].mean()
        assert 0.94 <= share <= 0.995, (rate, share)


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(0, 500), min_size=1, max_size=20),
    exposure=st.floats(0.1, 1e4),
)
def test_poisson_intervals_contain_the_observed_rate(counts, exposure):
    low, high = poisson_interval(counts, exposure)

    observed = np.asarray(counts) / exposure
    assert np.all(low <= observed + 1e-12)
    assert np.all(observed <= high + 1e-12)
    assert np.all(low >= 0)


@settings(max_examples=200, deadline=None)
@given(
    cells=st.lists(st.frozensets(st.integers(0, 9), max_size=4), max_size=12),
    sets=st.lists(
        st.tuples(*[st.integers(0, 12)] * 3).map(lambda t: tuple(sorted(set(t)))), max_size=12
    ),
)
def test_a_cell_lies_in_a_condition_set_exactly_when_the_set_holds_all_its_values(cells, sets):
    """The shift adjustment's membership table is the subset test, pair by pair: values
    only the sets name, cells with no values and empty lists included."""
    from analytics.selectors_reliability import _containment

    table = _containment(cells, sets)
    assert table.shape == (len(cells), len(sets))
    expected = [[float(cell <= frozenset(values)) for values in sets] for cell in cells]
    assert table.tolist() == expected
