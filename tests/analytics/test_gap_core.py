import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.curves import LearningCurve
from analytics.gap import (
    LN2,
    Coverage,
    Dimension,
    GapInputs,
    compute_gap,
    domain_classifier_auc,
    explain_cell,
    format_count,
    format_interventions,
    format_percent,
    js_divergence,
    psi,
    top_gaps,
)
from tests.analytics import curve_oracle

CURVE = LearningCurve(f_inf=0.005, a=0.4, b=0.5)


def _inputs(p, n, trials=None, successes=None, **kwargs) -> GapInputs:
    size = len(p)
    zeros = np.zeros(size, dtype=int)
    kwargs.setdefault("curve", CURVE)
    kwargs.setdefault("cycles_per_day", 5000.0)
    return GapInputs(
        labels=[f"cell {i}" for i in range(size)],
        target_share=np.asarray(p, dtype=float),
        train_count=np.asarray(n, dtype=float),
        trials=zeros if trials is None else np.asarray(trials),
        successes=zeros if successes is None else np.asarray(successes),
        **kwargs,
    )


@st.composite
def gap_cases(draw, *, min_cells=1, max_cells=25):
    size = draw(st.integers(min_cells, max_cells))
    weights = np.array(draw(st.lists(st.integers(0, 1000), min_size=size, max_size=size)))
    if weights.sum() == 0:
        weights[draw(st.integers(0, size - 1))] = 1
    n = draw(
        st.lists(
            st.one_of(st.just(0.0), st.floats(0, 1e4, allow_subnormal=False)),
            min_size=size,
            max_size=size,
        )
    )
    trials = draw(st.lists(st.integers(0, 300), min_size=size, max_size=size))
    successes = [draw(st.integers(0, t)) for t in trials]
    return weights / weights.sum(), np.array(n), np.array(trials), np.array(successes)


# --- a case worked by hand ---------------------------------------------------------------


def test_hand_worked_three_cells_and_one_without_target_mass():
    # Curve f(n) = 0.01 + 0.4 (n+1)^-0.5, 1000 cycles a day.
    # A: p .5, n 99, 2/100 failed (prior f(99) = 0.05). B: p .3, n 3, no trials (f(3) = 0.21).
    # C: p .2, n 0, 5/10 failed (f(0) = 0.41). D: p 0, n 8: no target mass, E = 0.
    # Each cell's rate is the pooled curve times its posterior-mean multiplier (the oracle
    # in tests/analytics/curve_oracle.py, written independently); E = cycles p rate and
    # priority = cycles p (rate - 0.01) (1 - ((n+1)/(n+2))^0.5).
    # sum n = 110 -> q = (.9, 3/110, 0, 8/110). Thin below 50: A covered, B thin, C uncovered.
    curve = LearningCurve(f_inf=0.01, a=0.4, b=0.5)
    n, trials, successes = [99.0, 3.0, 0.0, 8.0], [100, 0, 10, 0], [98, 0, 5, 0]
    inputs = GapInputs(
        labels=["A", "B", "C", "D"],
        target_share=[0.5, 0.3, 0.2, 0.0],
        train_count=n,
        trials=trials,
        successes=successes,
        cycles_per_day=1000.0,
        reliability_target=0.999,
        thin_below=50.0,
        curve=curve,
        dimensions=[
            Dimension(name="lighting", values=["bright", "dim"], codes=np.array([0, 1, 1, 0])),
            Dimension(name="clutter", values=["low", "high"], codes=np.array([0, 0, 1, 1])),
        ],
    )

    result = compute_gap(inputs)

    cells, summary = result.cells, result.summary
    approx = lambda x: pytest.approx(x, abs=1e-9)  # noqa: E731
    oracle = curve_oracle.cell_rates(curve, n, trials, successes)
    rate = [r for r, _, _ in oracle]
    # A's 2 failures in 100 pull it below its prior, C's 5 in 10 above; B (no trials) is a
    # typical cell: above the pooled (median) curve by the mean multiplier.
    assert rate[0] < 0.05 and rate[2] > 0.41 and rate[1] > 0.21
    assert cells.prior_rate == approx([0.05, 0.21, 0.41, 0.01 + 0.4 / 3])
    assert cells.failure_rate == approx(rate)
    assert cells.failure_low == approx([low for _, low, _ in oracle])
    assert cells.failure_high == approx([high for _, _, high in oracle])
    assert cells.train_share == approx([0.9, 3 / 110, 0.0, 8 / 110])
    assert list(cells.coverage) == [Coverage.COVERED, Coverage.THIN, Coverage.UNCOVERED, 1]
    assert cells.interventions == approx([500 * rate[0], 300 * rate[1], 200 * rate[2], 0.0])
    assert cells.priority == approx(
        [
            500 * (rate[0] - 0.01) * (1 - math.sqrt(100 / 101)),
            300 * (rate[1] - 0.01) * (1 - math.sqrt(4 / 5)),
            200 * (rate[2] - 0.01) * (1 - math.sqrt(1 / 2)),
            0.0,
        ]
    )
    total = 500 * rate[0] + 300 * rate[1] + 200 * rate[2]
    assert summary.uncovered_mass == approx(0.2)
    assert summary.thin_mass == approx(0.3)
    assert summary.covered_mass == approx(0.5)
    assert (summary.n_uncovered, summary.n_thin) == (1, 1)
    assert summary.interventions_per_day == approx(total)
    assert summary.reliability_now == approx(1 - total / 1000)
    assert summary.interventions_at_target == approx(1.0)
    assert summary.excess_interventions_per_day == approx(total - 1)
    assert not summary.meets_target
    # m = (p + q) / 2 = (.7, (.3 + 3/110)/2, .1, 4/110)
    m2 = (0.3 + 3 / 110) / 2
    assert summary.js_divergence == approx(
        0.5 * (0.5 * math.log(0.5 / 0.7) + 0.3 * math.log(0.3 / m2) + 0.2 * math.log(2))
        + 0.5 * (0.9 * math.log(0.9 / 0.7) + 3 / 110 * math.log(3 / 110 / m2))
        + 0.5 * (8 / 110 * math.log(2))
    )
    # lighting: p (bright .5, dim .5), q (107/110, 3/110); clutter: p (.8, .2), q (102/110, 8/110)
    assert summary.psi["lighting"] == approx(
        (0.5 - 107 / 110) * math.log(0.5 / (107 / 110))
        + (0.5 - 3 / 110) * math.log(0.5 / (3 / 110))
    )
    assert summary.psi["clutter"] == approx(
        (0.8 - 102 / 110) * math.log(0.8 / (102 / 110))
        + (0.2 - 8 / 110) * math.log(0.2 / (8 / 110))
    )


