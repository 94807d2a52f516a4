"""The simulator's harder worlds, the oracle that knows their truth, and excess failures."""

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.steering.observation import Observation
from analytics.steering.simulate import (
    DIMENSIONS,
    FIRST_ROUND_BOUNDS,
    INFORMED,
    INFORMED_LEARNING_TRANSFER,
    INFORMED_WITHOUT_TRANSFER,
    ORACLE,
    REFERENCES,
    WORLDS,
    HiddenCurves,
    World,
    WorldConfig,
    _truth_of,
    excess_failures,
    informed_curves,
    make_oracle,
    make_world,
    oracle_allocation,
    run_campaign,
    simulate,
)
from analytics.steering.strategies import (
    STRATEGY_NAMES,
    get_strategy,
    learn_transfer,
    proportional,
)
from tests.analytics.steered_worlds import played_by_steered

# --- the benchmark's world is the one it was ---------------------------------------------

# Recorded from make_world and run_campaign before the harder worlds existed (commit
# 789ef6e): the default config must keep drawing the same world, draw for draw.
BEFORE = {
    3: {
        "train_sum": 19977.0,
        "cells_with_data": 47,
        "share": [
            0.005658022559329181,
            0.008102837680063929,
            0.03221408904948182,
            0.0003368586556660152,
        ],
        "train": [4856.0, 440.0, 1368.0, 741.0, 140.0, 78.0],
        "a": [0.05899716909249456, 0.3366732582711565, 0.22986539876297052, 0.8250459187714849],
        "b": [0.8813900715946676, 0.6338375883466245, 0.7677830596647153, 0.7210273408272412],
        "f_inf": [0.00014837832695147106, 7.722136494340102e-05],
        "first_successes": [11, 7, 24, 1, 3, 6, 2, 4, 2, 3, 40, 155],
        "first_successes_sum": 1920,
        "interventions": [
            207.5174699045675,
            20.329971703828086,
            13.471573841492706,
            10.553779026336425,
        ],
        "last_successes_sum": 1996,
    },
    11: {
        "train_sum": 19975.0,
        "cells_with_data": 48,
        "share": [
            0.0009088302640553157,
            0.0044339207280981886,
            0.0008835010072096444,
            0.01711280165506413,
        ],
        "train": [2207.0, 1405.0, 1734.0, 700.0, 175.0, 234.0],
        "a": [0.032126745446353404, 0.26244885421844727, 0.21670237534637393, 0.6198163629155546],
        "b": [0.7182520954649085, 0.9545763754625292, 0.8133335004481985, 0.7948021748489073],
        "f_inf": [0.00011950466108199061, 0.00017502276343915054],
        "first_successes": [2, 5, 2, 2, 30, 14, 1, 14, 1, 5, 4, 1],
        "first_successes_sum": 1841,
        "interventions": [
            381.38565466771695,
            25.52319852341382,
            16.73166680668852,
            12.982421275629575,
        ],
        "last_successes_sum": 1995,
    },
}
PICKED = [0, 17, 55, 107]


@pytest.mark.parametrize("seed", sorted(BEFORE))
def test_the_default_world_is_drawn_as_before_the_harder_worlds(seed):
    before = BEFORE[seed]

    world = make_world(seed)
    truth = _truth_of(world)
    cells_with_data = int((world.train_count > 0).sum())
    first_successes = world.observe().latest_successes.copy()
    result = run_campaign(world, proportional, 3)

    assert world.target_share.sum() == pytest.approx(1.0, abs=1e-12)
    assert world.target_share[PICKED].tolist() == pytest.approx(before["share"], rel=1e-12)
    assert world.train_count.sum() - sum(sum(a) for a in result.allocations) == before["train_sum"]
    assert cells_with_data == before["cells_with_data"]
    assert truth.a[PICKED].tolist() == pytest.approx(before["a"], rel=1e-12)
    assert truth.b[PICKED].tolist() == pytest.approx(before["b"], rel=1e-12)
    assert truth.f_inf[[0, 107]].tolist() == pytest.approx(before["f_inf"], rel=1e-12)
    assert truth.transfer is not None
    assert float(truth.transfer.sum()) == pytest.approx(48.6)
    assert first_successes[:12].tolist() == before["first_successes"]
    assert int(first_successes.sum()) == before["first_successes_sum"]
    assert result.interventions_per_day == pytest.approx(before["interventions"], rel=1e-12)
    assert int(world.observe().latest_successes.sum()) == before["last_successes_sum"]
    assert np.all(world.cost_per_episode == 1.0)


