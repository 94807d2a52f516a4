"""Find the takes a field team marked on the tablet inside a long recording.

The tablet records when each take started and ended on *its* clock; the robot records on its
own. Between takes the robot stands still, so the offset between the clocks is the shift that
lays the tablet's takes over the recording's motion: on a 10 ms grid, motion counts +1 and
stillness −1, and the offset maximises the sum over the shifted takes (a cross-correlation).
When the recording has no stillness to align on (or no motion), the clocks are assumed to
agree and the result says so.

Plain functions over numpy arrays of integer nanoseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .decode import joint_decoder_for
from .reader import Recording
from .streams import StreamMap

GRID_NS = 10_000_000  # 10 ms
# A take may run this far past either end of the recording and still be cut from it.
EDGE_TOLERANCE_NS = 500_000_000


@dataclass(frozen=True)
class Motion:
    """The state stream's sample times and whether the robot moved at each."""

    times_ns: np.ndarray
    moving: np.ndarray
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Offset:
    offset_ns: int  # tablet clock − recording clock
    method: str  # "motion" or "assumed"
    score: float  # share of the takes' time over motion (1.0 = every take on motion)
    note: str


def recording_motion(paths: Sequence[Path | str], stream_map: StreamMap) -> Motion:
    """Read the recording's state stream (only) and mark where any joint moved."""
    recording = Recording(paths)
    times: list[int] = []
    values: list[list[float]] = []
    decoders: dict[int, object] = {}
    first = last = None
    for message in recording.messages():
        first = message.log_time_ns if first is None else first
        last = message.log_time_ns
        if stream_map.state_topic and message.topic != stream_map.state_topic:
            continue
        if not stream_map.state_topic and "joint_state" not in message.topic:
            continue
        decoder = decoders.get(id(message.channel))
        if decoder is None:
            decoder, _ = joint_decoder_for(message.channel)
            decoders[id(message.channel)] = decoder
        if decoder is None:
            continue
        try:
            joints = decoder(message.data)  # type: ignore[operator]
        except Exception:  # noqa: S112  (a damaged message is stillness for alignment)
            continue
        times.append(message.log_time_ns)
        values.append([float(joints.get(j, np.nan)) for j in stream_map.joints])
    t = np.asarray(times, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64).reshape(len(times), len(stream_map.joints))
    step = np.abs(np.diff(v, axis=0, prepend=v[:1]))
    moving = np.nan_to_num(step, nan=0.0).max(axis=1) > 1e-6 if len(v) else np.zeros(0, bool)
    return Motion(t, moving, int(first or 0), int(last or 0))


def estimate_offset(
    takes_ns: Sequence[tuple[int, int]], motion: Motion, *, search_s: float = 600.0
) -> Offset:
    """The tablet − recording clock offset that lays the takes over the robot's motion."""
    if not takes_ns or motion.times_ns.size < 2:
        return Offset(0, "assumed", 0.0, "nothing to align on: clocks assumed to agree")
    moving_share = float(motion.moving.mean())
    if moving_share > 0.98 or moving_share < 0.02:
        return Offset(
            0,
            "assumed",
            0.0,
            "the robot never stands still (or never moves) in this recording: clocks "
            "assumed to agree",
        )
    origin = int(motion.times_ns[0])
    cells = int((motion.times_ns[-1] - origin) // GRID_NS) + 1
    index = ((motion.times_ns - origin) // GRID_NS).astype(np.int64)
    signal = np.full(cells, np.nan)
    signal[index] = np.where(motion.moving, 1.0, -1.0)
    # Fill the grid between samples with the last sample's state.
    filled = np.where(np.isnan(signal), 0, 1).astype(bool)
    last = np.maximum.accumulate(np.where(filled, np.arange(cells), 0))
    signal = signal[last]
    cumulative = np.concatenate(([0.0], np.cumsum(signal)))
    take_cells = [
        ((a - origin) // GRID_NS, max((b - origin) // GRID_NS, (a - origin) // GRID_NS + 1))
        for a, b in takes_ns
    ]
    total = sum(b - a for a, b in take_cells)
    reach = int(search_s * 1e9 // GRID_NS)
    shifts = np.arange(-reach, reach + 1)
    score = np.zeros(shifts.size)
    for a, b in take_cells:
        lo = np.clip(a - shifts, 0, cells)
        hi = np.clip(b - shifts, 0, cells)
        # Outside the recording counts as stillness (a take must not fall off the end).
        inside = cumulative[hi] - cumulative[lo]
        outside = (b - a) - (hi - lo)
        score += inside - outside
    best = int(np.argmax(score))
    # Equal scores form a plateau as wide as the sampling blur: take its middle (of the
    # plateau nearest zero, should there be several).
    ties = np.flatnonzero(score == score[best])
    runs = np.split(ties, np.flatnonzero(np.diff(ties) > 1) + 1)
    plateau = min(runs, key=lambda r: abs(int(shifts[r[len(r) // 2]])))
    best = int(plateau[len(plateau) // 2])
    share = float((score[best] + total) / (2 * total)) if total else 0.0
    offset = int(shifts[best]) * GRID_NS
    return Offset(offset, "motion", share, f"{share:.0%} of the takes' time lies over motion")


def takes_in_recording(
    takes_ns: Sequence[tuple[int, int]], offset: Offset, motion: Motion
) -> list[tuple[int, int] | None]:
    """Each take's span on the recording's clock, clipped to it; None when it lies outside."""
    out: list[tuple[int, int] | None] = []
    for a, b in takes_ns:
        start, end = a - offset.offset_ns, b - offset.offset_ns
        if start < motion.start_ns - EDGE_TOLERANCE_NS or end > motion.end_ns + EDGE_TOLERANCE_NS:
            out.append(None)
            continue
        start, end = max(start, motion.start_ns), min(end, motion.end_ns)
        out.append((start, end) if end > start else None)
    return out