def test_totals_carry_an_interval_around_the_point_estimate():
    result = compute_gap(_inputs([0.5, 0.5], [10.0, 100.0], [40, 400], [36, 396]))

    low, high = result.summary.interventions_interval

    assert 0 <= low < result.summary.interventions_per_day < high
    rel_low, rel_high = result.summary.reliability_interval
    assert rel_low < result.summary.reliability_now < rel_high


def test_without_a_curve_the_engine_fits_one_and_says_so():
    inputs = _inputs(
        [0.25] * 4, [0.0, 10.0, 100.0, 1000.0], [100] * 4, [50, 80, 95, 99], curve=None
    )

    result = compute_gap(inputs)

    assert result.fit.source == "fitted"
    assert result.fit.n_trials == 400


def test_a_given_curve_is_used_as_is():
    result = compute_gap(_inputs([1.0], [3.0], [10], [9]))

    assert result.fit.source == "given"
    assert result.curve is CURVE


def test_without_evidence_the_value_of_capture_is_the_pooled_curve_gain_of_a_typical_cell():
    n = np.array([0.0, 7.0, 250.0])
    result = compute_gap(_inputs([0.2, 0.3, 0.5], n))

    avoided = result.avoided(10)

    # A cell nobody evaluated is a typical cell: the pooled curve times its prior multiplier.
    rate = np.array([r for r, _, _ in curve_oracle.cell_rates(CURVE, n, [0, 0, 0], [0, 0, 0])])
    multiplier = (rate - CURVE.f_inf) / (CURVE.rate(n) - CURVE.f_inf)
    expected = 5000 * np.array([0.2, 0.3, 0.5]) * CURVE.gain(n, 10) * multiplier
    assert avoided == pytest.approx(expected, rel=1e-9)


def test_avoided_one_episode_is_the_priority():
    result = compute_gap(_inputs([0.2, 0.3, 0.5], [0.0, 7.0, 250.0], [5, 50, 0], [1, 45, 0]))

    avoided = result.avoided(1)

    assert avoided == pytest.approx(result.cells.priority, rel=1e-12)


