"""Reliability of a deployment in production: daily rates, breakdowns and a change detector.

Django-free, over numpy arrays. The input is a :class:`ProductionHistory`: cycles per
condition set per day and interventions (failure records) per failure mode, condition set and
day, over consecutive site-local days. Every failure record counts: whoever stepped in (the
classical harness or a person), the deployment needed help with that cycle.

* :func:`daily_series` — interventions per day with an exact Poisson interval, and per 1,000
  cycles with the same interval over the day's cycles (:func:`analytics.intervals.poisson_interval`).
* :func:`rate_rows` — totals and rates per 1,000 cycles with intervals for any breakdown
  (failure mode, condition value, policy version).
* :func:`detect_shifts` — has a rate risen? For the deployment overall, each failure mode,
  each condition value and each failure mode under each condition value it compares the
  recent window (default the last 7 days) with the baseline before it (default 28 days),
  exposure-adjusted by cycles, with the exact conditional test for two Poisson rates: given
  the ``N`` events of both windows, the recent count is Binomial(N, pi) under "no change",
  ``pi`` the recent share of cycles; the one-sided p-value is ``P(X >= x)``. Counts are
  divided by a quasi-Poisson dispersion estimated on the baseline days (never below 1), so
  day-to-day swings seen before the window are not mistaken for a shift. Holm's step-down
  correction over all the rates tested keeps the chance of *any* false flag per deployment
  check at most ``alpha`` (default 5%) whatever the dependence between them; rates whose
  total count could not reach ``alpha`` even alone are left out of the family (valid because
  the test conditions on that total). A flag also needs ``min_events`` recent events and a
  rise of at least ``min_ratio``; a failure mode absent in the baseline is a *new* failure
  mode. The onset ("since 24 Nov") is the split of the recent window with the highest
  two-rate Poisson likelihood.
* :func:`excess_rate` — the extra failures per cycle of a flagged rise in each cell, which
  the next round's recommendation adds to the cells' failure rates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special, stats

from analytics.intervals import poisson_interval

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

PER = 1000.0
"""Rates are shown per 1,000 cycles."""

Scope = Literal["overall", "mode", "condition", "mode-condition"]
SCOPE_ORDER: dict[str, int] = {"mode-condition": 0, "mode": 1, "condition": 2, "overall": 3}


@dataclass(frozen=True)
class ProductionHistory:
    """A deployment's production over consecutive days.

    ``set_cycles[s, d]``: cycles under condition set ``s`` on ``days[d]``; ``counts[m, s, d]``:
    interventions of failure mode ``m`` under set ``s`` that day; ``set_values[s]``: the
    condition value keys of set ``s`` (empty for interventions whose conditions were not
    recorded: such a set has no cycles). ``value_labels`` names each value key ("dim
    lighting"); ``place`` is where the deployment runs, for sentences. Raises ValueError on
    shapes that do not agree, negative or non-finite numbers, or days that are not consecutive.
    """

    days: list[date]
    set_cycles: FloatArray
    counts: FloatArray
    set_values: list[tuple[int, ...]]
    mode_keys: list[str]
    mode_labels: list[str]
    value_labels: dict[int, str] = field(default_factory=dict)
    place: str = ""

    def __post_init__(self) -> None:
        n_days, n_sets, n_modes = len(self.days), len(self.set_values), len(self.mode_keys)
        if self.set_cycles.shape != (n_sets, n_days):
            raise ValueError(
                f"set_cycles must be ({n_sets}, {n_days}), got {self.set_cycles.shape}"
            )
        if self.counts.shape != (n_modes, n_sets, n_days):
            raise ValueError(
                f"counts must be ({n_modes}, {n_sets}, {n_days}), got {self.counts.shape}"
            )
        if len(self.mode_labels) != n_modes:
            raise ValueError("one label per failure mode")
        for name, array in (("set_cycles", self.set_cycles), ("counts", self.counts)):
            if not np.all(np.isfinite(array)) or np.any(array < 0):
                raise ValueError(f"{name} must be finite and >= 0")
        for a, b in zip(self.days, self.days[1:], strict=False):
            if (b - a).days != 1:
                raise ValueError(f"days must be consecutive: {a} is followed by {b}")

    @property
    def cycles(self) -> FloatArray:
        """Return cycles per day."""
        return np.asarray(self.set_cycles.sum(axis=0), dtype=np.float64)

    @property
    def interventions(self) -> FloatArray:
        """Return interventions per day (every mode and condition set)."""
        return np.asarray(self.counts.sum(axis=(0, 1)), dtype=np.float64)

    def value_keys(self) -> list[int]:
        """Return the condition value keys that occur in some set, in label order."""
        keys = {v for values in self.set_values for v in values}
        return sorted(keys, key=lambda v: (self.value_labels.get(v, str(v)), v))

    def sets_with(self, value: int) -> BoolArray:
        """Return which condition sets include ``value``."""
        return np.array([value in values for values in self.set_values], dtype=bool)

    def value_label(self, value: int) -> str:
        """Return the value's label (its key when unnamed)."""
        return self.value_labels.get(value, str(value))


# ------------------------------------------------------------------ rates


@dataclass(frozen=True)
class DailySeries:
    """Interventions per day and per 1,000 cycles, each with its ``level`` interval."""

    days: list[date]
    cycles: FloatArray
    interventions: FloatArray
    low: FloatArray
    high: FloatArray
    rate: FloatArray
    rate_low: FloatArray
    rate_high: FloatArray
    level: float


def daily_series(history: ProductionHistory, level: float = 0.95) -> DailySeries:
    """Return each day's interventions and rate per 1,000 cycles with exact Poisson intervals.

    A day without cycles has no rate (NaN) and the uninformative rate interval.
    """
    cycles = history.cycles
    events = history.interventions
    low, high = poisson_interval(events, 1.0, level)
    thousands = cycles / PER
    rate_low, rate_high = poisson_interval(events, thousands, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(cycles > 0, events / np.maximum(thousands, 1e-300), np.nan)
    return DailySeries(
        days=list(history.days),
        cycles=cycles,
        interventions=events,
        low=low,
        high=high,
        rate=np.asarray(rate, dtype=np.float64),
        rate_low=rate_low,
        rate_high=np.where(cycles > 0, rate_high, np.nan),
        level=level,
    )


@dataclass(frozen=True)
class RateRow:
    """One row of a breakdown: events, cycles, and the rate per 1,000 cycles with its interval."""

    key: str
    label: str
    events: float
    cycles: float
    rate: float | None
    low: float | None
    high: float | None


def rate_rows(
    keys: Sequence[str],
    labels: Sequence[str],
    events: npt.ArrayLike,
    cycles: npt.ArrayLike,
    level: float = 0.95,
) -> list[RateRow]:
    """Return one :class:`RateRow` per key, most events first; no cycles means no rate."""
    x = np.asarray(events, dtype=np.float64)
    e = np.asarray(cycles, dtype=np.float64)
    low, high = poisson_interval(x, e / PER, level)
    rows = []
    for i, key in enumerate(keys):
        measured = e[i] > 0
        rows.append(
            RateRow(
                key=str(key),
                label=str(labels[i]),
                events=float(x[i]),
                cycles=float(e[i]),
                rate=float(PER * x[i] / e[i]) if measured else None,
                low=float(low[i]) if measured else None,
                high=float(high[i]) if measured else None,
            )
        )
    rows.sort(key=lambda r: (-r.events, r.label))
    return rows


def mode_rows(history: ProductionHistory, level: float = 0.95) -> list[RateRow]:
    """Return interventions per failure mode over the whole history, per 1,000 cycles."""
    total = float(history.set_cycles.sum())
    events = history.counts.sum(axis=(1, 2))
    return rate_rows(
        history.mode_keys, history.mode_labels, events, [total] * len(history.mode_keys), level
    )


def condition_rows(history: ProductionHistory, level: float = 0.95) -> list[RateRow]:
    """Return interventions under each condition value per 1,000 cycles under that value."""
    keys = history.value_keys()
    events, cycles = [], []
    for value in keys:
        member = history.sets_with(value)
        events.append(float(history.counts[:, member, :].sum()))
        cycles.append(float(history.set_cycles[member].sum()))
    return rate_rows(
        [str(k) for k in keys], [history.value_label(k) for k in keys], events, cycles, level
    )


# ------------------------------------------------------------------ the change detector


@dataclass(frozen=True)
class ShiftFlag:
    """A rate that rose: what, where, since when, by how much, and how sure.

    Rates are per 1,000 cycles; ``p_value`` is the single test's, ``p_adjusted`` Holm's over
    every rate of the check. ``mode_key`` / ``value_key`` are None where the flag is not
    about one failure mode / condition value.
    """

    kind: Literal["rise", "new"]
    scope: Scope
    mode_key: str | None
    mode: str | None
    value_key: int | None
    value: str | None
    since: date
    recent_start: date
    baseline_start: date
    baseline_rate: float
    recent_rate: float
    baseline_events: float
    recent_events: float
    ratio: float
    dispersion: float
    p_value: float
    p_adjusted: float
    sentence: str


@dataclass(frozen=True)
class ShiftCheck:
    """The outcome of one deployment check: its flags and what was compared."""

    flags: list[ShiftFlag]
    tests: int
    alpha: float
    recent_start: date | None
    baseline_start: date | None
    end: date | None
    reason: str | None = None

    def describe(self) -> str:
        """Return one sentence on what was compared and the false-alarm rate it holds."""
        if self.reason or self.recent_start is None or self.baseline_start is None:
            return self.reason or ""
        if self.end is None:
            return ""
        return (
            f"The {(self.end - self.recent_start).days + 1} days from "
            f"{_day(self.recent_start)} to {_day(self.end)} against the "
            f"{(self.recent_start - self.baseline_start).days} days before, per 1,000 cycles: "
            f"{self.tests} rate{'' if self.tests == 1 else 's'} tested (overall, per failure "
            f"mode, per condition), at most a {self.alpha:.0%} chance of any false flag."
        )


@dataclass(frozen=True)
class _Series:
    scope: Scope
    mode: int | None
    value: int | None
    counts: FloatArray
    exposure: FloatArray


def _series(history: ProductionHistory) -> list[_Series]:
    per_mode = history.counts.sum(axis=1)
    out = [_Series("overall", None, None, per_mode.sum(axis=0), history.cycles)]
    out += [
        _Series("mode", m, None, per_mode[m], history.cycles) for m in range(len(history.mode_keys))
    ]
    for value in history.value_keys():
        member = history.sets_with(value)
        exposure = history.set_cycles[member].sum(axis=0)
        by_mode = history.counts[:, member, :].sum(axis=1)
        out.append(_Series("condition", None, value, by_mode.sum(axis=0), exposure))
        out += [
            _Series("mode-condition", m, value, by_mode[m], exposure)
            for m in range(len(history.mode_keys))
            if by_mode[m].any()
        ]
    return out


def dispersion(counts: npt.ArrayLike, exposure: npt.ArrayLike) -> float:
    """Return the quasi-Poisson dispersion of daily counts around a constant rate (>= 1).

    Pearson's chi-square over the days with exposure, divided by its degrees of freedom,
    where it exceeds the 99th percentile of its distribution for Poisson counts; else 1 (a
    clamped estimate would be above 1 half the time on pure Poisson noise and cost power).
    Also 1 with fewer than 5 days of exposure or no events: too little to say more.
    """
    x = np.asarray(counts, dtype=np.float64)
    e = np.asarray(exposure, dtype=np.float64)
    used = e > 0
    if used.sum() < 5 or x[used].sum() <= 0:
        return 1.0
    expected = e[used] * x[used].sum() / e[used].sum()
    chi2 = float(np.sum((x[used] - expected) ** 2 / expected))
    df = int(used.sum()) - 1
    if chi2 <= float(stats.chi2.ppf(0.99, df)):
        return 1.0
    return chi2 / df


def rate_rise_p(recent: float, baseline: float, share: float, phi: float = 1.0) -> float:
    """Return the one-sided p-value that the recent rate is no higher than the baseline's.

    Conditional on ``N = recent + baseline`` events the recent count is Binomial(N, share)
    when the rate did not change (``share``: the recent window's share of the exposure), and
    the p-value is ``P(X >= recent)`` = the regularised incomplete Beta ``I_share(x, N - x +
    1)``; counts are first divided by the dispersion ``phi`` (quasi-Poisson).
    """
    if recent <= 0:
        return 1.0
    if share >= 1.0:
        return 1.0
    x = recent / phi
    n = (recent + baseline) / phi
    return float(special.betainc(x, n - x + 1.0, share))


def holm(p_values: npt.ArrayLike) -> FloatArray:
    """Return Holm's step-down adjusted p-values (family-wise error under any dependence)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def _onset(counts: FloatArray, exposure: FloatArray, start: int, recent: int) -> int:
    """The split in ``[recent, end)`` with the highest two-rate Poisson likelihood."""
    best, best_ll = recent, -np.inf
    for split in range(recent, counts.size):
        ll = 0.0
        for x, e in (
            (counts[start:split].sum(), exposure[start:split].sum()),
            (counts[split:].sum(), exposure[split:].sum()),
        ):
            if x > 0 and e > 0:
                ll += float(x * np.log(x / e))
        if ll > best_ll + 1e-9:
            best, best_ll = split, ll
    return best


def detect_shifts(
    history: ProductionHistory,
    *,
    recent_days: int = 7,
    baseline_days: int = 28,
    min_baseline_days: int = 7,
    alpha: float = 0.05,
    min_events: int = 5,
    min_ratio: float = 1.5,
) -> ShiftCheck:
    """Flag rates that rose in the last ``recent_days`` against the ``baseline_days`` before.

    See the module docstring for the test. Returns the flags most specific first (a failure
    mode under a condition, a failure mode, a condition, overall), then by p-value; a check
    without enough history returns no flags and says why. Raises ValueError on windows or
    levels out of range.
    """
    if recent_days < 1 or baseline_days < 1 or min_baseline_days < 1:
        raise ValueError("windows must be at least one day")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    n_days = len(history.days)
    recent = n_days - recent_days
    start = max(0, recent - baseline_days)
    if recent - start < min_baseline_days:
        return ShiftCheck(
            [],
            0,
            alpha,
            None,
            None,
            history.days[-1] if history.days else None,
            reason=(
                f"Not enough production to check for shifts: {n_days} day"
                f"{'' if n_days == 1 else 's'} logged, {recent_days + min_baseline_days} needed "
                f"(the last {recent_days} against at least {min_baseline_days} before)."
            ),
        )
    tested: list[tuple[_Series, float, float, float, float, float]] = []
    for s in _series(history):
        x_b, x_r = float(s.counts[start:recent].sum()), float(s.counts[recent:].sum())
        e_b, e_r = float(s.exposure[start:recent].sum()), float(s.exposure[recent:].sum())
        if e_b <= 0 or e_r <= 0 or x_r + x_b <= 0:
            continue
        share = e_r / (e_r + e_b)
        phi = dispersion(s.counts[start:recent], s.exposure[start:recent])
        # Tarone: a rate whose total could not reach alpha even alone can never be flagged;
        # leaving it out is valid because the test conditions on that total.
        if share ** ((x_r + x_b) / phi) > alpha:
            continue
        tested.append((s, x_b, x_r, e_b, e_r, phi))
    p_raw = np.array(
        [rate_rise_p(x_r, x_b, e_r / (e_r + e_b), phi) for _, x_b, x_r, e_b, e_r, phi in tested]
    )
    p_adj = holm(p_raw)
    flags: list[ShiftFlag] = []
    for i, (s, x_b, x_r, e_b, e_r, phi) in enumerate(tested):
        rate_b, rate_r = PER * x_b / e_b, PER * x_r / e_r
        ratio = rate_r / rate_b if rate_b > 0 else np.inf
        if p_adj[i] > alpha or x_r < min_events or ratio < min_ratio:
            continue
        split = _onset(s.counts, s.exposure, start, recent)
        x_since, e_since = float(s.counts[split:].sum()), float(s.exposure[split:].sum())
        since_rate = PER * x_since / e_since if e_since > 0 else rate_r
        mode = history.mode_labels[s.mode] if s.mode is not None else None
        value = history.value_label(s.value) if s.value is not None else None
        kind: Literal["rise", "new"] = "new" if x_b == 0 and s.mode is not None else "rise"
        flags.append(
            ShiftFlag(
                kind=kind,
                scope=s.scope,
                mode_key=history.mode_keys[s.mode] if s.mode is not None else None,
                mode=mode,
                value_key=s.value,
                value=value,
                since=history.days[split],
                recent_start=history.days[recent],
                baseline_start=history.days[start],
                baseline_rate=rate_b,
                recent_rate=since_rate,
                baseline_events=x_b,
                recent_events=x_since,
                ratio=float(ratio),
                dispersion=phi,
                p_value=float(p_raw[i]),
                p_adjusted=float(p_adj[i]),
                sentence=_sentence(
                    kind=kind,
                    mode=mode,
                    value=value,
                    place=history.place,
                    since=history.days[split],
                    baseline_rate=rate_b,
                    recent_rate=since_rate,
                    recent_events=x_since,
                    baseline_days=recent - start,
                    p=float(p_adj[i]),
                ),
            )
        )
    flags.sort(key=lambda f: (SCOPE_ORDER[f.scope], f.p_adjusted, -f.recent_rate))
    return ShiftCheck(
        flags, len(tested), alpha, history.days[recent], history.days[start], history.days[-1]
    )


def _day(d: date) -> str:
    return f"{d.day} {d:%b}"


def _rate(r: float) -> str:
    return f"{r:.2f}" if r < 0.1 else f"{r:.1f}" if r < 100 else f"{r:,.0f}"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _sentence(
    *,
    kind: str,
    mode: str | None,
    value: str | None,
    place: str,
    since: date,
    baseline_rate: float,
    recent_rate: float,
    recent_events: float,
    baseline_days: int,
    p: float,
) -> str:
    where = f" at {place}" if place else ""
    under = f" under {value}" if value else ""
    if kind == "new":
        return (
            f"New failure mode{where}{under}: {mode}, absent in the {baseline_days} days before, "
            f"{recent_events:,.0f} times since {_day(since)} ({_rate(recent_rate)} per 1,000 "
            f"cycles, {_p(p)})."
        )
    what = mode or "Interventions"
    if mode is None and value is None:
        what = "Interventions overall"
    return (
        f"{what[:1].upper()}{what[1:]} rose from {_rate(baseline_rate)} to {_rate(recent_rate)} "
        f"per 1,000 cycles{where}{under} since {_day(since)} ({_p(p)})."
    )


# ------------------------------------------------------------------ flags feed the plan


def flag_window_counts(
    history: ProductionHistory, flag: ShiftFlag
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Return per condition set the flag's events and cycles since its onset and in its baseline.

    ``(recent_events, recent_cycles, baseline_events, baseline_cycles)``, each of shape
    ``(sets,)``: the events of the flag's failure mode (all modes for a condition or overall
    flag) in the sets of its condition value (all sets without one).
    """
    modes = (
        [history.mode_keys.index(flag.mode_key)]
        if flag.mode_key is not None
        else list(range(len(history.mode_keys)))
    )
    member = (
        history.sets_with(flag.value_key)
        if flag.value_key is not None
        else np.ones(len(history.set_values), dtype=bool)
    )
    since = history.days.index(flag.since)
    base = history.days.index(flag.baseline_start)
    # The baseline is the window before the check's recent window, not before the onset.
    baseline_end = history.days.index(flag.recent_start)
    events = history.counts[modes].sum(axis=0) * member[:, None]
    cycles = history.set_cycles * member[:, None]
    return (
        np.asarray(events[:, since:].sum(axis=1), dtype=np.float64),
        np.asarray(cycles[:, since:].sum(axis=1), dtype=np.float64),
        np.asarray(events[:, base:baseline_end].sum(axis=1), dtype=np.float64),
        np.asarray(cycles[:, base:baseline_end].sum(axis=1), dtype=np.float64),
    )


def excess_rate(
    recent_events: npt.ArrayLike,
    recent_cycles: npt.ArrayLike,
    baseline_events: npt.ArrayLike,
    baseline_cycles: npt.ArrayLike,
    *,
    fallback_rate: float = 0.0,
    min_events: int = 2,
) -> FloatArray:
    """Return each cell's extra failures per cycle: recent rate minus baseline rate, >= 0.

    A cell with fewer than ``min_events`` recent events has no excess (one event is no
    concentration); a cell without baseline cycles is compared with ``fallback_rate`` (the
    flag's baseline rate per cycle).
    """
    x_r = np.asarray(recent_events, dtype=np.float64)
    e_r = np.asarray(recent_cycles, dtype=np.float64)
    x_b = np.asarray(baseline_events, dtype=np.float64)
    e_b = np.asarray(baseline_cycles, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        now = np.where(e_r > 0, x_r / np.maximum(e_r, 1e-300), 0.0)
        before = np.where(e_b > 0, x_b / np.maximum(e_b, 1e-300), fallback_rate)
    excess = np.where(x_r >= min_events, np.maximum(now - before, 0.0), 0.0)
    return np.asarray(excess, dtype=np.float64)