def test_the_initial_training_counts_of_the_default_world_are_as_before():
    # The first six cells' counts, separately: the campaign above adds to them.
    for seed, before in BEFORE.items():
        assert make_world(seed).train_count[:6].tolist() == before["train"]


# --- observations name each cell's conditions --------------------------------------------


def test_an_observation_names_each_cell_s_condition_per_dimension():
    world = make_world(1)

    seen = world.observe()

    names = [dim[0] for dim in DIMENSIONS]
    assert len(seen.conditions) == seen.n_cells == 108
    for label, conditions in zip(seen.labels, seen.conditions, strict=True):
        assert conditions == dict(zip(names, label.split(", "), strict=True))
    assert seen.conditions[0] == {
        "lighting": "bright LED",
        "clutter": "tidy",
        "camera pose": "nominal mount",
        "object wear": "new",
    }


def _observation(**overrides):
    fields = {
        "round": 0,
        "labels": ("a", "b"),
        "target_share": [0.5, 0.5],
        "train_count": [0.0, 0.0],
        "cost_per_episode": [1.0, 1.0],
        "budget": 10.0,
        "cycles_per_day": 100.0,
        "reliability_target": 0.99,
        "eval_train_count": np.zeros((1, 2)),
        "eval_trials": np.zeros((1, 2)),
        "eval_successes": np.zeros((1, 2)),
    }
    return Observation(**{**fields, **overrides})


def test_an_observation_copies_conditions_in_and_refuses_a_count_other_than_the_cells():
    given_conditions = [{"lighting": "dim"}, {"lighting": "bright"}]

    seen = _observation(conditions=given_conditions)
    given_conditions[0]["lighting"] = "changed"

    assert seen.conditions == ({"lighting": "dim"}, {"lighting": "bright"})
    assert isinstance(seen.conditions, tuple)
    assert _observation().conditions == ()
    with pytest.raises(ValueError, match="one mapping per cell"):
        _observation(conditions=[{"lighting": "dim"}])


def test_a_world_with_labels_of_its_own_shows_no_conditions():
    truth = HiddenCurves(f_inf=np.zeros(2), a=np.full(2, 0.1), b=np.ones(2))
    world = World(
        labels=("left bin", "right bin"),
        target_share=np.array([0.5, 0.5]),
        train_count=np.zeros(2),
        truth=truth,
        config=WorldConfig(),
        budget=10.0,
    )

    assert world.observe().conditions == ()


# --- world families ----------------------------------------------------------------------


def _changed(config: WorldConfig) -> dict[str, object]:
    default = dataclasses.asdict(WorldConfig())
    return {k: v for k, v in dataclasses.asdict(config).items() if default[k] != v}


_SHARED = {"transfer_model": "shared", "transfer_range": (0.02, 0.25), "base_amplitude": 0.15}


def test_each_world_family_is_the_benchmark_world_with_its_hardships():
    assert {name: _changed(config) for name, config in WORLDS.items()} == {
        "independent": {"transfer": 0.0},
        "transfer": _SHARED,
        "cost": {"cost_spread": 5.0},
        "noise": {"eval_trials": 300},
        "drift": {"drift_round": 4},
        "all": {
            **_SHARED,
            "cost_spread": 5.0,
            "eval_trials": 300,
            "drift_round": 4,
        },
    }


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"transfer_model": "everywhere"}, "unknown transfer model"),
        ({"transfer_range": (0.5, 0.1)}, "transfer_range"),
        ({"transfer_noise": -0.1}, "transfer_noise"),
        ({"cost_spread": 0.5}, "cost_spread"),
        ({"drift_round": -1}, "drift_round"),
        ({"drift_cells": 1.5}, "drift_cells"),
        ({"drift_amplitude": -1.0}, "drift_amplitude"),
        ({"production_days": -1.0}, "production_days"),
        ({"production_days": float("nan")}, "production_days"),
        ({"earlier_release": -1}, "earlier_release"),
    ],
)
def test_a_world_config_refuses_knobs_out_of_range(knobs, message):
    with pytest.raises(ValueError, match=message):
        WorldConfig(**knobs)