@given(case=gap_cases(), k=st.floats(0.5, 500))
def test_avoided_is_concave_and_non_decreasing_in_more_episodes(case, k):
    result = compute_gap(_inputs(*case))

    a0, a1, a2 = (result.avoided(x) for x in (0.0, k, 2 * k))

    assert np.all(a0 == 0)
    assert np.all(a1 >= 0)
    assert np.all(a2 >= a1)
    assert np.all(a2 - a1 <= (a1 - a0) * (1 + 1e-9) + 1e-12)


def test_avoided_rejects_negative_episodes():
    result = compute_gap(_inputs([1.0], [3.0]))

    with pytest.raises(ValueError, match="k must be"):
        result.avoided(-1)


# --- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"target_share": [0.5, 0.4]}, "target_share sums to 0.9"),
        ({"target_share": [1.5, -0.5]}, "target_share must be finite and >= 0"),
        ({"train_count": [1.0]}, "train_count has shape"),
        ({"train_count": [1.0, -1.0]}, "train_count must be finite"),
        ({"successes": [3, 0]}, "'cell 0' has 3 successes in 2 trials"),
        ({"trials": [2.5, 0]}, "trials must hold whole numbers"),
        ({"cycles_per_day": -1.0}, "cycles_per_day"),
        ({"reliability_target": 1.5}, "reliability_target"),
        ({"uncovered_below": 60.0}, "uncovered_below <= thin_below"),
        ({"dimensions": [Dimension("light", ["a"], np.array([0, 1]))]}, "codes must index"),
    ],
)
def test_inputs_reject_bad_data_naming_the_problem(change, message):
    fields = {"target_share": [0.5, 0.5], "train_count": [1.0, 2.0], "trials": [2, 2]}
    fields["successes"] = [1, 1]
    fields.update(change)

    with pytest.raises(ValueError, match=message):
        _inputs(**{"p": fields.pop("target_share"), "n": fields.pop("train_count"), **fields})


def test_inputs_accept_rounding_error_in_shares_and_renormalise():
    inputs = _inputs([0.3333333, 0.3333333, 0.3333333], [1.0, 1.0, 1.0])

    assert float(np.sum(inputs.target_share)) == pytest.approx(1.0, abs=1e-15)


# --- properties --------------------------------------------------------------------------


@given(
    p=st.lists(st.floats(0, 1e6, allow_subnormal=False), min_size=1, max_size=40),
    q=st.lists(st.floats(0, 1e6, allow_subnormal=False), min_size=1, max_size=40),
)
def test_js_divergence_stays_between_zero_and_ln2(p, q):
    size = min(len(p), len(q))

    value = js_divergence(p[:size], q[:size])

    assert 0 <= value <= LN2


def test_js_divergence_is_ln2_when_training_is_empty_and_zero_when_both_are():
    assert js_divergence([0.4, 0.6], [0.0, 0.0]) == LN2
    assert js_divergence([0.0], [0.0]) == 0.0


@given(case=gap_cases())
def test_summary_divergence_stays_between_zero_and_ln2(case):
    result = compute_gap(_inputs(*case))

    assert 0 <= result.summary.js_divergence <= LN2


def test_with_no_training_data_everything_is_uncovered_and_maximally_divergent():
    result = compute_gap(_inputs([0.7, 0.3, 0.0], [0.0, 0.0, 0.0]))

    assert result.summary.uncovered_mass == pytest.approx(1.0)
    assert result.summary.js_divergence == LN2
    assert np.all(result.cells.train_share == 0)


@given(counts=st.lists(st.integers(1, 100_000), min_size=1, max_size=30))
def test_identical_target_and_training_distributions_show_no_gap(counts):
    n = np.array(counts, dtype=float)
    codes = np.arange(n.size) % 3
    dims = [Dimension(name="lighting", values=["a", "b", "c"], codes=codes)]

    result = compute_gap(_inputs(n / n.sum(), n, dimensions=dims))

    assert result.summary.js_divergence == pytest.approx(0.0, abs=1e-12)
    assert result.summary.psi["lighting"] == pytest.approx(0.0, abs=1e-12)
    assert result.summary.uncovered_mass == 0.0


@given(case=gap_cases())
def test_shares_sum_to_one(case):
    result = compute_gap(_inputs(*case))

    s = result.summary
    assert float(result.cells.target_share.sum()) == pytest.approx(1.0, abs=1e-12)
    expected_train = 1.0 if s.total_train > 0 else 0.0
    assert float(result.cells.train_share.sum()) == pytest.approx(expected_train, abs=1e-12)
    assert s.uncovered_mass + s.thin_mass + s.covered_mass == pytest.approx(1.0, abs=1e-12)


