"""Write a complete LeRobot dataset (frames, videos, metadata) from episode bundles.

An *episode bundle* is what :mod:`labeling.capture.convert` makes of one episode:
``frames.parquet`` (``timestamp``, ``frame_index``, ``observation.state``, ``action``),
``videos/<video key>.mp4`` (frame *k* at *k*/fps, one frame per row) and ``bundle.json``
(length, fps, names, cameras, statistics, synchronisation report).

:class:`LeRobotWriter` adds bundles one at a time (each is checked against the
:class:`Layout` first, so a bad bundle raises :class:`DatasetWriteError` and leaves the
dataset as it was) and :meth:`~LeRobotWriter.finish` completes the metadata. Two layouts, as
huggingface/lerobot writes them:

* ``v3.0`` (``lerobot/datasets/dataset_writer.py``, ``dataset_metadata.py``): episodes share
  ``data/chunk-XXX/file-YYY.parquet`` (one row group per episode) and, per camera,
  ``videos/<key>/chunk-XXX/file-YYY.mp4`` (the episodes' videos concatenated without
  re-encoding); a file rotates when it would pass ``data_files_size_in_mb`` /
  ``video_files_size_in_mb``, the chunk after ``chunks_size`` files. ``meta/episodes/…``
  holds one row per episode (where its frames are, its statistics flattened as
  ``stats/<feature>/<stat>``, our own columns), ``meta/tasks.parquet`` the tasks,
  ``meta/stats.json`` the statistics aggregated over episodes (``aggregate_stats``).
* ``v2.1`` (the writer before v3.0): one parquet file and one video per episode and camera,
  ``meta/episodes.jsonl``, ``meta/episodes_stats.jsonl``, ``meta/tasks.jsonl``.

``meta/info.json`` is written last, so a folder without it is not a dataset. The frames of one
episode are in memory at a time; video timestamps come from integer frame counts.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from labeling.capture.feature_stats import (
    STAT_KEYS,
    aggregate_feature_stats,
    column_stats,
    column_stats_v21,
)
from labeling.capture.video import concatenate_videos, video_info

VERSIONS = ("v3.0", "v2.1")
STATE, ACTION = "observation.state", "action"
V21_STAT_KEYS = ("min", "max", "mean", "std", "count")
# LeRobot's DEFAULT_FEATURES (lerobot/utils/constants.py), in its order.
DEFAULT_FEATURES: dict[str, dict[str, Any]] = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = "data/" + CHUNK_FILE + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE + ".mp4"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE + ".parquet"
V21_DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
V21_VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
META_BUFFER = 10  # episode rows per meta/episodes row group, as LeRobot buffers them
ACTION_CONVENTIONS = ("recorded", "next_state")
_MB = 1024**2
_STAGING = ".staging"
# What the writer makes under root (either version): a root holding any of it is refused.
_OURS = (
    "data", "videos", _STAGING, "meta/info.json", "meta/stats.json", "meta/tasks.parquet",
    "meta/tasks.jsonl", "meta/episodes", "meta/episodes.jsonl", "meta/episodes_stats.jsonl",
)  # fmt: skip
_INFO_KEYS = {
    "codebase_version", "robot_type", "total_episodes", "total_frames", "total_tasks",
    "total_videos", "total_chunks", "chunks_size", "data_files_size_in_mb",
    "video_files_size_in_mb", "fps", "splits", "data_path", "video_path", "features",
}  # fmt: skip


_EPISODE_COLUMNS = {
    "episode_index", "tasks", "length", "dataset_from_index", "dataset_to_index",
}  # fmt: skip


class DatasetWriteError(ValueError):
    """A bundle that does not fit the dataset (or a dataset that cannot be written); says why."""


@dataclass
class Layout:
    """The dataset's shape: every bundle must match it."""

    version: str
    fps: float
    robot_type: str | None
    state_names: list[str]
    action_names: list[str]
    cameras: dict[str, tuple[int, int]]  # video key -> (height, width)
    codec: str = "av1"
    chunks_size: int = 1000
    data_files_size_in_mb: float = 100
    video_files_size_in_mb: float = 200
    extra_episode_columns: dict[str, pa.DataType] = field(default_factory=dict)
    info_extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = []
        if self.version not in VERSIONS:
            problems.append(f"version {self.version!r} is not one of {', '.join(VERSIONS)}")
        if not (self.fps > 0 and math.isfinite(self.fps)):
            problems.append(f"fps must be positive, not {self.fps!r}")
        if self.chunks_size < 1 or self.data_files_size_in_mb <= 0:
            problems.append("chunks_size and data_files_size_in_mb must be positive")
        if self.video_files_size_in_mb <= 0:
            problems.append("video_files_size_in_mb must be positive")
        if not self.state_names or not self.action_names:
            problems.append("state_names and action_names must not be empty")
        for key, size in self.cameras.items():
            if not key.startswith("observation.images.") or "/" in key:
                problems.append(f"camera key {key!r} is not observation.images.<name>")
            if len(size) != 2 or min(size) < 1:
                problems.append(f"camera {key!r}: size {size!r} is not (height, width)")
        for name in self.extra_episode_columns:
            if name in _EPISODE_COLUMNS or name.split("/")[0] in (
                "stats",
                "videos",
                "meta",
                "data",
            ):
                problems.append(f"extra episode column {name!r} clashes with LeRobot's columns")
        for name in self.info_extra:
            if name in _INFO_KEYS:
                problems.append(f"info_extra key {name!r} clashes with LeRobot's info.json")
        if problems:
            raise DatasetWriteError("; ".join(problems))

    @property
    def features(self) -> dict[str, dict[str, Any]]:
        """info.json ``features`` without the cameras' ``info`` blocks."""
        # Action first, then the observations: the order of LeRobot's robot features.
        features: dict[str, dict[str, Any]] = {
            ACTION: {
                "dtype": "float32",
                "shape": [len(self.action_names)],
                "names": self.action_names,
            },
            STATE: {
                "dtype": "float32",
                "shape": [len(self.state_names)],
                "names": self.state_names,
            },
        }
        for key, (height, width) in self.cameras.items():
            features[key] = {
                "dtype": "video",
                "shape": [height, width, 3],
                "names": ["height", "width", "channels"],
            }
        return features | {k: dict(v) for k, v in DEFAULT_FEATURES.items()}