# --- shared transfer ---------------------------------------------------------------------


def _codes() -> np.ndarray:
    return np.array(list(itertools.product(*[range(len(dim[1])) for dim in DIMENSIONS])))


def test_shared_transfer_depends_only_on_the_dimensions_in_which_two_cells_differ():
    world = make_world(4, config=WorldConfig(transfer_model="shared", transfer_noise=0.0))
    transfer = _truth_of(world).transfer
    assert transfer is not None
    codes = _codes()
    differ = codes[:, None, :] != codes[None, :, :]

    by_pattern: dict[tuple[bool, ...], set[float]] = {}
    for c, d in itertools.product(range(len(codes)), repeat=2):
        if c != d:
            by_pattern.setdefault(tuple(differ[c, d]), set()).add(round(transfer[c, d], 12))

    assert all(len(values) == 1 for values in by_pattern.values())
    assert len(by_pattern) == 2 ** len(DIMENSIONS) - 1
    taus = [by_pattern[tuple(i == j for j in range(len(DIMENSIONS)))].pop() for i in range(4)]
    assert all(0.1 <= tau <= 0.5 for tau in taus)
    assert by_pattern[(True, True, False, False)] == {round(taus[0] * taus[1], 12)}
    assert np.array_equal(transfer, transfer.T)
    assert np.all(np.diag(transfer) == 0.0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shared_transfer_is_stronger_between_cells_that_share_more_conditions(seed):
    world = make_world(seed, config=WORLDS["transfer"])
    transfer = _truth_of(world).transfer
    assert transfer is not None
    codes = _codes()
    differing = (codes[:, None, :] != codes[None, :, :]).sum(axis=2)

    means = [float(transfer[differing == k].mean()) for k in range(1, 5)]

    assert means == sorted(means, reverse=True)
    assert means[0] > 5 * means[3]
    assert transfer.max() <= 0.9
    assert np.array_equal(transfer, transfer.T)


def test_shared_transfer_ignores_the_neighbours_share():
    one = _truth_of(make_world(5, config=WorldConfig(transfer_model="shared")))
    other = _truth_of(make_world(5, config=WorldConfig(transfer_model="shared", transfer=0.3)))

    assert one.transfer is not None and other.transfer is not None
    assert np.array_equal(one.transfer, other.transfer)


# --- costs -------------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "spread"), [(1, 5.0), (2, 5.0), (3, 2.0), (4, 12.0)])
def test_costs_spread_as_asked_around_a_median_cell_costing_one(seed, spread):
    world = make_world(seed, config=WorldConfig(cost_spread=spread))
    cost = world.cost_per_episode
    codes = _codes()
    # A product of per-value multipliers: log cost is a sum of per-value terms.
    design = np.hstack([np.eye(len(dim[1]))[codes[:, d]] for d, dim in enumerate(DIMENSIONS)])
    fitted, *_ = np.linalg.lstsq(design, np.log(cost), rcond=None)

    assert cost.max() / cost.min() == pytest.approx(spread)
    assert np.median(cost) == pytest.approx(1.0)
    assert np.allclose(design @ fitted, np.log(cost), atol=1e-9)
    assert np.array_equal(world.observe().cost_per_episode, cost)


def test_cost_spread_moves_no_other_draw_of_the_world():
    plain, dear = make_world(6), make_world(6, config=WorldConfig(cost_spread=5.0))

    assert np.array_equal(plain.target_share, dear.target_share)
    assert np.array_equal(plain.train_count, dear.train_count)
    assert np.array_equal(_truth_of(plain).a, _truth_of(dear).a)


# --- drift -------------------------------------------------------------------------------


def test_drift_raises_true_failures_from_its_round_on_and_only_in_the_hit_cells():
    steady = make_world(2)
    drifting = make_world(2, config=WorldConfig(drift_round=2))

    kept = run_campaign(steady, proportional, 4)
    drifted = run_campaign(drifting, proportional, 4)

    assert drifted.allocations == kept.allocations
    assert drifted.interventions_per_day[:2] == kept.interventions_per_day[:2]
    for r in (2, 3, 4):
        assert drifted.interventions_per_day[r] > kept.interventions_per_day[r]
    n = steady.train_count
    assert np.array_equal(_truth_of(drifting, 1).rate(n), _truth_of(steady, 1).rate(n))
    before, after = _truth_of(steady, 4), _truth_of(drifting, 4)
    hit = after.rate(n) != before.rate(n)
    assert hit.sum() == round(0.15 * 108)
    rise = (after.rate(n) - after.f_inf)[hit] / (before.rate(n) - before.f_inf)[hit]
    assert rise == pytest.approx(3.0)
    assert drifted.floor_mass == kept.floor_mass


def test_a_strategy_sees_drift_only_in_the_evaluations():
    steady = make_world(2)
    drifting = make_world(2, config=WorldConfig(drift_round=2))
    run_campaign(steady, proportional, 3)
    run_campaign(drifting, proportional, 3)

    seen, seen_drifting = steady.observe(), drifting.observe()

    for field in dataclasses.fields(Observation):
        same = np.array_equal(
            np.asarray(getattr(seen, field.name)), np.asarray(getattr(seen_drifting, field.name))
        )
        assert same == (field.name != "eval_successes"), field.name
    assert np.array_equal(seen.eval_successes[:2], seen_drifting.eval_successes[:2])
    assert seen_drifting.eval_successes[2:].sum() < seen.eval_successes[2:].sum()


# --- the fleet's production --------------------------------------------------------------


def test_logged_production_adds_each_policy_s_cycles_to_its_outcomes_and_moves_no_other_draw():
    plain = make_world(7, config=WorldConfig(drift_round=2))
    logged = make_world(7, config=WorldConfig(drift_round=2, production_days=1.5))
    run_campaign(plain, proportional, 3)
    run_campaign(logged, proportional, 3)
    seen, seen_logged = plain.observe(), logged.observe()

    cycles = logged.production_cycles()
    assert cycles.sum() == 7_500  # a day and a half of 5,000 cycles, by target share
    assert np.abs(cycles - 7_500 * logged.target_share).max() < 1
    assert plain.production_cycles().sum() == 0
    # Each policy's outcomes are its evaluation's and its production's, drawn apart: the
    # evaluations are the same draws whether production is logged or not.
    assert np.array_equal(seen_logged.eval_trials, seen.eval_trials + cycles[None, :])
    ran = seen_logged.eval_successes - seen.eval_successes
    assert np.all(ran >= 0) and np.all(ran <= cycles[None, :])
    for field in ("target_share", "train_count", "eval_train_count", "cost_per_episode"):
        assert np.array_equal(getattr(seen, field), getattr(seen_logged, field)), field
    assert (
        run_campaign(make_world(7), proportional, 3).interventions_per_day
        == (
            run_campaign(make_world(7, config=WorldConfig(production_days=1.0)), proportional, 3)
        ).interventions_per_day
    )


def test_logged_production_fails_at_the_policy_s_true_rate_drift_included():
    days = 400.0  # two million cycles a policy: each cell's frequency is close to its rate
    world = make_world(8, config=WorldConfig(drift_round=1, production_days=days))
    plain = make_world(8, config=WorldConfig(drift_round=1))
    for w in (world, plain):
        w.train(np.zeros(w.train_count.size, dtype=np.int64))
        w.evaluate()
    logged, evaluated = world.observe(), plain.observe()
    cycles = world.production_cycles()
    for e in (0, 1):  # before the drift and after it
        rate = _truth_of(world, e).rate(logged.eval_train_count[e])
        failed = (logged.eval_trials[e] - logged.eval_successes[e]) - (
            evaluated.eval_trials[e] - evaluated.eval_successes[e]
        )
        expected = cycles * rate
        spread = np.sqrt(cycles * rate * (1 - rate))
        seen = cycles > 0
        assert np.all(np.abs(failed - expected)[seen] <= 5 * spread[seen] + 1)
    # The second policy fails under the drift: its production shows the new failure mode.
    n = logged.eval_train_count[1]
    assert np.sum(_truth_of(world, 1).rate(n) > 2 * _truth_of(world, 0).rate(n)) >= 10


# --- the release before the campaign ----------------------------------------------------


def test_an_earlier_release_starts_the_record_and_moves_no_draw_of_the_campaign():
    config = WorldConfig(production_days=1.0, drift_round=1)
    plain = make_world(7, config=config)
    earlier = make_world(7, config=dataclasses.replace(config, earlier_release=5_000))
    start = plain.train_count.copy()
    run_campaign(plain, proportional, 2)
    run_campaign(earlier, proportional, 2)
    seen, seen_earlier = plain.observe(), earlier.observe()

    # It was trained on the starting data less the last collection: 5,000 whole episodes,
    # taken from the cells the data covers, by target share where a cell held enough.
    counts = earlier.earlier_train_count
    assert counts is not None and plain.earlier_train_count is None
    taken = start - counts
    assert taken.sum() == 5_000
    assert np.all(taken == np.round(taken)) and np.all(taken >= 0) and np.all(counts >= 0)
    assert np.all(taken[start == 0] == 0)
    free = (counts > 0) & (start > 0)
    scale = taken[free].sum() / earlier.target_share[free].sum()
    assert np.abs(taken[free] - scale * earlier.target_share[free]).max() < 1
    # Its outcomes come first, then the campaign's, the same draws as without it.
    assert earlier.earlier_rows == 1 and plain.earlier_rows == 0
    assert np.array_equal(seen_earlier.eval_train_count[0], counts)
    for field in ("eval_train_count", "eval_trials", "eval_successes"):
        assert np.array_equal(getattr(seen_earlier, field)[1:], getattr(seen, field)), field
    assert seen_earlier.round == seen.round == 2
    assert earlier.interventions_per_day() == plain.interventions_per_day()
    # A collection larger than the starting data took all of it.
    everything = make_world(7, config=WorldConfig(earlier_release=10**9))
    assert everything.earlier_train_count is not None
    assert not everything.earlier_train_count.any()
    # Before the campaign, before any drift: a drift from round 0 leaves it as it was.
    drifting = make_world(
        7,
        config=dataclasses.replace(
            config, earlier_release=5_000, drift_round=0, drift_amplitude=50.0
        ),
    )
    assert np.array_equal(drifting.observe().eval_successes[0], seen_earlier.eval_successes[0])
    assert not np.array_equal(drifting.observe().eval_successes[1], seen.eval_successes[0])
    # It failed more than the campaign's first policy, before any drift.
    failures = seen_earlier.eval_trials - seen_earlier.eval_successes
    assert failures[0].sum() > failures[1].sum()


def test_the_last_collection_is_taken_where_it_can_be_and_never_from_an_empty_cell():
    # The one cell with a share holds 2 of the 5 episodes; the rest come from the cell that
    # holds data but has no share, by what it holds; the empty cell gives nothing.
    world = World(
        labels=("a", "b", "c"),
        target_share=np.array([1.0, 0.0, 0.0]),
        train_count=np.array([2.0, 10.0, 0.0]),
        truth=HiddenCurves(f_inf=np.zeros(3), a=np.full(3, 0.1), b=np.full(3, 0.8)),
        config=WorldConfig(earlier_release=5),
        budget=10.0,
    )

    assert world.earlier_train_count is not None
    assert world.earlier_train_count.tolist() == [0.0, 7.0, 0.0]


def test_a_first_round_learns_the_transfer_from_the_release_before():
    world = make_world(1003, config=dataclasses.replace(WORLDS["transfer"], earlier_release=5_000))
    alone = make_world(1003, config=WORLDS["transfer"])

    model, without = learn_transfer(world.observe()), learn_transfer(alone.observe())

    assert without is not None and not without.transfers  # one evaluation: none assumed
    assert model is not None and model.transfers
    steered = get_strategy("steered")
    assert not np.array_equal(steered(world.observe()), steered(alone.observe()))


# --- the oracle --------------------------------------------------------------------------


@st.composite
def _problems(draw):
    size = draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    transfer = rng.uniform(0.0, 0.5, (size, size)) * draw(st.sampled_from([0.0, 1.0]))
    np.fill_diagonal(transfer, 0.0)
    truth = HiddenCurves(
        f_inf=rng.uniform(0.0, 1e-3, size),
        a=rng.uniform(0.01, 2.0, size),  # above 1: a cell whose rate is capped at first
        b=rng.uniform(0.5, 1.0, size),
        transfer=transfer if transfer.any() else None,
    )
    return {
        "truth": truth,
        "target_share": rng.dirichlet(np.ones(size)),
        "train_count": np.floor(rng.uniform(0, 500, size) * (rng.random(size) < 0.6)),
        "cost_per_episode": np.exp(rng.uniform(-1.0, 1.0, size)),
        "budget": draw(st.floats(0.0, 400.0)),
    }


@settings(max_examples=60)
@given(problem=_problems())
def test_the_oracle_spends_whole_episodes_within_budget_until_no_cell_fits(problem):
    k = oracle_allocation(**problem)

    cost = problem["cost_per_episode"]
    left = problem["budget"] - float(np.dot(cost, k))
    assert k.dtype == np.int64
    assert np.all(k >= 0)
    assert left >= -1e-9
    if np.all(problem["truth"].f_inf + problem["truth"].a <= 1.0):
        # No rate starts capped at 1, so every episode helps: all that fits is spent.
        assert left < cost.min() + 1e-9


def _mass(truth, share, n):
    return float(np.dot(share, truth.rate(n)))


@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), budget=st.integers(0, 80))
def test_the_oracle_finds_the_best_round_for_cells_that_share_nothing_at_equal_cost(seed, budget):
    # Budgets above 20 episodes go in chunks first (then scale down): still the optimum.
    rng = np.random.default_rng(seed)
    truth = HiddenCurves(
        f_inf=rng.uniform(0, 1e-3, 3), a=rng.uniform(0.01, 0.9, 3), b=rng.uniform(0.5, 1.0, 3)
    )
    share = rng.dirichlet(np.ones(3))
    n = np.floor(rng.uniform(0, 30, 3))

    k = oracle_allocation(
        truth, target_share=share, train_count=n, cost_per_episode=np.ones(3), budget=budget
    )

    splits = np.array(
        [(i, j, budget - i - j) for i in range(budget + 1) for j in range(budget + 1 - i)]
    )
    best = float((truth.rate(n + splits) @ share).min())
    assert k.sum() == budget
    assert _mass(truth, share, n + k) == pytest.approx(best, rel=1e-12, abs=1e-15)


