"""What a LeRobot dataset's features say about its robot: joints, cameras, action ranges.

``info.json`` names the joints of ``action`` (or ``observation.state``) as a list, a list of
lists, or ``{"motors": [...]}``; image and video features are cameras, with shapes
channel-first ``[C, H, W]`` or channel-last ``[H, W, C]``; ranges come from ``stats.json``
(v2.0, v3.0) or ``episodes_stats.jsonl`` (v2.1), only where finite.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labeling.importers.errors import ImportFailed, ImportProblem
from labeling.importers.sources import is_lfs_pointer, iter_jsonl, read_text

IMAGE_DTYPES = ("video", "image")


@dataclass
class Camera:
    name: str
    feature: str
    width: int
    height: int
    fps: float
    layout: str  # "channels-first", "channels-last" or "from video info"


def positive_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def flatten_names(names: Any) -> list[str] | None:
    """Joint names from a feature's ``names``: a list, a list of lists, or {"motors": [...]}."""
    if names is None:
        return None
    if isinstance(names, dict):
        out: list[str] = []
        for value in names.values():
            flat = flatten_names(value)
            if flat:
                out.extend(flat)
        return out or None
    if isinstance(names, list):
        out = []
        for item in names:
            if isinstance(item, str):
                out.append(item)
            else:
                flat = flatten_names(item)
                if flat:
                    out.extend(flat)
        return out or None
    return None


def joint_names(features: dict[str, Any], warnings: list[str]) -> tuple[str | None, list[str]]:
    for key in ("action", "observation.state"):
        feature = features.get(key)
        if not isinstance(feature, dict):
            continue
        shape = feature.get("shape") or []
        dims = int(shape[0]) if shape and isinstance(shape[0], int) else 0
        names = flatten_names(feature.get("names")) or []
        if dims and len(names) != dims:
            if names:
                warnings.append(
                    f"feature '{key}' has {dims} dimensions but {len(names)} names; "
                    f"the rest are called {key}_<i>"
                )
            else:
                warnings.append(f"feature '{key}' has no joint names; they are called {key}_<i>")
            names = names[:dims] + [f"{key}_{i}" for i in range(len(names), dims)]
        return key, names
    warnings.append("no 'action' or 'observation.state' feature: the action space is unknown")
    return None, []


def cameras_of(features: dict[str, Any], fps: float | None, warnings: list[str]) -> list[Camera]:
    cameras: list[Camera] = []
    for key, feature in features.items():
        if not isinstance(feature, dict) or feature.get("dtype") not in IMAGE_DTYPES:
            continue
        name = key
        for prefix in ("observation.images.", "observation."):
            if name.startswith(prefix) and len(name) > len(prefix):
                name = name[len(prefix) :]
                break
        info = feature.get("info") or feature.get("video_info") or {}
        width = info.get("video.width") if isinstance(info, dict) else None
        height = info.get("video.height") if isinstance(info, dict) else None
        layout = "from video info"
        shape = feature.get("shape") or []
        if not (isinstance(width, int) and isinstance(height, int)):
            width, height, layout = image_size(shape, feature.get("names"))
        cam_fps = positive_number(info.get("video.fps") if isinstance(info, dict) else None) or fps
        if not width or not height or not cam_fps:
            warnings.append(
                f"camera feature '{key}' has no usable size or fps (shape {shape}); skipped"
            )
            continue
        cameras.append(
            Camera(name=name, feature=key, width=width, height=height, fps=cam_fps, layout=layout)
        )
    return cameras


def image_size(shape: list[Any], names: Any) -> tuple[int, int, str]:
    """(width, height, layout) from an image shape, channel-first [C,H,W] or channel-last [H,W,C]."""
    if len(shape) != 3 or not all(isinstance(s, int) and s > 0 for s in shape):
        return 0, 0, "unknown"
    if isinstance(names, list) and len(names) == 3 and all(isinstance(n, str) for n in names):
        lowered = [n.lower() for n in names]
        if "height" in lowered and "width" in lowered:
            h, w = shape[lowered.index("height")], shape[lowered.index("width")]
            first = lowered[0].startswith("channel")
            return w, h, "channels-first" if first else "channels-last"
    channels = (1, 3, 4)
    if shape[0] in channels and shape[2] not in channels:
        return shape[2], shape[1], "channels-first"
    if shape[2] in channels:
        return shape[1], shape[0], "channels-last"
    if shape[0] in channels:
        return shape[2], shape[1], "channels-first"
    return 0, 0, "unknown"


def finite_pairs(mins: Any, maxs: Any, n: int) -> list[tuple[float, float] | None]:
    out: list[tuple[float, float] | None] = []
    mins = mins if isinstance(mins, list) else []
    maxs = maxs if isinstance(maxs, list) else []
    for i in range(n):
        lo = mins[i] if i < len(mins) else None
        hi = maxs[i] if i < len(maxs) else None
        if (
            isinstance(lo, int | float)
            and isinstance(hi, int | float)
            and math.isfinite(lo)
            and math.isfinite(hi)
            and hi > lo
        ):
            out.append((float(lo), float(hi)))
        else:
            out.append(None)
    return out


def action_ranges(
    root: Path,
    version: str,
    feature: str | None,
    names: list[str],
    warnings: list[str],
) -> dict[str, tuple[float, float]]:
    """Per action dimension (min, max) from the dataset's statistics, where finite."""
    if feature is None or not names:
        return {}
    n = len(names)
    lows: list[float | None] = [None] * n
    highs: list[float | None] = [None] * n

    def merge(pairs: list[tuple[float, float] | None]) -> None:
        for i, pair in enumerate(pairs):
            if pair is None:
                continue
            lo, hi = pair
            lows[i] = lo if lows[i] is None else min(lows[i], lo)  # type: ignore[type-var]
            highs[i] = hi if highs[i] is None else max(highs[i], hi)  # type: ignore[type-var]

    stats_json = root / "meta/stats.json"
    episodes_stats = root / "meta/episodes_stats.jsonl"
    try:
        if stats_json.is_file() and not is_lfs_pointer(stats_json):
            stats = json.loads(read_text(stats_json, "meta/stats.json"))
            entry = stats.get(feature) if isinstance(stats, dict) else None
            if isinstance(entry, dict):
                merge(finite_pairs(entry.get("min"), entry.get("max"), n))
        elif episodes_stats.is_file() and not is_lfs_pointer(episodes_stats):
            ignored: list[ImportProblem] = []
            for _lineno, row in iter_jsonl(episodes_stats, "meta/episodes_stats.jsonl", ignored):
                entry = (row.get("stats") or {}).get(feature)
                if isinstance(entry, dict):
                    merge(finite_pairs(entry.get("min"), entry.get("max"), n))
            if ignored:
                warnings.append(
                    f"meta/episodes_stats.jsonl: {ignored[0]}; statistics partly ignored"
                )
    except (ImportFailed, json.JSONDecodeError, AttributeError) as exc:
        warnings.append(f"statistics could not be read ({exc}); action ranges unknown")
        return {}
    return {
        names[i]: (lo, hi)
        for i, (lo, hi) in enumerate(zip(lows, highs, strict=True))
        if lo is not None and hi is not None and hi > lo
    }
