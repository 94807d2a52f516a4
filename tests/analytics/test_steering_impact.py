import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.learning import EvaluationRows, fit_curve_set
from analytics.steering.impact import (
    difference_in_differences,
    group_impact,
    predicted_failure_rate,
    round_impact,
    summarise_impact,
)


def _adj_var(s, t):
    p = (s + 1) / (t + 2)
    return p * (1 - p) / t


# --- difference in differences by hand ---------------------------------------------------


def test_difference_in_differences_on_a_hand_example():
    # Treated cell: 90/100 -> 98/100. Control cell: 95/100 -> 96/100.
    # DiD = (0.98 - 0.90) - (0.96 - 0.95) = 0.07.
    did = difference_in_differences(
        trials_before=np.array([100.0, 100.0]),
        successes_before=np.array([90.0, 95.0]),
        trials_after=np.array([100.0, 100.0]),
        successes_after=np.array([98.0, 96.0]),
        treated=np.array([True, False]),
    )

    se = math.sqrt(_adj_var(90, 100) + _adj_var(98, 100) + _adj_var(95, 100) + _adj_var(96, 100))
    assert did.estimate == pytest.approx(0.07)
    assert (did.treated_before, did.treated_after) == pytest.approx((0.90, 0.98))
    assert (did.control_before, did.control_after) == pytest.approx((0.95, 0.96))
    assert did.low == pytest.approx(0.07 - 1.959964 * se, abs=1e-6)
    assert did.high == pytest.approx(0.07 + 1.959964 * se, abs=1e-6)
    assert (did.treated_cells, did.control_cells) == (1, 1)


def test_difference_in_differences_holds_group_composition_fixed_with_weights():
    # Two treated cells, both improve by 2 points; evaluation moved most trials from the
    # weak cell to the strong one, which a pooled rate would read as a big improvement.
    did = difference_in_differences(
        trials_before=np.array([900.0, 100.0, 500.0]),
        successes_before=np.array([810.0, 99.0, 475.0]),
        trials_after=np.array([100.0, 900.0, 500.0]),
        successes_after=np.array([92.0, 900.0, 475.0]),
        treated=np.array([True, True, False]),
        weights=np.array([0.5, 0.5, 1.0]),
    )

    # Fixed weights: treated before 0.5*0.9 + 0.5*0.99 = 0.945, after 0.5*0.92 + 0.5*1.0 = 0.96.
    assert did.treated_before == pytest.approx(0.945)
    assert did.treated_after == pytest.approx(0.96)
    assert did.estimate == pytest.approx(0.015)
    assert did.weighting == "rows weighted by target share"


def test_difference_in_differences_without_a_control_group_says_why():
    did = difference_in_differences(
        trials_before=np.array([100.0]),
        successes_before=np.array([90.0]),
        trials_after=np.array([100.0]),
        successes_after=np.array([95.0]),
        treated=np.array([True]),
    )

    assert math.isnan(did.estimate)
    assert "got no data" in did.reason


# --- per-cell impact and sentences -------------------------------------------------------


def _round_two():
    return round_impact(
        trials_before=[500, 400, 300, 0],
        successes_before=[456, 380, 297, 0],
        trials_after=[500, 400, 300, 50],
        successes_after=[489, 396, 298, 49],
        episodes_added=[1200, 0, 0, 40],
        predicted_failure_after=[0.035, 0.05, 0.01, 0.03],
        label="Round 2",
    )


def test_round_impact_gives_rates_intervals_and_realised_against_predicted():
    impact = _round_two()
    cells = impact.cells

    assert cells.success_before[0] == pytest.approx(0.912)
    assert cells.success_after[0] == pytest.approx(0.978)
    assert cells.before_low[0] < 0.912 < cells.before_high[0]
    assert cells.change[0] == pytest.approx(0.066)
    assert cells.change_low[0] > 0  # a real improvement
    assert cells.predicted_success_after[0] == pytest.approx(0.965)
    assert cells.realised_minus_predicted[0] == pytest.approx(0.013)
    assert math.isnan(cells.success_before[3]) and math.isnan(cells.change[3])
    assert cells.treated.tolist() == [True, False, False, True]


