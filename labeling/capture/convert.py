"""Convert one recording (an MCAP file, or a folder of split files) into episode bundles.

Two streaming passes over the files, so memory does not grow with the recording's length:

1. read every message's capture time (the header stamp where every message of the stream has
   one, else the log time, less the camera's declared clock offset) and the joint values;
   resolve the state, action and camera streams (:mod:`.streams`); put them on the frame grid
   and apply the gap policy (:mod:`.align`);
2. read again, decode exactly the images the rows take, in order, and stream them into one
   video per camera and episode (:mod:`.video`).

An *episode bundle* is a folder: ``frames.parquet`` (``timestamp`` = frame_index/fps,
``frame_index``, ``observation.state``, ``action``), ``videos/<video key>.mp4`` (frame *k* at
*k*/fps, one frame per row) and ``bundle.json`` (length, fps, names, cameras, statistics, the
synchronisation report). :mod:`labeling.exports.lerobot` assembles bundles into datasets.

Bad input — a damaged file, an image that does not decode, a resolution change, stamps that go
backwards, a JointState without names, a missing joint or stream — raises ConversionError whose
problems name the file, the topic and the time; nothing is left at the output path.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import uuid
from array import array
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import align
from .decode import (
    JointDecoder,
    StampReader,
    is_image_channel,
    is_joint_channel,
    joint_decoder_for,
    stamp_reader_for,
)
from .feature_stats import as_lists, feature_stats
from .images import ImageDecodeError, image_decoder_for
from .messages import CaptureReadError, Channel
from .reader import Recording
from .streams import Resolved, StreamMap, StreamMappingError, TopicSummary, resolve
from .video import CODECS, ImageStats, VideoEncoder, VideoError, VideoHung, VideoInfo

Progress = Callable[[int, int], None]

_MAX_LISTED_RANGES = 50


class ConversionError(Exception):
    """The recording cannot be converted; ``problems`` name the file, topic and time."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@dataclass
class EpisodeBundle:
    path: Path
    length: int
    start_ns: int
    report: dict[str, Any]


@dataclass
class ConversionResult:
    """What one recording became: its episode bundles (one, several when split, or none)."""

    episodes: list[EpisodeBundle]
    report: dict[str, Any]
    excluded: str | None = None
    warnings: list[str] = field(default_factory=list)


# --- pass 1: times and joint values per topic ----------------------------------------------------


class _Topic:
    __slots__ = (
        "channel",
        "count",
        "file_starts",
        "first_problem",
        "image",
        "joint",
        "joint_decoder",
        "joint_reason",
        "log_times",
        "stamp_reader",
        "stamps",
        "stamps_ok",
        "values",
    )

    def __init__(self, channel: Channel, *, image: bool, joint: bool) -> None:
        self.channel = channel
        self.image = image
        self.joint = joint
        self.count = 0
        self.log_times = array("q")
        self.stamp_reader: StampReader | None = (
            stamp_reader_for(channel) if image or joint else None
        )
        self.stamps = array("q")
        self.stamps_ok = self.stamp_reader is not None
        self.joint_decoder: JointDecoder | None = None
        self.joint_reason: str | None = None
        if joint:
            self.joint_decoder, self.joint_reason = joint_decoder_for(channel)
        self.values: list[dict[str, float] | None] = []
        self.first_problem: tuple[int, str] | None = None  # (message index, problem)
        self.file_starts: list[tuple[int, Path]] = []

    def capture_times(self) -> np.ndarray:
        source = (
            self.stamps if self.stamps_ok and len(self.stamps) == self.count else self.log_times
        )
        return np.frombuffer(source, dtype=np.int64).copy() if self.count else np.empty(0, np.int64)

    @property
    def time_source(self) -> str:
        return "header stamp" if self.stamps_ok and len(self.stamps) == self.count else "log time"

    def file_at(self, index: int) -> Path:
        starts = [s for s, _ in self.file_starts]
        return self.file_starts[max(0, bisect_right(starts, index) - 1)][1]


