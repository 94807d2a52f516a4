"""Round impact: how a round's data moved the policy, per cell and per group of cells.

Inputs are per-row arrays — a row is a condition cell, or a (cell, site) pair when impact is
wanted per site: evaluation trials and successes of the policy before and after the round,
the episodes the round added to the row, and optionally the failure rate the curves
predicted after the round (:func:`predicted_failure_rate`) and weights (target shares).

* **Per row**: success before and after with 95% Wilson intervals; the change with
  Newcombe's hybrid score interval (:func:`analytics.intervals.difference_interval`);
  predicted success and change; realised minus predicted.
* **Difference in differences**: cells that got data (>= 1 episode) against cells that did
  not, both evaluated before and after. Each group's success rate is a *fixed-weight* mean
  of its rows' rates (weights: target share when given, else each row's total trials), so a
  change in where evaluation trials went cannot masquerade as a change in success. The
  estimate is ``(treated_after - treated_before) - (control_after - control_before)`` in
  success-rate points; its standard error adds the four groups' binomial variances (rows
  independent), each row's variance taken at ``(s + 1) / (t + 2)`` so a row at 100% success
  still carries uncertainty (the Agresti–Caffo adjustment); the interval is normal.
  The control group absorbs what changed for every cell (a new training recipe, a
  different evaluation season): the estimate is what the *data* did.
* :func:`summarise_impact` writes a sentence per group (a dimension value, a site):
  "Round 2 added 1,200 episodes under dim lighting; success there rose from 91.2% to
  97.8% (±1.1); predicted 96.5%."
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from analytics.intervals import difference_interval, wilson_interval
from analytics.learning import CurveSet
from analytics.steering.text import format_count, format_points, format_rate, rate_decimals

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class CellImpact:
    """Per-row impact figures (success rates, not failure rates), arrays in input order.

    Rates are ``nan`` where the row had no trials in that period. ``predicted_*`` are
    ``nan`` when no prediction was given. ``treated`` marks rows that got >= 1 episode.
    """

    trials_before: FloatArray
    successes_before: FloatArray
    trials_after: FloatArray
    successes_after: FloatArray
    episodes_added: FloatArray
    success_before: FloatArray
    before_low: FloatArray
    before_high: FloatArray
    success_after: FloatArray
    after_low: FloatArray
    after_high: FloatArray
    change: FloatArray
    change_low: FloatArray
    change_high: FloatArray
    predicted_success_after: FloatArray
    predicted_change: FloatArray
    realised_minus_predicted: FloatArray
    treated: BoolArray


@dataclass(frozen=True)
class DiffInDiff:
    """Difference in differences of success rates, treated (got data) vs control.

    Rates are fixed-weight group means; ``estimate`` and its interval are in rate units
    (0.05 = 5 points). ``reason`` explains a missing estimate (then figures are nan).
    """

    treated_cells: int
    control_cells: int
    treated_before: float
    treated_after: float
    control_before: float
    control_after: float
    estimate: float
    low: float
    high: float
    level: float
    weighting: str
    reason: str = ""


@dataclass(frozen=True, eq=False)
class RoundImpact:
    """A round's impact: per-row figures, the difference in differences, and the label."""

    label: str
    cells: CellImpact
    did: DiffInDiff
    weights: FloatArray | None
    predicted_failure_after: FloatArray | None


def predicted_failure_rate(
    curves: CurveSet, train_before: npt.ArrayLike, episodes_added: npt.ArrayLike
) -> FloatArray:
    """Return each cell's expected failure rate after the round, on the planning curves."""
    n = np.asarray(train_before, dtype=np.float64)
    return curves.rate(n + np.asarray(episodes_added, dtype=np.float64))


def _arr(x: npt.ArrayLike, name: str, size: int | None) -> FloatArray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or (size is not None and arr.shape != (size,)):
        raise ValueError(f"{name} must be a 1-d array of {size} entries, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and >= 0")
    return arr


def _rate(s: FloatArray, t: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t > 0, s / np.maximum(t, 1e-300), np.nan)


