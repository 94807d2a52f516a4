"""Refit learning curves after each evaluation: a pooled curve plus per-cell deviations.

Model. Every cell ``c`` follows ``f_c(n) = f_inf + a * m_c * (n + 1) ** -b``: the floor
``f_inf`` and exponent ``b`` are shared, each cell scales the pooled amplitude ``a`` by its
own multiplier ``m_c`` (a hard cell starts higher, an easy one lower, all learn at the same
relative pace). Evidence is a list of evaluation rows ``(cell, n at evaluation, trials,
successes)``; a cell evaluated after several rounds contributes several rows at different
``n``, which is what identifies ``b``.

Fit:

1. **Pooled curve** ``(f_inf, a, b)``: binomial maximum likelihood over all rows with
   :func:`analytics.curves.fit_learning_curve` (which falls back to its prior curve when the
   rows cannot identify three parameters).
2. **Per-cell multipliers with partial pooling**: ``log m_c ~ Normal(0, tau^2)`` (a
   log-normal random effect). For each cell the exact posterior of ``log m_c`` given its rows
   is computed on a fixed grid (no Laplace approximation: with a handful of failures the
   posterior is far from normal), truncated so the cell's rate at its current ``n`` stays a
   probability. The spread ``tau`` is not fixed: the posteriors under each candidate spread
   are averaged with weights proportional to the marginal likelihood of all cells' rows
   (a uniform prior over the candidates). With many cells this is empirical Bayes — the
   spread is learned from how much cells actually differ; with few it stays uncertain, so
   thinly evaluated cells keep wide posteriors. A cell with thin evidence stays near the
   pool, one with many trials follows its own data.
3. **Refinement** (``refine`` times, default 2): the shared ``(f_inf, a, b)`` are refitted
   with each cell's multiplier held at its posterior (geometric) mean — otherwise a hard
   cell with little data and an easy cell with much would be read as learning — and step 2
   is repeated. A floor ``f_inf > 0`` is kept only when a likelihood-ratio test against
   ``f_inf = 0`` demands it (:data:`FLOOR_EVIDENCE`): cells that learn more slowly than the
   shared exponent otherwise pass for a floor, and a spurious floor above the target would
   declare the target out of reach. The refinement goes on until the shared exponent
   settles (with per-cell exponents each step moves it only as far as the cells' own
   exponents reach), once without a floor and once with one, and the test compares the
   two on the rows' marginal likelihood, every cell integrated out, under an exponential
   prior on the floor (mean :data:`FLOOR_SCALE`). Tested with the cells held where a floor
   had put them, a history whose untrained cells fail often passed for a floor of 0.24%
   under an exponent of 1.5, and a first evaluation for one of 7.35%; without the floor's
   prior, an evaluation too thin to show any learning passed for a floor at the pool's
   failure rate.

**Per-cell exponents** (``exponents=True``, what the steered strategy uses). A cell that
learns faster or slower than the pool is misread by a shared exponent: its rows at earlier
``n`` pull its multiplier the wrong way, so its rate *now* — what decides where the next
episodes go — comes out too high or too low. With this option each cell has its own exponent
``b_c = b + delta_c``, ``delta_c ~ Normal(0, s^2)`` on a grid of offsets
(:data:`EXPONENT_OFFSET_GRID`), its posterior joint with ``log m_c`` (the spread ``s``
averaged over :data:`EXPONENT_SPREADS` by marginal likelihood, like ``tau``). A cell seen at
one ``n`` learns its rate there but little of its exponent; one seen before and after
training arrived learns its own. The joint posterior is then read at each cell's current ``n`` as the
posterior of the shared-exponent multiplier giving the same rate there, so every method of
:class:`CurveSet` keeps its meaning at the current counts (rates and gains further away
follow the shared ``b``); :attr:`CurveSet.exponent` holds each cell's posterior-mean exponent.
With ``conditions`` (each cell's value per condition dimension) the prior mean of ``log m_c``
is no longer 0 but a sum of one effect per condition value (dim light is hard wherever it
occurs), fitted by weighted ridge regression on the cells' posterior means in each
refinement; ``tau`` is then the spread around that.

**Kept and read again** (:mod:`analytics.learning.stored`). A refit stores each cell's
posterior as quantiles (:data:`POSTERIOR_LEVELS`); the gap report reads every cell on that
history, updated by the outcomes the refit does not hold (production since), and stores the
quantiles of what it scored, which the in-app recommendation reads back.

The grid posterior gives everything steering needs without refitting: the posterior-mean
amplitude (what a cell is expected to gain), upper quantiles (optimistic value for thin
evidence) and posterior draws (Thompson sampling). :class:`CurveSet` is the result; the gap
engine can take ``curve_set.pooled`` as its curve, and the planner takes per-cell failure
rates from :meth:`CurveSet.rate` with the shared ``f_inf`` and ``b`` (its gain
``w * (r - f_inf) * (1 - ((n0 + 1) / (n0 + k + 1)) ** b)`` is then exactly
:meth:`CurveSet.gain` times ``w``).
"""

from analytics.learning.curveset import CurveSet
from analytics.learning.fit import FLOOR_EVIDENCE, FLOOR_SCALE, fit_curve_set, fit_history
from analytics.learning.posteriors import (
    CONDITION_RIDGE,
    EXPONENT_OFFSET_GRID,
    EXPONENT_SPREADS,
    LOG_MULTIPLIER_GRID,
    TAU_GRID,
)
from analytics.learning.rows import EvaluationRows, FloatArray, IntArray
from analytics.learning.stored import (
    POSTERIOR_LEVELS,
    curves_from_quantiles,
    curves_on_history,
    posterior_from_quantiles,
    posterior_quantiles,
)

__all__ = [
    "CONDITION_RIDGE",
    "EXPONENT_OFFSET_GRID",
    "EXPONENT_SPREADS",
    "FLOOR_EVIDENCE",
    "FLOOR_SCALE",
    "LOG_MULTIPLIER_GRID",
    "POSTERIOR_LEVELS",
    "TAU_GRID",
    "CurveSet",
    "EvaluationRows",
    "FloatArray",
    "IntArray",
    "curves_from_quantiles",
    "curves_on_history",
    "fit_curve_set",
    "fit_history",
    "posterior_from_quantiles",
    "posterior_quantiles",
]
