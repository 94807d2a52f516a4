"""Timing statistics of message streams: plain functions over numpy arrays of nanosecond times."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# Below this span a rate is noise (or synthetic timestamps), not a measurement.
MIN_RATE_SPAN_NS = 1_000_000

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class StreamTiming:
    """Timing of one stream. Fields are None where too few messages make them meaningless."""

    count: int
    first_ns: int | None
    last_ns: int | None
    span_s: float
    rate_hz: float | None
    mean_interval_ms: float | None
    jitter_ms: float | None
    longest_gap_ms: float | None
    longest_gap_start_ns: int | None
    note: str | None


def stream_timing(times_ns: IntArray) -> StreamTiming:
    """Summarise the arrival times of one stream (any order; sorted here).

    Assumes nanosecond integer times. Never returns NaN or inf: the rate is None (with a note)
    when the stream has under two messages or spans less than a millisecond, and jitter (the
    population standard deviation of intervals) needs at least two intervals.
    """
    count = int(times_ns.size)
    if count == 0:
        return StreamTiming(0, None, None, 0.0, None, None, None, None, None, "no messages")
    times = np.sort(times_ns)
    first, last = int(times[0]), int(times[-1])
    span_ns = last - first
    if count == 1:
        return StreamTiming(1, first, last, 0.0, None, None, None, None, None, "single message")
    intervals = np.diff(times)
    gap_index = int(np.argmax(intervals))
    longest_ns = int(intervals[gap_index])
    # Python int division is correctly rounded, so the mean never exceeds the longest gap.
    mean_interval_ns = span_ns / (count - 1)
    jitter_ms = float(np.std(intervals.astype(np.float64))) / 1e6 if count >= 3 else None
    rate_hz: float | None = None
    note: str | None = None
    if span_ns < MIN_RATE_SPAN_NS:
        note = f"all {count} messages within {span_ns:,} ns: rate not meaningful"
    else:
        rate_hz = (count - 1) * 1e9 / span_ns
    return StreamTiming(
        count=count,
        first_ns=first,
        last_ns=last,
        span_s=span_ns / 1e9,
        rate_hz=rate_hz,
        mean_interval_ms=mean_interval_ns / 1e6,
        jitter_ms=jitter_ms,
        longest_gap_ms=longest_ns / 1e6,
        longest_gap_start_ns=int(times[gap_index]),
        note=note,
    )


def nearest_sample_offset_ms(
    frame_log_ns: IntArray,
    frame_stamp_ns: IntArray,
    sample_log_ns: IntArray,
    sample_stamp_ns: IntArray,
) -> npt.NDArray[np.float64]:
    """Return, per frame, frame stamp minus the stamp of the sample logged nearest to it, in ms.

    Pairing happens on log (arrival) time, the comparison on stamps (capture time): a camera
    whose stamps run 200 ms behind the joint states it arrived with is 200 ms out of sync even
    though a joint sample arrived within a few ms of every frame. Pass the log times as stamps
    to measure plain arrival distance. Assumes at least one sample; arrays of one stream are
    aligned element-wise and need not be sorted. Negative means the frame's stamp is earlier.
    """
    order = np.argsort(sample_log_ns, kind="stable")
    sample_log = sample_log_ns[order]
    sample_stamp = sample_stamp_ns[order]
    last = sample_log.size - 1
    right = np.clip(np.searchsorted(sample_log, frame_log_ns), 0, last)
    left = np.clip(right - 1, 0, last)
    take_left = np.abs(frame_log_ns - sample_log[left]) <= np.abs(sample_log[right] - frame_log_ns)
    nearest = np.where(take_left, left, right)
    return (frame_stamp_ns - sample_stamp[nearest]).astype(np.float64) / 1e6