def test_the_oracle_counts_what_an_episode_transfers_to_other_cells():
    # By hand: an episode in cell 1 lowers cell 1 from 0.1 to 0.05 and cell 0 from 0.1 to
    # 0.1 / 1.9 (0.9 of it counts there); one in cell 0 only lowers cell 0 to 0.05.
    transfer = np.array([[0.0, 0.9], [0.0, 0.0]])
    truth = HiddenCurves(f_inf=np.zeros(2), a=np.full(2, 0.1), b=np.ones(2), transfer=transfer)
    alone = HiddenCurves(f_inf=np.zeros(2), a=np.full(2, 0.1), b=np.ones(2))
    share = np.array([0.6, 0.4])

    with_transfer = oracle_allocation(
        truth, target_share=share, train_count=np.zeros(2), cost_per_episode=np.ones(2), budget=1
    )
    without = oracle_allocation(
        alone, target_share=share, train_count=np.zeros(2), cost_per_episode=np.ones(2), budget=1
    )

    assert with_transfer.tolist() == [0, 1]  # 0.4 * 0.05 + 0.6 * 0.047 > 0.6 * 0.05
    assert without.tolist() == [1, 0]


@pytest.mark.parametrize(("family", "seed"), [("independent", 7), ("all", 8), ("cost", 9)])
def test_the_oracle_lowers_true_failures_in_a_round_at_least_as_much_as_any_strategy(family, seed):
    world = make_world(seed, config=WORLDS[family])
    seen = world.observe()
    start = world.failure_mass()

    oracle_k = make_oracle(world)(seen)
    fall = {
        name: start - world.failure_mass(extra=get_strategy(name, seed=seed)(seen))
        for name in STRATEGY_NAMES
    }

    assert np.all(oracle_k >= 0) and oracle_k.dtype == np.int64
    assert float(np.dot(world.cost_per_episode, oracle_k)) <= world.budget + 1e-6
    assert all(start - world.failure_mass(extra=oracle_k) >= f for f in fall.values()), fall