def _scan(recording: Recording) -> dict[str, _Topic]:
    topics: dict[str, _Topic] = {}
    by_channel: dict[int, _Topic] = {}
    files: dict[int, Path] = {}
    for message in recording.messages():
        channel = message.channel
        topic = by_channel.get(id(channel))
        if topic is None:
            topic = topics.get(channel.topic)
            if topic is None:
                image = is_image_channel(channel)
                joint = not image and is_joint_channel(channel)
                topic = _Topic(channel, image=image, joint=joint)
                topics[channel.topic] = topic
            by_channel[id(channel)] = topic
            files[id(channel)] = recording.file_of(channel)
        path = files[id(channel)]
        if not topic.file_starts or topic.file_starts[-1][1] != path:
            topic.file_starts.append((topic.count, path))
        topic.log_times.append(min(message.log_time_ns, 2**63 - 1))
        if topic.stamps_ok and topic.stamp_reader is not None:
            stamp = topic.stamp_reader(message.data)
            if stamp is None or stamp <= 0:
                topic.stamps_ok = False
            else:
                topic.stamps.append(stamp)
        if topic.joint and topic.joint_decoder is not None:
            try:
                decoded = topic.joint_decoder(message.data)
            except Exception as exc:  # the ROS 2 and protobuf decoders raise assorted types
                decoded = None
                if topic.first_problem is None:
                    topic.first_problem = (topic.count, f"message does not decode ({exc})")
            topic.values.append(decoded)
        topic.count += 1
    for channel in recording.channels:
        if channel.topic not in topics:
            topics[channel.topic] = _Topic(
                channel, image=is_image_channel(channel), joint=is_joint_channel(channel)
            )
            topics[channel.topic].file_starts.append((0, recording.file_of(channel)))
    return topics


# --- the conversion ---------------------------------------------------------------------------------


class _Where:
    """Names a message the way a field lead needs it: file, topic, time into the recording."""

    def __init__(self, origin_ns: int) -> None:
        self.origin_ns = origin_ns

    def __call__(self, topic: _Topic, index: int, problem: str, time_ns: int | None = None) -> str:
        if time_ns is None:
            time_ns = int(topic.log_times[index]) if index < topic.count else self.origin_ns
        return (
            f"{topic.file_at(index).name}: {topic.channel.topic} at "
            f"{(time_ns - self.origin_ns) / 1e9:.3f} s: {problem}"
        )


def _joint_matrix(
    topic: _Topic, joints: Sequence[str], where: _Where, what: str
) -> tuple[np.ndarray, np.ndarray, int]:
    """The topic's samples as (capture times, values in joint order); samples lacking a joint
    are left out (and counted)."""
    if topic.joint_decoder is None:
        raise ConversionError(
            [where(topic, 0, f"the {what} stream cannot be decoded: {topic.joint_reason}")]
        )
    if topic.first_problem is not None:
        index, problem = topic.first_problem
        raise ConversionError([where(topic, index, problem)])
    seen: set[str] = set()
    for index, value in enumerate(topic.values):
        if not value:
            raise ConversionError(
                [
                    where(
                        topic,
                        index,
                        "a JointState without joint names (or positions): its values cannot be "
                        "put in the embodiment's joint order",
                    )
                ]
            )
        seen.update(value)
    missing = [j for j in joints if j not in seen]
    if missing:
        raise ConversionError(
            [
                where(
                    topic,
                    0,
                    f"joint{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                    f"{'are' if len(missing) > 1 else 'is'} missing from the {what} stream "
                    f"(it carries {', '.join(sorted(seen))})",
                )
            ]
        )
    values = np.array(
        [[v.get(j, math.nan) for j in joints] for v in topic.values if v is not None],
        dtype=np.float64,
    ).reshape(-1, len(joints))
    times = topic.capture_times()
    complete = ~np.isnan(values).any(axis=1)
    return times[complete], values[complete].astype(np.float32), int((~complete).sum())


def _check_monotonic(topic: _Topic, times: np.ndarray, where: _Where, offset_ns: int = 0) -> None:
    if times.size < 2:
        return
    backwards = np.flatnonzero(np.diff(times) < 0)
    if backwards.size:
        i = int(backwards[0]) + 1
        raise ConversionError(
            [
                where(
                    topic,
                    i,
                    f"capture time goes backwards ({topic.time_source} {int(times[i]) + offset_ns} "
                    f"ns after {int(times[i - 1]) + offset_ns} ns)",
                )
            ]
        )


