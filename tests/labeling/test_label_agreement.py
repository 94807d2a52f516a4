"""Agreement maths: Cohen's and Fleiss' kappa against hand-computed values and scikit-learn."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.labels.agreement import (
    Rating,
    cohen_kappa,
    count_table,
    fleiss_kappa,
    gold_accuracy,
    job_agreement,
    percent_agreement,
    rater_agreement,
)


def test_cohen_kappa_matches_the_hand_computed_example():
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15.
    # p_o = 35/50 = 0.7; p_yes = 25/50 · 30/50 = 0.3, p_no = 25/50 · 20/50 = 0.2, p_e = 0.5.
    a = ["yes"] * 20 + ["yes"] * 5 + ["no"] * 10 + ["no"] * 15
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15

    kappa = cohen_kappa(a, b)

    assert kappa == pytest.approx((0.7 - 0.5) / (1 - 0.5))  # 0.4


def test_cohen_kappa_of_a_small_three_category_table_by_hand():
    # Rater A: a a b b c c ; rater B: a b b b c a.
    # Observed 4/6; marginals A (2,2,2)/6, B (2,3,1)/6 -> p_e = (4 + 6 + 2)/36 = 1/3.
    kappa = cohen_kappa(list("aabbcc"), list("abbbca"))

    assert kappa == pytest.approx((4 / 6 - 1 / 3) / (1 - 1 / 3))  # 0.5


def test_fleiss_kappa_matches_the_wikipedia_worked_example():
    table = np.array(
        [
            [0, 0, 0, 0, 14],
            [0, 2, 6, 4, 2],
            [0, 0, 3, 5, 6],
            [0, 3, 9, 2, 0],
            [2, 2, 8, 1, 1],
            [7, 7, 0, 0, 0],
            [3, 2, 6, 3, 0],
            [2, 5, 3, 2, 2],
            [6, 5, 2, 1, 0],
            [0, 2, 2, 3, 7],
        ]
    )

    assert fleiss_kappa(table) == pytest.approx(0.210, abs=0.0005)


def test_fleiss_kappa_of_two_raters_equals_scotts_pi_by_hand():
    # 4 items, 2 raters: agree on x, agree on y, disagree twice.
    # P_i = 1, 1, 0, 0 -> P̄ = 0.5; p_x = p_y = 0.5 -> P̄e = 0.5 -> κ = 0.
    table = count_table([["x", "x"], ["y", "y"], ["x", "y"], ["y", "x"]])

    assert fleiss_kappa(table) == pytest.approx(0.0)


def test_kappa_is_undefined_when_everyone_gives_the_one_same_answer():
    assert cohen_kappa(["a", "a", "a"], ["a", "a", "a"]) is None
    assert fleiss_kappa(count_table([["a", "a", "a"], ["a", "a", "a"]])) is None
    assert percent_agreement([["a", "a"], ["a", "a"]]) == 1.0


def test_perfect_agreement_over_several_categories_is_one_and_none_counts_as_a_category():
    assert cohen_kappa(["a", None, "b"], ["a", None, "b"]) == pytest.approx(1.0)


def test_fleiss_kappa_refuses_items_with_different_numbers_of_ratings():
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa(np.array([[2, 0], [1, 2]]))


def test_cohen_kappa_refuses_sequences_of_different_length():
    with pytest.raises(ValueError, match="same"):
        cohen_kappa(["a"], ["a", "b"])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from("abcd")), min_size=2, max_size=60)
)
def test_cohen_kappa_equals_scikit_learn(pairs):
    from sklearn.metrics import cohen_kappa_score

    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]

    ours = cohen_kappa(a, b)

    if ours is None:
        assert len(set(a) | set(b)) == 1
    else:
        assert ours == pytest.approx(float(cohen_kappa_score(a, b)), abs=1e-9)
        assert -1.0 - 1e-9 <= ours <= 1.0 + 1e-9


@settings(max_examples=100, deadline=None)
@given(
    st.integers(min_value=2, max_value=5).flatmap(
        lambda n: st.lists(
            st.lists(st.sampled_from("xyz"), min_size=n, max_size=n), min_size=1, max_size=30
        )
    )
)
def test_fleiss_kappa_is_at_most_one_and_one_exactly_when_all_items_are_unanimous(ratings):
    kappa = fleiss_kappa(count_table(ratings))

    unanimous = all(len(set(r)) == 1 for r in ratings)
    if kappa is None:
        assert len({v for r in ratings for v in r}) == 1
    else:
        assert kappa <= 1.0 + 1e-9
        assert math.isclose(kappa, 1.0, abs_tol=1e-9) == unanimous


def _ratings(rows):
    return [Rating(item=i, rater=r, labels={"lighting": v}) for i, r, v in rows]


def test_job_agreement_uses_cohen_for_pairs_and_fleiss_for_more():
    pairs = _ratings(
        [(1, 10, "a"), (1, 11, "a"), (2, 10, "b"), (2, 11, "a"), (3, 10, "b"), (3, 11, "b")]
    )
    triples = _ratings(
        [
            (i, r, v)
            for i, vs in enumerate(["aab", "bbb", "aaa"])
            for r, v in zip((10, 11, 12), vs, strict=True)
        ]
    )

    (two,) = job_agreement(pairs, ["lighting"], raters_per_item=2)
    (three,) = job_agreement(triples, ["lighting"], raters_per_item=3)

    assert (two.method, two.items) == ("cohen", 3)
    assert two.kappa == pytest.approx(cohen_kappa(["a", "b", "b"], ["a", "a", "b"]))
    assert two.agreement == pytest.approx(2 / 3)
    assert (three.method, three.items) == ("fleiss", 3)
    assert three.kappa == pytest.approx(fleiss_kappa(count_table(["aab", "bbb", "aaa"])))


def test_job_agreement_ignores_items_with_another_number_of_ratings():
    ratings = _ratings([(1, 10, "a"), (1, 11, "a"), (2, 10, "b")])

    (result,) = job_agreement(ratings, ["lighting"], raters_per_item=2)

    assert result.items == 1


def test_rater_agreement_pairs_each_rater_with_the_others_on_shared_items():
    ratings = _ratings([(1, 10, "a"), (1, 11, "a"), (2, 10, "b"), (2, 11, "a"), (3, 12, "a")])

    per = rater_agreement(ratings, ["lighting"])

    assert per[10]["lighting"].pairs == 2
    assert per[10]["lighting"].agreement == pytest.approx(0.5)
    assert 12 not in per  # rated alone


def test_gold_accuracy_counts_each_label_and_all_together():
    ratings = [
        Rating(1, 10, {"lighting": "dim", "outcome": "success"}),
        Rating(2, 10, {"lighting": "bright", "outcome": "failure"}),
        Rating(3, 10, {"lighting": "dim", "outcome": "success"}),  # not gold
    ]
    gold = {
        1: {"lighting": "dim", "outcome": "success"},
        2: {"lighting": "dim", "outcome": "failure"},
    }

    acc = gold_accuracy(ratings, gold, ["lighting", "outcome"])[10]

    assert (acc["lighting"].correct, acc["lighting"].total) == (1, 2)
    assert (acc["outcome"].correct, acc["outcome"].total) == (2, 2)
    assert acc["*"].share == pytest.approx(3 / 4)