@pytest.mark.parametrize("seed", [21, 22])
def test_the_oracle_leaves_fewer_excess_failures_than_any_strategy_in_independent_cells(seed):
    excess = {
        name: excess_failures(simulate(name, seed=seed, rounds=3, config=WORLDS["independent"]))
        for name in (*STRATEGY_NAMES, ORACLE)
    }

    assert all(excess[ORACLE] <= value for value in excess.values()), excess
    assert excess[ORACLE] > 0


def test_the_oracle_is_played_by_name_but_is_no_strategy_a_programme_could_run():
    result = simulate(ORACLE, seed=3, rounds=2, config=WORLDS["cost"])

    assert ORACLE not in STRATEGY_NAMES
    with pytest.raises(ValueError, match="unknown strategy"):
        get_strategy(ORACLE)
    assert result.strategy == ORACLE and result.seed == 3 and result.rounds == 2
    assert result.interventions_per_day[2] < result.interventions_per_day[0]


# --- the informed reference ---------------------------------------------------------------


@pytest.mark.parametrize(("family", "seed"), [("all", 31), ("drift", 32)])
def test_the_informed_reference_spends_whole_episodes_within_budget(family, seed):
    result = simulate(INFORMED, seed=seed, rounds=5, config=WORLDS[family])
    world = make_world(seed, config=WORLDS[family])

    assert INFORMED not in STRATEGY_NAMES
    for k in result.allocations:
        spend = float(np.dot(world.cost_per_episode, k))
        assert min(k) >= 0 and spend <= world.budget + 1e-6
        assert spend > world.budget - world.cost_per_episode.max()  # it spends what fits
    assert result.interventions_per_day[-1] < result.interventions_per_day[0]


