"""The informed reference: a strategy that knows all of the world's truth except each cell's
own amplitude and exponent, and learns those as well as they can be learnt (part of
:mod:`analytics.steering.simulate`).

The oracle knows every cell's curve; no strategy that learns from evaluations can. How much
of a strategy's excess over the oracle is the price of having to learn at all? This
reference answers it: it knows the floors, the transfer between cells, the drift once it has
happened, the evaluations' noise, and the very distributions each cell's amplitude and
exponent were drawn from (the world's difficulty per condition value, its spread, its range
of exponents), and it reads each cell's amplitude and exponent from the evaluations by Bayes'
rule under those true priors. Each round it spends the budget like the oracle
(:func:`~analytics.steering.simulate.oracle.oracle_allocation`) on the curves its posterior
expects: per cell, the power law with the posterior-mean rate and slope at the cell's
effective training now. What it loses against the oracle is what the world's evaluations
cannot tell; a strategy that also has to learn the floors, the transfer and the priors cannot
expect to lose less.

:data:`INFORMED_LEARNING_TRANSFER` is the same reference with one piece of the truth taken
away: it learns the transfer between cells from the evaluations as the steered strategy does
(:func:`~analytics.steering.strategies.learn_transfer`, chosen by what the evaluations'
levels say, :mod:`analytics.steering.levels`), and knows the rest. Its excess over the
informed reference's is what learning the transfer costs a strategy that knows everything
else; steered's excess over it is the price of learning everything else. Until 2026-12-07
it read the transfer from how the evaluations changed alone, as steered then did, and was
about as far from the oracle as steered where only neighbours share.

:data:`INFORMED_WITHOUT_TRANSFER` knows everything the informed reference knows but the
transfer: it reads every cell as if it learnt only from its own episodes. Its excess over
the informed reference's is what knowing the transfer is worth to a strategy that knows the
rest. Measured on 2026-12-06 it loses as much as steered where only neighbours share, and
more where cells share condition values, whose transfer steered learns.
"""

from __future__ import annotations

import dataclasses
from typing import Final, Literal

import numpy as np

from analytics.steering.observation import FloatArray, Observation, Strategy
from analytics.steering.simulate.oracle import spending_on
from analytics.steering.simulate.world import DIMENSIONS, HiddenCurves, World, _hidden_of
from analytics.steering.strategies import learn_transfer
from analytics.steering.transfer import TransferModel

INFORMED = "informed"
INFORMED_LEARNING_TRANSFER = "informed-learning-transfer"
INFORMED_WITHOUT_TRANSFER = "informed-without-transfer"

_SPREAD_POINTS = np.linspace(-4.0, 4.0, 81)
"""The amplitude grid per cell, in prior standard deviations around the cell's prior centre."""

_EXPONENT_POINTS = 9
"""Exponents on the grid: the midpoints of equal slices of the world's range."""

_EPS = 1e-12


def _prior_centres(world: World) -> FloatArray:
    """Each cell's prior mean of its log amplitude: the world's base amplitude times the
    difficulty of its condition values."""
    log_centre = np.full(len(world.conditions), np.log(world.config.base_amplitude))
    for name, values, difficulty in DIMENSIONS:
        for c, conditions in enumerate(world.conditions):
            log_centre[c] += np.log(difficulty[values.index(conditions[name])])
    return log_centre


TRUE_TRANSFER: Final = "true transfer"
"""What :func:`informed_curves` reads the transfer from by default: the world's own."""

LEARNT_TRANSFER: Final = "learnt transfer"
"""What :func:`make_informed` reads the transfer from in :data:`INFORMED_LEARNING_TRANSFER`:
the model the evaluations teach each round."""


def informed_curves(
    world: World,
    observation: Observation,
    *,
    transfer: TransferModel | Literal["true transfer"] | None = TRUE_TRANSFER,
) -> HiddenCurves:
    """The curves the informed reference spends on: each cell's posterior over its amplitude
    and exponent under the world's true priors, given every evaluation so far, summarised
    as the power law with the posterior-mean rate and slope at its effective training now
    (floors and drift as they are). ``transfer`` is the world's (:data:`TRUE_TRANSFER`), or
    a model learnt from the evaluations in its place (``None``: none)."""
    truth = _hidden_of(world)
    if transfer != TRUE_TRANSFER:
        live = transfer if isinstance(transfer, TransferModel) and transfer.transfers else None
        truth = dataclasses.replace(truth, transfer=None if live is None else live.matrix())
    cfg = world.config
    low, high = cfg.b_range
    width = (high - low) / _EXPONENT_POINTS
    b = low + width * (np.arange(_EXPONENT_POINTS) + 0.5)  # exponents
    log_a = _prior_centres(world)[:, None] + cfg.difficulty_sigma * _SPREAD_POINTS[None, :]
    a = np.minimum(np.exp(log_a), 0.95 - truth.f_inf[:, None])  # cells x amplitudes
    log_prior = -0.5 * _SPREAD_POINTS**2

    f = truth.f_inf[:, None, None]
    log_post = np.broadcast_to(log_prior, (a.shape[0], b.size, a.shape[1])).copy()
    for e in range(observation.eval_trials.shape[0]):
        trials = observation.eval_trials[e]
        failures = trials - observation.eval_successes[e]
        x = np.power(truth.effective(observation.eval_train_count[e])[:, None] + 1.0, -b[None, :])
        drift = truth.drift_at(e - world.earlier_rows)  # rows before the campaign: none
        rate = f + (drift[:, None] * a)[:, None, :] * x[:, :, None]
        rate = np.clip(rate, _EPS, 1.0 - _EPS)
        log_post += failures[:, None, None] * np.log(rate)
        log_post += (trials - failures)[:, None, None] * np.log1p(-rate)
    post = np.exp(log_post - log_post.max(axis=(1, 2), keepdims=True))
    post /= post.sum(axis=(1, 2), keepdims=True)

    n_now = truth.effective(observation.train_count)
    level = np.power(n_now[:, None] + 1.0, -b[None, :])  # cells x exponents
    excess = (truth.drift_at(observation.round)[:, None] * a)[:, None, :] * level[:, :, None]
    rate = (post * excess).sum(axis=(1, 2))
    slope = (post * excess * b[None, :, None]).sum(axis=(1, 2))
    exponent = np.where(rate > 0, slope / np.maximum(rate, _EPS), b.mean())
    amplitude = rate * np.power(n_now + 1.0, exponent)
    return HiddenCurves(f_inf=truth.f_inf, a=amplitude, b=exponent, transfer=truth.transfer)


def make_informed(
    world: World,
    *,
    chunks: int = 20,
    transfer: Literal["true transfer", "learnt transfer"] | None = TRUE_TRANSFER,
) -> Strategy:
    """Return the informed reference for ``world`` (see the module docstring): reading the
    world's own transfer (:data:`TRUE_TRANSFER`, :data:`INFORMED`), the one the evaluations
    teach each round (:data:`LEARNT_TRANSFER`, :data:`INFORMED_LEARNING_TRANSFER`), or none
    (``None``, :data:`INFORMED_WITHOUT_TRANSFER`). Only the simulator can build it."""
    if transfer == LEARNT_TRANSFER:
        return spending_on(
            lambda observation: informed_curves(
                world, observation, transfer=learn_transfer(observation)
            ),
            chunks=chunks,
        )
    return spending_on(
        lambda observation: informed_curves(world, observation, transfer=transfer),
        chunks=chunks,
    )
