"""Read a LeRobot dataset's metadata (v2.0, v2.1, v3.0) into one normalised description.

Layouts:

* v2.0 / v2.1 — ``meta/info.json``, ``meta/episodes.jsonl`` (one episode per line:
  ``episode_index``, ``tasks``, ``length``), ``meta/tasks.jsonl``, and per-episode statistics
  in ``meta/episodes_stats.jsonl`` (v2.1) or dataset statistics in ``meta/stats.json`` (v2.0);
* v3.0 — ``meta/info.json``, ``meta/episodes/chunk-*/file-*.parquet`` (one row per episode),
  ``meta/tasks.parquet``, ``meta/stats.json``.

Only metadata is read (a dataset's metadata is small: thousands of episodes), never the
frames or videos. A dataset whose episode metadata is absent — only ``meta/info.json``, as
when the other files are Git-LFS pointers — is *info-only*: it imports as one episode row
(key ``all``) standing for ``total_episodes`` episodes with ``total_frames`` frames.

Per-episode fields named ``fieldcraft.*`` are Fieldcraft's own (its exports write them, see
:data:`OWN_FIELDS`): they carry the episode key, count, storage URI, outcome, failure mode,
site, statuses, condition values and features, so an export imports back unchanged.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labeling.importers.errors import MAX_REPORTED, ImportFailed, ImportProblem
from labeling.importers.lerobot_features import (
    Camera,
    action_ranges,
    cameras_of,
    joint_names,
    positive_number,
)
from labeling.importers.sources import is_lfs_pointer, iter_jsonl, read_text

VERSIONS = ("v2.0", "v2.1", "v3.0")
INFO = "meta/info.json"
EPISODES_JSONL = "meta/episodes.jsonl"
EPISODES_DIR = "meta/episodes"
STRUCTURAL = {
    "episode_index",
    "tasks",
    "length",
    "task_index",
    "dataset_from_index",
    "dataset_to_index",
}
STRUCTURAL_PREFIXES = ("data/", "videos/", "stats/", "meta/")
METADATA_VALUE_LIMIT = 16 * 1024
INFO_ONLY_KEY = "all"

# Fieldcraft's own per-episode fields, written by its exports (labeling.exports.services) so
# that an exported dataset imports back with nothing lost. ``fieldcraft.key``,
# ``fieldcraft.episode_count`` and ``fieldcraft.storage_uri`` replace the episode's key
# (else its episode_index), count and data path; the others feed episode fields.
OWN_FIELDS = {
    "fieldcraft.outcome": "outcome",
    "fieldcraft.failure_mode": "failure_mode",
    "fieldcraft.site": "site",
    "fieldcraft.embodiment": "embodiment",
    "fieldcraft.duration_s": "duration_s",
    "fieldcraft.recorded_at": "recorded_at",
    "fieldcraft.sync_status": "sync_status",
    "fieldcraft.label_status": "label_status",
}
# Kept in the episode's ``extra`` under the name after the prefix (as capture stores them).
OWN_EXTRAS = (
    "fieldcraft.team",
    "fieldcraft.round",
    "fieldcraft.calibration",
    "fieldcraft.capture_verdict",
    "fieldcraft.source_key",
    "fieldcraft.part",
)
OWN_KEY = "fieldcraft.key"
OWN_EPISODE_COUNT = "fieldcraft.episode_count"
OWN_STORAGE_URI = "fieldcraft.storage_uri"
OWN_CONDITION_PREFIX = "fieldcraft.conditions."
OWN_FEATURE_PREFIX = "fieldcraft.features."


def own_field(name: str) -> tuple[str, str] | None:
    """The import target of one of Fieldcraft's own episode fields: (kind, name) — kind an
    episode field, ``condition`` (name: the dimension), ``feature`` or ``extra`` — else None."""
    if name in OWN_FIELDS:
        return OWN_FIELDS[name], ""
    if name in OWN_EXTRAS:
        return "extra", name.removeprefix("fieldcraft.")
    for prefix, kind in ((OWN_CONDITION_PREFIX, "condition"), (OWN_FEATURE_PREFIX, "feature")):
        if name.startswith(prefix) and len(name) > len(prefix):
            return kind, name[len(prefix) :]
    return None


@dataclass
class Episode:
    index: int
    length: int
    tasks: list[str]
    storage_uri: str
    extras: dict[str, Any]
    count: int = 1
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            self.key = str(self.index)


@dataclass
class LeRobotDataset:
    root: Path
    version: str
    info: dict[str, Any]
    fps: float | None
    robot_type: str | None
    total_episodes: int | None
    total_frames: int | None
    action_feature: str | None
    action_names: list[str]
    action_ranges: dict[str, tuple[float, float]]
    cameras: list[Camera]
    tasks: list[str]
    episodes: list[Episode]
    info_only: bool
    episodes_file: str
    warnings: list[str] = field(default_factory=list)

    @property
    def format_version(self) -> str:
        return f"LeRobot {self.version}"

    @property
    def extra_fields(self) -> list[str]:
        names: dict[str, None] = {}
        for ep in self.episodes:
            for k in ep.extras:
                names.setdefault(k, None)
        return list(names)

    def metadata(self) -> dict[str, Any]:
        """info.json for Dataset.metadata, without values too big to keep around."""
        kept: dict[str, Any] = {}
        dropped: list[str] = []
        for key, value in self.info.items():
            if len(json.dumps(value, default=str)) > METADATA_VALUE_LIMIT:
                dropped.append(key)
            else:
                kept[key] = value
        if dropped:
            kept["_dropped_keys"] = dropped
        return kept


def find_root(path: Path) -> Path:
    """The dataset root (the folder holding ``meta/info.json``) for a path given by a person."""
    if path.is_file() and path.name == "info.json" and path.parent.name == "meta":
        return path.parent.parent
    if not path.exists():
        raise ImportFailed.one(str(path), "no such file or folder")
    if not path.is_dir():
        raise ImportFailed.one(path.name, "not a LeRobot dataset folder or archive")
    if (path / INFO).is_file():
        return path
    candidates = sorted(p.parent.parent for p in path.glob("*/meta/info.json"))
    if len(candidates) == 1:
        return candidates[0]
    if len(candidates) > 1:
        names = ", ".join(c.name for c in candidates[:5])
        raise ImportFailed.one(
            path.name, f"holds several LeRobot datasets ({names}); import them one at a time"
        )
    if (path / "meta").is_dir():
        raise ImportFailed.one(
            path.name, "not a LeRobot dataset: meta/ has no info.json (every layout has one)"
        )
    raise ImportFailed.one(
        path.name,
        "not a LeRobot dataset: no meta/info.json (expected <dataset>/meta/info.json)",
    )


def load(path: Path) -> LeRobotDataset:
    """Read and check the metadata of the LeRobot dataset at ``path``.

    Raises ImportFailed listing what is missing or malformed (file, line/row, field).
    """
    root = find_root(path)
    info = _load_json(root / INFO, INFO)
    if not isinstance(info, dict):
        raise ImportFailed.one(INFO, "expected a JSON object")
    version = _version(info, root)
    problems: list[ImportProblem] = []
    warnings: list[str] = []

    fps = positive_number(info.get("fps"))
    if info.get("fps") is not None and fps is None:
        problems.append(
            ImportProblem(INFO, f"'fps' must be a positive number, got {info['fps']!r}")
        )
    if fps is None:
        warnings.append("meta/info.json gives no fps: durations are left at 0")
    total_episodes = _count(info.get("total_episodes"), "total_episodes", problems)
    total_frames = _count(info.get("total_frames"), "total_frames", problems)
    features = info.get("features") or {}
    if not isinstance(features, dict):
        problems.append(ImportProblem(INFO, "'features' must be a JSON object"))
        features = {}
    robot_type = info.get("robot_type") if isinstance(info.get("robot_type"), str) else None

    action_feature, names = joint_names(features, warnings)
    cameras = cameras_of(features, fps, warnings)

    tasks = _tasks(root, version, problems)
    episodes, episodes_file, info_only = _episodes(root, version, info, tasks, problems, warnings)
    if problems:
        raise ImportFailed(problems, total=len(problems))
    stats_ranges = action_ranges(root, version, action_feature, names, warnings)

    if info_only:
        if total_episodes is None or total_frames is None:
            raise ImportFailed.one(
                INFO,
                "no episode metadata, and info.json lacks total_episodes/total_frames: "
                "nothing to import",
            )
        episodes = [
            Episode(
                index=0,
                length=total_frames,
                tasks=tasks[:1] if len(tasks) == 1 else [],
                storage_uri="",
                extras={},
                count=max(total_episodes, 1),
                key=INFO_ONLY_KEY,
            )
        ]
        warnings.append(
            f"no episode metadata ({episodes_file} is absent): imported as one row standing "
            f"for {total_episodes} episodes and {total_frames} frames (key '{INFO_ONLY_KEY}')"
        )
    else:
        n = sum(e.count for e in episodes)
        frames = sum(e.length for e in episodes)
        if total_episodes is not None and n != total_episodes:
            warnings.append(
                f"{episodes_file} lists {n} episodes but info.json says total_episodes={total_episodes}"
            )
        if total_frames is not None and frames != total_frames:
            warnings.append(
                f"episode lengths sum to {frames} frames but info.json says total_frames={total_frames}"
            )
    return LeRobotDataset(
        root=root,
        version=version,
        info=info,
        fps=fps,
        robot_type=robot_type,
        total_episodes=total_episodes,
        total_frames=total_frames,
        action_feature=action_feature,
        action_names=names,
        action_ranges=stats_ranges,
        cameras=cameras,
        tasks=tasks,
        episodes=episodes,
        info_only=info_only,
        episodes_file=episodes_file,
        warnings=warnings,
    )


# --- pieces -----------------------------------------------------------------------------


def _load_json(path: Path, label: str) -> Any:
    if not path.is_file():
        raise ImportFailed.one(label, "missing")
    text = read_text(path, label)
    if not text.strip():
        raise ImportFailed.one(label, "the file is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFailed(
            [
                ImportProblem(
                    file=label,
                    row=exc.lineno,
                    line_label="line",
                    message=f"invalid JSON ({exc.msg}, column {exc.colno})",
                )
            ]
        ) from None


def _version(info: dict[str, Any], root: Path) -> str:
    raw = info.get("codebase_version")
    if raw is None:
        if (root / EPISODES_DIR).is_dir():
            return "v3.0"
        raise ImportFailed.one(
            INFO, "no 'codebase_version': cannot tell the LeRobot layout (v2.0, v2.1 or v3.0)"
        )
    text = str(raw).strip().lower()
    if not text.startswith("v"):
        text = "v" + text
    for version in VERSIONS:
        if text == version or text.startswith(version + "."):
            return version
    raise ImportFailed.one(
        INFO, f"codebase_version {raw!r} is not a supported layout (v2.0, v2.1, v3.0)"
    )


def _count(value: Any, name: str, problems: list[ImportProblem]) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.append(ImportProblem(INFO, f"'{name}' must be a whole number ≥ 0, got {value!r}"))
        return None
    return value


def _tasks(root: Path, version: str, problems: list[ImportProblem]) -> list[str]:
    by_index: dict[int, str] = {}
    if version == "v3.0":
        path = root / "meta/tasks.parquet"
        if path.is_file() and not is_lfs_pointer(path):
            table = _read_parquet(path, "meta/tasks.parquet", None, problems)
            if table is not None:
                rows = table.to_pylist()
                names = table.schema.names
                text_col = (
                    "task"
                    if "task" in names
                    else next((n for n in names if n != "task_index"), None)
                )
                for i, row in enumerate(rows):
                    index = row.get("task_index", i)
                    task = row.get(text_col) if text_col else None
                    if isinstance(task, str) and isinstance(index, int):
                        by_index[index] = task
    else:
        path = root / "meta/tasks.jsonl"
        if path.is_file() and not is_lfs_pointer(path):
            for lineno, row in iter_jsonl(path, "meta/tasks.jsonl", problems):
                index, task = row.get("task_index"), row.get("task")
                if not isinstance(index, int) or not isinstance(task, str):
                    problems.append(
                        ImportProblem(
                            file="meta/tasks.jsonl",
                            row=lineno,
                            line_label="line",
                            message="expected 'task_index' (a whole number) and 'task' (text)",
                        )
                    )
                    continue
                by_index[index] = task
    return [by_index[i] for i in sorted(by_index)]


def _read_parquet(path: Path, label: str, columns: list[str] | None, problems: list[ImportProblem]):  # type: ignore[no-untyped-def]
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.stat().st_size == 0:
        problems.append(ImportProblem(label, "the file is empty"))
        return None
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        problems.append(
            ImportProblem(label, f"not a readable Parquet file ({first}); it may be truncated")
        )
        return None


def _episodes(
    root: Path,
    version: str,
    info: dict[str, Any],
    tasks: list[str],
    problems: list[ImportProblem],
    warnings: list[str],
) -> tuple[list[Episode], str, bool]:
    jsonl = root / EPISODES_JSONL
    parquet_files = (
        sorted((root / EPISODES_DIR).glob("**/*.parquet")) if (root / EPISODES_DIR).is_dir() else []
    )
    if version == "v3.0":
        if not parquet_files:
            if jsonl.is_file():
                problems.append(
                    ImportProblem(
                        INFO,
                        "says codebase_version v3.0, but the episodes are in meta/episodes.jsonl "
                        "(the v2.x layout); v3.0 keeps them in meta/episodes/chunk-*/file-*.parquet",
                    )
                )
            return [], "meta/episodes/*.parquet", True
        if any(is_lfs_pointer(p) for p in parquet_files):
            warnings.append("meta/episodes/*.parquet are Git-LFS pointers, not the files")
            return [], "meta/episodes/*.parquet", True
        return (
            _episodes_v3(root, parquet_files, info, tasks, problems),
            "meta/episodes/*.parquet",
            False,
        )
    if not jsonl.is_file():
        if parquet_files:
            problems.append(
                ImportProblem(
                    INFO,
                    f"says codebase_version {version}, but the episodes are in "
                    "meta/episodes/*.parquet (the v3.0 layout); v2.x keeps them in meta/episodes.jsonl",
                )
            )
        return [], EPISODES_JSONL, True
    if is_lfs_pointer(jsonl):
        warnings.append("meta/episodes.jsonl is a Git-LFS pointer, not the file")
        return [], EPISODES_JSONL, True
    return _episodes_v2(root, jsonl, info, tasks, problems), EPISODES_JSONL, False


def _task_names(raw: Any, tasks: list[str]) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [raw]
    out = []
    for item in list(raw):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, int) and 0 <= item < len(tasks):
            out.append(tasks[item])
    return out


def _is_scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str | int | bool)


def _scalar_extras(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in row.items()
        if k not in STRUCTURAL and not k.startswith(STRUCTURAL_PREFIXES) and _is_scalar(v)
    }


def _episode(
    index: int, length: int, tasks: list[str], storage_uri: str, row: dict[str, Any]
) -> Episode:
    extras = _scalar_extras(row)
    key = extras.pop(OWN_KEY, None)
    count = _whole(extras.pop(OWN_EPISODE_COUNT, None))
    uri = extras.pop(OWN_STORAGE_URI, None)
    return Episode(
        index=index,
        length=length,
        tasks=tasks,
        storage_uri=uri if isinstance(uri, str) else storage_uri,
        extras=extras,
        count=count if count else 1,
        key=str(key).strip() if key is not None else "",
    )


def _whole(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _episodes_v2(
    root: Path, path: Path, info: dict[str, Any], tasks: list[str], problems: list[ImportProblem]
) -> list[Episode]:
    raw_chunks = info.get("chunks_size")
    chunks_size: int = raw_chunks if isinstance(raw_chunks, int) and raw_chunks > 0 else 1000
    raw_path = info.get("data_path")
    data_path: str = raw_path if isinstance(raw_path, str) else ""
    episodes: list[Episode] = []
    seen: dict[int, int] = {}
    for lineno, row in iter_jsonl(path, EPISODES_JSONL, problems):
        if len(problems) > MAX_REPORTED * 5:
            break
        index, length = _whole(row.get("episode_index")), _whole(row.get("length"))
        bad = [n for n, v in (("episode_index", index), ("length", length)) if v is None]
        if bad:
            problems.append(
                ImportProblem(
                    file=EPISODES_JSONL,
                    row=lineno,
                    line_label="line",
                    column=bad[0],
                    message=f"expected a whole number ≥ 0, got {row.get(bad[0])!r}",
                )
            )
            continue
        assert index is not None
        assert length is not None
        if index in seen:
            problems.append(
                ImportProblem(
                    file=EPISODES_JSONL,
                    row=lineno,
                    line_label="line",
                    column="episode_index",
                    message=f"episode_index {index} repeats line {seen[index]}",
                )
            )
            continue
        seen[index] = lineno
        uri = _format_path(data_path, episode_chunk=index // chunks_size, episode_index=index)
        episodes.append(_episode(index, length, _task_names(row.get("tasks"), tasks), uri, row))
    if not episodes and not problems:
        problems.append(ImportProblem(EPISODES_JSONL, "the file lists no episodes"))
    return episodes


def _format_path(template: str, **values: int) -> str:
    if not template:
        return ""
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError):
        return ""


def _episodes_v3(
    root: Path,
    files: list[Path],
    info: dict[str, Any],
    tasks: list[str],
    problems: list[ImportProblem],
) -> list[Episode]:
    import pyarrow.parquet as pq

    raw_path = info.get("data_path")
    data_path: str = raw_path if isinstance(raw_path, str) else ""
    episodes: list[Episode] = []
    seen: dict[int, str] = {}
    for path in files:
        label = str(path.relative_to(root))
        try:
            names = pq.read_schema(path).names
        except Exception:
            names = None
        if names is not None:
            wanted = [
                n
                for n in names
                if n in ("episode_index", "length", "tasks", "data/chunk_index", "data/file_index")
                or (n not in STRUCTURAL and not n.startswith(STRUCTURAL_PREFIXES))
            ]
            missing = [n for n in ("episode_index", "length") if n not in names]
            if missing:
                problems.append(ImportProblem(label, f"no {' or '.join(missing)} column"))
                continue
        else:
            wanted = None
        table = _read_parquet(path, label, wanted, problems)
        if table is None:
            continue
        for rowno, row in enumerate(table.to_pylist(), start=1):
            index, length = _whole(row.get("episode_index")), _whole(row.get("length"))
            if index is None or length is None:
                column = "episode_index" if index is None else "length"
                problems.append(
                    ImportProblem(
                        file=label,
                        row=rowno,
                        column=column,
                        message=f"expected a whole number ≥ 0, got {row.get(column)!r}",
                    )
                )
                continue
            if index in seen:
                problems.append(
                    ImportProblem(
                        file=label,
                        row=rowno,
                        column="episode_index",
                        message=f"episode_index {index} is listed twice (also in {seen[index]})",
                    )
                )
                continue
            seen[index] = label
            chunk, file_index = row.get("data/chunk_index"), row.get("data/file_index")
            uri = (
                _format_path(data_path, chunk_index=chunk, file_index=file_index)
                if isinstance(chunk, int) and isinstance(file_index, int)
                else ""
            )
            episodes.append(_episode(index, length, _task_names(row.get("tasks"), tasks), uri, row))
    if not episodes and not problems:
        problems.append(ImportProblem(EPISODES_DIR, "the episode files list no episodes"))
    return episodes
