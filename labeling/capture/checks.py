"""Checks of a read recording against a capture spec: streams present, rates, sync, coverage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .decode import is_image_channel, is_joint_channel
from .reader import Channel, FileInfo
from .spec import CaptureSpec
from .stats import IntArray, StreamTiming, nearest_sample_offset_ms


@dataclass(frozen=True)
class Check:
    """One verdict with the numbers behind it (``evidence`` is JSON-serialisable)."""

    name: str
    passed: bool
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Stream:
    """Everything collected about one topic. ``stamps`` holds capture stamps (ns) when every
    message carried a usable one, else None; it is aligned with ``times`` (log times)."""

    topic: str
    channel: Channel
    times: IntArray
    stamps: IntArray | None
    timing: StreamTiming

    @property
    def count(self) -> int:
        return self.timing.count


def files_check(files: list[FileInfo]) -> Check:
    """Pass when every file was read to its end and agrees with its own summary statistics."""
    evidence: dict[str, Any] = {}
    problems: list[str] = []
    for info in files:
        evidence[info.path.name] = {
            "bytes": info.size_bytes,
            "messages": info.messages,
            "chunks": info.chunks,
            "compression": sorted(info.compressions),
            "has_summary": info.has_summary,
            "summary_message_count": info.indexed_message_count,
            "out_of_order_messages": info.out_of_order,
        }
        if not info.complete:
            problems.append(f"{info.path.name} was not read to its end")
        elif info.indexed_message_count not in (None, info.messages):
            problems.append(
                f"{info.path.name}: summary counts {info.indexed_message_count:,} messages "
                f"but {info.messages:,} were read"
            )
    total = sum(info.messages for info in files)
    if problems:
        return Check("files_read", False, "; ".join(problems), evidence)
    return Check("files_read", True, f"{len(files)} file(s) read, {total:,} messages", evidence)


def _pick(candidates: list[Stream], prefer: Any = None) -> Stream | None:
    if not candidates:
        return None
    return max(candidates, key=lambda s: (prefer(s) if prefer else 0, s.count, -len(s.topic)))


def camera_streams_check(
    spec: CaptureSpec, streams: list[Stream]
) -> tuple[Check, dict[str, Stream]]:
    """Match every spec camera to the image topic whose name contains it (the busiest one).

    Returns the check and the matched streams by camera name (cameras with messages only).
    """
    found: dict[str, Stream] = {}
    evidence: dict[str, Any] = {}
    problems: list[str] = []
    for camera in spec.cameras:
        needle = camera.name.lower()
        if camera.topic:
            named = [s for s in streams if s.topic == camera.topic]
        else:
            named = [s for s in streams if needle in s.topic.lower()]
        images = [s for s in named if is_image_channel(s.channel)]
        chosen = _pick(images)
        evidence[camera.name] = {
            "topic": chosen.topic if chosen else None,
            "messages": chosen.count if chosen else 0,
            "image_topics": [s.topic for s in images],
            "other_topics_with_name": [s.topic for s in named if s not in images],
        }
        if chosen is None:
            hint = ""
            if named:
                hint = f"; {', '.join(s.topic for s in named)} match the name but carry no images"
            where = (
                f"declared topic {camera.topic} is not in the recording"
                if camera.topic
                else f"no image topic contains {camera.name!r}"
            )
            problems.append(f"missing camera stream {camera.name!r} ({where}{hint})")
        elif chosen.count == 0:
            problems.append(
                f"camera {camera.name!r}: {chosen.topic} is declared but has no messages"
            )
        else:
            found[camera.name] = chosen
    if not spec.cameras:
        return Check("camera_streams", True, "no cameras required", evidence), found
    if problems:
        return Check("camera_streams", False, "; ".join(problems), evidence), found
    listing = ", ".join(f"{name} on {stream.topic}" for name, stream in found.items())
    return Check("camera_streams", True, f"all cameras present: {listing}", evidence), found


def joint_stream_check(streams: list[Stream]) -> tuple[Check, Stream | None]:
    """Find the joint/action stream, preferring a JointState schema, then the busiest topic."""
    candidates = [s for s in streams if is_joint_channel(s.channel)]
    chosen = _pick(candidates, prefer=lambda s: "JointState" in s.channel.schema_name)
    evidence = {
        "topic": chosen.topic if chosen else None,
        "schema": chosen.channel.schema_name if chosen else None,
        "messages": chosen.count if chosen else 0,
        "candidates": [s.topic for s in candidates],
    }
    if chosen is None:
        message = "no joint/action stream (no JointState schema, no topic containing joint_states or action)"
        return Check("joint_stream", False, message, evidence), None
    if chosen.count == 0:
        return Check(
            "joint_stream", False, f"{chosen.topic} is declared but has no messages", evidence
        ), None
    return Check(
        "joint_stream", True, f"joint stream {chosen.topic} ({chosen.count:,} messages)", evidence
    ), chosen


def rates_check(spec: CaptureSpec, cameras: dict[str, Stream], joint: Stream | None) -> Check:
    """Compare each found stream's mean rate with the spec's fps / control rate."""
    expected: list[tuple[str, Stream, float]] = [
        (f"camera {camera.name}", cameras[camera.name], camera.fps)
        for camera in spec.cameras
        if camera.name in cameras and camera.fps is not None
    ]
    if joint is not None and spec.control_rate_hz is not None:
        expected.append(("joint stream", joint, spec.control_rate_hz))
    evidence: dict[str, Any] = {"tolerance": spec.rate_tolerance}
    problems: list[str] = []
    for label, stream, target in expected:
        observed = stream.timing.rate_hz
        deviation = None if observed is None else abs(observed - target) / target
        evidence[stream.topic] = {
            "expected_hz": target,
            "observed_hz": observed,
            "deviation": deviation,
            "jitter_ms": stream.timing.jitter_ms,
            "longest_gap_ms": stream.timing.longest_gap_ms,
        }
        if observed is None or deviation is None:
            problems.append(f"{label} {stream.topic}: rate not measurable ({stream.timing.note})")
        elif deviation > spec.rate_tolerance:
            problems.append(
                f"{label} {stream.topic} runs at {observed:.1f} Hz, expected {target:g} Hz "
                f"(±{spec.rate_tolerance:.0%})"
            )
    if not expected:
        return Check("stream_rates", True, "no expected rates to check", evidence)
    if problems:
        return Check("stream_rates", False, "; ".join(problems), evidence)
    return Check("stream_rates", True, f"{len(expected)} stream rate(s) within tolerance", evidence)


def sync_check(
    spec: CaptureSpec, cameras: dict[str, Stream], joint: Stream | None, start_ns: int
) -> Check:
    """Measure, per camera frame, the skew to the joint sample that arrived nearest to it.

    Uses capture stamps when both streams carry them, else log times (see
    :func:`~labeling.capture.stats.nearest_sample_offset_ms`).
    """
    limits = {"max_p95_ms": spec.max_skew_p95_ms, "max_worst_ms": spec.max_skew_worst_ms}
    if not spec.cameras:
        return Check("synchronisation", True, "no cameras required", limits)
    if joint is None or not cameras:
        missing = "joint stream" if joint is None else "camera streams"
        return Check("synchronisation", False, f"not checked: no {missing} found", limits)
    evidence: dict[str, Any] = dict(limits)
    problems: list[str] = []
    offsets_ms = {c.name: c.clock_offset_ms for c in spec.cameras}
    for name, camera in cameras.items():
        use_stamps = camera.stamps is not None and joint.stamps is not None
        frame_stamps = camera.stamps if camera.stamps is not None and use_stamps else camera.times
        if use_stamps and offsets_ms.get(name):
            # The calibrated offset of the camera's clock: capture time = stamp − offset.
            frame_stamps = frame_stamps - round(offsets_ms[name] * 1e6)
        joint_stamps = joint.stamps if joint.stamps is not None and use_stamps else joint.times
        offsets = nearest_sample_offset_ms(camera.times, frame_stamps, joint.times, joint_stamps)
        skews = np.abs(offsets)
        worst_index = int(np.argmax(skews))
        worst, p95 = float(skews[worst_index]), float(np.percentile(skews, 95))
        evidence[camera.topic] = {
            "camera": name,
            "frames": int(skews.size),
            "time_base": "header stamps" if use_stamps else "log time",
            "worst_ms": worst,
            "p95_ms": p95,
            "median_offset_ms": float(np.median(offsets)),
            "worst_at_s": (int(camera.times[worst_index]) - start_ns) / 1e9,
        }
        if worst > spec.max_skew_worst_ms or p95 > spec.max_skew_p95_ms:
            problems.append(
                f"camera {name} ({camera.topic}) vs {joint.topic}: worst skew {worst:.0f} ms, "
                f"p95 {p95:.0f} ms (limits {spec.max_skew_worst_ms:g} / {spec.max_skew_p95_ms:g} ms)"
            )
    if problems:
        return Check("synchronisation", False, "; ".join(problems), evidence)
    return Check(
        "synchronisation", True, f"{len(cameras)} camera(s) in sync with {joint.topic}", evidence
    )


def coverage_check(spec: CaptureSpec, required: list[Stream], start_ns: int, end_ns: int) -> Check:
    """Fail a required stream that starts late or stops early relative to the whole recording."""
    duration_s = (end_ns - start_ns) / 1e9
    tolerance = spec.stop_tolerance_for(duration_s)
    evidence: dict[str, Any] = {"tolerance_s": tolerance, "recording_s": duration_s}
    problems: list[str] = []
    for stream in required:
        first, last = stream.timing.first_ns, stream.timing.last_ns
        if first is None or last is None:
            continue
        late, early = (first - start_ns) / 1e9, (end_ns - last) / 1e9
        evidence[stream.topic] = {"starts_after_s": late, "stops_before_end_s": early}
        if early > tolerance:
            problems.append(
                f"{stream.topic} stopped {early:.2f} s before the recording ended "
                f"(at {(last - start_ns) / 1e9:.2f} s of {duration_s:.2f} s; tolerance {tolerance:.2f} s)"
            )
        if late > tolerance:
            problems.append(
                f"{stream.topic} started {late:.2f} s late (tolerance {tolerance:.2f} s)"
            )
    if not required:
        return Check("stream_coverage", True, "no required streams found to check", evidence)
    if problems:
        return Check("stream_coverage", False, "; ".join(problems), evidence)
    return Check(
        "stream_coverage", True, f"{len(required)} required stream(s) span the recording", evidence
    )
