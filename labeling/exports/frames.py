"""A LeRobot dataset with frames and video, from episodes and their recordings.

Recordings are converted in parallel threads (decoding and encoding run in FFmpeg and Pillow,
outside the GIL), each conversion stored once (:mod:`.conversions`), and the episodes added to
the dataset in the order given, whatever order the conversions finish in. An episode without a
recording, or whose recording cannot be converted or is left out by the gap policy, is not
written frame-less: it is named in ``meta/fieldcraft/left_out.jsonl`` with its reason and
counted in the summary.

Django-free: the service (:mod:`.services`) reads the database and hands episodes in.
"""

from __future__ import annotations

import json
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labeling.capture.streams import StreamMap

from .conversions import Conversion, convert_stored
from .lerobot import DatasetWriteError, Layout, LeRobotWriter

Progress = Callable[[int, int | None, str], None]

LEFT_OUT = "meta/fieldcraft/left_out.jsonl"
NAMED_IN_SUMMARY = 20

OWN_VERDICT = "fieldcraft.capture_verdict"
OWN_PART = "fieldcraft.part"
OWN_SOURCE_KEY = "fieldcraft.source_key"
OWN_DURATION = "fieldcraft.duration_s"
OWN_KEY = "fieldcraft.key"


@dataclass(frozen=True)
class Source:
    """A stored recording: its files and content digest."""

    paths: list[Path]
    sha256: str
    window: tuple[int, int] | None = None  # one take of a longer recording (capture ns)


@dataclass
class FrameEpisode:
    key: str
    task: str
    extra: dict[str, Any]
    recording: Source | None
    refused: str | None = None  # why it cannot be in this dataset at all
    id: int | None = None  # the Fieldcraft episode


@dataclass
class FramesSummary:
    episodes: int = 0  # dataset episodes written (a split recording gives several)
    source_episodes: int = 0  # Fieldcraft episodes with at least one dataset episode
    frames: int = 0
    converted: int = 0
    reused: int = 0
    files: list[str] = field(default_factory=list)
    left_out: Counter[str] = field(default_factory=Counter)
    left_out_named: list[dict[str, str]] = field(default_factory=list)
    verdicts: Counter[str] = field(default_factory=Counter)
    episode_ids: list[int] = field(default_factory=list)  # Fieldcraft episodes with frames
    worst_skew_ms: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    action_convention: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset_episodes": self.episodes,
            "source_episodes": self.source_episodes,
            "frames": self.frames,
            "recordings_converted": self.converted,
            "recordings_reused": self.reused,
            "left_out": dict(self.left_out),
            "left_out_total": sum(self.left_out.values()),
            "left_out_named": self.left_out_named,
            "left_out_file": LEFT_OUT,
            "verdicts": dict(self.verdicts),
            "episode_ids": self.episode_ids,
            "worst_skew_ms": self.worst_skew_ms,
            "warnings": self.warnings[:NAMED_IN_SUMMARY],
            "action_convention": self.action_convention,
        }


def _reason_kind(reason: str) -> str:
    if reason == "no recording":
        return "no recording"
    if reason.startswith("gap policy") or "miss a stream" in reason or "no stretch" in reason:
        return "out of sync (gap policy)"
    if reason.startswith("does not fit the dataset"):
        return "does not fit the dataset"
    if reason.startswith("another robot"):
        return "another robot"
    return "recording cannot be converted"


class _LeftOut:
    def __init__(self, root: Path, summary: FramesSummary) -> None:
        self.path = root / LEFT_OUT
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = self.path.open("w", encoding="utf-8")
        self.summary = summary

    def add(self, key: str, reason: str) -> None:
        kind = _reason_kind(reason)
        self.summary.left_out[kind] += 1
        if len(self.summary.left_out_named) < NAMED_IN_SUMMARY:
            self.summary.left_out_named.append({"key": key, "reason": reason})
        self.fh.write(json.dumps({"key": key, "why": kind, "reason": reason}) + "\n")

    def close(self) -> None:
        self.fh.close()


def _conversions(
    episodes: Iterable[FrameEpisode],
    *,
    stream_map: StreamMap,
    codec: str,
    media_root: Path,
    workers: int,
) -> Iterator[tuple[FrameEpisode, Conversion | None]]:
    """Each episode with its conversion, in the given order; at most ``2 × workers`` ahead."""
    window: deque[tuple[FrameEpisode, Future[Conversion] | None]] = deque()
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="convert") as pool:
        try:
            for episode in episodes:
                future = None
                if episode.recording is not None and episode.refused is None:
                    future = pool.submit(
                        convert_stored,
                        paths=episode.recording.paths,
                        sha256=episode.recording.sha256,
                        stream_map=stream_map,
                        codec=codec,
                        media_root=media_root,
                        window=episode.recording.window,
                    )
                window.append((episode, future))
                while len(window) > 2 * max(1, workers):
                    ep, fut = window.popleft()
                    yield ep, fut.result() if fut is not None else None
            while window:
                ep, fut = window.popleft()
                yield ep, fut.result() if fut is not None else None
        finally:
            for _, fut in window:
                if fut is not None:
                    fut.cancel()


