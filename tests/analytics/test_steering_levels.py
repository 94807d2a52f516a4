"""The transfer chosen by the evaluations' levels (analytics.steering.levels) and the extent
of transfer it can choose, neighbours only (analytics.steering.transfer)."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from analytics.learning import fit_history
from analytics.steering.levels import candidate_count, fit_transfer
from analytics.steering.simulate import WORLDS, WorldConfig, make_world
from analytics.steering.strategies import proportional
from analytics.steering.transfer import (
    EXTENT_ANY,
    EXTENT_NEIGHBOURS,
    CellStructure,
    TransferModel,
)


def _neighbours_by_definition(structure, strength):
    """``T`` of the neighbours' extent straight from its definition."""
    differ = structure.differ()
    if differ.shape[2] == 0:  # every cell left every dimension unstated: no strength to pass
        return np.zeros(differ.shape[:2])
    apart = differ.sum(axis=2)
    where = differ.argmax(axis=2)
    matrix = np.where(apart == 0, 1.0, np.where(apart == 1, strength[where], 0.0))
    np.fill_diagonal(matrix, 0.0)
    return matrix


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    dims=st.integers(1, 4),
    unstated=st.floats(0.0, 0.4),
    repeated=st.integers(0, 5),
)
# Two cells that both leave the one dimension unstated: a structure with no dimension.
@example(seed=27, dims=1, unstated=0.4, repeated=0)
def test_neighbours_extent_reaches_only_cells_one_condition_apart(seed, dims, unstated, repeated):
    rng = np.random.default_rng(seed)
    # Cells that leave a dimension unstated differ there from every cell, and cells may
    # repeat conditions (they transfer fully, as under the product).
    cells = [
        {f"d{d}": f"v{rng.integers(0, 3)}" for d in range(dims) if rng.random() >= unstated}
        for _ in range(int(rng.integers(2, 40)))
    ]
    cells += cells[:repeated]
    structure = CellStructure.of(cells)
    size = len(structure.dimensions)
    strength = rng.choice([0.0, 0.05, 0.3], size=size)
    model = TransferModel(
        structure=structure,
        strength=strength,
        low=strength,
        high=strength,
        evaluations=3,
        extent=EXTENT_NEIGHBOURS,
    )
    expected = _neighbours_by_definition(structure, strength)
    if not np.any(strength > 0):
        expected[:] = 0.0

    assert np.allclose(model.matrix(), expected)
    x = rng.random((3, structure.n_cells))
    assert np.allclose(model.spread(x), x @ expected.T)
    assert np.allclose(model.effective(x[0]), x[0] + expected @ x[0])
    rows, cols = [0, structure.n_cells - 1], list(range(min(3, structure.n_cells)))
    if model.transfers:
        assert np.allclose(model.columns(cols, rows=rows), expected[np.ix_(rows, cols)])
    # Under the product, cells two conditions apart help each other; here they do not.
    product = TransferModel(
        structure=structure, strength=strength, low=strength, high=strength, evaluations=3
    )
    assert product.extent == EXTENT_ANY
    apart = structure.differ().sum(axis=2)
    np.fill_diagonal(apart, 0)  # a cell that leaves dimensions unstated differs from itself
    if np.any(apart >= 2) and np.all(strength > 0):
        assert np.all(model.matrix()[apart >= 2] == 0)
        assert np.all(product.matrix()[apart == 2] > 0)


def test_the_extent_is_stored_said_and_checked():
    structure = CellStructure.of([{"light": "dim", "floor": "wet"}, {"light": "dim"}])
    model = TransferModel(
        structure=structure,
        strength=np.array([0.05, 0.05]),
        low=np.array([0.02, 0.02]),
        high=np.array([0.1, 0.1]),
        evaluations=4,
        extent=EXTENT_NEIGHBOURS,
    )
    back = TransferModel.from_stored(structure, model.stored())
    assert back.extent == EXTENT_NEIGHBOURS
    assert np.array_equal(back.matrix(), model.matrix())
    assert "nothing in cells that differ in two or more" in model.describe()
    # A model stored before the extent was one reads back as the product.
    old = {k: v for k, v in model.stored().items() if k != "extent"}
    assert TransferModel.from_stored(structure, old).extent == EXTENT_ANY
    with pytest.raises(ValueError, match="unknown extent 'far'"):
        TransferModel(
            structure=structure,
            strength=np.zeros(2),
            low=np.zeros(2),
            high=np.zeros(2),
            evaluations=0,
            extent="far",
        )


