"""Steering: measure how each round moved the policy, learn from it, recommend the next round.

Django-free numerical core over numpy arrays (services feed it data and store results):

* :mod:`analytics.intervals` (their one home, re-exported here) — Wilson and Beta
  intervals, Newcombe's interval for a change, trials to demonstrate a reliability target.
* :mod:`.impact` — round impact per cell or (cell, site) row, difference in differences of
  cells that got data against cells that did not, plain-language summaries per group.
* :mod:`.learning` — refit the pooled learning curve and per-cell amplitude multipliers
  (log-normal random effect, empirical Bayes) after each evaluation: a :class:`CurveSet`.
* :mod:`.recommend` — whole-episode allocation within budget maximising interventions
  avoided per day, with an upper-confidence-bound exploration bonus; input validation.
* :mod:`.economics` — interventions per day now and after the next round, rounds and
  episodes to the target, evaluation trials to demonstrate it.
* :mod:`.simulate` / :mod:`.strategies` / :mod:`.observation` — the campaign simulator; its
  strategies see an :class:`~.observation.Observation` only. (Not re-exported here, so that
  importing the strategies never imports the simulator that holds the hidden truth.)
"""

from analytics.intervals import (
    beta_interval,
    difference_interval,
    trials_to_demonstrate,
    wilson_interval,
    zero_failure_trials,
)
from analytics.learning import CurveSet, EvaluationRows, fit_curve_set
from analytics.steering.economics import (
    CampaignProjection,
    Demonstration,
    DeploymentProfile,
    Projection,
    demonstration,
    project_campaign,
)
from analytics.steering.impact import (
    CellImpact,
    DiffInDiff,
    GroupImpact,
    RoundImpact,
    describe_did,
    difference_in_differences,
    group_impact,
    predicted_failure_rate,
    round_impact,
    summarise_impact,
)
from analytics.steering.recommend import (
    CellInput,
    CellRecommendation,
    Exploration,
    Recommendation,
    RecommendationInputError,
    RecommendationRequest,
    parse_cells,
    parse_request,
    recommend,
)
from analytics.steering.waterfill import waterfill
from campaigns.planning.gain import power_gain

__all__ = [
    "CampaignProjection",
    "CellImpact",
    "CellInput",
    "CellRecommendation",
    "CurveSet",
    "Demonstration",
    "DeploymentProfile",
    "DiffInDiff",
    "EvaluationRows",
    "Exploration",
    "GroupImpact",
    "Projection",
    "Recommendation",
    "RecommendationInputError",
    "RecommendationRequest",
    "RoundImpact",
    "beta_interval",
    "demonstration",
    "describe_did",
    "difference_in_differences",
    "difference_interval",
    "fit_curve_set",
    "group_impact",
    "parse_cells",
    "parse_request",
    "power_gain",
    "predicted_failure_rate",
    "project_campaign",
    "recommend",
    "round_impact",
    "summarise_impact",
    "trials_to_demonstrate",
    "waterfill",
    "wilson_interval",
    "zero_failure_trials",
]