@dataclass
class WriteSummary:
    version: str
    episodes: int = 0
    frames: int = 0
    tasks: int = 0
    files: list[str] = field(default_factory=list)
    action_convention: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "episodes": self.episodes,
            "frames": self.frames,
            "tasks": self.tasks,
            "files": self.files,
            "action_convention": self.action_convention,
        }


def _serialize(stats: dict[str, dict[str, np.ndarray]]) -> dict[str, dict[str, Any]]:
    return {f: {k: np.asarray(v).tolist() for k, v in s.items()} for f, s in stats.items()}


# --- small helpers --------------------------------------------------------------------------------


def _next_file(chunk_index: int, file_index: int, chunks_size: int) -> tuple[int, int]:
    """LeRobot's ``update_chunk_file_indices``: the next file, in the next chunk when full."""
    if file_index == chunks_size - 1:
        return chunk_index + 1, 0
    return chunk_index, file_index + 1


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=4, ensure_ascii=False)  # LeRobot's write_json


def _extradata(path: Path) -> bytes:
    """The video stream's codec parameters (what ``concatenate_videos`` requires to match)."""
    with av.open(str(path)) as container:
        return bytes(container.streams.video[0].codec_context.extradata or b"")


def _size_mb(path: Path) -> float:
    return path.stat().st_size / _MB if path.exists() else 0.0


def _hf_metadata(features: dict[str, dict[str, Any]], version: str) -> bytes:
    """The ``huggingface`` schema metadata ``datasets`` writes (``List`` since datasets 4,
    which LeRobot v3.0 uses; ``Sequence`` before, as v2.1 datasets carry)."""
    out: dict[str, Any] = {}
    for key, ft in features.items():
        if ft["dtype"] == "video":
            continue
        value = {"dtype": ft["dtype"], "_type": "Value"}
        if ft["shape"] == [1]:
            out[key] = value
        else:
            kind = "List" if version == "v3.0" else "Sequence"
            out[key] = {"feature": value, "length": ft["shape"][0], "_type": kind}
    return json.dumps({"info": {"features": out}}).encode()