def _share_weighted_log_error(world, curves) -> float:
    truth = _truth_of(world)
    true_excess = truth.rate(world.train_count) - truth.f_inf
    read = curves.rate(world.train_count) - truth.f_inf
    error = np.log(np.maximum(read, 1e-12) / true_excess)
    return float(np.sqrt(np.average(error**2, weights=world.target_share * true_excess)))


def test_the_informed_reference_reads_each_cell_s_rate_from_the_evaluations_not_its_prior():
    # Its posterior of each cell's amplitude and exponent, given every evaluation, reads the
    # cells' current excess rates far better than its prior alone; once rates have fallen
    # to where few evaluation trials fail, and the exponents matter, less so (what any
    # learner faces in this world).
    world = make_world(42, config=WORLDS["independent"])
    blind = dataclasses.replace(world.observe(), **_no_evaluations(world))
    first = _share_weighted_log_error(world, informed_curves(world, world.observe()))
    first_blind = _share_weighted_log_error(world, informed_curves(world, blind))
    for _ in range(3):
        world.train(make_oracle(world)(world.observe()))
        world.evaluate()
    blind = dataclasses.replace(world.observe(), **_no_evaluations(world))
    later = _share_weighted_log_error(world, informed_curves(world, world.observe()))
    later_blind = _share_weighted_log_error(world, informed_curves(world, blind))

    assert first < 0.5 * first_blind
    assert later < 0.8 * later_blind