def _fps(stream_map: StreamMap, topics: dict[str, _Topic], resolved: Resolved) -> float:
    if stream_map.fps:
        return float(stream_map.fps)
    rates: list[float] = []
    for camera in stream_map.cameras:
        if camera.fps:
            rates.append(camera.fps)
        else:
            interval = align.median_interval_ns(
                topics[resolved.cameras[camera.name]].capture_times()
            )
            if interval > 0:
                rates.append(round(align.NS / interval, 2))
    if not rates:
        interval = align.median_interval_ns(topics[resolved.state].capture_times())
        if interval <= 0:
            raise ConversionError(["cannot tell the dataset fps: no camera and a single state"])
        rates.append(round(align.NS / interval, 2))
    return max(rates)


def _ranges(pairs: list[tuple[int, int]]) -> list[list[int]]:
    return [[a, b] for a, b in pairs[:_MAX_LISTED_RANGES]]


HUNG_ATTEMPTS = 2
"""Conversions tried when the video encoder hangs (:class:`VideoHung`) before giving up."""


def convert_recording(
    paths: Sequence[Path | str],
    stream_map: StreamMap,
    outdir: Path,
    *,
    codec: str = "libsvtav1",
    progress: Progress | None = None,
    window: tuple[int, int] | None = None,
) -> ConversionResult:
    """Convert the recording in ``paths`` into episode bundles under ``outdir`` (``ep-000``…).

    ``window`` (capture times in ns, the recording's clock) keeps one take of a longer
    recording. ``outdir`` appears only when the conversion succeeded (it is replaced if it
    exists). Raises ConversionError with the problems (file, topic, time) on bad input;
    converts again when the encoder hangs, and raises VideoHung after
    :data:`HUNG_ATTEMPTS` hangs (a job fails and is retried, nothing is stored as bad).
    """
    for _ in range(HUNG_ATTEMPTS - 1):
        with contextlib.suppress(VideoHung):
            return _convert_once(
                paths, stream_map, outdir, codec=codec, progress=progress, window=window
            )
    return _convert_once(paths, stream_map, outdir, codec=codec, progress=progress, window=window)