def round_impact(
    *,
    trials_before: npt.ArrayLike,
    successes_before: npt.ArrayLike,
    trials_after: npt.ArrayLike,
    successes_after: npt.ArrayLike,
    episodes_added: npt.ArrayLike,
    predicted_failure_after: npt.ArrayLike | None = None,
    weights: npt.ArrayLike | None = None,
    label: str = "This round",
    level: float = 0.95,
) -> RoundImpact:
    """Measure a round's impact per row and as a difference in differences.

    Raises ValueError on arrays of different lengths, negative counts or successes above
    trials.
    """
    t1 = _arr(trials_before, "trials_before", None)
    size = t1.size
    s1 = _arr(successes_before, "successes_before", size)
    t2 = _arr(trials_after, "trials_after", size)
    s2 = _arr(successes_after, "successes_after", size)
    k = _arr(episodes_added, "episodes_added", size)
    if np.any(s1 > t1) or np.any(s2 > t2):
        raise ValueError("successes cannot exceed trials")
    w = None if weights is None else _arr(weights, "weights", size)
    predicted = None
    if predicted_failure_after is not None:
        predicted = _arr(predicted_failure_after, "predicted_failure_after", size)
        if np.any(predicted > 1):
            raise ValueError("predicted failure rates must lie in [0, 1]")

    p1, p2 = _rate(s1, t1), _rate(s2, t2)
    l1, h1 = wilson_interval(s1, t1, level)
    l2, h2 = wilson_interval(s2, t2, level)
    change, c_low, c_high = difference_interval(s1, t1, s2, t2, level)
    both = (t1 > 0) & (t2 > 0)
    nan = np.full(size, np.nan)
    pred_success = nan if predicted is None else 1.0 - predicted
    pred_change = pred_success - p1
    cells = CellImpact(
        trials_before=t1,
        successes_before=s1,
        trials_after=t2,
        successes_after=s2,
        episodes_added=k,
        success_before=p1,
        before_low=np.where(t1 > 0, l1, np.nan),
        before_high=np.where(t1 > 0, h1, np.nan),
        success_after=p2,
        after_low=np.where(t2 > 0, l2, np.nan),
        after_high=np.where(t2 > 0, h2, np.nan),
        change=np.where(both, change, np.nan),
        change_low=np.where(both, c_low, np.nan),
        change_high=np.where(both, c_high, np.nan),
        predicted_success_after=pred_success,
        predicted_change=pred_change,
        realised_minus_predicted=np.where(both, p2 - pred_success, np.nan),
        treated=k >= 1,
    )
    did = difference_in_differences(
        trials_before=t1,
        successes_before=s1,
        trials_after=t2,
        successes_after=s2,
        treated=k >= 1,
        weights=w,
        level=level,
    )
    return RoundImpact(
        label=label, cells=cells, did=did, weights=w, predicted_failure_after=predicted
    )


def _group_rate(
    s: FloatArray, t: FloatArray, w: FloatArray, rows: BoolArray
) -> tuple[float, float]:
    """Return the fixed-weight mean success rate of ``rows`` and its variance."""
    weight = w[rows]
    total = float(weight.sum())
    rate = s[rows] / t[rows]
    adjusted = (s[rows] + 1.0) / (t[rows] + 2.0)
    mean = float(np.dot(weight, rate)) / total
    variance = float(np.dot(weight**2, adjusted * (1.0 - adjusted) / t[rows])) / total**2
    return mean, variance


def difference_in_differences(
    *,
    trials_before: FloatArray,
    successes_before: FloatArray,
    trials_after: FloatArray,
    successes_after: FloatArray,
    treated: BoolArray,
    weights: FloatArray | None = None,
    level: float = 0.95,
) -> DiffInDiff:
    """Return the difference in differences of success, treated rows against control rows.

    Only rows evaluated in both periods (and with positive weight) take part. See the
    module docstring for the weighting and the standard error. Never raises for empty
    groups: the result then carries nan figures and a ``reason``.
    """
    t1, s1, t2, s2 = trials_before, successes_before, trials_after, successes_after
    if weights is None:
        w = t1 + t2
        weighting = "rows weighted by their evaluation trials"
    else:
        w = np.asarray(weights, dtype=np.float64)
        weighting = "rows weighted by target share"
    usable = (t1 > 0) & (t2 > 0) & (w > 0)
    treated_rows = usable & treated
    control_rows = usable & ~treated
    n_treated, n_control = int(treated_rows.sum()), int(control_rows.sum())
    nan = float("nan")
    if n_treated == 0 or n_control == 0:
        missing = "cells that got data" if n_treated == 0 else "cells that got no data"
        return DiffInDiff(
            treated_cells=n_treated,
            control_cells=n_control,
            treated_before=nan,
            treated_after=nan,
            control_before=nan,
            control_after=nan,
            estimate=nan,
            low=nan,
            high=nan,
            level=level,
            weighting=weighting,
            reason=f"no {missing} were evaluated both before and after the round",
        )
    tb, vtb = _group_rate(s1, t1, w, treated_rows)
    ta, vta = _group_rate(s2, t2, w, treated_rows)
    cb, vcb = _group_rate(s1, t1, w, control_rows)
    ca, vca = _group_rate(s2, t2, w, control_rows)
    estimate = (ta - tb) - (ca - cb)
    half = NormalDist().inv_cdf(0.5 + level / 2.0) * float(np.sqrt(vtb + vta + vcb + vca))
    return DiffInDiff(
        treated_cells=n_treated,
        control_cells=n_control,
        treated_before=tb,
        treated_after=ta,
        control_before=cb,
        control_after=ca,
        estimate=estimate,
        low=estimate - half,
        high=estimate + half,
        level=level,
        weighting=weighting,
    )


@dataclass(frozen=True)
class GroupImpact:
    """Pooled figures for one group of rows (a dimension value, a site)."""

    label: str
    rows: int
    episodes_added: float
    trials_before: float
    trials_after: float
    success_before: float
    success_after: float
    after_low: float
    after_high: float
    predicted_success_after: float
    sentence: str


