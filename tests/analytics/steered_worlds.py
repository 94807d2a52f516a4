"""A simulated world played by the steered strategy for some rounds, and the transfer its
evaluations teach (shared by the tests of the refit and of the simulator's references)."""

from __future__ import annotations

from analytics.steering.observation import Observation
from analytics.steering.simulate import WORLDS, World, make_world
from analytics.steering.strategies import learn_transfer, make_steered
from analytics.steering.transfer import TransferModel


def played_by_steered(
    seed: int, family: str, rounds: int
) -> tuple[World, Observation, TransferModel]:
    """The world of ``family`` and ``seed`` after ``rounds`` steered rounds, what it shows
    now, and the transfer learnt from it (asserted to transfer: the tests need some)."""
    world = make_world(seed, config=WORLDS[family])
    steered = make_steered(seed=seed)
    for _ in range(rounds):
        world.train(steered(world.observe()))
        world.evaluate()
    seen = world.observe()
    transfer = learn_transfer(seen)
    assert transfer is not None and transfer.transfers
    return world, seen, transfer