def _played(seed, config, rounds):
    """A world's observable record after ``rounds`` rounds of the proportional strategy."""
    world = make_world(seed, config=config)
    for _ in range(rounds):
        world.train(proportional(world.observe()))
        world.evaluate()
    return world.observe()


def _fit(observation, **kwargs):
    structure = CellStructure.of(observation.conditions)
    return fit_transfer(
        structure,
        observation.eval_train_count,
        observation.eval_trials,
        observation.eval_successes,
        observation.train_count,
        **kwargs,
    )


@pytest.mark.parametrize("seed", [1, 2])
def test_the_levels_show_neighbours_sharing_five_percent(seed):
    # The simulator's world: an episode counts 5% in cells one condition away, nothing
    # further. The changes within each cell (about 18 trials a round) cannot show that;
    # the levels do, and they refute the product, under which the lab's episodes would
    # reach the far cells.
    observation = _played(seed, WorldConfig(), rounds=2)
    told = []
    model, curves = _fit(observation, on_step=lambda done, total: told.append((done, total)))

    assert model.extent == EXTENT_NEIGHBOURS
    assert np.all(model.low <= 0.05) and np.all(model.high >= 0.05), model.describe()
    # Within a factor of three of the truth. The candidates are scored under one exponent
    # spread, which reads 0.068 and 0.122 here (the free spread read 0.067 and 0.069;
    # analytics.steering.levels): on the second seed the first two evaluations' levels say
    # little more than the interval does.
    assert np.all((model.strength > 0.02) & (model.strength < 0.15)), model.describe()
    assert model.evaluations == 3
    # The curves are those read under the chosen transfer, refitted at its effective counts.
    again = fit_history(
        model.effective(observation.eval_train_count),
        observation.eval_trials,
        observation.eval_successes,
        model.effective(observation.train_count),
        conditions=model.structure.codes,
    )
    assert np.allclose(curves.amplitude, again.amplitude)
    total = told[-1][1]
    assert total <= candidate_count(3)
    assert told == [(k, total) for k in range(1, total + 1)]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_levels_show_no_transfer_where_cells_are_independent(seed):
    observation = _played(seed, WORLDS["independent"], rounds=2)
    model, _ = _fit(observation)

    assert np.all(model.low == 0)
    assert np.all(model.strength < 0.01), model.describe()


def test_the_reference_learning_the_transfer_learns_what_steered_acts_on():
    # informed-learning-transfer measures what learning the transfer costs a strategy that
    # knows the rest: it must act on the very transfer the steered strategy's recommender
    # chooses from the same record, not on another reading of it.
    from analytics.steering.recommend import recommend
    from analytics.steering.strategies import history_of, learn_transfer, steered_cells

    observation = _played(4, WORLDS["cost"], rounds=2)
    learnt = learn_transfer(observation)
    acted_on = recommend(
        steered_cells(observation),
        observation.budget,
        observation.cycles_per_day,
        history=history_of(observation),
    ).transfer

    assert learnt is not None and acted_on is not None and learnt.transfers
    assert learnt.extent == acted_on.extent
    assert learnt.evaluations == acted_on.evaluations == 3
    for field in ("strength", "low", "high"):
        assert np.array_equal(getattr(learnt, field), getattr(acted_on, field)), field
    assert learnt.describe() == acted_on.describe()


def test_one_evaluation_is_no_history_and_the_curves_are_todays():
    observation = _played(3, WorldConfig(), rounds=0)
    model, curves = _fit(observation)

    assert not model.transfers
    assert model.evaluations == 1
    today = fit_history(
        observation.eval_train_count,
        observation.eval_trials,
        observation.eval_successes,
        observation.train_count,
        conditions=model.structure.codes,
    )
    assert np.array_equal(curves.amplitude, today.amplitude)
    assert np.array_equal(curves.posterior, today.posterior)


def test_malformed_evaluations_are_refused():
    observation = _played(3, WorldConfig(), rounds=1)
    structure = CellStructure.of(observation.conditions)
    with pytest.raises(ValueError, match="agree in shape"):
        fit_transfer(
            structure,
            observation.eval_train_count,
            observation.eval_trials[:1],
            observation.eval_successes,
            observation.train_count,
        )
    with pytest.raises(ValueError, match="cover the 108 cells"):
        fit_transfer(
            structure,
            observation.eval_train_count,
            observation.eval_trials,
            observation.eval_successes,
            observation.train_count[:-1],
        )