@given(case=gap_cases(), data=st.data(), extra=st.floats(0.01, 1e4))
def test_training_an_unevaluated_cell_never_raises_its_failure_rate_or_priority(case, data, extra):
    p, n, trials, successes = case
    i = data.draw(st.integers(0, len(p) - 1))
    # Where the cell has outcomes, the same outcomes after more training say the cell is
    # harder than the curve thought (and cells differ more): its rate may rise, which is the
    # evidence speaking. Without outcomes of its own, more training only helps.
    trials, successes = trials.copy(), successes.copy()
    trials[i] = successes[i] = 0
    more = n.copy()
    more[i] += extra

    before = compute_gap(_inputs(p, n, trials, successes)).cells
    after = compute_gap(_inputs(p, more, trials, successes)).cells

    assert after.failure_rate[i] <= before.failure_rate[i] * (1 + 1e-12)
    assert after.priority[i] <= before.priority[i] * (1 + 1e-12)


@given(case=gap_cases())
def test_priority_is_zero_exactly_where_there_is_no_target_mass(case):
    result = compute_gap(_inputs(*case))

    assert np.all(result.cells.priority[result.cells.target_share == 0] == 0)
    assert np.all(result.cells.priority >= 0)


@given(case=gap_cases(min_cells=2), data=st.data())
def test_permuting_cells_permutes_outputs_and_changes_no_summary_figure(case, data):
    p, n, trials, successes = case
    perm = np.array(data.draw(st.permutations(range(len(p)))))
    codes = np.arange(len(p)) % 2
    dims = [Dimension(name="clutter", values=["low", "high"], codes=codes)]
    permuted_dims = [Dimension(name="clutter", values=["low", "high"], codes=codes[perm])]

    base = compute_gap(_inputs(p, n, trials, successes, dimensions=dims))
    moved = compute_gap(
        _inputs(p[perm], n[perm], trials[perm], successes[perm], dimensions=permuted_dims)
    )

    for name in ("failure_rate", "interventions", "priority", "train_share", "coverage"):
        assert getattr(moved.cells, name) == pytest.approx(getattr(base.cells, name)[perm])
    for name in (
        "uncovered_mass",
        "thin_mass",
        "js_divergence",
        "reliability_now",
        "interventions_per_day",
        "excess_interventions_per_day",
    ):
        assert getattr(moved.summary, name) == pytest.approx(
            getattr(base.summary, name), rel=1e-9, abs=1e-12
        )
    assert moved.summary.psi["clutter"] == pytest.approx(base.summary.psi["clutter"], abs=1e-12)


@given(case=gap_cases(), k=st.integers(0, 30))
def test_cells_with_no_target_mass_never_rank_as_gaps(case, k):
    result = compute_gap(_inputs(*case))

    gaps = top_gaps(result, k)

    assert len(gaps) <= k
    assert all(gap.target_share > 0 for gap in gaps)


@given(case=gap_cases(), data=st.data())
def test_a_cell_with_no_training_data_and_target_mass_always_surfaces(case, data):
    p, n, trials, successes = case
    i = data.draw(st.integers(0, len(p) - 1))
    n = n.copy()
    n[i] = 0.0
    p = p.copy()
    p[i] += 1e-9  # real but negligible mass: the case most likely to be crowded out
    p /= p.sum()
    result = compute_gap(_inputs(p, n, trials, successes))
    blind = np.flatnonzero((result.cells.train_count < 1) & (result.cells.target_share > 0))
    k = data.draw(st.integers(len(blind), len(blind) + 5))

    gaps = top_gaps(result, k)

    assert i in {gap.index for gap in gaps}
    assert set(blind) <= {gap.index for gap in gaps}


def test_top_gaps_rank_by_priority_then_by_interventions():
    # Cells 0 and 1 are identical (same priority and E); cell 2 has more at stake.
    result = compute_gap(_inputs([0.25, 0.25, 0.5, 0.0], [10.0, 10.0, 10.0, 0.0]))

    gaps = top_gaps(result, 10)

    assert [gap.index for gap in gaps] == [2, 0, 1]
    assert gaps[0].coverage is Coverage.THIN
    assert not any(gap.blind_spot for gap in gaps)


