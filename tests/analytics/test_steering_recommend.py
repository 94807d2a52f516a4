import heapq
import math
import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from analytics.steering.recommend import (
    CellInput,
    Exploration,
    RecommendationInputError,
    parse_request,
    recommend,
)
from analytics.steering.waterfill import waterfill
from campaigns.planning.gain import power_gain


def _cell(id, share, n, trials, successes, cost=1.0):
    return CellInput(
        id=id,
        target_share=share,
        train_count=n,
        trials=trials,
        successes=successes,
        cost_per_episode=cost,
    )


def _lab_world():
    return [
        _cell("lab", 0.05, 8000, 300, 299),
        _cell("fluorescent", 0.10, 1500, 200, 196),
        _cell("glare", 0.10, 400, 150, 141),
        _cell("moderate clutter", 0.05, 900, 120, 117),
    ]


# --- where the budget goes ---------------------------------------------------------------


def test_an_uncovered_cell_holding_most_target_mass_gets_most_of_the_budget():
    cells = [*_lab_world(), _cell("dim sodium, dense", 0.70, 0, 0, 0)]

    result = recommend(cells, 2000, 5000)

    episodes = {a.id: a.episodes for a in result.allocations}
    assert episodes["dim sodium, dense"] > 0.6 * 2000
    assert episodes["dim sodium, dense"] == max(episodes.values())


def test_a_fully_covered_cell_with_high_observed_success_gets_almost_nothing():
    cells = [
        _cell("covered", 0.40, 60_000, 4000, 3999),
        _cell("thin A", 0.30, 200, 120, 110),
        _cell("thin B", 0.30, 50, 90, 80),
    ]

    result = recommend(cells, 3000, 5000)

    covered = result.allocations[0]
    assert covered.episodes <= 0.02 * 3000
    assert (
        covered.rationale.endswith(
            "no episodes: other cells avoid more interventions per unit of budget."
        )
        or covered.episodes > 0
    )


def test_the_rationale_reads_like_the_issue_example():
    cells = [
        _cell("c1", 0.12, 340, 120, 113),
        *[_cell(f"o{i}", 0.22, 3000, 200, 199) for i in range(4)],
    ]

    result = recommend(cells, 2000, 5000)

    text = result.allocations[0].rationale
    assert re.fullmatch(
        r"12% of production cycles, 340 training episodes; 7 failures in 120 trials "
        r"\(5\.8%, 95% 2\.9–11\.6%\); [\d,]+ more episodes avoid about [\d.]+ interventions a day\.",
        text,
    ), text


def test_interventions_before_and_after_are_the_expected_sums():
    cells = [*_lab_world(), _cell("dim", 0.70, 20, 30, 22)]

    result = recommend(cells, 1500, 5000)

    p = np.array([c.target_share for c in cells])
    n = np.array([c.train_count for c in cells])
    curves = result.curves
    before = 5000 * float(np.dot(p, curves.rate(n)))
    after = 5000 * float(np.dot(p, curves.rate(n + result.episodes)))
    assert result.interventions_per_day_before == pytest.approx(before)
    assert result.interventions_per_day_after == pytest.approx(after)
    avoided = sum(a.expected_interventions_avoided_per_day for a in result.allocations)
    assert avoided == pytest.approx(before - after)
    assert result.interventions_per_day_after < result.interventions_per_day_before


def test_the_upper_confidence_bound_gives_thin_evidence_the_benefit_of_the_doubt():
    # Same training count and observed rate, one on 10 trials, one on 2,000.
    cells = [
        _cell("well known", 0.5, 500, 2000, 1960),
        _cell("barely known", 0.5, 500, 10, 10),
    ]

    ucb = recommend(cells, 1000, 5000, exploration=Exploration("ucb", 0.9))
    mean = recommend(cells, 1000, 5000, exploration=Exploration("mean"))

    assert ucb.ranking_amplitude[1] > 1.5 * ucb.curves.amplitude[1]
    assert ucb.ranking_amplitude[0] < 1.3 * ucb.curves.amplitude[0]
    assert ucb.episodes[1] > mean.episodes[1]
    assert "little evidence" in ucb.allocations[1].rationale


