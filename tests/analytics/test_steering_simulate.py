import ast
import dataclasses
import importlib
import inspect
import pkgutil
import subprocess
import sys
import typing
from pathlib import Path

import numpy as np
import pytest

from analytics.steering.observation import Observation
from analytics.steering.simulate import (
    HiddenCurves,
    World,
    WorldConfig,
    _truth_of,
    make_world,
    median_or_none,
    run_campaign,
    simulate,
)
from analytics.steering.strategies import (
    STRATEGY_NAMES,
    get_strategy,
    proportional,
    split_budget,
    uniform,
)

ROOT = Path(__file__).resolve().parents[2]


def _twin_with_shuffled_truth(world: World, seed: int) -> World:
    """Return a world with the same observable record but the hidden curves permuted."""
    truth = _truth_of(world)
    order = np.random.default_rng(seed).permutation(truth.a.size)
    shuffled = HiddenCurves(f_inf=truth.f_inf[order], a=truth.a[order], b=truth.b[order])
    twin = World(
        labels=world.labels,
        target_share=world.target_share,
        train_count=world.train_count,
        truth=shuffled,
        config=world.config,
        budget=world.budget,
    )
    # The observable record is what was observed, whatever produced it.
    twin.round = world.round
    twin._eval_n = [x.copy() for x in world._eval_n]
    twin._eval_trials = [x.copy() for x in world._eval_trials]
    twin._eval_successes = [x.copy() for x in world._eval_successes]
    return twin


# --- strategies cannot read the truth ----------------------------------------------------


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_every_strategy_is_a_function_of_an_observation_alone(name):
    strategy = get_strategy(name, seed=1)

    parameters = list(inspect.signature(strategy).parameters.values())
    hints = typing.get_type_hints(strategy)

    assert len(parameters) == 1
    assert hints[parameters[0].name] is Observation


def test_an_observation_holds_only_the_observable_record():
    fields = {f.name for f in dataclasses.fields(Observation)}

    assert fields == {
        "round",
        "labels",
        "target_share",
        "train_count",
        "cost_per_episode",
        "budget",
        "cycles_per_day",
        "reliability_target",
        "eval_train_count",
        "eval_trials",
        "eval_successes",
        "conditions",  # each cell's condition values: what a manager knows of a cell
    }


def test_importing_the_strategies_never_imports_the_simulator_that_holds_the_truth():
    code = (
        "import sys, analytics.steering.strategies, analytics.steering;"
        "print('analytics.steering.simulate' in sys.modules)"
    )

    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )

    assert out.stdout.strip() == "False"


