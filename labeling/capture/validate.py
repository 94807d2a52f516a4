"""Validate a recording in one streaming pass: collect per-topic times, then run the checks."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .calibration import CalibrationTracker, calibration_check
from .checks import (
    Check,
    Stream,
    camera_streams_check,
    coverage_check,
    files_check,
    joint_stream_check,
    rates_check,
    sync_check,
)
from .decode import StampReader, is_image_channel, is_joint_channel, stamp_reader_for
from .reader import CaptureMessage, Channel, Recording
from .report import CaptureReport, FileReport, TopicReport
from .spec import CaptureSpec, CaptureSpecError
from .stats import stream_timing

_INT64_MAX = 2**63 - 1


class _TopicCollector:
    """Log times of one topic, plus capture stamps for camera and joint topics."""

    __slots__ = ("channel", "stamp_reader", "stamps", "stamps_ok", "times", "tracker")

    def __init__(
        self, channel: Channel, *, sync_relevant: bool, tracker: CalibrationTracker | None
    ):
        self.channel = channel
        self.times = array("q")
        self.stamp_reader: StampReader | None = stamp_reader_for(channel) if sync_relevant else None
        self.stamps = array("q")
        self.stamps_ok = self.stamp_reader is not None
        self.tracker = tracker

    def add(self, message: CaptureMessage) -> None:
        try:
            self.times.append(message.log_time_ns)
        except OverflowError:  # log_time is u64 in MCAP; beyond 2262 is a broken clock anyway
            self.times.append(_INT64_MAX)
        if self.stamps_ok and self.stamp_reader is not None:
            stamp = self.stamp_reader(message.data)
            if stamp is None or stamp <= 0:
                # An unset stamp on any message makes the stream's stamps unusable for sync.
                self.stamps_ok = False
            else:
                self.stamps.append(stamp)
        if self.tracker is not None:
            self.tracker.observe(message)

    def stream(self, topic: str) -> Stream:
        times = np.frombuffer(self.times, dtype=np.int64) if self.times else np.empty(0, np.int64)
        stamps = (
            np.frombuffer(self.stamps, dtype=np.int64) if self.stamps_ok and self.stamps else None
        )
        return Stream(topic, self.channel, times, stamps, stream_timing(times))


def validate_recording(
    paths: Sequence[Path | str], spec: CaptureSpec | None, *, calibration: bool = False
) -> CaptureReport:
    """Read the recording in ``paths`` (files or rosbag2 directories) once and judge it.

    Without a spec the report lists the topics and passes when every file reads. With one it
    also checks cameras, the joint stream, rates, synchronisation and coverage; ``calibration``
    adds the action-range check. Raises CaptureReadError for missing, empty, non-MCAP,
    truncated or corrupt files (the message names the file and the damage), and
    CaptureSpecError when calibration is asked for without a spec.
    """
    if calibration and spec is None:
        raise CaptureSpecError("a calibration check needs a spec with action dimensions")
    recording = Recording(paths)
    tracker = CalibrationTracker() if calibration else None
    by_topic: dict[str, _TopicCollector] = {}
    by_channel: dict[Channel, _TopicCollector] = {}
    for message in recording.messages():
        collector = by_channel.get(message.channel)
        if collector is None:
            collector = _collector_for(message.channel, by_topic, spec, tracker)
            by_channel[message.channel] = collector
        collector.add(message)
    for channel in recording.channels:  # channels that never carried a message
        _collector_for(channel, by_topic, spec, tracker)

    streams = [collector.stream(topic) for topic, collector in by_topic.items()]
    firsts = [s.timing.first_ns for s in streams if s.timing.first_ns is not None]
    lasts = [s.timing.last_ns for s in streams if s.timing.last_ns is not None]
    start_ns = min(firsts) if firsts else None
    end_ns = max(lasts) if lasts else None
    checks = [files_check(recording.files)]
    if spec is not None and start_ns is not None and end_ns is not None:
        checks += _spec_checks(spec, streams, start_ns, end_ns)
    elif spec is not None:
        checks.append(Check("has_messages", False, "the recording holds no messages"))
    if spec is not None and tracker is not None:
        checks.append(calibration_check(spec, tracker))
    return CaptureReport(
        passed=all(check.passed for check in checks),
        files=[
            FileReport(
                path=str(info.path),
                size_bytes=info.size_bytes,
                messages=info.messages,
                chunks=info.chunks,
                compression=sorted(info.compressions),
                has_summary=info.has_summary,
            )
            for info in recording.files
        ],
        duration_s=0.0 if start_ns is None or end_ns is None else (end_ns - start_ns) / 1e9,
        start_time_ns=start_ns,
        message_count=sum(s.count for s in streams),
        topics=[_topic_report(s, start_ns) for s in sorted(streams, key=lambda s: s.topic)],
        checks=checks,
        spec_slug=spec.slug if spec is not None else None,
    )


def _collector_for(
    channel: Channel,
    by_topic: dict[str, _TopicCollector],
    spec: CaptureSpec | None,
    tracker: CalibrationTracker | None,
) -> _TopicCollector:
    # Topics, not channels, are the unit of the report: a rosbag2 split repeats each topic
    # under a new channel id in every file.
    collector = by_topic.get(channel.topic)
    if collector is None:
        joint = is_joint_channel(channel)
        collector = _TopicCollector(
            channel,
            sync_relevant=spec is not None and (joint or is_image_channel(channel)),
            tracker=tracker if joint else None,
        )
        by_topic[channel.topic] = collector
    return collector


def _spec_checks(
    spec: CaptureSpec, streams: list[Stream], start_ns: int, end_ns: int
) -> list[Check]:
    camera_check, cameras = camera_streams_check(spec, streams)
    joint_check, joint = joint_stream_check(streams)
    required = list(cameras.values()) + ([joint] if joint is not None else [])
    return [
        camera_check,
        joint_check,
        rates_check(spec, cameras, joint),
        sync_check(spec, cameras, joint, start_ns),
        coverage_check(spec, required, start_ns, end_ns),
    ]


def _topic_report(stream: Stream, start_ns: int | None) -> TopicReport:
    timing = stream.timing
    gap_at = None
    if timing.longest_gap_start_ns is not None and start_ns is not None:
        gap_at = (timing.longest_gap_start_ns - start_ns) / 1e9
    channel = stream.channel
    return TopicReport(
        topic=stream.topic,
        schema_name=channel.schema_name,
        schema_encoding=channel.schema_encoding,
        message_encoding=channel.message_encoding,
        count=timing.count,
        first_time_ns=timing.first_ns,
        last_time_ns=timing.last_ns,
        span_s=timing.span_s,
        rate_hz=timing.rate_hz,
        mean_interval_ms=timing.mean_interval_ms,
        jitter_ms=timing.jitter_ms,
        longest_gap_ms=timing.longest_gap_ms,
        longest_gap_at_s=gap_at,
        note=timing.note,
    )