def test_the_informed_reference_reads_the_transfer_it_is_given_learnt_or_none():
    # Everything but the transfer is the truth's: the transfer is the model it is given, or
    # none, never the world's; each round it spends on the model the evaluations teach.
    # In the cost family neighbours share 5% of their episodes.
    world, observation, learnt = played_by_steered(5, "cost", 3)

    knowing = informed_curves(world, observation)
    with_learnt = informed_curves(world, observation, transfer=learnt)
    with_none = informed_curves(world, observation, transfer=None)

    assert np.array_equal(knowing.transfer, _truth_of(world).transfer)
    assert np.array_equal(with_learnt.transfer, learnt.matrix())
    assert with_none.transfer is None
    assert np.array_equal(with_learnt.f_inf, knowing.f_inf)
    # The posterior reads each cell's rate at the effective training the model gives.
    now = observation.train_count
    assert not np.allclose(with_none.rate(now), knowing.rate(now), rtol=1e-3)
    assert not np.allclose(with_learnt.rate(now), knowing.rate(now), rtol=1e-3)

    for name, curves in (
        (INFORMED_LEARNING_TRANSFER, with_learnt),
        (INFORMED_WITHOUT_TRANSFER, with_none),
    ):
        spends = REFERENCES[name](world)(observation)
        expected = oracle_allocation(
            curves,
            target_share=observation.target_share,
            train_count=observation.train_count,
            cost_per_episode=observation.cost_per_episode,
            budget=observation.budget,
        )
        assert spends.tolist() == expected.tolist(), name
        assert name not in STRATEGY_NAMES
    # Told nothing of the transfer, the reference spends differently from the one told it.
    knowing_spends = REFERENCES[INFORMED](world)(observation)
    without_spends = REFERENCES[INFORMED_WITHOUT_TRANSFER](world)(observation)
    assert knowing_spends.tolist() != without_spends.tolist()


