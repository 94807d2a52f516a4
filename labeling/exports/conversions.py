"""Converted recordings, kept once per recording content and conversion settings.

Converting a recording (decode, align, encode) is the expensive part of an export, so its
result is stored under ``MEDIA_ROOT/episodes/<sha256[:2]>/<sha256>/<settings key>/``: the
episode bundles (see :mod:`labeling.capture.convert`) and ``result.json`` (the synchronisation
report, or the reason it was left out). The folder appears in one rename when the conversion
is complete, so a worker killed mid-way leaves nothing that looks finished, and the retry
converts only what is missing. The hidden work folder a killed worker leaves is swept away by
the next conversion or reuse of that recording once it has lain untouched for an hour. The
annotator's player serves the same videos.

Django-free apart from where the folder lives: callers pass the media root.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labeling.capture.convert import ConversionError, convert_recording
from labeling.capture.streams import StreamMap

# Bump when the conversion's output changes, so stored conversions are made again.
CONVERTER_VERSION = 1
RESULT = "result.json"


@dataclass(frozen=True)
class Conversion:
    """A finished conversion: its bundles (none when left out) and what happened."""

    folder: Path
    bundles: list[Path]
    report: dict[str, Any]
    excluded: str | None
    problems: list[str]
    reused: bool = False

    @property
    def ok(self) -> bool:
        return bool(self.bundles)

    @property
    def reason(self) -> str | None:
        """Why the recording gave no episode (None when it gave one or more)."""
        if self.problems:
            return "; ".join(self.problems)
        return self.excluded


def conversion_key(stream_map: StreamMap, codec: str, window: tuple[int, int] | None = None) -> str:
    """A short digest of everything that shapes the output."""
    payload = json.dumps(
        {
            "map": dataclasses.asdict(stream_map),
            "codec": codec,
            "version": CONVERTER_VERSION,
            "window": list(window) if window else None,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def conversion_folder(
    media_root: Path,
    sha256: str,
    stream_map: StreamMap,
    codec: str,
    window: tuple[int, int] | None = None,
) -> Path:
    key = conversion_key(stream_map, codec, window)
    return Path(media_root) / "episodes" / sha256[:2] / sha256 / key


def stored_conversion(folder: Path) -> Conversion | None:
    """The conversion stored in ``folder``, or None when there is none (or it is damaged)."""
    try:
        data = json.loads((folder / RESULT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    bundles = [folder / name for name in data.get("bundles", [])]
    if not all((b / "bundle.json").is_file() for b in bundles):
        return None
    return Conversion(
        folder=folder,
        bundles=bundles,
        report=data.get("report") or {},
        excluded=data.get("excluded"),
        problems=list(data.get("problems") or []),
        reused=True,
    )


def convert_stored(
    *,
    paths: list[Path],
    sha256: str,
    stream_map: StreamMap,
    codec: str,
    media_root: Path,
    window: tuple[int, int] | None = None,
) -> Conversion:
    """The conversion of the recording ``paths`` (content ``sha256``): the stored one when it
    exists, else converted now and stored. Safe to run twice at once for the same recording:
    the first to finish is kept. Bad input is a Conversion with ``problems``, stored too (the
    same bytes fail the same way)."""
    folder = conversion_folder(media_root, sha256, stream_map, codec, window)
    remove_partial(media_root, sha256)
    done = stored_conversion(folder)
    if done is not None:
        return done
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = folder.with_name(f".{folder.name}.{uuid.uuid4().hex[:8]}")
    try:
        try:
            result = convert_recording(paths, stream_map, work / "out", codec=codec, window=window)
        except ConversionError as exc:
            work.mkdir(parents=True, exist_ok=True)
            data: dict[str, Any] = {"bundles": [], "report": {}, "excluded": None}
            data["problems"] = exc.problems
        else:
            work.mkdir(parents=True, exist_ok=True)
            names = []
            out = work / "out"
            for bundle in result.episodes:
                target = work / bundle.path.name
                bundle.path.replace(target)
                names.append(target.name)
            shutil.rmtree(out, ignore_errors=True)
            data = {
                "bundles": names,
                "report": result.report,
                "excluded": result.excluded,
                "problems": [],
            }
        (work / RESULT).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        try:
            os.rename(work, folder)
        except OSError:
            # Someone else finished first (the folder exists): theirs is as good as ours.
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    stored = stored_conversion(folder)
    if stored is None:
        raise ConversionError([f"the conversion stored in {folder} cannot be read back"])
    return dataclasses.replace(stored, reused=False)


# A work folder nobody has written to for this long was left by a worker that died.
STALE_WORK_S = 3600.0


def _last_written(path: Path) -> float:
    """The newest modification time in ``path``'s tree (a conversion writes as it goes)."""
    newest = path.stat().st_mtime
    for child in path.rglob("*"):
        try:
            newest = max(newest, child.stat().st_mtime)
        except OSError:
            continue
    return newest


def remove_partial(media_root: Path, sha256: str, *, older_than_s: float = STALE_WORK_S) -> int:
    """Remove half-made conversions a killed worker left behind for this recording: hidden
    work folders that nothing has written to for ``older_than_s`` seconds (a live worker's
    folder is newer, so running conversions are left alone). Returns how many were removed."""
    parent = Path(media_root) / "episodes" / sha256[:2] / sha256
    if not parent.is_dir():
        return 0
    cutoff = time.time() - older_than_s
    removed = 0
    for child in parent.iterdir():
        if not child.name.startswith(".") or not child.is_dir():
            continue
        try:
            stale = _last_written(child) < cutoff
        except OSError:
            continue  # gone already: another worker finished or swept it
        if stale:
            shutil.rmtree(child, ignore_errors=True)
            removed += 1
    return removed