def test_recommendation_is_deterministic_for_a_seed():
    cells = [*_lab_world(), _cell("dim", 0.70, 20, 30, 22)]

    runs = [
        recommend(cells, 2000, 5000, seed=seed, exploration=Exploration("thompson"))
        for seed in (7, 7, 8, 9, 10)
    ]

    assert runs[0].episodes.tolist() == runs[1].episodes.tolist()
    assert runs[0].to_dict() == runs[1].to_dict()
    assert len({tuple(r.episodes.tolist()) for r in runs[1:]}) > 1  # draws do differ
    ucb = [recommend(cells, 2000, 5000, seed=s).episodes.tolist() for s in (1, 2)]
    assert ucb[0] == ucb[1]


def test_planner_rates_reproduce_the_ranking_valuation():
    cells = [*_lab_world(), _cell("dim", 0.70, 20, 30, 22)]

    result = recommend(cells, 2000, 5000)

    curves = result.curves
    n = np.array([c.train_count for c in cells])
    amp_from_rate = (result.planner_failure_rates - curves.f_inf) * (n + 1) ** curves.b
    assert amp_from_rate == pytest.approx(result.ranking_amplitude, rel=1e-9)


# --- budget feasibility ------------------------------------------------------------------


@st.composite
def requests(draw):
    size = draw(st.integers(1, 12))
    weights = draw(st.lists(st.integers(0, 100), min_size=size, max_size=size))
    if sum(weights) == 0:
        weights[0] = 1
    cells = []
    for i, w in enumerate(weights):
        trials = draw(st.integers(0, 400))
        cells.append(
            _cell(
                f"c{i}",
                w / sum(weights),
                draw(st.one_of(st.just(0.0), st.floats(0, 50_000))),
                trials,
                draw(st.integers(0, trials)),
                draw(st.one_of(st.just(1.0), st.floats(0.05, 40.0))),
            )
        )
    budget = draw(st.one_of(st.just(0.0), st.floats(0, 50_000)))
    return cells, budget


@given(requests(), st.sampled_from(["ucb", "thompson", "mean"]), st.integers(0, 3))
@settings(max_examples=60, deadline=None)
def test_allocations_are_whole_non_negative_and_within_budget(case, method, seed):
    cells, budget = case

    result = recommend(cells, budget, 5000, seed=seed, exploration=Exploration(method))

    episodes = np.array([a.episodes for a in result.allocations])
    cost = np.array([c.cost_per_episode for c in cells])
    assert episodes.dtype.kind == "i" and np.all(episodes >= 0)
    assert float(np.dot(episodes, cost)) <= budget + 1e-6
    assert result.spent == pytest.approx(float(np.dot(episodes, cost)))
    # Whatever is left could not buy one more episode of any cell worth buying.
    worth = result.ranking_amplitude * np.array([c.target_share for c in cells]) > 0
    if worth.any():
        assert budget - result.spent < cost[worth].max() + 1e-6


@given(
    st.lists(
        st.tuples(st.floats(0, 100), st.floats(0, 500)),
        min_size=1,
        max_size=5,
    ),
    st.floats(0.1, 1.5),
    st.integers(0, 300),
)
@settings(max_examples=80, deadline=None)
# Found by hypothesis: rounding the continuous optimum down spent the budget on episodes that
# gain less than one left out elsewhere; the exchange pass now moves them.
@example(cells=[(4.0, 0.0), (4.0, 0.0), (4.0, 0.0), (12.0, 0.0), (90.0, 0.0)], b=0.125, budget=33)
def test_waterfill_with_unit_costs_matches_the_exact_greedy_optimum(cells, b, budget):
    amp = np.array([c[0] for c in cells])
    n = np.array([c[1] for c in cells])

    k = waterfill(amp, n, np.ones(amp.size), b, budget)

    # One episode at a time by marginal gain is optimal for separable concave gains.
    best = np.zeros(amp.size, dtype=int)
    heap = [(-float(power_gain(amp[i], n[i], b, 1)), i) for i in range(amp.size) if amp[i] > 0]
    heapq.heapify(heap)
    for _ in range(budget):
        if not heap:
            break
        _, i = heapq.heappop(heap)
        best[i] += 1
        heapq.heappush(heap, (-float(power_gain(amp[i], n[i] + best[i], b, 1)), i))
    ours = float(power_gain(amp, n, b, k).sum())
    optimum = float(power_gain(amp, n, b, best).sum())
    assert k.sum() <= budget
    assert ours >= optimum * (1 - 1e-9) - 1e-12


