"""Why each cell gets its episodes, in words: what they avoid, what they cost, which other
cells they help (part of :mod:`analytics.steering.recommend`).
"""

from __future__ import annotations

import numpy as np

from analytics.steering.recommend.inputs import CellInput, FloatArray, IntArray
from analytics.steering.text import format_count, format_interventions, format_percent
from analytics.steering.transfer import TransferModel


def _by_source(
    avoided_in: FloatArray, episodes: IntArray, transfer: TransferModel | None
) -> FloatArray:
    """What each cell's episodes avoid: every cell's avoided interventions shared among the
    cells whose episodes reached it, in proportion to what each contributed (cell ``i``
    got ``k_i + sum_j T[i, j] k_j``; cell ``j``'s part of it is ``T[i, j] k_j``, its own
    ``k_i``), so ``k_j * (r_j + (T.T @ r)_j)`` with ``r`` the avoided per episode received."""
    if transfer is None or not transfer.transfers:
        return avoided_in
    k = episodes.astype(np.float64)
    received = k + transfer.spread(k)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(received > 0, avoided_in / received, 0.0)
    return np.asarray(k * (per + transfer.reach(per)), dtype=np.float64)


HELP_THRESHOLD = 0.05
"""A cell is said to be helped by another's episodes when one of them counts this much."""

_HELPS_AT_ONCE = 256  # allocated cells whose columns of T are formed together


def _helps(
    transfer: TransferModel | None,
    share: FloatArray,
    episodes: IntArray,
) -> dict[int, str]:
    """Per allocated cell, the words for the other cells its episodes help."""
    if transfer is None or not transfer.transfers:
        return {}
    structure = transfer.structure
    codes = structure.codes
    out: dict[int, str] = {}
    allocated = np.flatnonzero(episodes > 0)
    for start in range(0, allocated.size, _HELPS_AT_ONCE):
        chunk = allocated[start : start + _HELPS_AT_ONCE]
        reach = transfer.columns(chunk)
        for column, j in enumerate(chunk.tolist()):
            helped = np.flatnonzero((reach[:, column] >= HELP_THRESHOLD) & (share > 0))
            if helped.size == 0:
                continue
            common = [
                structure.values[d][codes[j, d]]
                for d in np.flatnonzero((codes[helped] == codes[j]).all(axis=0)).tolist()
                if codes[j, d] >= 0
            ]
            under = f" under {' · '.join(common)}" if common else ""
            noun = "cell" if helped.size == 1 else "cells"
            out[j] = (
                f"also help {helped.size} {noun}{under} that hold "
                f"{format_percent(float(share[helped].sum()))} of production"
            )
    return out


def _cost_words(cost: FloatArray, i: int) -> str:
    """ "cheap to stage (0.3x the median cost)" and the like, when costs differ."""
    median = float(np.median(cost))
    if median <= 0 or np.allclose(cost, cost[0]):
        return ""
    ratio = float(cost[i]) / median
    if ratio <= 0.67:
        return f"cheap to stage ({ratio:.1f}x the median cost)"
    if ratio >= 1.5:
        return f"costly to stage ({ratio:.1f}x the median cost)"
    return ""


def _rationale(
    cell: CellInput,
    *,
    share: float,
    episodes: int,
    avoided: float,
    rate_now: float,
    floor: float,
    optimistic: bool,
    level: float,
    marginal: float,
    interval: tuple[float, float],
    cost: str = "",
    helps: str = "",
) -> str:
    """Return e.g. "12% of production cycles, 340 training episodes; 7 failures in 120
    trials (5.8%, 95% 2.9–11.5%); 420 more episodes avoid about 3.1 interventions a day."."""
    training = f"{format_count(cell.train_count)} training episodes"
    if cell.train_count == 0:
        training = "no training episodes"
    head = f"{format_percent(share)} of production cycles, {training}"
    if cell.trials:
        failures = cell.trials - cell.successes
        low, high = interval
        noun = "failure" if failures == 1 else "failures"
        evidence = (
            f"{format_count(failures)} {noun} in {format_count(cell.trials)} trials "
            f"({_pct(failures / cell.trials)}, 95% {_pct(low, False)}–{_pct(high)})"
        )
    else:
        evidence = f"no trials yet, learning-curve estimate {_pct(rate_now)}"
    if episodes > 0:
        noun = "episode" if episodes == 1 else "episodes"
        action = f"{format_count(episodes)} more {noun}"
        if cost:
            action += f", {cost},"
        if helps:
            action += f" {helps};"
        action += f" avoid {format_interventions(avoided)}"
        if optimistic:
            action += f" (little evidence: valued at the upper {level:.0%} bound of its curve)"
    elif share == 0:
        action = "no episodes: not seen in production"
    elif rate_now - floor <= 1e-6 or marginal <= 0:
        action = "no episodes: already at the learning-curve floor"
    else:
        action = "no episodes: other cells avoid more interventions per unit of budget"
    return f"{head}; {evidence}; {action}."


def _pct(rate: float, sign: bool = True) -> str:
    text = f"{100.0 * rate:.1f}"
    if text == "0.0" and rate > 0:
        text = f"{100.0 * rate:.2f}"
    return f"{text}%" if sign else text
