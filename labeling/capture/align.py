"""Put a recording's streams on one clock: a fixed frame grid and the sample each row takes.

Plain functions over numpy arrays of integer nanosecond capture times (sorted ascending):

* the grid runs at the dataset fps from the latest start to the earliest end of the required
  streams, frame *k* at ``start + round(k · 10⁹ / fps)``;
* state and action rows take the latest sample at or before the frame time — never a future
  one; a sample older than the stream's tolerance (the larger of half a frame period and
  1.5 of the stream's median interval, i.e. a missed beat) is *stale*;
* each camera row takes the image whose capture time is nearest, matched when within half a
  frame period.

A row where any stream misses is not filled in silently: :func:`segments` applies the
embodiment's gap policy (split the episode at the gap, keep it marked, or leave it out) and
never removes rows from inside an episode, because LeRobot requires
``timestamp == frame_index / fps``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

NS = 1_000_000_000


def frame_period_ns(fps: float) -> float:
    return NS / fps


def frame_grid(start_ns: int, end_ns: int, fps: float) -> IntArray:
    """Frame times from ``start_ns`` through ``end_ns`` (inclusive) at ``fps``.

    Computed from the frame number, never by accumulating a float period.
    """
    if end_ns < start_ns:
        return np.empty(0, np.int64)
    count = int(np.floor((end_ns - start_ns) * fps / NS + 1e-9)) + 1
    k = np.arange(count, dtype=np.float64)
    grid = start_ns + np.rint(k * (NS / fps)).astype(np.int64)
    return grid[grid <= end_ns]


@dataclass(frozen=True)
class Match:
    """How one stream fills the grid: the sample index per row and its skew (sample − frame)."""

    name: str
    kind: str  # "state", "action" or "camera"
    topic: str
    index: IntArray
    skew_ns: IntArray
    ok: BoolArray
    tolerance_ns: float

    def summary(self, rows: BoolArray | None = None) -> dict[str, object]:
        """Match rate, stale (missed) rows and p95 / worst absolute skew, over ``rows``."""
        ok = self.ok if rows is None else self.ok[rows]
        skew = np.abs(self.skew_ns if rows is None else self.skew_ns[rows]).astype(np.float64)
        total = int(ok.size)
        return {
            "name": self.name,
            "kind": self.kind,
            "topic": self.topic,
            "rows": total,
            "matched": int(ok.sum()),
            "match_rate": float(ok.mean()) if total else 0.0,
            "stale": int(total - ok.sum()),
            "skew_p95_ms": float(np.percentile(skew, 95) / 1e6) if total else None,
            "skew_worst_ms": float(skew.max() / 1e6) if total else None,
            "tolerance_ms": self.tolerance_ns / 1e6,
        }


def median_interval_ns(times: IntArray) -> float:
    if times.size < 2:
        return 0.0
    return float(np.median(np.diff(times)))


def latest_at_or_before(
    name: str, kind: str, topic: str, times: IntArray, grid: IntArray, fps: float
) -> Match:
    """Each row's latest sample at or before the frame time (index −1 where there is none)."""
    index = np.searchsorted(times, grid, side="right").astype(np.int64) - 1
    has = index >= 0
    sample = np.where(has, times[np.maximum(index, 0)], grid)
    skew = (sample - grid).astype(np.int64)  # ≤ 0: the sample's age, negated
    tolerance = max(frame_period_ns(fps) / 2, 1.5 * median_interval_ns(times))
    ok = has & (-skew <= tolerance)
    return Match(name, kind, topic, index, skew, ok, tolerance)


def nearest(name: str, kind: str, topic: str, times: IntArray, grid: IntArray, fps: float) -> Match:
    """Each row's nearest sample in time; matched within half a frame period."""
    if times.size == 0:
        index = np.full(grid.size, -1, np.int64)
        return Match(name, kind, topic, index, np.zeros(grid.size, np.int64), index >= 0, 0.0)
    right = np.searchsorted(times, grid, side="left")
    right_c = np.minimum(right, times.size - 1)
    left_c = np.maximum(right - 1, 0)
    d_right = np.abs(times[right_c] - grid)
    d_left = np.abs(times[left_c] - grid)
    index = np.where(d_left <= d_right, left_c, right_c).astype(np.int64)
    skew = (times[index] - grid).astype(np.int64)
    tolerance = frame_period_ns(fps) / 2
    ok = np.abs(skew) <= tolerance
    return Match(name, kind, topic, index, skew, ok, tolerance)


def runs(mask: BoolArray) -> list[tuple[int, int]]:
    """The ``[start, stop)`` row ranges where ``mask`` is true."""
    if mask.size == 0:
        return []
    padded = np.concatenate(([False], mask, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


@dataclass(frozen=True)
class Segments:
    """The episodes one recording becomes under a gap policy."""

    ranges: list[tuple[int, int]]  # [start, stop) rows of each episode
    out_of_sync: bool  # kept with rows that miss (policy "mark")
    bad_rows: list[tuple[int, int]]  # rows where a stream misses
    dropped: list[tuple[int, int]]  # rows not in any episode (gaps, too-short pieces)
    excluded: str | None  # why the whole recording is left out (policy "exclude")


def segments(ok: BoolArray, policy: str, *, min_frames: int) -> Segments:
    """Apply the gap policy to the per-row verdict ``ok`` (every stream matched)."""
    rows = int(ok.size)
    bad = runs(~ok)
    if not bad:
        return Segments([(0, rows)] if rows else [], False, [], [], None)
    missed = int((~ok).sum())
    if policy == "mark":
        return Segments([(0, rows)], True, bad, [], None)
    if policy == "exclude":
        return Segments(
            [],
            False,
            bad,
            [(0, rows)],
            f"{missed:,} of {rows:,} rows miss a stream (gap policy: leave out)",
        )
    kept: list[tuple[int, int]] = []
    dropped = list(bad)
    for a, b in runs(ok):
        (kept if b - a >= min_frames else dropped).append((a, b))
    dropped.sort()
    return Segments(kept, False, bad, dropped, None)
