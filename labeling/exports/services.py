"""Exports: a dataset's synchronised, accepted episodes in the form models train on.

Formats:

* ``lerobot-v3`` / ``lerobot-v2.1`` — a LeRobot dataset. When the exported episodes have
  recordings, a complete one: every recording converted (aligned on the dataset clock,
  encoded to video; :mod:`labeling.capture.convert`), data parquet files, one MP4 per camera
  and file (v3.0) or per episode (v2.1), statistics, tasks and episodes metadata, as
  huggingface/lerobot writes them (:mod:`labeling.exports.lerobot`). Episodes without a
  recording, or whose recording cannot be converted, are named in
  ``meta/fieldcraft/left_out.jsonl`` and counted in the summary, never written frame-less.
  When no exported episode has a recording (an imported inventory), the metadata only:
  ``meta/info.json``, tasks and episodes, with ``fieldcraft.metadata_only`` true.
* ``parquet`` / ``csv`` — a manifest: one row per episode, columns named as the inventory
  importer reads them (key, episode_count, frames, duration_s, fps, outcome, failure_mode,
  task, site, embodiment, storage_uri, recorded_at, sync_status, label_status, and one
  column per condition dimension holding the value's slug).

Every LeRobot episode row also carries Fieldcraft's own fields, which the LeRobot importer
reads back (see :func:`labeling.importers.lerobot.own_field`): ``fieldcraft.key``,
``fieldcraft.episode_count``, ``fieldcraft.duration_s``, ``fieldcraft.outcome``,
``fieldcraft.failure_mode`` (code), ``fieldcraft.site`` (slug), ``fieldcraft.embodiment``
(slug), ``fieldcraft.storage_uri``, ``fieldcraft.recorded_at``, ``fieldcraft.sync_status``,
``fieldcraft.label_status``, ``fieldcraft.conditions.<dimension slug>`` (value slug),
``fieldcraft.features.<name>``; with frames also ``fieldcraft.team``, ``fieldcraft.round``,
``fieldcraft.calibration``, ``fieldcraft.capture_verdict`` (synced, trimmed, split,
out_of_sync), ``fieldcraft.source_key`` and ``fieldcraft.part`` (a recording split at a gap
gives several episodes). So an export imports back through our own importer with every field
we own intact.

Only episodes that are synchronised (``sync_status`` synced) and accepted (``label_status``
accepted) export; LeRobot layouts also leave out rows standing for several episodes. The
summary counts what was left out and why.
"""

from __future__ import annotations

import json
import shutil
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Func, Min, Q, QuerySet
from django.utils import timezone
from django.utils.text import slugify

from accounts.services import JobFailed, job_create, job_enqueue, job_running, job_set_result
from labeling.exports.frames import LEFT_OUT, FrameEpisode, Source, write_frames_dataset
from labeling.exports.lerobot import DatasetWriteError, tasks_parquet
from labeling.importers.lerobot import (
    OWN_CONDITION_PREFIX,
    OWN_EPISODE_COUNT,
    OWN_FEATURE_PREFIX,
    OWN_FIELDS,
    OWN_KEY,
    OWN_STORAGE_URI,
)
from labeling.labels.selectors import Eligibility, export_eligibility
from labeling.models import Dataset, DatasetExport, Episode, Recording, RecordingSegment
from sites.models import ConditionDimension, ConditionValue, Embodiment

FORMATS = tuple(DatasetExport.Format.values)
LEROBOT = {DatasetExport.Format.LEROBOT_V3: "v3.0", DatasetExport.Format.LEROBOT_V21: "v2.1"}
TASK_NAME = "labeling.tasks.dataset_export"
CHUNK = 5000

Progress = Callable[[int, int | None, str], None]


class ExportError(ValueError):
    """An export that cannot be made (unknown format, nothing to export); says why."""


