"""Recommend the next round: whole episodes per cell that avoid the most interventions.

Value. ``k`` more episodes in cell ``c`` avoid ``cycles * p_c * a_c * ((n_c + 1) ** -b -
(n_c + k + 1) ** -b)`` interventions a day, with the shared ``f_inf``, ``b`` and the cell
amplitude ``a_c`` from :func:`analytics.learning.fit_history` (pooled curve with a
partially pooled per-cell multiplier; with history, also an exponent per cell, read at the
cell's training now). The plan maximises the total within the budget, with
each cell's episodes priced at its ``cost_per_episode`` (:func:`waterfill`).

Exploration. Where evidence is thin the amplitude is uncertain, and a plan built on the
posterior mean under-invests in cells that look fine only because nobody has looked. The
default is an **upper-confidence bound on the curve**: cells are valued at the ``level``
(default 0.8) posterior quantile of their amplitude. A cell with thousands of trials has a
narrow posterior, so its quantile is its mean; a cell with a handful of trials is valued
optimistically until evaluation says otherwise — the bonus shrinks exactly as evidence
arrives, is deterministic, and can be explained in one sentence. ``Exploration("thompson")``
instead values each cell at one posterior draw (seeded; Thompson sampling), and
``Exploration("mean")`` turns exploration off. Whatever ranks the cells, the *reported*
expected interventions avoided are always posterior means, so the figures stay honest.
"""

from analytics.steering.recommend.core import ranking_amplitude, recommend
from analytics.steering.recommend.inputs import (
    SHARE_TOLERANCE,
    CellInput,
    Exploration,
    HistoryRound,
    RecommendationInputError,
    RecommendationRequest,
    evaluations,
    parse_cells,
    parse_history,
    parse_request,
)
from analytics.steering.recommend.rationale import HELP_THRESHOLD
from analytics.steering.recommend.result import CellRecommendation, Recommendation

__all__ = [
    "HELP_THRESHOLD",
    "SHARE_TOLERANCE",
    "CellInput",
    "CellRecommendation",
    "Exploration",
    "HistoryRound",
    "Recommendation",
    "RecommendationInputError",
    "RecommendationRequest",
    "evaluations",
    "parse_cells",
    "parse_history",
    "parse_request",
    "ranking_amplitude",
    "recommend",
]