def _convert_once(
    paths: Sequence[Path | str],
    stream_map: StreamMap,
    outdir: Path,
    *,
    codec: str,
    progress: Progress | None,
    window: tuple[int, int] | None,
) -> ConversionResult:
    if codec not in CODECS:
        raise ConversionError([f"unknown codec {codec!r} (one of {', '.join(CODECS)})"])
    outdir = Path(outdir)
    try:
        recording = Recording(paths)
        topics = _scan(recording)
    except CaptureReadError as exc:
        raise ConversionError([str(exc)]) from None
    summaries = [
        TopicSummary(t.channel.topic, t.channel.schema_name, t.count, t.image, t.joint)
        for t in topics.values()
    ]
    try:
        resolved = resolve(stream_map, summaries)
    except StreamMappingError as exc:
        names = ", ".join(p.name for p in recording.paths)
        raise ConversionError([f"{names}: {exc}"]) from None
    firsts = [int(t.log_times[0]) for t in topics.values() if t.count]
    where = _Where(min(firsts) if firsts else 0)
    warnings: list[str] = []

    # Streams on one clock.
    state_topic = topics[resolved.state]
    state_times, state_values, state_incomplete = _joint_matrix(
        state_topic, stream_map.joints, where, "state"
    )
    _check_monotonic(state_topic, state_times, where)
    if state_incomplete:
        warnings.append(f"{resolved.state}: {state_incomplete:,} messages lack a joint; not used")
    action_times = action_values = None
    if resolved.action is not None:
        action_topic = topics[resolved.action]
        action_times, action_values, incomplete = _joint_matrix(
            action_topic, stream_map.joints, where, "action"
        )
        _check_monotonic(action_topic, action_times, where)
        if incomplete:
            warnings.append(f"{resolved.action}: {incomplete:,} messages lack a joint; not used")
    camera_times: dict[str, np.ndarray] = {}
    for camera in stream_map.cameras:
        topic = topics[resolved.cameras[camera.name]]
        offset = round(camera.clock_offset_ms * 1e6)
        times = topic.capture_times() - offset
        _check_monotonic(topic, times, where, offset)
        camera_times[camera.name] = times
    fps = _fps(stream_map, topics, resolved)
    period = align.frame_period_ns(fps)
    required: list[tuple[str, np.ndarray]] = [(f"state {resolved.state}", state_times)]
    if action_times is not None:
        required.append((f"action {resolved.action}", action_times))
    required += [(f"camera {n} {resolved.cameras[n]}", t) for n, t in camera_times.items()]
    for label, times in required:
        if times.size == 0:
            raise ConversionError([f"{label} holds no usable samples"])
    start = max(int(t[0]) for _, t in required)
    end = min(int(t[-1]) for _, t in required)
    if resolved.action is None:
        end -= round(period)  # the last row's action is the state one frame later
    if window is not None:
        if window[1] <= start or window[0] >= end:
            raise ConversionError(
                [
                    f"the take {(window[0] - where.origin_ns) / 1e9:.3f}–"
                    f"{(window[1] - where.origin_ns) / 1e9:.3f} s lies outside the recording's "
                    f"streams ({(start - where.origin_ns) / 1e9:.3f}–{(end - where.origin_ns) / 1e9:.3f} s)"
                ]
            )
        start, end = max(start, window[0]), min(end, window[1])
    grid = align.frame_grid(start, end, fps)
    if grid.size < 2:
        spans = "; ".join(
            f"{label} {(int(t[0]) - where.origin_ns) / 1e9:.3f}–{(int(t[-1]) - where.origin_ns) / 1e9:.3f} s"
            for label, t in required
        )
        raise ConversionError([f"the required streams do not overlap in time ({spans})"])
    matches = [align.latest_at_or_before("state", "state", resolved.state, state_times, grid, fps)]
    if action_times is not None and resolved.action is not None:
        matches.append(
            align.latest_at_or_before("action", "action", resolved.action, action_times, grid, fps)
        )
    else:
        next_grid = grid + round(period)
        matches.append(
            align.latest_at_or_before(
                "action", "action", f"{resolved.state} (next state)", state_times, next_grid, fps
            )
        )
    for camera in stream_map.cameras:
        matches.append(
            align.nearest(
                camera.name,
                "camera",
                resolved.cameras[camera.name],
                camera_times[camera.name],
                grid,
                fps,
            )
        )
    ok = np.logical_and.reduce([m.ok for m in matches])
    min_frames = max(2, math.ceil(stream_map.min_segment_s * fps))
    pieces = align.segments(ok, stream_map.gap_policy, min_frames=min_frames)
    report: dict[str, Any] = {
        "files": [str(p) for p in recording.paths],
        "window_ns": list(window) if window else None,
        "fps": fps,
        "rows": int(grid.size),
        "start_ns": int(grid[0]),
        "duration_s": float((grid[-1] - grid[0]) / 1e9),
        "gap_policy": stream_map.gap_policy,
        "action_convention": "recorded" if resolved.action else "next_state",
        "time_source": {
            "state": state_topic.time_source,
            **(
                {"action": topics[resolved.action].time_source}
                if resolved.action
                else {"action": "state, one frame later"}
            ),
            **{c.name: topics[resolved.cameras[c.name]].time_source for c in stream_map.cameras},
        },
        "clock_offsets_ms": {c.name: c.clock_offset_ms for c in stream_map.cameras},
        "streams": [m.summary() for m in matches],
        "bad_rows": _ranges(pieces.bad_rows),
        "dropped_rows": _ranges(pieces.dropped),
        "verdict": "synced",
        "warnings": warnings,
    }
    if pieces.out_of_sync:
        report["verdict"] = "out_of_sync"
    elif pieces.bad_rows and pieces.ranges:
        report["verdict"] = "split" if len(pieces.ranges) > 1 else "trimmed"
    if pieces.excluded or not pieces.ranges:
        reason = pieces.excluded or (
            f"no stretch of {min_frames:,} frames or more has every stream in sync"
        )
        report["verdict"] = "excluded"
        report["excluded"] = reason
        return ConversionResult([], report, excluded=reason, warnings=warnings)

    # Pass 2: decode the images the rows take and encode them.
    work = outdir.with_name(f".{outdir.name}.partial-{uuid.uuid4().hex[:8]}")
    work.mkdir(parents=True)
    try:
        bundles = _write_bundles(
            recording=recording,
            stream_map=stream_map,
            resolved=resolved,
            topics=topics,
            where=where,
            grid=grid,
            fps=fps,
            matches=matches,
            state_values=state_values,
            action_values=action_values if action_values is not None else state_values,
            ranges=pieces.ranges,
            work=work,
            codec=codec,
            warnings=warnings,
            report=report,
            progress=progress,
        )
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    if outdir.exists():
        shutil.rmtree(outdir)
    work.replace(outdir)
    for bundle in bundles:
        bundle.path = outdir / bundle.path.name
    return ConversionResult(bundles, report, warnings=warnings)