def _no_evaluations(world) -> dict[str, np.ndarray]:
    size = len(world.labels)
    return {
        "eval_train_count": np.zeros((0, size)),
        "eval_trials": np.zeros((0, size)),
        "eval_successes": np.zeros((0, size)),
    }


@pytest.mark.parametrize("seed", [23, 24])
def test_the_oracle_leaves_no_more_excess_failures_than_the_informed_reference(seed):
    # In independent cells at equal cost the oracle's greedy is the optimum of every round,
    # so nothing that has to learn the curves can beat it; and the informed reference does
    # have to learn them (strictly more excess: it reads no cell's own curve).
    excess = {
        name: excess_failures(simulate(name, seed=seed, rounds=3, config=WORLDS["independent"]))
        for name in (ORACLE, INFORMED, "proportional")
    }

    assert excess[ORACLE] < excess[INFORMED] < excess["proportional"], excess


@pytest.mark.parametrize("name", sorted(FIRST_ROUND_BOUNDS))
def test_a_first_round_bound_plays_steered_first_then_its_reference(name):
    # The bound is steered's first round exactly, then the reference on the world that round
    # left: what any strategy that starts as today's recommendation can at best do after.
    seed, family = 7, "cost"
    bound = simulate(name, seed=seed, rounds=3, config=WORLDS[family])
    steered = simulate("steered", seed=seed, rounds=1, config=WORLDS[family])

    world = make_world(seed, config=WORLDS[family])
    reference = REFERENCES[FIRST_ROUND_BOUNDS[name]](world)
    world.train(np.asarray(steered.allocations[0]))
    world.evaluate()
    second = reference(world.observe())

    assert bound.allocations[0] == steered.allocations[0]
    assert bound.allocations[1] == [int(x) for x in second]
    assert bound.allocations[1] != bound.allocations[0]
    assert name not in STRATEGY_NAMES


# --- excess failures ---------------------------------------------------------------------


def _two_cell_world(budget: float, trained: float = 0.0) -> World:
    truth = HiddenCurves(
        f_inf=np.array([1e-4, 2e-4]), a=np.array([0.2, 0.1]), b=np.array([1.0, 0.5])
    )
    return World(
        labels=("a", "b"),
        target_share=np.array([0.25, 0.75]),
        train_count=np.array([3.0, 0.0]) + trained,
        truth=truth,
        config=WorldConfig(cycles_per_day=1000.0, eval_trials=50),
        budget=budget,
    )


def test_excess_failures_add_up_a_day_above_the_floor_per_round():
    world = _two_cell_world(budget=4.0)

    result = run_campaign(world, proportional, 2)

    # proportional to shares 1:3 with a budget of 4: one episode in a, three in b a round.
    assert result.allocations == [[1, 3], [1, 3]]
    floor = 0.25 * 1e-4 + 0.75 * 2e-4
    after_1 = 0.25 * (1e-4 + 0.2 / 5) + 0.75 * (2e-4 + 0.1 / 4**0.5)
    after_2 = 0.25 * (1e-4 + 0.2 / 6) + 0.75 * (2e-4 + 0.1 / 7**0.5)
    assert result.floor_mass == pytest.approx(floor)
    assert excess_failures(result) == pytest.approx(1000.0 * (after_1 - floor + after_2 - floor))


def test_excess_failures_refuse_a_campaign_stopped_at_the_target():
    world = _two_cell_world(budget=4.0, trained=1e8)  # at the target before any round

    result = run_campaign(world, proportional, 3, stop_at_target=True)

    assert result.stopped_early and result.rounds == 0
    with pytest.raises(ValueError, match="stop_at_target"):
        excess_failures(result)