@dataclass
class ExportRow:
    id: int
    key: str
    episode_count: int
    frames: int
    duration_s: float
    outcome: str
    failure_mode: str | None
    site: str | None
    embodiment: str | None
    task: str | None
    storage_uri: str
    recorded_at: str | None
    sync_status: str
    label_status: str
    conditions: dict[str, str]
    features: dict[str, float]
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExportSummary:
    format: str
    dataset: str
    rows: int = 0
    episodes: int = 0
    frames: int = 0
    tasks: int = 0
    files: list[str] = field(default_factory=list)
    eligibility: dict[str, Any] = field(default_factory=dict)
    # LeRobot layouts: False when the dataset holds frames and video (``conversion`` says
    # how the recordings went), True when no exported episode has a recording.
    metadata_only: bool | None = None
    conversion: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "metadata_only": self.metadata_only,
            "conversion": self.conversion,
            "dataset": self.dataset,
            "rows": self.rows,
            "episodes": self.episodes,
            "frames": self.frames,
            "tasks": self.tasks,
            "files": self.files,
            "excluded": self.eligibility,
        }


# --- reading the episodes ---------------------------------------------------------------------


def _dimensions(organization_id: int) -> list[ConditionDimension]:
    return list(
        ConditionDimension.objects.filter(organization_id=organization_id).order_by("order", "name")
    )


def eligible_episodes(*, dataset: Dataset, single_episodes_only: bool) -> QuerySet[Episode]:
    """The dataset's episodes that export: synchronised and accepted (and single, for LeRobot)."""
    qs = Episode.objects.filter(
        dataset=dataset,
        sync_status=Episode.SyncStatus.SYNCED,
        label_status=Episode.LabelStatus.ACCEPTED,
    )
    return qs.filter(episode_count=1) if single_episodes_only else qs


def export_rows(*, dataset: Dataset, single_episodes_only: bool) -> Iterator[ExportRow]:
    """The dataset's synchronised, accepted episodes in a stable order (by id), streamed."""
    values = {
        v_id: (dim_slug, slug)
        for v_id, dim_slug, slug in ConditionValue.objects.filter(
            dimension__organization_id=dataset.organization_id
        ).values_list("pk", "dimension__slug", "slug")
    }
    qs = eligible_episodes(dataset=dataset, single_episodes_only=single_episodes_only)
    rows = qs.order_by("id").values_list(
        "id",
        "key",
        "episode_count",
        "frames",
        "duration_s",
        "outcome",
        "failure_mode__code",
        "site__slug",
        "embodiment__slug",
        "task__name",
        "storage_uri",
        "recorded_at",
        "sync_status",
        "label_status",
        "condition_set__value_ids",
        "features",
        "extra",
    )
    for (
        pk, key, count, frames, duration, outcome, mode, site, embodiment, task, uri, recorded,
        sync, label, value_ids, features, extra,
    ) in rows.iterator(chunk_size=CHUNK):  # fmt: skip
        yield ExportRow(
            id=pk,
            key=key,
            episode_count=count,
            frames=frames,
            duration_s=duration,
            outcome=outcome,
            failure_mode=mode,
            site=site,
            embodiment=embodiment,
            task=task,
            storage_uri=uri,
            recorded_at=recorded.isoformat() if isinstance(recorded, datetime) else None,
            sync_status=sync,
            label_status=label,
            conditions=dict(values[v] for v in value_ids or [] if v in values),
            features={
                k: float(v)
                for k, v in (features or {}).items()
                if isinstance(v, int | float) and not isinstance(v, bool)
            },
            extra=extra if isinstance(extra, dict) else {},
        )