def group_impact(
    impact: RoundImpact,
    groups: Mapping[str, Sequence[int] | npt.ArrayLike] | Iterable[tuple[str, npt.ArrayLike]],
    *,
    level: float = 0.95,
) -> list[GroupImpact]:
    """Return pooled before/after figures and a sentence for each group of rows.

    ``groups`` maps a label (e.g. "dim lighting", "Rotterdam DC") to row indices or a
    boolean mask. Success rates pool the group's trials (Wilson interval after); the
    prediction is weighted by the group's after-round trials, so it is comparable with
    the realised rate. Raises IndexError for an index outside the rows.
    """
    c = impact.cells
    size = c.trials_before.size
    items = groups.items() if isinstance(groups, Mapping) else groups
    result = []
    for label, members in items:
        index = np.asarray(members)
        if index.dtype == bool:
            if index.shape != (size,):
                raise IndexError(f"group {label!r}: mask must have {size} entries")
            index = np.flatnonzero(index)
        index = index.astype(np.int64)
        if index.size and (index.min() < 0 or index.max() >= size):
            raise IndexError(f"group {label!r}: row index out of range")
        t1, s1 = float(c.trials_before[index].sum()), float(c.successes_before[index].sum())
        t2, s2 = float(c.trials_after[index].sum()), float(c.successes_after[index].sum())
        before = s1 / t1 if t1 > 0 else float("nan")
        after = s2 / t2 if t2 > 0 else float("nan")
        low, high = (float(x) for x in wilson_interval(s2, t2, level))
        predicted = float("nan")
        pred_rows = c.predicted_success_after[index]
        if t2 > 0 and np.all(np.isfinite(pred_rows)):
            predicted = float(np.dot(c.trials_after[index], pred_rows)) / t2
        episodes = float(c.episodes_added[index].sum())
        result.append(
            GroupImpact(
                label=str(label),
                rows=int(index.size),
                episodes_added=episodes,
                trials_before=t1,
                trials_after=t2,
                success_before=before,
                success_after=after,
                after_low=low if t2 > 0 else float("nan"),
                after_high=high if t2 > 0 else float("nan"),
                predicted_success_after=predicted,
                sentence=_sentence(
                    impact.label, str(label), episodes, before, after, low, high, predicted, t2
                ),
            )
        )
    return result


def summarise_impact(
    impact: RoundImpact,
    groups: Mapping[str, Sequence[int] | npt.ArrayLike] | Iterable[tuple[str, npt.ArrayLike]],
    *,
    level: float = 0.95,
) -> list[str]:
    """Return one plain-language sentence per group, then one on the difference in differences.

    E.g. "Round 2 added 1,200 episodes under dim lighting; success there rose from 91.2% to
    97.8% (±1.1); predicted 96.5%." The ± is the half-width of the 95% interval of the
    after-round rate, in percentage points.
    """
    sentences = [g.sentence for g in group_impact(impact, groups, level=level)]
    sentences.append(describe_did(impact.did, impact.label))
    return sentences


def _sentence(
    round_label: str,
    label: str,
    episodes: float,
    before: float,
    after: float,
    low: float,
    high: float,
    predicted: float,
    trials_after: float,
) -> str:
    if episodes > 0:
        noun = "episode" if episodes == 1 else "episodes"
        head = f"{round_label} added {format_count(episodes)} {noun} under {label}"
    else:
        head = f"{round_label} added no episodes under {label}"
    if trials_after == 0:
        return f"{head}; not evaluated since."
    places = rate_decimals(*(x for x in (before, after, predicted) if np.isfinite(x)))
    spread = f"(±{format_points((high - low) / 2.0, places)})"
    if not np.isfinite(before):
        body = f"success there is {format_rate(after, places)} {spread} (not evaluated before)"
    else:
        b_text, a_text = format_rate(before, places), format_rate(after, places)
        if a_text == b_text:
            body = f"success there held at {a_text} {spread}"
        else:
            verb = "rose" if after > before else "fell"
            body = f"success there {verb} from {b_text} to {a_text} {spread}"
    tail = f"; predicted {format_rate(predicted, places)}" if np.isfinite(predicted) else ""
    return f"{head}; {body}{tail}."


def describe_did(did: DiffInDiff, round_label: str = "This round") -> str:
    """Return one sentence on the difference in differences (or why there is none)."""
    if did.reason:
        return f"No difference-in-differences estimate: {did.reason}."
    direction = "more" if did.estimate >= 0 else "less"
    control = f"{did.control_cells} cell{'s' if did.control_cells != 1 else ''}"
    treated = f"{did.treated_cells} cell{'s' if did.treated_cells != 1 else ''}"
    return (
        f"Against the {control} that got no data, the {treated} that did improved by "
        f"{format_points(did.estimate, 1)} points {direction} "
        f"({did.level:.0%} interval {100 * did.low:+.1f} to {100 * did.high:+.1f}; "
        f"{did.weighting})."
    )
