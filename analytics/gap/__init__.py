"""Coverage-gap engine: Django-free numbers over per-cell numpy arrays.

Given, per condition cell *c*, the target share of production cycles ``p(c)``, the
transfer-weighted training episodes ``n(c)`` (transfer weights are applied upstream, so this
module never sees embodiments) and evaluation outcomes, :func:`compute_gap` returns per-cell
coverage, failure rates, interventions per day and capture priority, plus a campaign
summary. :func:`top_gaps` ranks cells, :func:`explain_cell` writes the sentence for one, and
:func:`domain_classifier_auc` measures shift on continuous features.

How this refines DESIGN.md ("Core computations"):

* **Cell-specific value of capture.** DESIGN.md values ``k`` more episodes with the pooled
  curve, ``cycles * p * (f(n) - f(n + k))``, which ignores what was observed in the cell.
  Here each cell gets its own curve, the pooled curve with the cell's amplitude multiplier
  (:func:`gap_curves`, the per-cell model the recommendation uses too:
  :func:`analytics.learning.fit_curve_set`), through its posterior failure rate ``f(c)`` with
  the pooled floor ``f_inf`` and exponent ``b`` (:attr:`GapCells.amplitude`; the gain is
  :func:`campaigns.planning.gain.gain`)::

      avoided(c, k) = cycles * p * (f(c) - f_inf)^+ * (1 - ((n + 1) / (n + 1 + k)) ** b)
      priority(c)   = avoided(c, 1)

  Without trials the cell is a typical cell of the campaign: ``f(c) = f_inf + E[m] (f(n) -
  f_inf)`` with ``E[m]`` the mean multiplier across cells (the pooled curve is the median
  cell), which is the DESIGN.md formula scaled by how much cells differ. Priority is 0
  when ``p = 0``; it never increases with ``n`` (all else equal, fixed curve) because
  ``f(c)`` falls with ``n`` (its prior ``f(n)`` does, the evidence is unchanged) and so does
  the decay factor; ``avoided`` is concave in ``k``.
* **Intervals.** ``f(c)`` carries the 95% equal-tailed interval of the cell's multiplier
  posterior (which model and why: ``bench/curve_models.py``), carried to interventions
  per cell; the campaign totals get a 95% interval from a Gamma matched to the mean and
  variance of ``sum p * f`` (cells independent, pooled curve taken as known).
* **Blind spots surface.** A cell with target mass and no training data rests entirely on
  the prior, so :func:`top_gaps` reserves places for such cells; see its docstring.
* **Distance to target is signed** (``excess_interventions_per_day``), so headroom is
  visible too; ``meets_target`` gives the yes/no.
* **PSI per dimension** is computed from marginals of the same per-cell ``p`` and ``n`` (each
  :class:`Dimension` maps cells to value codes), so it can never disagree with the cells.
"""

from analytics.gap.core import (
    CellHistory,
    Coverage,
    Dimension,
    GapCells,
    GapInputs,
    GapResult,
    GapSummary,
    compute_gap,
    gap_curves,
)
from analytics.gap.divergence import LN2, PSI_EPSILON, js_divergence, psi
from analytics.gap.domain import DomainShift, domain_classifier_auc
from analytics.gap.explain import (
    CellGap,
    explain_cell,
    format_count,
    format_interventions,
    format_percent,
    top_gaps,
)

__all__ = [
    "LN2",
    "PSI_EPSILON",
    "CellGap",
    "CellHistory",
    "Coverage",
    "Dimension",
    "DomainShift",
    "GapCells",
    "GapInputs",
    "GapResult",
    "GapSummary",
    "compute_gap",
    "domain_classifier_auc",
    "explain_cell",
    "format_count",
    "format_interventions",
    "format_percent",
    "gap_curves",
    "js_divergence",
    "psi",
    "top_gaps",
]