def test_summary_reads_like_the_issue_example():
    impact = _round_two()

    sentences = summarise_impact(impact, {"dim lighting": [0], "bright LED": [1, 2]})

    assert sentences[0] == (
        "Round 2 added 1,200 episodes under dim lighting; success there rose from 91.2% to "
        "97.8% (±1.3); predicted 96.5%."
    )
    assert sentences[1].startswith("Round 2 added no episodes under bright LED; success there rose")
    assert sentences[-1].startswith("Against the 2 cells that got no data, the 1 cell that did")


def test_summary_handles_groups_never_evaluated_after_and_masks():
    impact = round_impact(
        trials_before=[100, 100],
        successes_before=[99, 97],
        trials_after=[0, 100],
        successes_after=[0, 97],
        episodes_added=[1, 0],
    )

    groups = group_impact(impact, [("worn parts", [0]), ("new parts", np.array([False, True]))])

    assert groups[0].sentence == "This round added 1 episode under worn parts; not evaluated since."
    assert (
        groups[1].sentence
        == "This round added no episodes under new parts; success there held at 97.0% (±3.7)."
    )
    assert math.isnan(groups[1].predicted_success_after)


def test_success_near_one_hundred_percent_gets_more_decimals():
    impact = round_impact(
        trials_before=[3000],
        successes_before=[2994],
        trials_after=[3000],
        successes_after=[2999],
        episodes_added=[500],
        predicted_failure_after=[0.0009],
        label="Round 5",
    )

    sentence = summarise_impact(impact, {"the Rotterdam DC": [0]})[0]

    assert sentence == (
        "Round 5 added 500 episodes under the Rotterdam DC; success there rose from 99.80% to "
        "99.97% (±0.09); predicted 99.91%."
    )


def test_predicted_failure_rate_follows_the_curve_set():
    rows = EvaluationRows.snapshot([0, 100, 1000], [100, 100, 100], [60, 90, 98])
    curves = fit_curve_set(rows)

    predicted = predicted_failure_rate(curves, [0, 100, 1000], [100, 0, 0])

    assert predicted[0] == pytest.approx(curves.rate(np.array([100.0, 100, 1000]))[0])
    assert predicted[0] < curves.rate(np.zeros(3))[0]


def test_round_impact_rejects_inconsistent_counts():
    with pytest.raises(ValueError, match="successes cannot exceed trials"):
        round_impact(
            trials_before=[10],
            successes_before=[11],
            trials_after=[10],
            successes_after=[10],
            episodes_added=[0],
        )
    with pytest.raises(ValueError, match="episodes_added"):
        round_impact(
            trials_before=[10],
            successes_before=[1],
            trials_after=[10],
            successes_after=[1],
            episodes_added=[0, 1],
        )


@st.composite
def impacts(draw):
    size = draw(st.integers(2, 12))
    t1 = draw(st.lists(st.integers(1, 500), min_size=size, max_size=size))
    t2 = draw(st.lists(st.integers(1, 500), min_size=size, max_size=size))
    s1 = [draw(st.integers(0, t)) for t in t1]
    s2 = [draw(st.integers(0, t)) for t in t2]
    k = draw(st.lists(st.sampled_from([0, 0, 5, 100]), min_size=size, max_size=size))
    return t1, s1, t2, s2, k


@given(impacts())
@settings(max_examples=100, deadline=None)
def test_did_interval_contains_the_estimate_and_groups_partition_the_cells(case):
    t1, s1, t2, s2, k = case

    impact = round_impact(
        trials_before=t1,
        successes_before=s1,
        trials_after=t2,
        successes_after=s2,
        episodes_added=k,
    )

    did = impact.did
    treated = sum(1 for x in k if x >= 1)
    assert did.treated_cells == treated and did.control_cells == len(k) - treated
    if treated and treated < len(k):
        assert did.low <= did.estimate <= did.high
        assert -2.0 <= did.estimate <= 2.0  # a difference of two differences of rates
    cells = impact.cells
    assert np.all(cells.change_low <= cells.change + 1e-12)
    assert np.all(cells.change <= cells.change_high + 1e-12)
