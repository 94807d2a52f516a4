"""Timing statistics and sync skew: invariants on random streams plus cases checked by hand."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.capture.stats import nearest_sample_offset_ms, stream_timing

MS = 1_000_000

timestamps = st.lists(st.integers(min_value=0, max_value=2**62), min_size=0, max_size=200)


def finite_or_none(value: object) -> bool:
    return value is None or not isinstance(value, float) or math.isfinite(value)


@settings(max_examples=300, deadline=None)
@given(timestamps)
def test_stream_timing_never_yields_nan_or_infinity(times):
    timing = stream_timing(np.array(times, dtype=np.int64))

    assert all(finite_or_none(v) for v in dataclasses.asdict(timing).values())
    assert timing.count == len(times)
    assert timing.span_s >= 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2**62), min_size=2, max_size=200))
def test_longest_gap_is_at_least_the_mean_interval(times):
    timing = stream_timing(np.array(times, dtype=np.int64))

    assert timing.longest_gap_ms is not None
    assert timing.mean_interval_ms is not None
    assert timing.longest_gap_ms >= timing.mean_interval_ms
    assert timing.longest_gap_start_ns in times


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**13), min_size=2, max_size=100))
def test_rate_is_reported_exactly_when_the_span_reaches_a_millisecond(times):
    timing = stream_timing(np.array(times, dtype=np.int64))

    span = max(times) - min(times)
    assert (timing.rate_hz is None) == (span < MS)
    if timing.rate_hz is not None:
        assert timing.rate_hz == pytest.approx((len(times) - 1) / (span / 1e9))
    else:
        assert timing.note is not None


def test_stream_timing_by_hand():
    times = np.array([40, 0, 10, 20], dtype=np.int64) * MS

    timing = stream_timing(times)

    assert timing.count == 4
    assert timing.rate_hz == pytest.approx(75.0)
    assert timing.mean_interval_ms == pytest.approx(40 / 3)
    assert timing.longest_gap_ms == pytest.approx(20.0)
    assert timing.longest_gap_start_ns == 20 * MS
    assert timing.jitter_ms == pytest.approx(np.std([10, 10, 20]))


def test_tiny_streams_have_no_rate_or_jitter():
    empty, single, pair = (stream_timing(np.array(t, dtype=np.int64)) for t in ([], [5], [0, MS]))

    assert (empty.count, empty.rate_hz, empty.note) == (0, None, "no messages")
    assert (single.rate_hz, single.note) == (None, "single message")
    assert pair.rate_hz == pytest.approx(1000.0)
    assert pair.jitter_ms is None


def test_nearest_sample_offset_by_hand():
    samples = np.array([0, 20, 40], dtype=np.int64) * MS
    frames = np.array([1, 29, 45], dtype=np.int64) * MS
    frame_stamps = frames - 200 * MS

    arrival = nearest_sample_offset_ms(frames, frames, samples, samples)
    stamped = nearest_sample_offset_ms(frames, frame_stamps, samples, samples)

    assert arrival.tolist() == [1.0, 9.0, 5.0]
    assert stamped.tolist() == [-199.0, -191.0, -195.0]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=100),
    st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=100),
)
def test_arrival_skew_is_the_distance_to_the_nearest_sample(samples, frames):
    s, f = np.array(samples, dtype=np.int64), np.array(frames, dtype=np.int64)

    skew = np.abs(nearest_sample_offset_ms(f, f, s, s))

    expected = [min(abs(x - y) for y in samples) / 1e6 for x in frames]
    assert skew.tolist() == pytest.approx(expected)