def test_blind_spots_displace_the_lowest_ranked_covered_cells():
    # Cell 3 (no training data, tiny mass) has the lowest priority of all.
    p = [0.4, 0.3, 0.299, 0.001]
    result = compute_gap(_inputs(p, [10.0, 20.0, 30.0, 0.0]))
    assert result.cells.priority.argmin() == 3

    gaps = top_gaps(result, 2)

    assert [gap.index for gap in gaps] == [0, 3]
    assert gaps[1].blind_spot


def test_blind_spot_guarantee_can_require_a_minimum_share():
    result = compute_gap(_inputs([0.4, 0.3, 0.299, 0.001], [10.0, 20.0, 30.0, 0.0]))

    gaps = top_gaps(result, 2, blind_spot_min_share=0.01)

    assert [gap.index for gap in gaps] == [0, 1]


# --- explanations ------------------------------------------------------------------------


def test_explain_cell_writes_one_forwardable_sentence():
    inputs = GapInputs(
        labels=["Dim sodium lighting at Rotterdam DC", "Bright LED at Rotterdam DC"],
        target_share=[0.18, 0.82],
        train_count=[40.0, 19_960.0],
        trials=[1000, 0],
        successes=[940, 0],
        cycles_per_day=5000.0,
        curve=LearningCurve(f_inf=0.06, a=0.0, b=0.5),
    )
    result = compute_gap(inputs)

    sentence = explain_cell(result, 0)

    # rate (20 * 0.06 + 60) / 1020 = 0.06; E = 5000 * 0.18 * 0.06 = 54
    assert sentence == (
        "Dim sodium lighting at Rotterdam DC: 18% of production cycles but 0.2% of training "
        "episodes (40); estimated failure rate 6% (60 failures in 1,000 trials) → about 54 "
        "interventions a day."
    )


def test_explain_cell_names_missing_training_data_and_missing_trials():
    result = compute_gap(_inputs([0.9, 0.1], [100.0, 0.0]))

    sentence = explain_cell(result, 1)

    assert sentence.startswith("cell 1: 10% of production cycles but no training episodes;")
    assert "(no trials yet, learning-curve estimate)" in sentence


def test_explain_cell_says_when_a_cell_is_not_seen_in_production():
    result = compute_gap(_inputs([1.0, 0.0], [100.0, 25.0]))

    sentence = explain_cell(result, 1)

    assert sentence == (
        "cell 1: not seen in production; 20% of training episodes (25); no interventions expected."
    )


@pytest.mark.parametrize(
    ("share", "text"),
    [(0.18, "18%"), (0.002, "0.2%"), (0.0004, "<0.1%"), (0.0, "0%"), (0.9996, ">99%"), (1, "100%")],
)
def test_percentages_are_formatted_for_reading(share, text):
    assert format_percent(share) == text


@pytest.mark.parametrize(
    ("count", "text"), [(40, "40"), (12345, "12,345"), (2.5, "2.5"), (1234.6, "1,235")]
)
def test_counts_get_thousands_separators(count, text):
    assert format_count(count) == text


@pytest.mark.parametrize(
    ("per_day", "text"),
    [
        (54.2, "about 54 interventions a day"),
        (5.44, "about 5.4 interventions a day"),
        (1.0, "about 1 intervention a day"),
        (0.4, "about 2.8 interventions a week"),
        (0.05, "about 1.5 interventions a month"),
        (0.001, "less than one intervention a month"),
        (0.0, "no interventions expected"),
    ],
)
def test_interventions_are_phrased_in_a_natural_period(per_day, text):
    assert format_interventions(per_day) == text


# --- PSI and domain classifier -----------------------------------------------------------


def test_psi_uses_epsilon_for_empty_bins():
    value = psi([0.5, 0.5], [1.0, 0.0], epsilon=1e-4)

    assert value == pytest.approx(
        (0.5 - 1) * math.log(0.5 / 1) + (0.5 - 1e-4) * math.log(0.5 / 1e-4), abs=1e-12
    )


@settings(deadline=None, max_examples=5)
@given(seed=st.integers(0, 1000))
def test_domain_classifier_cannot_tell_identical_distributions_apart(seed):
    rng = np.random.default_rng(seed)
    x_train = rng.normal(size=(1500, 3))
    x_target = rng.normal(size=(1500, 3))

    shift = domain_classifier_auc(x_train, x_target, ["height", "lux", "yaw"], seed=seed)

    assert shift.auc == pytest.approx(0.5, abs=0.06)