def _identifiers(module) -> set[str]:
    """Return every name, attribute and imported module the module's code uses."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_strategy_code_never_names_the_hidden_truth():
    # By module name: the package ``analytics.steering`` exports a function ``recommend``
    # that hides the module of that name from ``import ... as``.
    learning, observation, recommend, strategies, transfer, waterfill = (
        importlib.import_module(name)
        for name in (
            "analytics.learning",
            "analytics.steering.observation",
            "analytics.steering.recommend",
            "analytics.steering.strategies",
            "analytics.steering.transfer",
            "analytics.steering.waterfill",
        )
    )

    forbidden = {
        "HiddenCurves",
        "World",
        "_World__truth",
        "_truth_of",
        "make_world",
        "analytics.steering.simulate",
        "simulate",
    }
    modules = [strategies, observation, recommend, transfer, waterfill, learning]
    modules += [  # every part of a package
        importlib.import_module(f"{package.__name__}.{info.name}")
        for package in (recommend, learning)
        for info in pkgutil.iter_modules(package.__path__)
    ]
    for module in modules:
        names = _identifiers(module)
        assert not (names & forbidden), module.__name__
        assert not any(name.startswith("analytics.steering.simulate.") for name in names)


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_shuffling_the_hidden_curves_with_the_observations_fixed_changes_nothing(name):
    world = make_world(5)
    run_campaign(world, uniform, 2)
    twin = _twin_with_shuffled_truth(world, seed=9)
    assert not np.array_equal(_truth_of(twin).a, _truth_of(world).a)

    seen, seen_twin = world.observe(), twin.observe()
    for field in dataclasses.fields(Observation):
        assert np.array_equal(
            np.asarray(getattr(seen, field.name)), np.asarray(getattr(seen_twin, field.name))
        ), field.name
    assert np.array_equal(get_strategy(name, seed=3)(seen), get_strategy(name, seed=3)(seen_twin))
    # The truth does differ where it is measured.
    assert world.interventions_per_day() != pytest.approx(twin.interventions_per_day())


def test_observations_are_read_only_copies():
    world = make_world(2)
    seen = world.observe()

    with pytest.raises(ValueError, match="read-only"):
        seen.train_count[0] = 1e9
    with pytest.raises(dataclasses.FrozenInstanceError):
        seen.budget = 1e9  # type: ignore[misc]
    assert world.train_count[0] != 1e9


# --- the world and the campaign loop -----------------------------------------------------


def test_the_world_is_lab_skewed_with_a_long_tail_of_target_mass():
    world = make_world(1)

    share = np.sort(world.target_share)[::-1]
    lab = world.train_count[0]  # the all-lab-values cell

    assert world.target_share.size == 108
    assert share[:10].sum() > 0.4  # a few cells hold much of production
    assert (world.target_share < 0.001).sum() > 20  # and there is a long tail
    assert lab == world.train_count.max()
    assert (world.train_count == 0).sum() > 30  # most far cells have no data
    assert world.floor_reliability() > world.config.reliability_target


@pytest.mark.parametrize(
    ("allocation", "message"),
    [
        (lambda n: np.full(n, 1000), "over the budget"),
        (lambda n: np.r_[-1, np.zeros(n - 1, dtype=int)], ">= 0"),
        (lambda n: np.full(n, 0.5), "whole episodes"),
        (lambda n: np.zeros(n - 1, dtype=int), "shape"),
    ],
)
def test_the_world_rejects_allocations_no_strategy_may_return(allocation, message):
    world = make_world(1)

    with pytest.raises(ValueError, match=message):
        run_campaign(world, lambda obs: allocation(obs.n_cells), 1)


def test_campaigns_are_reproducible_for_a_seed():
    first = simulate("steered", seed=4, rounds=3)
    second = simulate("steered", seed=4, rounds=3)

    assert first == second
    assert first.allocations == second.allocations
    assert len(first.interventions_per_day) == 4


def test_steered_avoids_more_interventions_than_uniform_early_on():
    steered = simulate("steered", seed=6, rounds=3, budget=5000)
    flat = simulate("uniform", seed=6, rounds=3, budget=5000)

    assert steered.interventions_per_day[0] == flat.interventions_per_day[0]
    assert steered.interventions_per_day[-1] < flat.interventions_per_day[-1]
    assert all(sum(a) <= 5000 for a in steered.allocations)


def test_steered_learns_without_conditions_and_spends_on_the_cell_that_fails_most():
    # Cells that name no conditions: the curves are fitted without a prior from conditions.
    # At 500 episodes each the middle cell fails 2.3%, the others 0.9% and 0.3%.
    truth = HiddenCurves(
        f_inf=np.full(3, 1e-4), a=np.array([0.4, 0.95, 0.4]), b=np.array([0.6, 0.6, 0.8])
    )
    world = World(
        labels=("left bin", "right bin", "shelf"),
        target_share=np.array([0.3, 0.4, 0.3]),
        train_count=np.array([500.0, 500.0, 500.0]),
        truth=truth,
        config=WorldConfig(eval_trials=2000, transfer=0.0),
        budget=300.0,
    )

    result = run_campaign(world, get_strategy("steered"), 3)

    assert world.observe().conditions == ()
    assert all(sum(a) == 300 for a in result.allocations)
    first = result.allocations[0]
    assert first[1] == max(first) and first[1] >= 0.6 * 300


def test_episodes_to_target_are_interpolated_inside_the_crossing_round():
    truth = HiddenCurves(
        f_inf=np.array([1e-4, 1e-4]), a=np.array([0.2, 0.1]), b=np.array([1.0, 1.0])
    )
    world = World(
        labels=("a", "b"),
        target_share=np.array([0.5, 0.5]),
        train_count=np.array([0.0, 0.0]),
        truth=truth,
        config=WorldConfig(eval_trials=100, transfer=0.0),
        budget=100.0,
    )

    result = run_campaign(world, proportional, 400, stop_at_target=True)

    r = result.rounds_to_target
    assert (
        r is not None and result.episodes[r - 1] < result.episodes_to_target <= result.episodes[r]
    )
    n = result.episodes_to_target / 2  # proportional: half in each cell
    mass = 0.5 * float(truth.rate(np.array([n, n])).sum())
    assert mass == pytest.approx(0.001, rel=1e-3)


def test_split_budget_spends_whole_episodes_in_proportion():
    k = split_budget([3, 1, 0], [1.0, 1.0, 1.0], 10)

    assert k.tolist() == [8, 2, 0] or k.tolist() == [7, 3, 0]
    assert k.sum() == 10
    assert split_budget([1, 1], [3.0, 3.0], 10).tolist() in ([2, 1], [1, 2])


def test_median_counts_unreached_as_infinite():
    assert median_or_none([1.0, 2.0, 3.0]) == 2.0
    assert median_or_none([1.0, None, 3.0]) == 3.0
    assert median_or_none([1.0, None, None]) is None