def tasks_parquet(path: Path, tasks: list[str]) -> None:
    """meta/tasks.parquet as LeRobot v3.0 writes it (``pd.DataFrame({"task_index": …},
    index=pd.Index(tasks, name="task")).to_parquet``): the task string is the index."""
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": "task",
                "field_name": "task",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.3.3",
    }
    schema = pa.schema(
        [("task_index", pa.int64()), ("task", pa.string())],
        metadata={b"pandas": json.dumps(pandas_meta).encode()},
    )
    table = pa.table({"task_index": list(range(len(tasks))), "task": tasks}, schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def _stat_type(depth: int, count: bool) -> pa.DataType:
    kind: pa.DataType = pa.int64() if count else pa.float64()
    for _ in range(1 if count else depth):
        kind = pa.list_(kind)
    return kind


def frame_schema(layout: Layout) -> pa.Schema:
    """The data files' schema: LeRobot's feature columns, with the ``huggingface`` metadata."""
    names = {ACTION: layout.action_names, STATE: layout.state_names}
    fields = [pa.field(key, pa.list_(pa.float32(), len(names[key]))) for key in (ACTION, STATE)]
    fields += [pa.field(k, pa.type_for_alias(ft["dtype"])) for k, ft in DEFAULT_FEATURES.items()]
    metadata = {b"huggingface": _hf_metadata(layout.features, layout.version)}
    return pa.schema(fields, metadata=metadata)


def episodes_schema(layout: Layout) -> pa.Schema:
    """meta/episodes columns in the order and types LeRobot v3.0 writes them, then ours."""
    fields = [
        ("episode_index", pa.int64()),
        ("tasks", pa.list_(pa.string())),
        ("length", pa.int64()),
        ("data/chunk_index", pa.int64()),
        ("data/file_index", pa.int64()),
        ("dataset_from_index", pa.int64()),
        ("dataset_to_index", pa.int64()),
    ]
    for key in layout.cameras:
        fields += [
            (f"videos/{key}/chunk_index", pa.int64()),
            (f"videos/{key}/file_index", pa.int64()),
            (f"videos/{key}/from_timestamp", pa.float64()),
            (f"videos/{key}/to_timestamp", pa.float64()),
        ]
    for key, ft in layout.features.items():
        depth = 3 if ft["dtype"] == "video" else 1
        fields += [(f"stats/{key}/{s}", _stat_type(depth, s == "count")) for s in STAT_KEYS]
    fields += [("meta/episodes/chunk_index", pa.int64()), ("meta/episodes/file_index", pa.int64())]
    fields += list(layout.extra_episode_columns.items())
    return pa.schema(fields)


# --- reading and checking a bundle ---------------------------------------------------------------


@dataclass
class _Episode:
    bundle: Path
    length: int
    state: pa.Array
    action: pa.Array
    videos: dict[str, Path]
    pix_fmts: dict[str, str]
    stats: dict[str, dict[str, np.ndarray]]
    action_convention: str


def _read_bundle(bundle: Path, layout: Layout) -> _Episode:
    """The bundle's frames and statistics; DatasetWriteError naming the bundle when it does
    not match the layout."""
    where = str(bundle)

    def fail(problem: str) -> DatasetWriteError:
        return DatasetWriteError(f"bundle {where}: {problem}")

    try:
        meta = json.loads((bundle / "bundle.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise fail(f"bundle.json cannot be read ({exc})") from None
    if not isinstance(meta, dict):
        raise fail("bundle.json is not an object")
    fps = meta.get("fps")
    if not isinstance(fps, int | float) or abs(float(fps) - layout.fps) > 1e-9:
        raise fail(f"fps {fps!r} differs from the dataset's {layout.fps:g}")
    for key, expected in ((STATE, layout.state_names), (ACTION, layout.action_names)):
        names = meta.get("state_names" if key == STATE else "action_names")
        if names != expected:
            raise fail(f"{key} names {names!r} differ from the dataset's {expected!r}")
    convention = meta.get("action_convention")
    if convention not in ACTION_CONVENTIONS:
        raise fail(f"action_convention {convention!r} is not one of {ACTION_CONVENTIONS}")
    cameras = meta.get("cameras") or {}
    if set(cameras) != set(layout.cameras):
        raise fail(f"cameras {sorted(cameras)} differ from the dataset's {sorted(layout.cameras)}")
    length = meta.get("length")
    try:
        table = pq.read_table(bundle / "frames.parquet")
    except (OSError, pa.ArrowException) as exc:
        raise fail(f"frames.parquet cannot be read ({exc})") from None
    if not isinstance(length, int) or length < 1 or length != table.num_rows:
        raise fail(f"length {length!r} differs from frames.parquet's {table.num_rows:,} rows")
    missing = [
        c for c in ("timestamp", "frame_index", STATE, ACTION) if c not in table.schema.names
    ]
    if missing:
        raise fail(f"frames.parquet lacks {', '.join(missing)}")
    frame_index = table.column("frame_index").to_numpy(zero_copy_only=False)
    if not np.array_equal(frame_index, np.arange(length)):
        raise fail("frame_index is not 0, 1, 2, … in order")
    expected_ts = (np.arange(length) / layout.fps).astype(np.float32).astype(np.float64)
    timestamp = table.column("timestamp").to_numpy(zero_copy_only=False).astype(np.float64)
    off = np.abs(timestamp - expected_ts)
    if np.isnan(off).any() or off.max() > 1e-4:
        row = int(np.nanargmax(np.where(np.isnan(off), np.inf, off)))
        raise fail(f"timestamp {timestamp[row]!r} at frame {row} is not frame_index/fps")
    columns = {}
    for key, names in ((STATE, layout.state_names), (ACTION, layout.action_names)):
        column = table.column(key).combine_chunks()
        kind = column.type
        if not (
            (pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind))
            and pa.types.is_floating(kind.value_type)
        ):
            raise fail(f"{key} is {kind}, not a list of floats")
        try:
            column = column.cast(pa.list_(pa.float32(), len(names)))
        except (pa.ArrowException, ValueError):
            raise fail(f"{key} rows do not hold {len(names)} values each") from None
        if column.null_count or column.flatten().null_count:
            raise fail(f"{key} has missing values")
        columns[key] = column
    videos, pix_fmts = {}, {}
    for key, (height, width) in layout.cameras.items():
        declared = cameras[key] or {}
        if (declared.get("height"), declared.get("width")) != (height, width):
            raise fail(
                f"camera {key} is {declared.get('width')}x{declared.get('height')} in bundle.json,"
                f" the dataset's is {width}x{height}"
            )
        path = bundle / "videos" / f"{key}.mp4"
        try:
            info = video_info(path)
        except Exception as exc:  # the video module raises its own errors and av's
            raise fail(f"video {path.name} cannot be read ({exc})") from None
        if (info.height, info.width) != (height, width):
            raise fail(f"video {path.name} is {info.width}x{info.height}, not {width}x{height}")
        if info.codec != layout.codec:
            raise fail(f"video {path.name} is {info.codec}, the dataset's codec is {layout.codec}")
        if abs(float(info.fps) - layout.fps) > 1e-6:
            raise fail(f"video {path.name} runs at {info.fps:g} fps, not {layout.fps:g}")
        if info.frames != length:
            raise fail(f"video {path.name} has {info.frames:,} frames for {length:,} rows")
        videos[key], pix_fmts[key] = path, info.pix_fmt
    stats = _bundle_stats(meta.get("stats"), layout, length, fail)
    return _Episode(
        bundle, length, columns[STATE], columns[ACTION], videos, pix_fmts, stats, convention
    )


def _bundle_stats(
    raw: Any, layout: Layout, length: int, fail: Callable[[str], DatasetWriteError]
) -> dict[str, dict[str, Any]]:
    if not isinstance(raw, dict):
        raise fail("bundle.json has no stats")
    shapes: dict[str, tuple[int, ...]] = {
        STATE: (len(layout.state_names),),
        ACTION: (len(layout.action_names),),
    }
    shapes |= dict.fromkeys(layout.cameras, (3, 1, 1))
    out: dict[str, dict[str, Any]] = {}
    for feature, shape in shapes.items():
        entry = raw.get(feature)
        if not isinstance(entry, dict) or set(STAT_KEYS) - set(entry):
            raise fail(f"stats for {feature} lack {', '.join(STAT_KEYS)}")
        stats: dict[str, Any] = {}
        for key in STAT_KEYS:
            try:
                value = np.asarray(entry[key], dtype=np.int64 if key == "count" else np.float64)
            except (TypeError, ValueError):
                raise fail(f"stats {feature}/{key} are not numbers") from None
            wanted = (1,) if key == "count" else shape
            if value.shape != wanted or (key != "count" and not np.isfinite(value).all()):
                raise fail(f"stats {feature}/{key} have shape {value.shape}, not {wanted}")
            stats[key] = value
        count = int(stats["count"][0])
        if (count != length) if feature in (STATE, ACTION) else not 1 <= count <= length:
            raise fail(f"stats {feature} count {count} does not fit {length:,} frames")
        out[feature] = stats
    return out


# --- the writer ------------------------------------------------------------------------------------


@dataclass
class _VideoFile:
    """One camera's current v3.0 video file: the episode videos waiting to be concatenated."""

    chunk_index: int = 0
    file_index: int = 0
    pending: list[Path] = field(default_factory=list)
    spans: list[tuple[float, float]] = field(default_factory=list)
    size_mb: float = 0.0
    frames: int = 0


class LeRobotWriter:
    """Write a LeRobot dataset under ``root`` from episode bundles, one episode at a time.

    ``root`` must not hold a dataset already (other files, such as the caller's own notes,
    may be there and are left alone). Call :meth:`add_episode` per bundle, then
    :meth:`finish`; :meth:`abort` (or leaving a ``with`` block by an exception) removes what
    was written.
    """

    def __init__(self, root: Path, layout: Layout) -> None:
        self.root = Path(root)
        self.layout = layout
        if self.root.exists() and not self.root.is_dir():
            raise DatasetWriteError(f"{self.root} is not a folder")
        taken = [name for name in _OURS if (self.root / name).exists()]
        if taken:
            raise DatasetWriteError(f"{self.root} already holds {', '.join(taken)}")
        self._created_root = not self.root.exists()
        self.root.mkdir(parents=True, exist_ok=True)
        self.features = layout.features
        self._files: list[str] = []
        self._tasks: dict[str, int] = {}
        self._episodes = 0
        self._frames = 0
        self._convention: str | None = None
        self._pix_fmts: dict[str, str] = {}
        self._extradata: dict[str, bytes] = {}
        self._state = "open"
        self._failure = ""
        self._stats: dict[str, dict[str, np.ndarray]] | None = None
        v3 = layout.version == "v3.0"
        self._data_schema = frame_schema(layout)
        # v3.0: the open data file, the cameras' current video files, the episode rows.
        self._data_writer: pq.ParquetWriter | None = None
        self._data_file = (0, 0)
        self._data_file_start = 0
        self._videos = {key: _VideoFile() for key in layout.cameras}
        self._meta_schema = episodes_schema(layout) if v3 else None
        self._meta_writer: pq.ParquetWriter | None = None
        self._meta_file = (0, 0)
        self._meta_rows: list[dict[str, Any]] = []
        self._meta_rows_in_file = 0
        # v2.1: the jsonl files, appended as episodes come.
        self._jsonl: dict[str, Any] = {}

    # -- public API ---------------------------------------------------------------------------

    def add_episode(self, bundle: Path, *, task: str, extra: dict[str, Any]) -> int:
        """Add the bundle's episode; return its episode_index.

        Raises DatasetWriteError naming the bundle when it does not match the layout (names,
        cameras, fps, sizes, frame counts), or when ``task``/``extra`` are not usable; the
        dataset is then unchanged.
        """
        self._require_open()
        bundle = Path(bundle)
        if not isinstance(task, str) or not task.strip():
            raise DatasetWriteError(f"bundle {bundle}: the task must be a non-empty string")
        extras = self._extras(bundle, extra)
        episode = _read_bundle(bundle, self.layout)
        if self._convention not in (None, episode.action_convention):
            raise DatasetWriteError(
                f"bundle {bundle}: action_convention {episode.action_convention!r} differs from "
                f"the other episodes' {self._convention!r}"
            )
        for key, pix_fmt in episode.pix_fmts.items():
            if self._pix_fmts.get(key, pix_fmt) != pix_fmt:
                raise DatasetWriteError(
                    f"bundle {bundle}: video {key} is {pix_fmt}, the other episodes' "
                    f"{self._pix_fmts[key]} (they could not be concatenated)"
                )
        # Videos are concatenated without re-encoding, which needs the same codec parameters.
        extradata = {key: _extradata(path) for key, path in episode.videos.items()}
        for key, data in extradata.items():
            if self._extradata.get(key, data) != data:
                raise DatasetWriteError(
                    f"bundle {bundle}: video {key} was encoded with other codec parameters than "
                    "the dataset's first episode, so it cannot be joined to the others; "
                    "re-encode it with the same settings"
                )
        self._state = "writing"
        try:
            index = self._write_episode(episode, task, extras)
        except BaseException as exc:
            self._state, self._failure = "failed", f"{type(exc).__name__}: {exc}"
            raise
        self._state = "open"
        self._convention = episode.action_convention
        self._pix_fmts |= episode.pix_fmts
        self._extradata = extradata | self._extradata
        return index

    def finish(self) -> WriteSummary:
        """Complete the dataset (last files, tasks, statistics, info.json last).

        Raises DatasetWriteError when no episode was added.
        """
        self._require_open()
        if not self._episodes:
            raise DatasetWriteError("no episode was added, so there is no dataset to write")
        self._state = "writing"
        try:
            if self.layout.version == "v3.0":
                self._finish_v3()
            else:
                self._finish_v21()
            shutil.rmtree(self.root / _STAGING, ignore_errors=True)
        except BaseException as exc:
            self._state, self._failure = "failed", f"{type(exc).__name__}: {exc}"
            raise
        self._state = "finished"
        return WriteSummary(
            version=self.layout.version,
            episodes=self._episodes,
            frames=self._frames,
            tasks=len(self._tasks),
            files=list(self._files),
            action_convention=self._convention,
        )

    def abort(self) -> None:
        """Remove everything written so far; the writer cannot be used afterwards."""
        if self._state == "aborted":
            return
        self._state = "aborted"
        for writer in (self._data_writer, self._meta_writer, *self._jsonl.values()):
            if writer is not None:
                with contextlib.suppress(Exception):  # the files go anyway
                    writer.close()
        self._data_writer = self._meta_writer = None
        self._jsonl = {}
        shutil.rmtree(self.root / _STAGING, ignore_errors=True)
        for name in self._files:
            (self.root / name).unlink(missing_ok=True)
        for folder in sorted(
            {p for name in self._files for p in Path(name).parents if p != Path(".")},
            key=lambda p: len(p.parts),
            reverse=True,
        ):
            with contextlib.suppress(OSError):  # not empty: someone else's files are in it
                (self.root / folder).rmdir()
        if self._created_root:
            with contextlib.suppress(OSError):
                self.root.rmdir()
        self._files = []

    def __enter__(self) -> LeRobotWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()

    # -- checks -------------------------------------------------------------------------------

    def _require_open(self) -> None:
        if self._state != "open":
            raise DatasetWriteError(
                {
                    "finished": "the dataset is already finished",
                    "aborted": "the writer was aborted",
                    "failed": f"an earlier write failed ({self._failure}); abort and start again",
                }.get(self._state, f"the writer is {self._state}")
            )

    def _extras(self, bundle: Path, extra: dict[str, Any]) -> dict[str, Any]:
        columns = self.layout.extra_episode_columns
        unknown = sorted(set(extra) - set(columns))
        if unknown:
            raise DatasetWriteError(
                f"bundle {bundle}: extra fields {', '.join(unknown)} are not episode columns of "
                "the layout"
            )
        out = {}
        for name, kind in columns.items():
            try:
                out[name] = pa.array([extra.get(name)], type=kind)[0].as_py()
            except (pa.ArrowException, TypeError, ValueError) as exc:
                raise DatasetWriteError(
                    f"bundle {bundle}: extra field {name} = {extra.get(name)!r} is not {kind} ({exc})"
                ) from None
        return out

    # -- writing one episode ----------------------------------------------------------------

    def _write_episode(self, episode: _Episode, task: str, extras: dict[str, Any]) -> int:
        index = self._episodes
        length = episode.length
        task_index = self._tasks.setdefault(task, len(self._tasks))
        frame_index = np.arange(length, dtype=np.int64)
        # As LeRobot's add_frame: timestamp = frame_index / fps in Python floats, stored float32.
        timestamp = frame_index / self.layout.fps
        columns = {
            "timestamp": timestamp,
            "frame_index": frame_index,
            "episode_index": np.full(length, index, dtype=np.int64),
            "index": np.arange(self._frames, self._frames + length, dtype=np.int64),
            "task_index": np.full(length, task_index, dtype=np.int64),
        }
        table = pa.Table.from_arrays(
            [episode.action, episode.state]
            + [pa.array(columns[k], type=self._data_schema.field(k).type) for k in columns],
            schema=self._data_schema,
        )
        v3 = self.layout.version == "v3.0"
        stats = dict(episode.stats)
        for key, values in columns.items():
            stats[key] = column_stats(values) if v3 else column_stats_v21(values)
        stats = {key: stats[key] for key in self.features}
        if v3:
            row = self._write_v3(index, episode, table, task, stats)
            self._add_meta_row(row | extras)
            self._stats = (
                stats
                if self._stats is None
                else {k: aggregate_feature_stats([self._stats[k], stats[k]]) for k in stats}
            )
        else:
            self._write_v21(index, episode, table, task, stats, extras)
        self._episodes += 1
        self._frames += length
        return index

    def _track(self, path: Path) -> None:
        name = path.relative_to(self.root).as_posix()
        if name not in self._files:
            self._files.append(name)

    def _write_v3(
        self,
        index: int,
        episode: _Episode,
        table: pa.Table,
        task: str,
        stats: dict[str, dict[str, np.ndarray]],
    ) -> dict[str, Any]:
        layout = self.layout
        # Data file: rotate as DatasetWriter._save_episode_data does, from the open file's size
        # and its average bytes per frame.
        if self._data_writer is not None:
            chunk_index, file_index = self._data_file
            size = _size_mb(self._data_path(chunk_index, file_index))
            frames_in_file = self._frames - self._data_file_start
            per_frame = size / frames_in_file if frames_in_file else 0.0
            if size + per_frame * episode.length >= layout.data_files_size_in_mb:
                self._data_writer.close()
                self._data_writer = None
                self._data_file = _next_file(chunk_index, file_index, layout.chunks_size)
                self._data_file_start = self._frames
        path = self._data_path(*self._data_file)
        if self._data_writer is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._track(path)
            self._data_writer = pq.ParquetWriter(
                path, self._data_schema, compression="snappy", use_dictionary=True
            )
        self._data_writer.write_table(table, row_group_size=table.num_rows)
        row: dict[str, Any] = {
            "episode_index": index,
            "tasks": [task],
            "length": episode.length,
            "data/chunk_index": self._data_file[0],
            "data/file_index": self._data_file[1],
            "dataset_from_index": self._frames,
            "dataset_to_index": self._frames + episode.length,
        }
        for key, source in episode.videos.items():
            row |= self._add_video(key, source, index, episode.length)
        for feature, values in stats.items():
            for stat in STAT_KEYS:
                row[f"stats/{feature}/{stat}"] = np.asarray(values[stat]).tolist()
        return row

    def _data_path(self, chunk_index: int, file_index: int) -> Path:
        return self.root / DATA_PATH.format(chunk_index=chunk_index, file_index=file_index)

    def _video_path(self, key: str, chunk_index: int, file_index: int) -> Path:
        return self.root / VIDEO_PATH.format(
            video_key=key, chunk_index=chunk_index, file_index=file_index
        )

    def _add_video(self, key: str, source: Path, index: int, length: int) -> dict[str, Any]:
        """Queue the episode's video for its camera's current file (rotating first when it
        would pass the size limit, as DatasetWriter._save_episode_video does)."""
        current = self._videos[key]
        size = _size_mb(source)
        if current.pending and current.size_mb + size >= self.layout.video_files_size_in_mb:
            self._close_video(key)
            current.chunk_index, current.file_index = _next_file(
                current.chunk_index, current.file_index, self.layout.chunks_size
            )
        # A link (else a copy) under root: the bundle may be removed before the file is made.
        staged = self.root / _STAGING / key / f"episode_{index:06d}.mp4"
        staged.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, staged)
        except OSError:
            shutil.copyfile(source, staged)
        span = (current.frames / self.layout.fps, (current.frames + length) / self.layout.fps)
        current.pending.append(staged)
        current.spans.append(span)
        current.size_mb += size
        current.frames += length
        return {
            f"videos/{key}/chunk_index": current.chunk_index,
            f"videos/{key}/file_index": current.file_index,
            f"videos/{key}/from_timestamp": span[0],
            f"videos/{key}/to_timestamp": span[1],
        }

    def _close_video(self, key: str) -> None:
        current = self._videos[key]
        if not current.pending:
            return
        path = self._video_path(key, current.chunk_index, current.file_index)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._track(path)
        if len(current.pending) == 1:
            shutil.move(current.pending[0], path)
        else:
            spans = concatenate_videos(current.pending, path)
            got = [(float(a), float(b)) for a, b in spans]
            if len(got) != len(current.spans) or any(
                abs(a - c) > 1e-6 or abs(b - d) > 1e-6
                for (a, b), (c, d) in zip(got, current.spans, strict=False)
            ):
                raise DatasetWriteError(
                    f"{path.name} of {key}: the concatenated episodes start at {got[:3]}…, "
                    f"not at {current.spans[:3]}… as their frame counts say"
                )
            for staged in current.pending:
                staged.unlink(missing_ok=True)
        current.pending, current.spans = [], []
        current.size_mb, current.frames = 0.0, 0

    def _add_meta_row(self, row: dict[str, Any]) -> None:
        """Buffer the episode's row for meta/episodes, rotating the file at the data size
        limit from its size and average bytes per episode row."""
        if self._meta_writer is not None and self._meta_rows_in_file:
            size = _size_mb(self.root / self._meta_path(*self._meta_file))
            if size + size / self._meta_rows_in_file >= self.layout.data_files_size_in_mb:
                self._close_meta()
                self._meta_file = _next_file(*self._meta_file, self.layout.chunks_size)
        chunk_index, file_index = self._meta_file
        row |= {"meta/episodes/chunk_index": chunk_index, "meta/episodes/file_index": file_index}
        self._meta_rows.append(row)
        if len(self._meta_rows) >= META_BUFFER:
            self._flush_meta()

    def _meta_path(self, chunk_index: int, file_index: int) -> str:
        return EPISODES_PATH.format(chunk_index=chunk_index, file_index=file_index)

    def _flush_meta(self) -> None:
        if not self._meta_rows:
            return
        if self._meta_writer is None:
            path = self.root / self._meta_path(*self._meta_file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._track(path)
            self._meta_writer = pq.ParquetWriter(
                path, self._meta_schema, compression="snappy", use_dictionary=True
            )
        rows = self._meta_rows
        table = pa.Table.from_pylist(rows, schema=self._meta_schema)
        self._meta_writer.write_table(table, row_group_size=len(rows))
        self._meta_rows_in_file += len(rows)
        self._meta_rows = []

    def _close_meta(self) -> None:
        self._flush_meta()
        if self._meta_writer is not None:
            self._meta_writer.close()
            self._meta_writer = None
        self._meta_rows_in_file = 0

    def _finish_v3(self) -> None:
        if self._data_writer is not None:
            self._data_writer.close()
            self._data_writer = None
        for key in self.layout.cameras:
            self._close_video(key)
        self._close_meta()
        tasks_parquet(self.root / "meta" / "tasks.parquet", list(self._tasks))
        self._track(self.root / "meta" / "tasks.parquet")
        assert self._stats is not None
        _write_json(self.root / "meta" / "stats.json", _serialize(self._stats))
        self._track(self.root / "meta" / "stats.json")
        layout = self.layout
        info: dict[str, Any] = {
            "codebase_version": "v3.0",
            "robot_type": layout.robot_type,
            "total_episodes": self._episodes,
            "total_frames": self._frames,
            "total_tasks": len(self._tasks),
            "chunks_size": layout.chunks_size,
            "data_files_size_in_mb": _number(layout.data_files_size_in_mb),
            "video_files_size_in_mb": _number(layout.video_files_size_in_mb),
            "fps": _number(layout.fps),
            "splits": {"train": f"0:{self._episodes}"},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if layout.cameras else None,
            "features": self._info_features(lambda key: self._video_path(key, 0, 0)),
        }
        self._write_info(info)

    def _info_features(self, first_video: Callable[[str], Path]) -> dict[str, Any]:
        """info.json features; each camera's ``info`` probed from its first video file, as
        LeRobotDatasetMetadata.update_video_info does."""
        features = {key: dict(ft) for key, ft in self.features.items()}
        for key in self.layout.cameras:
            features[key]["info"] = video_info(first_video(key)).lerobot_info()
        return features

    def _write_info(self, info: dict[str, Any]) -> None:
        _write_json(self.root / "meta" / "info.json", info | self.layout.info_extra)
        self._track(self.root / "meta" / "info.json")

    # -- v2.1 -----------------------------------------------------------------------------------

    def _jsonl_write(self, name: str, row: dict[str, Any]) -> None:
        handle = self._jsonl.get(name)
        if handle is None:
            path = self.root / "meta" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            self._track(path)
            handle = self._jsonl[name] = path.open("w", encoding="utf-8")
        handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")

    def _write_v21(
        self,
        index: int,
        episode: _Episode,
        table: pa.Table,
        task: str,
        stats: dict[str, dict[str, np.ndarray]],
        extras: dict[str, Any],
    ) -> None:
        chunk = index // self.layout.chunks_size
        path = self.root / V21_DATA_PATH.format(episode_chunk=chunk, episode_index=index)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._track(path)
        pq.write_table(table, path, row_group_size=table.num_rows, compression="snappy")
        for key, source in episode.videos.items():
            target = self.root / V21_VIDEO_PATH.format(
                episode_chunk=chunk, video_key=key, episode_index=index
            )
            target.parent.mkdir(parents=True, exist_ok=True)
            self._track(target)
            shutil.copyfile(source, target)
        self._jsonl_write(
            "episodes.jsonl",
            {"episode_index": index, "tasks": [task], "length": episode.length} | extras,
        )
        v21 = {f: {k: s[k] for k in V21_STAT_KEYS} for f, s in stats.items()}
        self._jsonl_write(
            "episodes_stats.jsonl", {"episode_index": index, "stats": _serialize(v21)}
        )

    def _finish_v21(self) -> None:
        for handle in self._jsonl.values():
            handle.close()
        self._jsonl = {}
        path = self.root / "meta" / "tasks.jsonl"
        with path.open("w", encoding="utf-8") as fh:
            for task, task_index in self._tasks.items():
                fh.write(json.dumps({"task_index": task_index, "task": task}, ensure_ascii=False))
                fh.write("\n")
        self._track(path)
        layout = self.layout
        info: dict[str, Any] = {
            "codebase_version": "v2.1",
            "robot_type": layout.robot_type,
            "total_episodes": self._episodes,
            "total_frames": self._frames,
            "total_tasks": len(self._tasks),
            "total_videos": self._episodes * len(layout.cameras),
            "total_chunks": -(-self._episodes // layout.chunks_size),
            "chunks_size": layout.chunks_size,
            "fps": _number(layout.fps),
            "splits": {"train": f"0:{self._episodes}"},
            "data_path": V21_DATA_PATH,
            "video_path": V21_VIDEO_PATH if layout.cameras else None,
            "features": self._info_features(
                lambda key: (
                    self.root
                    / V21_VIDEO_PATH.format(episode_chunk=0, video_key=key, episode_index=0)
                )
            ),
        }
        self._write_info(info)