@pytest.mark.parametrize("model", ["boosting", "logistic"])
def test_domain_classifier_finds_the_shifted_feature(model):
    rng = np.random.default_rng(0)
    x_train = rng.normal(size=(1000, 3))
    x_target = rng.normal(size=(1000, 3))
    x_target[:, 1] += 2.0

    shift = domain_classifier_auc(x_train, x_target, ["height", "lux", "yaw"], model=model)

    assert shift.auc is not None
    assert shift.auc > 0.8
    assert shift.features[0][0] == "lux"
    assert shift.features[0][1] > 0.1


def test_domain_classifier_with_boosting_sees_a_change_in_spread():
    rng = np.random.default_rng(1)
    x_train = rng.normal(size=(1500, 2))
    x_target = rng.normal(size=(1500, 2)) * np.array([1.0, 3.0])

    shift = domain_classifier_auc(x_train, x_target, ["height", "yaw"])

    assert shift.auc is not None
    assert shift.auc > 0.7
    assert shift.features[0][0] == "yaw"


def test_domain_classifier_declines_tiny_samples_with_a_reason():
    shift = domain_classifier_auc(np.zeros((3, 2)), np.ones((50, 2)), ["a", "b"], folds=5)

    assert shift.auc is None
    assert "got 3 training and 50 target rows" in shift.reason


def test_domain_classifier_subsamples_large_inputs_deterministically():
    rng = np.random.default_rng(2)
    x_train = rng.normal(size=(3000, 2))
    x_target = rng.normal(size=(2000, 2)) + 0.5

    first = domain_classifier_auc(x_train, x_target, ["a", "b"], max_rows=500, model="logistic")
    second = domain_classifier_auc(x_train, x_target, ["a", "b"], max_rows=500, model="logistic")

    assert (first.n_train, first.n_target) == (500, 500)
    assert first == second


def test_domain_classifier_rejects_mismatched_feature_names():
    with pytest.raises(ValueError, match="must agree"):
        domain_classifier_auc(np.zeros((10, 2)), np.zeros((10, 2)), ["only one"])


def _transfer(conditions, strength):
    from analytics.steering.transfer import CellStructure, TransferModel

    s = np.asarray(strength, dtype=float)
    return TransferModel(
        structure=CellStructure.of(conditions), strength=s, low=s, high=s, evaluations=3
    )


def test_with_transfer_cells_are_read_at_effective_training_and_valued_where_they_help():
    conditions = [
        {"lighting": "dim", "clutter": "tidy"},
        {"lighting": "dim", "clutter": "dense"},
        {"lighting": "bright", "clutter": "dense"},
    ]
    transfer = _transfer(conditions, [0.0, 0.5])  # clutter transfers half, lighting nothing
    p, n = [0.0, 0.7, 0.3], [400.0, 10.0, 50.0]

    plain = compute_gap(_inputs(p, n))
    result = compute_gap(_inputs(p, n, transfer=transfer))

    cells = result.cells
    assert list(cells.effective_count) == [405.0, 210.0, 50.0]
    assert list(cells.train_count) == n  # coverage stays about the cell's own data
    # More effective training, a lower rate; a cell nothing transfers to is as it was.
    assert cells.failure_rate[1] < plain.cells.failure_rate[1]
    assert cells.failure_rate[2] == plain.cells.failure_rate[2]
    own = result.avoided(1.0)
    assert list(cells.priority_elsewhere) == pytest.approx([0.5 * own[1], 0.5 * own[0], 0.0])
    assert list(cells.priority) == pytest.approx(list(own + cells.priority_elsewhere))
    # A cell without production of its own is worth capturing for the one it helps, and says so.
    assert cells.priority[0] > 0 == plain.cells.priority[0]
    assert "An episode here also trains cells that share its conditions: 100% of its value" in (
        explain_cell(result, 0)
    )
    assert "also trains" not in explain_cell(result, 2)


def test_transfer_that_moves_nothing_changes_no_figure():
    conditions = [{"lighting": v} for v in ("dim", "bright", "glare")]
    p, n = [0.5, 0.3, 0.2], [10.0, 200.0, 0.0]

    plain = compute_gap(_inputs(p, n, trials=[50, 0, 20], successes=[45, 0, 20]))
    none = compute_gap(
        _inputs(
            p, n, trials=[50, 0, 20], successes=[45, 0, 20], transfer=_transfer(conditions, [0.0])
        )
    )

    for name in ("failure_rate", "priority", "interventions", "failure_low", "failure_high"):
        assert np.array_equal(getattr(plain.cells, name), getattr(none.cells, name))
    assert plain.summary == none.summary