def write_frames_dataset(
    *,
    root: Path,
    version: str,
    fps: float,
    robot_type: str | None,
    stream_map: StreamMap,
    codec: str,
    media_root: Path,
    episodes: Iterable[FrameEpisode],
    total: int,
    extra_columns: dict[str, Any],
    info_extra: dict[str, Any],
    workers: int,
    progress: Progress | None = None,
    file_sizes_mb: tuple[float, float] | None = None,
) -> FramesSummary:
    """Write the LeRobot dataset of ``episodes`` under ``root`` (converting their recordings).

    Raises DatasetWriteError when no episode could be written (the left-out reasons say why).
    """
    import pyarrow as pa

    summary = FramesSummary()
    left_out = _LeftOut(Path(root), summary)
    columns = {OWN_KEY: pa.string(), OWN_DURATION: pa.float64()} | dict(extra_columns)
    columns |= {OWN_VERDICT: pa.string(), OWN_PART: pa.int64(), OWN_SOURCE_KEY: pa.string()}
    writer: LeRobotWriter | None = None
    done = 0
    try:
        for episode, conversion in _conversions(
            episodes, stream_map=stream_map, codec=codec, media_root=media_root, workers=workers
        ):
            done += 1
            if progress is not None:
                progress(done, total, f"Converting recordings: {done:,} of {total:,} episodes")
            if episode.refused is not None:
                left_out.add(episode.key, episode.refused)
                continue
            if conversion is None:
                left_out.add(episode.key, "no recording")
                continue
            if conversion.reused:
                summary.reused += 1
            else:
                summary.converted += 1
            if not conversion.ok:
                left_out.add(episode.key, conversion.reason or "no frames")
                continue
            report = conversion.report
            summary.action_convention = report.get("action_convention")
            summary.warnings.extend(w for w in report.get("warnings", []) if w)
            for stream in report.get("streams", []):
                worst = stream.get("skew_worst_ms")
                if worst is not None:
                    name = str(stream.get("name"))
                    summary.worst_skew_ms[name] = max(summary.worst_skew_ms.get(name, 0.0), worst)
            parts = conversion.bundles
            written_any = False
            for part, bundle in enumerate(parts):
                meta = json.loads((bundle / "bundle.json").read_text(encoding="utf-8"))
                if writer is None:
                    layout = Layout(
                        version=version,
                        fps=fps,
                        robot_type=robot_type,
                        state_names=list(meta["state_names"]),
                        action_names=list(meta["action_names"]),
                        cameras={
                            key: (int(cam["height"]), int(cam["width"]))
                            for key, cam in meta["cameras"].items()
                        },
                        codec=next((str(cam["codec"]) for cam in meta["cameras"].values()), "av1"),
                        extra_episode_columns=columns,
                        info_extra=info_extra,
                    )
                    if file_sizes_mb is not None:
                        layout.data_files_size_in_mb, layout.video_files_size_in_mb = file_sizes_mb
                    writer = LeRobotWriter(Path(root), layout)
                extra = dict(episode.extra)
                extra[OWN_SOURCE_KEY] = episode.key
                extra[OWN_PART] = part
                extra[OWN_VERDICT] = report.get("verdict")
                extra[OWN_DURATION] = meta["length"] / fps
                extra[OWN_KEY] = f"{episode.key}/part-{part + 1}" if len(parts) > 1 else episode.key
                try:
                    writer.add_episode(bundle, task=episode.task, extra=extra)
                except DatasetWriteError as exc:
                    left_out.add(
                        extra.get(OWN_KEY, episode.key), f"does not fit the dataset: {exc}"
                    )
                    continue
                written_any = True
                summary.episodes += 1
                summary.frames += int(meta["length"])
                summary.verdicts[str(report.get("verdict"))] += 1
            if written_any:
                summary.source_episodes += 1
                if episode.id is not None:
                    summary.episode_ids.append(episode.id)
        left_out.close()
        if writer is None or summary.episodes == 0:
            if writer is not None:
                writer.abort()
            reasons = "; ".join(f"{k}: {v:,}" for k, v in summary.left_out.items())
            raise DatasetWriteError(f"no episode has frames to export ({reasons or 'none'})")
        written = writer.finish()
    except BaseException:
        left_out.close()
        if writer is not None:
            writer.abort()
        raise
    summary.files = [*written.files, LEFT_OUT]
    return summary
