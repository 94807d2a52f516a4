"""Ranking gaps and turning a cell's numbers into one forwardable sentence."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analytics.gap.core import Coverage, GapResult


def format_percent(share: float) -> str:
    """Format a share in [0, 1] as a percentage a person reads at a glance.

    Whole percents from 1% up, one decimal below 1%, ``<0.1%`` for tiny non-zero shares, and
    never ``100%`` (or ``0%``) for a share that is not exactly 1 (or 0).
    """
    percent = 100.0 * share
    if share <= 0:
        return "0%"
    if share >= 1:
        return "100%"
    if percent < 0.05:
        return "<0.1%"
    if percent < 0.95:
        return f"{percent:.1f}%"
    if percent >= 99.5:
        return ">99%"
    return f"{percent:.0f}%"


def format_count(count: float) -> str:
    """Format an episode or trial count with thousands separators.

    Transfer-weighted counts may be fractional: below 10 they keep one decimal, above they
    are rounded to whole episodes.
    """
    if count != round(count) and count < 9.95:
        return f"{count:.1f}"
    return f"{count:,.0f}"


def format_interventions(per_day: float) -> str:
    """Phrase an expected number of interventions per day in the most natural period.

    Large numbers per day, small ones per week or month, so "0.03 a day" reads as
    "about 1 intervention a month".
    """
    for scale, period in ((1.0, "day"), (7.0, "week"), (30.0, "month")):
        value = per_day * scale
        if value >= 9.5:
            return f"about {value:,.0f} interventions a {period}"
        if value >= 0.95:
            shown = round(value, 1)
            text = f"{shown:.0f}" if shown == int(shown) else f"{shown:.1f}"
            noun = "intervention" if text == "1" else "interventions"
            return f"about {text} {noun} a {period}"
    if per_day > 0:
        return "less than one intervention a month"
    return "no interventions expected"


def explain_cell(result: GapResult, index: int) -> str:
    """Build one sentence on why cell ``index`` matters, from its numbers.

    E.g. "Dim sodium lighting at Rotterdam DC: 18% of production cycles but 0.2% of
    training episodes (40); estimated failure rate 6% (3 failures in 50 trials) → about 54
    interventions a day." Raises IndexError for an index outside the result.
    """
    cells = result.cells
    trials = int(result.inputs.trials[index])
    successes = int(result.inputs.successes[index])
    label = result.labels[index]
    p = float(cells.target_share[index])
    q = float(cells.train_share[index])
    n = float(cells.train_count[index])
    rate = float(cells.failure_rate[index])

    if n == 0:
        training = "no training episodes"
    else:
        training = f"{format_percent(q)} of training episodes ({format_count(n)})"
    elsewhere = _elsewhere(result, index)
    if p == 0:
        return f"{label}: not seen in production; {training}; no interventions expected.{elsewhere}"
    joiner = "and" if n > 0 and q >= p else "but"
    if trials:
        failures = trials - successes
        noun = "failure" if failures == 1 else "failures"
        evidence = f"{format_count(failures)} {noun} in {format_count(trials)} trials"
    else:
        evidence = "no trials yet, learning-curve estimate"
    return (
        f"{label}: {format_percent(p)} of production cycles {joiner} {training}; "
        f"estimated failure rate {format_percent(rate)} ({evidence}) → "
        f"{format_interventions(float(cells.interventions[index]))}.{elsewhere}"
    )


ELSEWHERE_SHARE = 0.1
"""The share of a cell's value of capture that lies in other cells before its sentence says so."""


def _elsewhere(result: GapResult, index: int) -> str:
    """ " An episode here also avoids ... in the cells it helps", where that is a tenth or
    more of its value of capture (else nothing)."""
    cells = result.cells
    elsewhere = float(cells.priority_elsewhere[index])
    total = float(cells.priority[index])
    if not total > 0 or elsewhere < ELSEWHERE_SHARE * total:
        return ""
    return (
        f" An episode here also trains cells that share its conditions: "
        f"{format_percent(elsewhere / total)} of its value lies there."
    )


@dataclass(frozen=True)
class CellGap:
    """One ranked gap: the cell's key figures and the sentence that explains it."""

    index: int
    label: str
    target_share: float
    train_count: float
    train_share: float
    coverage: Coverage
    failure_rate: float
    failure_interval: tuple[float, float]
    interventions_per_day: float
    interventions_interval: tuple[float, float]
    priority: float
    blind_spot: bool
    sentence: str


def top_gaps(result: GapResult, k: int, *, blind_spot_min_share: float = 0.0) -> list[CellGap]:
    """Return up to ``k`` cells most worth capturing, highest priority first.

    Ranked by priority, ties by expected interventions, then blind spots, then input order.
    Cells with no target mass never appear. **Blind spots** (target share above
    ``blind_spot_min_share`` and no training data: n == 0 or below ``uncovered_below``) are
    guaranteed a place: all of them when there are at most ``k``, else the ``k`` best of
    them; the remaining places go to the other cells by rank. Their estimate is pure prior,
    so a low priority there may be ignorance rather than safety. Raises ValueError if
    ``k < 0``.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    cells = result.cells
    p = cells.target_share
    eligible = p > 0
    blind = (
        eligible
        & (p > blind_spot_min_share)
        & ((cells.train_count == 0) | (cells.coverage == Coverage.UNCOVERED))
    )
    # lexsort's last key is the primary one.
    order = np.lexsort(
        (np.arange(p.size), ~blind, -cells.interventions, -cells.priority),
    )
    order = order[eligible[order]]
    reserved = order[blind[order]][:k]
    others = order[~blind[order]][: k - reserved.size]
    chosen = np.zeros(p.size, dtype=bool)
    chosen[reserved] = True
    chosen[others] = True
    return [_cell_gap(result, int(i), bool(blind[i])) for i in order[chosen[order]]]


def _cell_gap(result: GapResult, i: int, blind: bool) -> CellGap:
    cells = result.cells
    return CellGap(
        index=i,
        label=result.labels[i],
        target_share=float(cells.target_share[i]),
        train_count=float(cells.train_count[i]),
        train_share=float(cells.train_share[i]),
        coverage=Coverage(int(cells.coverage[i])),
        failure_rate=float(cells.failure_rate[i]),
        failure_interval=(float(cells.failure_low[i]), float(cells.failure_high[i])),
        interventions_per_day=float(cells.interventions[i]),
        interventions_interval=(
            float(cells.interventions_low[i]),
            float(cells.interventions_high[i]),
        ),
        priority=float(cells.priority[i]),
        blind_spot=blind,
        sentence=explain_cell(result, i),
    )
