"""What an episode's recording became: its source, its stored conversion, its playback.

An episode's recording is either its own (a recording holding one take links its episode) or
a segment of a longer one (:class:`~labeling.models.RecordingSegment`). The conversion of that
source (aligned frames, one video per camera; :mod:`labeling.capture.convert`) is stored once
(:mod:`labeling.exports.conversions`) and serves both the annotator's player and the export, so
what an annotator watched is what the dataset holds.

A recording that validates is converted in the background (``recording_convert_request``); the
player asks for it when it is missing and shows that it is on its way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from accounts.models import Job
from accounts.services import job_create, job_running
from labeling.capture.streams import StreamMap, StreamMappingError
from labeling.exports.conversions import (
    Conversion,
    conversion_folder,
    convert_stored,
    stored_conversion,
)
from labeling.exports.frames import Source
from labeling.models import Episode, Recording, RecordingSegment
from labeling.selectors import conversion_codec, stream_map_of
from sites.models import Embodiment

CONVERT_TASK = "labeling.tasks.recording_convert"


def source_of(episode: Episode) -> tuple[Recording, Source] | None:
    """The recording an episode's frames come from: its segment of a longer recording, else
    its own latest recording that passed validation, else its latest readable one."""
    segment = RecordingSegment.objects.filter(episode=episode).select_related("recording").first()
    if segment is not None:
        recording = segment.recording
        return recording, Source(
            paths=[Path(recording.storage_path)],
            sha256=recording.sha256,
            window=(segment.start_ns, segment.end_ns),
        )
    recordings = list(
        Recording.objects.filter(episode=episode)
        .exclude(status=Recording.Status.UNREADABLE)
        .order_by("-created_at", "-pk")
    )
    if not recordings:
        return None
    recording = next((r for r in recordings if r.status == Recording.Status.PASSED), recordings[0])
    return recording, Source(paths=[Path(recording.storage_path)], sha256=recording.sha256)


@dataclass
class PlaybackCamera:
    key: str
    name: str
    path: Path
    width: int
    height: int


@dataclass
class Playback:
    """The episode as its annotator plays it. ``status``: ``ready``, ``converting`` (queued
    or running), ``none`` (no recording), ``failed`` (the recording cannot be converted)."""

    status: str
    message: str = ""
    fps: float = 0.0
    length: int = 0
    cameras: list[PlaybackCamera] = field(default_factory=list)
    frames_path: Path | None = None
    report: dict[str, Any] = field(default_factory=dict)
    recording: Recording | None = None
    parts: int = 0
    joints: list[str] = field(default_factory=list)  # the state and action columns' names


def _episode_stream_map(episode: Episode) -> StreamMap:
    """The stream map the episode's recording converts with (the export's, for its dataset).
    Raises StreamMappingError when the episode names no robot or its robot's streams cannot
    be mapped."""
    if episode.embodiment_id is None:
        raise StreamMappingError(
            "the episode names no robot, so its recorded streams cannot be mapped"
        )
    embodiment = Embodiment.objects.prefetch_related("cameras", "action_dimensions").get(
        pk=episode.embodiment_id
    )
    try:
        return stream_map_of(embodiment, fps=episode.dataset.fps if episode.dataset_id else None)
    except StreamMappingError as exc:
        raise StreamMappingError(f"{embodiment.name}: {exc}") from None


def _conversion_of(episode: Episode) -> tuple[Recording | None, Conversion | None]:
    found = source_of(episode)
    if found is None:
        return None, None
    recording, source = found
    try:
        stream_map = _episode_stream_map(episode)
    except StreamMappingError:
        return recording, None
    folder = conversion_folder(
        Path(settings.MEDIA_ROOT), source.sha256, stream_map, conversion_codec(), source.window
    )
    return recording, stored_conversion(folder)


def _last_conversion(recording: Recording) -> Job | None:
    return (
        Job.objects.filter(
            organization_id=recording.organization_id,
            kind="conversion",
            task_name=CONVERT_TASK,
            task_kwargs__recording_id=recording.pk,
        )
        .order_by("-created_at")
        .first()
    )


def episode_playback(
    episode: Episode, *, request_conversion: bool = False, actor: Any = None
) -> Playback:
    """The episode's playback: its converted videos and frames, or why there are none — a
    conversion that cannot come (unmappable robot, a failed job) is ``failed`` with the
    reason, never "converting" forever. With ``request_conversion``, queue the conversion it
    waits for (once: not while one for the recording is queued or running, nor after one
    failed)."""
    recording, conversion = _conversion_of(episode)
    if recording is None:
        return Playback("none", "No recording is attached to this episode.")
    if conversion is None:
        if recording.status in (Recording.Status.RECEIVED, Recording.Status.VALIDATING):
            return Playback("converting", "The recording is being validated.", recording=recording)
        return _awaited_conversion(episode, recording, request=request_conversion, actor=actor)
    if not conversion.bundles:
        return Playback(
            "failed",
            f"The recording cannot be played: {conversion.reason or 'no frames'}",
            recording=recording,
            report=conversion.report,
        )
    bundle = conversion.bundles[0]
    meta = json.loads((bundle / "bundle.json").read_text(encoding="utf-8"))
    cameras = [
        PlaybackCamera(
            key=key,
            name=str(cam.get("name") or key.rsplit(".", 1)[-1]),
            path=bundle / "videos" / f"{key}.mp4",
            width=int(cam["width"]),
            height=int(cam["height"]),
        )
        for key, cam in meta["cameras"].items()
    ]
    return Playback(
        "ready",
        joints=[str(n) for n in meta.get("state_names") or []],
        fps=float(meta["fps"]),
        length=int(meta["length"]),
        cameras=cameras,
        frames_path=bundle / "frames.parquet",
        report=meta.get("sync") or {},
        recording=recording,
        parts=len(conversion.bundles),
    )


def _awaited_conversion(
    episode: Episode, recording: Recording, *, request: bool, actor: Any
) -> Playback:
    try:
        _episode_stream_map(episode)
    except StreamMappingError as exc:
        return Playback("failed", f"The recording cannot be played: {exc}.", recording=recording)
    with transaction.atomic():
        if request:
            # One request per recording at a time: the page polls, and several may be open.
            list(Recording.objects.select_for_update().filter(pk=recording.pk).values("pk"))
        last = _last_conversion(recording)
        if last is not None and last.status == Job.Status.FAILED:
            return Playback(
                "failed",
                f"The conversion for playback failed: {last.message or 'no reason given'}",
                recording=recording,
            )
        # None yet, or one that made what other settings asked for (the robot changed since).
        if request and (last is None or not last.is_active):
            recording_convert_request(recording=recording, actor=actor)
    return Playback(
        "converting", "The recording is being converted for playback.", recording=recording
    )


def playback_traces(playback: Playback, *, max_points: int = 2000) -> dict[str, Any]:
    """State and action per joint over the episode's time, for the traces under the player
    (every row up to ``max_points``, else an even subsample)."""
    import numpy as np
    import pyarrow.parquet as pq

    if playback.frames_path is None:
        return {}
    table = pq.read_table(playback.frames_path)
    times = table.column("timestamp").to_numpy()
    step = max(1, -(-len(times) // max_points))
    rows = slice(None, None, step)
    out: dict[str, Any] = {"t": times[rows].round(4).tolist()}
    for column in ("observation.state", "action"):
        values = np.array(table.column(column).to_pylist(), dtype=np.float64)
        out[column] = values[rows].T.round(5).tolist() if values.size else []
    return out


def recording_convert_request(*, recording: Recording, actor: Any = None) -> Any:
    """Queue the conversion of every episode the recording holds (itself or its segments)."""
    return job_create(
        organization=recording.organization,
        kind="conversion",
        title=f"Convert {recording.original_name} for playback and export",
        task_name=CONVERT_TASK,
        task_kwargs={"recording_id": recording.pk},
        created_by=actor,
    )


def recording_convert_run(*, job_id: str) -> None:
    with job_running(job_id=job_id) as ctx:
        if ctx is None:
            return
        recording = Recording.objects.get(pk=ctx.job.task_kwargs["recording_id"])
        episodes = [
            *Episode.objects.filter(recordings=recording).select_related("dataset"),
            *Episode.objects.filter(recording_segment__recording=recording).select_related(
                "dataset"
            ),
        ]
        for done, episode in enumerate(episodes):
            ctx.progress(done, len(episodes), f"Converting {done + 1:,} of {len(episodes):,}")
            episode_convert(episode=episode)


def episode_convert(*, episode: Episode) -> Conversion | None:
    """Convert the episode's recording now (or find it converted); None without one."""
    found = source_of(episode)
    if found is None:
        return None
    _, source = found
    try:
        stream_map = _episode_stream_map(episode)
    except StreamMappingError:
        return None
    return convert_stored(
        paths=source.paths,
        sha256=source.sha256,
        stream_map=stream_map,
        codec=conversion_codec(),
        media_root=Path(settings.MEDIA_ROOT),
        window=source.window,
    )