def test_waterfill_is_fast_for_large_budgets_and_many_cells():
    rng = np.random.default_rng(0)
    amp = rng.lognormal(0, 2, 5000)
    n = rng.integers(0, 10_000, 5000).astype(float)
    cost = rng.uniform(0.5, 3.0, 5000)

    k = waterfill(amp, n, cost, 0.5, 1_000_000)

    assert float(np.dot(cost, k)) <= 1_000_000
    assert float(np.dot(cost, k)) > 1_000_000 - 3.0


# --- input validation --------------------------------------------------------------------


def _valid():
    return {
        "budget": 2000,
        "cycles_per_day": 5000,
        "cells": [
            {"id": "c1", "target_share": 0.6, "train_count": 340, "trials": 120, "successes": 113},
            {
                "id": "c2",
                "target_share": 0.4,
                "train_count": 0,
                "trials": 0,
                "successes": 0,
                "cost_per_episode": 2.5,
            },
        ],
    }


def _broken(path, value):
    data = _valid()
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_broken(("cells", 0, "trials"), KeyError), "cell 'c1': missing field 'trials'"),
        (_broken(("cells", 1, "train_count"), -5), "cell 'c2': 'train_count' must be >= 0"),
        (
            _broken(("cells", 0, "target_share"), "a lot"),
            "cell 'c1': 'target_share' must be a number",
        ),
        (
            _broken(("cells", 0, "successes"), 130),
            "cell 'c1': 'successes' (130) exceeds 'trials' (120)",
        ),
        (_broken(("cells", 0, "target_share"), 0.3), "target shares sum to 0.7"),
        (_broken(("cells", 1, "cost_per_episode"), 0), "cell 'c2': 'cost_per_episode' must be > 0"),
        (_broken(("cells", 0, "trials"), 12.5), "cell 'c1': 'trials' must be a whole number"),
        (_broken(("cells", 0, "trials"), True), "cell 'c1': 'trials' must be a number"),
        (_broken(("cells", 1, "id"), "c1"), "cell 'c1': duplicate id"),
        (_broken(("cells", 1, "id"), KeyError), "cell #2: missing field 'id'"),
        (_broken(("budget",), -1), "'budget' must be >= 0"),
        (_broken(("cycles_per_day",), KeyError), "missing field 'cycles_per_day'"),
        (_broken(("cells",), []), "'cells' must be a non-empty list"),
        (
            _broken(("cells", 0, "train_count"), float("nan")),
            "'train_count' must be a finite number",
        ),
    ],
)
def test_malformed_input_names_the_cell_and_field(data, message):
    with pytest.raises(RecommendationInputError) as excinfo:
        parse_request(data)

    assert message in str(excinfo.value)


def test_valid_input_parses_with_the_default_cost():
    request = parse_request(_valid())

    assert [c.cost_per_episode for c in request.cells] == [1.0, 2.5]
    assert request.budget == 2000 and request.cycles_per_day == 5000


def test_recommend_validates_programmatic_input_too():
    with pytest.raises(RecommendationInputError, match="'successes'"):
        recommend([_cell("x", 1.0, 0, 5, 6)], 100, 10)
    assert math.isfinite(recommend([_cell("x", 1.0, 0, 5, 4)], 100, 10).spent)