def _own_fields(
    row: ExportRow, dimensions: list[ConditionDimension], features: list[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {column: getattr(row, name) for column, name in OWN_SCALARS.items()}
    for dim in dimensions:
        out[f"{OWN_CONDITION_PREFIX}{dim.slug}"] = row.conditions.get(dim.slug)
    for name in features:
        out[f"{OWN_FEATURE_PREFIX}{name}"] = row.features.get(name)
    return out


# Column → export row attribute: the names the LeRobot importer reads back (one list).
OWN_SCALARS = {
    OWN_KEY: "key",
    OWN_EPISODE_COUNT: "episode_count",
    OWN_STORAGE_URI: "storage_uri",
    **OWN_FIELDS,
}


def _own_columns(dimensions: list[ConditionDimension], features: list[str]) -> list[str]:
    return (
        list(OWN_SCALARS)
        + [f"{OWN_CONDITION_PREFIX}{d.slug}" for d in dimensions]
        + [f"{OWN_FEATURE_PREFIX}{name}" for name in features]
    )


# --- LeRobot layouts ---------------------------------------------------------------------------


def _features(embodiment: Embodiment | None, fps: float) -> tuple[dict[str, Any], int]:
    """info.json ``features`` from the embodiment's action space and camera rig; cameras."""
    features: dict[str, Any] = {}
    cameras = 0
    if embodiment is not None:
        names = [a.name for a in embodiment.action_dimensions.order_by("order", "name")]
        if names:
            for key in ("action", "observation.state"):
                features[key] = {"dtype": "float32", "shape": [len(names)], "names": names}
        for camera in embodiment.cameras.order_by("name"):
            cameras += 1
            features[f"observation.images.{slugify(camera.name).replace('-', '_') or 'camera'}"] = {
                "dtype": "video",
                "shape": [camera.height, camera.width, 3],
                "names": ["height", "width", "channels"],
                "info": {
                    "video.height": camera.height,
                    "video.width": camera.width,
                    "video.fps": camera.fps,
                    "video.channels": 3,
                    "has_audio": False,
                },
            }
    for key, dtype in (
        ("timestamp", "float32"),
        ("frame_index", "int64"),
        ("episode_index", "int64"),
        ("index", "int64"),
        ("task_index", "int64"),
    ):
        features[key] = {"dtype": dtype, "shape": [1], "names": None}
    return features, cameras


def _info(
    *,
    dataset: Dataset,
    version: str,
    embodiment: Embodiment | None,
    fps: float,
    episodes: int,
    frames: int,
    tasks: int,
    dimensions: list[ConditionDimension],
    eligibility: Eligibility,
) -> dict[str, Any]:
    features, cameras = _features(embodiment, fps)
    info: dict[str, Any] = {
        "codebase_version": version,
        "robot_type": (embodiment.robot_type or embodiment.slug) if embodiment else None,
        "total_episodes": episodes,
        "total_frames": frames,
        "total_tasks": tasks,
    }
    if version == "v2.1":
        info |= {
            "total_videos": episodes * cameras,
            "total_chunks": max(1, -(-episodes // 1000)),
            "chunks_size": 1000,
            "fps": fps,
            "splits": {"train": f"0:{episodes}"},
            "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
            "video_path": (
                "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
                if cameras
                else None
            ),
        }
    else:
        info |= {
            "chunks_size": 1000,
            "data_files_size_in_mb": 100,
            "video_files_size_in_mb": 500,
            "fps": fps,
            "splits": {"train": f"0:{episodes}"},
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "video_path": (
                "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
                if cameras
                else None
            ),
        }
    info["features"] = features
    info["fieldcraft"] = {
        "dataset": dataset.slug,
        "name": dataset.name,
        "exported_at": timezone.now().isoformat(),
        "metadata_only": True,
        "episode_fields": "per-episode fields prefixed 'fieldcraft.' carry Fieldcraft's labels",
        "dimensions": {d.slug: d.name for d in dimensions},
        "excluded": eligibility.as_dict(),
    }
    return info


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _episodes_schema(own_columns: list[str], feature_columns: set[str]) -> Any:
    import pyarrow as pa

    ints = {OWN_EPISODE_COUNT}
    fields = [
        ("episode_index", pa.int64()),
        ("tasks", pa.list_(pa.string())),
        ("length", pa.int64()),
        ("data/chunk_index", pa.int64()),
        ("data/file_index", pa.int64()),
        ("dataset_from_index", pa.int64()),
        ("dataset_to_index", pa.int64()),
        ("meta/episodes/chunk_index", pa.int64()),
        ("meta/episodes/file_index", pa.int64()),
    ]
    for name in own_columns:
        if name in ints:
            fields.append((name, pa.int64()))
        elif OWN_FIELDS.get(name) == "duration_s" or name in feature_columns:
            fields.append((name, pa.float64()))
        else:
            fields.append((name, pa.string()))
    return pa.schema(fields)


class _EpisodeSink:
    """Episode rows to ``meta/episodes/chunk-000/file-000.parquet`` (v3.0) or
    ``meta/episodes.jsonl`` (v2.1), written in batches."""

    def __init__(self, meta: Path, version: str, schema: Any) -> None:
        import pyarrow.parquet as pq

        self.version = version
        self.schema = schema
        self.batch: list[dict[str, Any]] = []
        if version == "v3.0":
            path = meta / "episodes" / "chunk-000" / "file-000.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            self.writer: Any = pq.ParquetWriter(path, schema)
            self.file = "meta/episodes/chunk-000/file-000.parquet"
        else:
            meta.mkdir(parents=True, exist_ok=True)
            self.writer = (meta / "episodes.jsonl").open("w", encoding="utf-8")
            self.file = "meta/episodes.jsonl"

    def add(self, row: dict[str, Any]) -> None:
        self.batch.append(row)
        if len(self.batch) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        if self.version == "v3.0":
            if self.batch:
                self.writer.write_table(pa.Table.from_pylist(self.batch, schema=self.schema))
        else:
            for row in self.batch:
                self.writer.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.batch = []

    def close(self) -> None:
        self.flush()
        self.writer.close()


def _write_lerobot(
    *,
    dataset: Dataset,
    version: str,
    outdir: Path,
    eligibility: Eligibility,
    progress: Progress | None,
) -> ExportSummary:
    dimensions = _dimensions(dataset.organization_id)
    eligible = eligible_episodes(dataset=dataset, single_episodes_only=True)
    embodiment = _embodiment_of(dataset, eligible)
    fps = float(dataset.fps or (embodiment.control_rate_hz if embodiment else 0) or 30.0)
    # Tasks in the order they first appear; the feature names across the episodes.
    tasks: list[str] = list(
        eligible.exclude(task__isnull=True)
        .values("task__name")
        .annotate(first=Min("id"))
        .order_by("first")
        .values_list("task__name", flat=True)
    )
    features = sorted(
        set(
            eligible.exclude(features={})
            .annotate(name=Func(F("features"), function="jsonb_object_keys"))
            .values_list("name", flat=True)
            .distinct()
        )
    )
    summary = ExportSummary(
        format="lerobot-v3" if version == "v3.0" else "lerobot-v2.1",
        dataset=dataset.slug,
        eligibility=eligibility.as_dict(),
        tasks=len(tasks),
    )
    own_columns = _own_columns(dimensions, features)
    schema = _episodes_schema(own_columns, {f"{OWN_FEATURE_PREFIX}{name}" for name in features})
    recorded = Recording.objects.filter(
        Q(episode__in=eligible) | Q(segments__episode__in=eligible)
    ).distinct()
    if embodiment is None and recorded.exists():
        # Episodes of several robots: a LeRobot dataset holds one, so the dataset is the
        # robot with the most recorded episodes; the others are named as left out.
        embodiment = _most_recorded_embodiment(eligible)
    if embodiment is not None and recorded.exists():
        return _write_lerobot_frames(
            dataset=dataset,
            version=version,
            outdir=outdir,
            eligibility=eligibility,
            progress=progress,
            embodiment=embodiment,
            dimensions=dimensions,
            features=features,
            schema=schema,
            summary=summary,
        )
    summary.metadata_only = True
    meta = outdir / "meta"
    sink = _EpisodeSink(meta, version, schema)
    frames_so_far = 0
    try:
        for index, r in enumerate(export_rows(dataset=dataset, single_episodes_only=True)):
            row: dict[str, Any] = {
                "episode_index": index,
                "tasks": [r.task] if r.task else [],
                "length": r.frames,
            }
            if version == "v3.0":
                row |= {
                    "data/chunk_index": 0,
                    "data/file_index": 0,
                    "dataset_from_index": frames_so_far,
                    "dataset_to_index": frames_so_far + r.frames,
                    "meta/episodes/chunk_index": 0,
                    "meta/episodes/file_index": 0,
                }
            sink.add(row | _own_fields(r, dimensions, features))
            frames_so_far += r.frames
            summary.rows += 1
            summary.episodes += r.episode_count
            summary.frames += r.frames
            if progress and index % CHUNK == 0:
                progress(index, eligibility.rows, f"Writing {eligibility.rows:,} episodes")
    finally:
        sink.close()
    _write_json(
        meta / "info.json",
        _info(
            dataset=dataset,
            version=version,
            embodiment=embodiment,
            fps=fps,
            episodes=summary.rows,
            frames=summary.frames,
            tasks=len(tasks),
            dimensions=dimensions,
            eligibility=eligibility,
        ),
    )
    if version == "v3.0":
        tasks_parquet(meta / "tasks.parquet", tasks)
        summary.files = ["meta/info.json", "meta/tasks.parquet", sink.file]
    else:
        with (meta / "tasks.jsonl").open("w", encoding="utf-8") as fh:
            for i, task in enumerate(tasks):
                fh.write(json.dumps({"task_index": i, "task": task}, ensure_ascii=False) + "\n")
        summary.files = ["meta/info.json", "meta/tasks.jsonl", sink.file]
    return summary


# Fieldcraft's per-episode fields beyond the importer's own (kept as episode extras on import).
CAPTURE_COLUMNS = {
    "fieldcraft.team": ("team", "string"),
    "fieldcraft.round": ("round", "int64"),
    "fieldcraft.calibration": ("calibration", "bool"),
}


def _recordings_of(episode_ids: list[int]) -> dict[int, Source]:
    """Each episode's recording to convert: its segment of a longer recording, else its latest
    own recording that passed validation, else its latest readable one."""
    found: dict[int, tuple[bool, Source]] = {}
    rows = (
        Recording.objects.filter(episode_id__in=episode_ids)
        .exclude(status=Recording.Status.UNREADABLE)
        .order_by("created_at", "pk")
        .values_list("episode_id", "status", "storage_path", "sha256")
    )
    for episode_id, status, path, sha in rows:
        passed = status == Recording.Status.PASSED
        if episode_id in found and found[episode_id][0] and not passed:
            continue
        found[episode_id] = (passed, Source(paths=[Path(path)], sha256=sha))
    sources = {k: v for k, (_, v) in found.items()}
    segments = RecordingSegment.objects.filter(episode_id__in=episode_ids).values_list(
        "episode_id", "recording__storage_path", "recording__sha256", "start_ns", "end_ns"
    )
    for episode_id, path, sha, start, end in segments:
        sources[episode_id] = Source(paths=[Path(path)], sha256=sha, window=(start, end))
    return sources


def _write_lerobot_frames(
    *,
    dataset: Dataset,
    version: str,
    outdir: Path,
    eligibility: Eligibility,
    progress: Progress | None,
    embodiment: Embodiment,
    dimensions: list[ConditionDimension],
    features: list[str],
    schema: Any,
    summary: ExportSummary,
) -> ExportSummary:
    """The LeRobot dataset with data files and video: every exported episode's recording
    converted (stored once per recording), the episodes without one named."""
    import pyarrow as pa

    from labeling.selectors import conversion_codec, stream_map_of

    # The same map and codec as the player's conversions, so those are reused here.
    stream_map = stream_map_of(embodiment, fps=dataset.fps)
    fps = float(stream_map.fps or 30.0)
    codec = conversion_codec()
    extra_columns = {f.name: f.type for f in schema if f.name.startswith("fieldcraft.")}
    for column, (_, kind) in CAPTURE_COLUMNS.items():
        extra_columns[column] = pa.type_for_alias(kind)
    total = eligibility.rows

    def episodes() -> Iterator[FrameEpisode]:
        batch: list[ExportRow] = []

        def flush() -> Iterator[FrameEpisode]:
            sources = _recordings_of([r.id for r in batch])
            for r in batch:
                if r.embodiment != embodiment.slug:
                    yield FrameEpisode(
                        key=r.key,
                        task=r.task or dataset.name,
                        extra={},
                        recording=None,
                        refused=(
                            f"another robot ({r.embodiment or 'no embodiment'}, not "
                            f"{embodiment.slug}): a LeRobot dataset holds one; export it on its own"
                        ),
                    )
                    continue
                extra = _own_fields(r, dimensions, features)
                for column, (name, _) in CAPTURE_COLUMNS.items():
                    value = r.extra.get(name)
                    extra[column] = value if isinstance(value, str | int | bool) else None
                yield FrameEpisode(
                    key=r.key,
                    task=r.task or dataset.name,
                    extra=extra,
                    recording=sources.get(r.id),
                    id=r.id,
                )

        for row in export_rows(dataset=dataset, single_episodes_only=True):
            batch.append(row)
            if len(batch) >= 500:
                yield from flush()
                batch = []
        yield from flush()

    action = (
        "recorded"
        if stream_map.action_source == "stream"
        else "next_state: a frame's action is the state one frame later (no action stream)"
    )
    info_extra = {
        "fieldcraft": {
            "dataset": dataset.slug,
            "name": dataset.name,
            "exported_at": timezone.now().isoformat(),
            "metadata_only": False,
            "embodiment": embodiment.slug,
            "action": action,
            "gap_policy": stream_map.gap_policy,
            "clock_offsets_ms": {c.name: c.clock_offset_ms for c in stream_map.cameras},
            "sync_tolerance": "cameras: nearest image within half a frame period; state and "
            "action: the latest sample at or before the frame time",
            "episode_fields": "per-episode fields prefixed 'fieldcraft.' carry Fieldcraft's labels",
            "dimensions": {d.slug: d.name for d in dimensions},
            "excluded": eligibility.as_dict(),
            "left_out": LEFT_OUT,
        }
    }
    try:
        frames = write_frames_dataset(
            root=outdir,
            version=version,
            fps=fps,
            robot_type=embodiment.robot_type or embodiment.slug,
            stream_map=stream_map,
            codec=codec,
            media_root=Path(settings.MEDIA_ROOT),
            episodes=episodes(),
            total=total,
            extra_columns=extra_columns,
            info_extra=info_extra,
            workers=int(settings.FIELDCRAFT.get("CONVERSION_WORKERS", 2)),
            progress=progress,
        )
    except DatasetWriteError as exc:
        raise ExportError(f"{dataset.name}: {exc}") from None
    summary.metadata_only = False
    summary.conversion = frames.as_dict()
    summary.rows = frames.episodes
    summary.episodes = frames.episodes
    summary.frames = frames.frames
    summary.files = frames.files
    return summary


def _most_recorded_embodiment(eligible: QuerySet[Episode]) -> Embodiment | None:
    first = (
        eligible.filter(Q(recordings__isnull=False) | Q(recording_segment__isnull=False))
        .exclude(embodiment__isnull=True)
        .values("embodiment")
        .annotate(n=Count("id", distinct=True))
        .order_by("-n", "embodiment")
        .first()
    )
    if first is None:
        return None
    return Embodiment.objects.filter(pk=first["embodiment"]).first()


def _embodiment_of(dataset: Dataset, eligible: QuerySet[Episode]) -> Embodiment | None:
    """The dataset's embodiment, else the one all exported episodes share."""
    if dataset.embodiment_id:
        return Embodiment.objects.filter(pk=dataset.embodiment_id).first()
    ids = list(
        eligible.exclude(embodiment__isnull=True)
        .values_list("embodiment_id", flat=True)
        .distinct()[:2]
    )
    return Embodiment.objects.filter(pk=ids[0]).first() if len(ids) == 1 else None


# --- manifests -----------------------------------------------------------------------------------

# Column -> its arrow type. Every column but ``fps`` (the dataset's) is the export row's
# attribute of the same name; the condition dimensions follow, one column each.
MANIFEST_COLUMNS = {
    "key": "string",
    "episode_count": "int64",
    "frames": "int64",
    "duration_s": "float64",
    "fps": "float64",
    "outcome": "string",
    "failure_mode": "string",
    "task": "string",
    "site": "string",
    "embodiment": "string",
    "storage_uri": "string",
    "recorded_at": "string",
    "sync_status": "string",
    "label_status": "string",
}


def _write_manifest(
    *,
    dataset: Dataset,
    fmt: str,
    outdir: Path,
    eligibility: Eligibility,
    progress: Progress | None,
) -> ExportSummary:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    dimensions = _dimensions(dataset.organization_id)
    taken = set(MANIFEST_COLUMNS)
    dim_columns = [d.slug for d in dimensions if d.slug not in taken]
    fields = [(name, pa.type_for_alias(kind)) for name, kind in MANIFEST_COLUMNS.items()] + [
        (slug, pa.string()) for slug in dim_columns
    ]
    schema = pa.schema(fields)
    summary = ExportSummary(format=fmt, dataset=dataset.slug, eligibility=eligibility.as_dict())
    outdir.mkdir(parents=True, exist_ok=True)
    name = f"{dataset.slug}.{'parquet' if fmt == 'parquet' else 'csv'}"
    target = outdir / name
    fps = dataset.fps
    tasks: set[str] = set()
    writer: Any = (
        pq.ParquetWriter(target, schema) if fmt == "parquet" else pacsv.CSVWriter(target, schema)
    )
    try:
        batch: list[dict[str, Any]] = []
        for r in export_rows(dataset=dataset, single_episodes_only=False):
            row = {name: fps if name == "fps" else getattr(r, name) for name in MANIFEST_COLUMNS}
            for slug in dim_columns:
                row[slug] = r.conditions.get(slug)
            batch.append(row)
            summary.rows += 1
            summary.episodes += r.episode_count
            summary.frames += r.frames
            if r.task:
                tasks.add(r.task)
            if len(batch) >= CHUNK:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch = []
                if progress:
                    progress(summary.rows, eligibility.rows, f"Wrote {summary.rows:,} rows")
        if batch or summary.rows == 0:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
    finally:
        writer.close()
    summary.tasks = len(tasks)
    summary.files = [name]
    return summary


# --- the service -----------------------------------------------------------------------------------


def dataset_export_write(
    *, dataset: Dataset, format: str, outdir: Path, progress: Progress | None = None
) -> ExportSummary:
    """Write the dataset's synchronised, accepted episodes to ``outdir`` in ``format``.

    Raises ExportError on an unknown format, or when no episode qualifies (the message
    gives the reasons and their counts).
    """
    if format not in FORMATS:
        raise ExportError(f"unknown format {format!r} (one of {', '.join(FORMATS)})")
    single = format in LEROBOT
    eligibility = export_eligibility(dataset_id=dataset.pk, single_episodes_only=single)
    if eligibility.rows == 0:
        raise ExportError(nothing_to_export(dataset, eligibility))
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    if single:
        return _write_lerobot(
            dataset=dataset,
            version=LEROBOT[DatasetExport.Format(format)],
            outdir=outdir,
            eligibility=eligibility,
            progress=progress,
        )
    return _write_manifest(
        dataset=dataset, fmt=format, outdir=outdir, eligibility=eligibility, progress=progress
    )


def nothing_to_export(dataset: Dataset, eligibility: Eligibility) -> str:
    reasons = "; ".join(f"{r.text}: {r.rows:,}" for r in eligibility.reasons) or "no episodes"
    return (
        f"Nothing in {dataset.name} is both synchronised and accepted, so nothing exports "
        f"({reasons})."
    )


def exclusion_lines(summary: dict[str, Any]) -> list[str]:
    """The exclusion reasons of an export summary, one line each."""
    excluded = summary.get("excluded") or {}
    return [
        f"{r['text']}: {r['rows']:,} episode row{'s' if r['rows'] != 1 else ''}"
        for r in excluded.get("reasons", [])
    ]


def dataset_export_start(*, dataset: Dataset, format: str, actor: Any = None) -> DatasetExport:
    """Record an export and queue its job (it runs once the transaction commits).

    Raises ExportError on an unknown format.
    """
    if format not in FORMATS:
        raise ExportError(f"unknown format {format!r} (one of {', '.join(FORMATS)})")
    label = DatasetExport.Format(format).label
    with transaction.atomic():
        job = job_create(
            organization=dataset.organization,
            kind="export",
            task_name=TASK_NAME,
            title=f"Export {dataset.name} as {label}",
            created_by=actor,
            enqueue=False,
        )
        export = DatasetExport.objects.create(
            organization_id=dataset.organization_id,
            dataset=dataset,
            format=format,
            job=job,
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        job_enqueue(job=job)
    return export


def export_file(export: DatasetExport) -> Path:
    """The export's zip file; Http404 when it is not written (or not where exports live)."""
    from django.http import Http404

    root = (Path(settings.MEDIA_ROOT) / "exports").resolve()
    path = Path(export.path).resolve() if export.path else None
    if path is None or root not in path.parents or not path.is_file():
        raise Http404("This export has no file (yet).")
    return path


def export_folder(export: DatasetExport) -> Path:
    return Path(settings.MEDIA_ROOT) / "exports" / str(export.pk)


def dataset_export_run(*, job_id: str) -> None:
    """Run a queued export (the Celery task calls this). Idempotent: a re-run writes the
    files again from scratch; a re-delivered task finds the job taken and does nothing."""
    with job_running(job_id=job_id) as ctx:
        if ctx is None:
            return
        export = DatasetExport.objects.select_related("dataset").get(job_id=job_id)
        folder = export_folder(export)
        shutil.rmtree(folder, ignore_errors=True)
        name = f"{export.dataset.slug}-{export.format}"
        work = folder / name
        ctx.progress(0, None, "Reading the episodes", force=True)
        try:
            summary = dataset_export_write(
                dataset=export.dataset,
                format=export.format,
                outdir=work,
                progress=lambda done, total, message: ctx.progress(done, total, message),
            )
        except ExportError as exc:
            eligibility = export_eligibility(
                dataset_id=export.dataset_id, single_episodes_only=export.format in LEROBOT
            )
            DatasetExport.objects.filter(pk=export.pk).update(
                summary={"excluded": eligibility.as_dict()}
            )
            shutil.rmtree(folder, ignore_errors=True)
            raise JobFailed(
                str(exc),
                errors=[{"message": f"{r.text}: {r.rows:,}"} for r in eligibility.reasons],
            ) from None
        archive = folder / f"{name}.zip"
        _zip(work, archive, root=name)
        shutil.rmtree(work, ignore_errors=True)
        data = summary.as_dict()
        DatasetExport.objects.filter(pk=export.pk).update(path=str(archive), summary=data)
        job_set_result(job=ctx.job, result={"summary": data}, message=summary_line(data))


def _zip(folder: Path, archive: Path, *, root: str) -> None:
    partial = archive.with_name(f".{uuid.uuid4().hex}.zip")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                # Video and parquet are compressed already: stored, not deflated again.
                stored = path.suffix in (".mp4", ".parquet")
                zf.write(
                    path,
                    f"{root}/{path.relative_to(folder).as_posix()}",
                    compress_type=zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED,
                )
    partial.replace(archive)


def summary_line(summary: dict[str, Any]) -> str:
    excluded = (summary.get("excluded") or {}).get("excluded_rows", 0)
    conversion = summary.get("conversion") or {}
    line = f"{summary.get('rows', 0):,} episodes ({summary.get('frames', 0):,} frames) exported"
    if conversion:
        line += " with data files and video"
        if conversion.get("left_out_total"):
            line += f"; {conversion['left_out_total']:,} without frames (named in the summary)"
    elif summary.get("metadata_only"):
        line += " as metadata (no episode has a recording)"
    return line + (f"; {excluded:,} left out (see the reasons)" if excluded else "") + "."