def _write_bundles(
    *,
    recording: Recording,
    stream_map: StreamMap,
    resolved: Resolved,
    topics: dict[str, _Topic],
    where: _Where,
    grid: np.ndarray,
    fps: float,
    matches: list[align.Match],
    state_values: np.ndarray,
    action_values: np.ndarray,
    ranges: list[tuple[int, int]],
    work: Path,
    codec: str,
    warnings: list[str],
    report: dict[str, Any],
    progress: Progress | None,
) -> list[EpisodeBundle]:
    rows = int(grid.size)
    segment_of = np.full(rows, -1, np.int64)
    for s, (a, b) in enumerate(ranges):
        segment_of[a:b] = s
    by_topic = {resolved.cameras[c.name]: c for c in stream_map.cameras}
    cam_match = {m.name: m for m in matches if m.kind == "camera"}
    pointer = {c.name: 0 for c in stream_map.cameras}
    # Skip rows outside every episode up front, so a camera is done once its last kept row is.
    kept = segment_of >= 0
    last_needed = {
        c.name: int(cam_match[c.name].index[kept].max()) if kept.any() else -1
        for c in stream_map.cameras
    }
    counters = dict.fromkeys(by_topic, 0)
    decoders: dict[str, Any] = {}
    encoders: dict[tuple[int, str], VideoEncoder] = {}
    stats: dict[tuple[int, str], ImageStats] = {}
    sizes: dict[str, tuple[int, int]] = {}
    infos: dict[tuple[int, str], VideoInfo] = {}
    pending = {c.name for c in stream_map.cameras}
    written = 0
    total = int(kept.sum()) * max(1, len(stream_map.cameras))
    try:
        if pending:
            for message in recording.messages():
                camera = by_topic.get(message.channel.topic)
                if camera is None:
                    continue
                name = camera.name
                j = counters[message.channel.topic]
                counters[message.channel.topic] = j + 1
                if name not in pending:
                    continue
                index = cam_match[name].index
                p = pointer[name]
                image = None
                while p < rows and index[p] == j:
                    s = int(segment_of[p])
                    if s >= 0:
                        if image is None:
                            image = _decode(message, decoders, topics, j, where)
                            _check_size(
                                camera,
                                image,
                                sizes,
                                topics[message.channel.topic],
                                j,
                                where,
                                warnings,
                            )
                        key = (s, name)
                        encoder = encoders.get(key)
                        if encoder is None:
                            height, width = image.shape[:2]
                            folder = work / f"ep-{s:03d}" / "videos"
                            folder.mkdir(parents=True, exist_ok=True)
                            encoder = VideoEncoder(
                                folder / f"{camera.key}.mp4",
                                width=width,
                                height=height,
                                fps=fps,
                                codec=codec,
                            )
                            encoders[key] = encoder
                            stats[key] = ImageStats()
                        encoder.write(image)
                        stats[key].add(image)
                        written += 1
                        if progress is not None and written % 64 == 0:
                            progress(written, total)
                    p += 1
                pointer[name] = p
                if j >= last_needed[name]:
                    pending.discard(name)
                    if not pending:
                        break
        for (s, name), encoder in list(encoders.items()):
            infos[(s, name)] = encoder.close()
            del encoders[(s, name)]
    except CaptureReadError as exc:
        raise ConversionError([str(exc)]) from None
    except VideoHung:
        raise  # not the recording's fault: the caller converts it again
    except VideoError as exc:
        raise ConversionError([str(exc)]) from None
    finally:
        for encoder in encoders.values():
            encoder.abort()
    bundles: list[EpisodeBundle] = []
    for s, (a, b) in enumerate(ranges):
        length = b - a
        for camera in stream_map.cameras:
            info = infos.get((s, camera.name))
            if info is None or info.frames != length:
                got = info.frames if info else 0
                raise ConversionError(
                    [
                        f"camera {camera.name!r} ({resolved.cameras[camera.name]}): episode "
                        f"{s} has {got:,} video frames for {length:,} rows (the recording "
                        "changed while it was read?)"
                    ]
                )
        bundle = work / f"ep-{s:03d}"
        bundle.mkdir(parents=True, exist_ok=True)
        state = state_values[matches[0].index[a:b]]
        action = action_values[matches[1].index[a:b]]
        _write_frames(bundle / "frames.parquet", state, action, fps)
        window = np.zeros(rows, bool)
        window[a:b] = True
        episode_report = {
            "rows": [a, b],
            "length": length,
            "start_ns": int(grid[a]),
            "start_offset_s": float((grid[a] - grid[0]) / 1e9),
            "streams": [m.summary(window) for m in matches],
            "verdict": report["verdict"],
        }
        meta = {
            "length": length,
            "fps": fps,
            "state_names": list(stream_map.joints),
            "action_names": list(stream_map.joints),
            "action_convention": report["action_convention"],
            "cameras": {
                camera.key: {
                    "name": camera.name,
                    "width": infos[(s, camera.name)].width,
                    "height": infos[(s, camera.name)].height,
                    "codec": infos[(s, camera.name)].codec,
                    "pix_fmt": infos[(s, camera.name)].pix_fmt,
                    "fps": fps,
                    "info": infos[(s, camera.name)].lerobot_info(),
                }
                for camera in stream_map.cameras
            },
            "stats": {
                "observation.state": as_lists(feature_stats(state)),
                "action": as_lists(feature_stats(action)),
                **{c.key: stats[(s, c.name)].result() for c in stream_map.cameras},
            },
            "sync": episode_report,
        }
        (bundle / "bundle.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        bundles.append(EpisodeBundle(bundle, length, int(grid[a]), episode_report))
    if progress is not None:
        progress(total, total)
    return bundles


def _decode(
    message: Any, decoders: dict[str, Any], topics: dict[str, _Topic], j: int, where: _Where
) -> np.ndarray:
    topic_name = message.channel.topic
    decoder = decoders.get(topic_name)
    if decoder is None:
        try:
            decoder = image_decoder_for(message.channel)
        except ImageDecodeError as exc:
            raise ConversionError([where(topics[topic_name], j, str(exc))]) from None
        decoders[topic_name] = decoder
    try:
        image: np.ndarray = decoder(message.data)
    except ImageDecodeError as exc:
        raise ConversionError(
            [where(topics[topic_name], j, f"image does not decode ({exc})", message.log_time_ns)]
        ) from None
    return image


def _check_size(
    camera: Any,
    image: np.ndarray,
    sizes: dict[str, tuple[int, int]],
    topic: _Topic,
    j: int,
    where: _Where,
    warnings: list[str],
) -> None:
    height, width = image.shape[:2]
    first = sizes.get(camera.name)
    if first is None:
        sizes[camera.name] = (height, width)
        if camera.width and camera.height and (camera.width, camera.height) != (width, height):
            warnings.append(
                f"camera {camera.name!r} ({topic.channel.topic}) records {width}x{height}, the "
                f"embodiment declares {camera.width}x{camera.height}; encoded at {width}x{height}"
            )
    elif first != (height, width):
        raise ConversionError(
            [
                where(
                    topic,
                    j,
                    f"camera {camera.name!r} changes resolution from {first[1]}x{first[0]} to "
                    f"{width}x{height}",
                )
            ]
        )


def _write_frames(path: Path, state: np.ndarray, action: np.ndarray, fps: float) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    length = int(state.shape[0])
    frame_index = np.arange(length, dtype=np.int64)
    table = pa.table(
        {
            "timestamp": pa.array((frame_index / fps).astype(np.float32)),
            "frame_index": pa.array(frame_index),
            "observation.state": pa.FixedSizeListArray.from_arrays(
                pa.array(state.astype(np.float32).ravel()), state.shape[1]
            ),
            "action": pa.FixedSizeListArray.from_arrays(
                pa.array(action.astype(np.float32).ravel()), action.shape[1]
            ),
        }
    )
    pq.write_table(table, path)
