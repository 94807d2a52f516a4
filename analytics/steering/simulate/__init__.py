"""A synthetic campaign: a world with hidden learning curves, and rounds run by a strategy.

The world (:func:`make_world`) is a deployment over four condition dimensions (lighting,
clutter, camera pose, object wear: 108 cells). It is built to look like the situation
DESIGN.md describes, not to flatter any strategy:

* **Target shares** are products of per-dimension deployment marginals (the sites see
  mostly non-lab conditions) with a log-normal interaction per cell, so a few cells hold
  most production cycles and there is a long tail of rare combinations.
* **Training data** starts lab-skewed: 20,000 episodes concentrated in cells close to the
  lab values (bright LED, tidy, nominal mount, new parts); most far cells have none.
* **Hidden learning curves** ``f_c(n) = f_inf_c + a_c * (n_eff + 1) ** -b_c`` differ per
  cell: the amplitude is a product of per-value difficulties (dim light, dense clutter and
  worn parts are hard) with log-normal noise, so a few cells are much harder than the rest
  (a new policy fails about 30% of production cycles); the exponent varies between 0.6 and
  1.0 and the floor around 1e-4.
* **Transfer**: an episode in a neighbouring cell (one condition different) also counts
  ``transfer`` (default 0.05) of an episode here, so ``n_eff`` is a little above the cell's
  own count, as data from "dim light, tidy" helps a bit under "dim light, dense".

The strategies' model (per-cell counts only, shared ``b`` and ``f_inf``) is thus only an
approximation of the truth, as it would be in reality. With the defaults the reliability
target (99.9%) needs tens to hundreds of thousands of episodes, depending on the seed.

Harder worlds (:class:`WorldConfig` knobs whose defaults leave the world above unchanged,
draw for draw; the named families are :data:`WORLDS`):

* **Shared transfer** (``transfer_model="shared"``): an episode in cell ``d`` counts
  ``prod tau_dim`` over the dimensions where ``d`` differs from ``c`` as training for
  ``c`` (``tau_dim`` drawn per world in ``transfer_range``, log-normal noise per pair of
  cells, capped at 0.9), so cells sharing three of four conditions help each other a lot.
* **Costs** (``cost_spread``): each condition value has a cost multiplier, a cell's cost
  per episode is their product, the median cell costs 1 and the dearest ``cost_spread``
  times the cheapest.
* **Noisy evaluation**: a small ``eval_trials``.
* **Drift** (``drift_round``): from that round on a new failure mode multiplies the
  amplitude of a few cells by ``1 + drift_amplitude``; it falls with data on the same curve.
* **The release before** (``earlier_release``): the record starts with the policy the
  campaign's first one replaced, trained without the last collection's episodes, so even
  the first round has history to learn the transfer from.

:func:`make_oracle` is a strategy that reads the hidden truth (only this package can build
it), and :func:`excess_failures` measures a campaign against the floor, so a strategy's
excess over the oracle's is what not knowing the truth costs. :func:`make_informed` (the
"informed" reference) knows all of the truth but each cell's own amplitude and exponent,
which it learns by Bayes' rule under the world's true priors: its excess over the oracle's is
what learning from these evaluations must cost at least.

A round: the strategy gets an :class:`~analytics.steering.observation.Observation` (built
here from observable state only), returns whole episodes per cell within budget, training
counts grow, the new policy is evaluated with sampling noise (``eval_trials`` trials spread
by target share, binomial failures from the hidden curves), and the next round starts.
Reported figures — interventions per day, reliability, episodes to reach the target — are
computed from the hidden curves, which only this package holds (in :class:`HiddenCurves`,
kept in a private attribute of :class:`World` and never passed to a strategy).
"""

from analytics.steering.simulate.campaign import (
    FIRST_ROUND_BOUNDS,
    REFERENCES,
    CampaignResult,
    excess_failures,
    median_or_none,
    run_campaign,
    simulate,
)
from analytics.steering.simulate.informed import (
    INFORMED,
    INFORMED_LEARNING_TRANSFER,
    INFORMED_WITHOUT_TRANSFER,
    informed_curves,
    make_informed,
)
from analytics.steering.simulate.oracle import ORACLE, make_oracle, oracle_allocation
from analytics.steering.simulate.world import (
    DIMENSIONS,
    TRANSFER_MODELS,
    WORLD_FAMILIES,
    WORLDS,
    HiddenCurves,
    World,
    WorldConfig,
    _truth_of,  # noqa: F401  (for the simulator's tests and benches)
    describe_record,
    make_world,
    world_config,
)

__all__ = [
    "DIMENSIONS",
    "FIRST_ROUND_BOUNDS",
    "INFORMED",
    "INFORMED_LEARNING_TRANSFER",
    "INFORMED_WITHOUT_TRANSFER",
    "ORACLE",
    "REFERENCES",
    "TRANSFER_MODELS",
    "WORLDS",
    "WORLD_FAMILIES",
    "CampaignResult",
    "HiddenCurves",
    "World",
    "WorldConfig",
    "describe_record",
    "excess_failures",
    "informed_curves",
    "make_informed",
    "make_oracle",
    "make_world",
    "median_or_none",
    "oracle_allocation",
    "run_campaign",
    "simulate",
    "world_config",
]
