"""Stream the messages of an MCAP recording (one or more files) without holding them in memory.

Each file is scanned front to back (see :mod:`labeling.capture.mcap_scan`): validation has to
touch every byte anyway, sequential reads are the fastest way to do that, and it works the same
for files with and without a summary section or index (a crashed recorder leaves none). When a
summary is present its statistics are kept in :class:`FileInfo` so the caller can cross-check
them against what was read.

Files are merged by log time; within a file the scanner restores log-time order (see there), and
the statistics sort their own times, so they never depend on the order.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter
from pathlib import Path

from .mcap_scan import FileScanner
from .messages import CaptureMessage, CaptureReadError, Channel, FileInfo

__all__ = [
    "CaptureMessage",
    "CaptureReadError",
    "Channel",
    "FileInfo",
    "Recording",
    "expand_paths",
    "read_messages",
]

_log_time = attrgetter("log_time_ns")


def _natural_key(path: Path) -> list[object]:
    """Sort ``wbag_10.mcap`` after ``wbag_9.mcap``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def expand_paths(paths: Iterable[Path | str]) -> list[Path]:
    """Return the MCAP files of ``paths``, replacing a directory by its ``*.mcap`` files.

    Raises CaptureReadError when a directory holds no MCAP file or no path is given.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(path.glob("*.mcap"), key=_natural_key)
            if not found:
                raise CaptureReadError(path, "directory holds no .mcap file")
            files.extend(found)
        else:
            files.append(path)
    if not files:
        raise CaptureReadError(Path("(no files)"), "no recording files given")
    return files


class Recording:
    """One recording read from one or more MCAP files as a single stream ordered by log time.

    Opening checks that every file exists and starts with the MCAP magic (raising
    CaptureReadError otherwise); reading the messages checks the rest and raises
    CaptureReadError at the first damaged record. ``channels`` and ``files`` are complete once
    :meth:`messages` has been exhausted.
    """

    def __init__(self, paths: Sequence[Path | str]) -> None:
        self.paths = expand_paths(paths)
        self._scanners = [FileScanner(path) for path in self.paths]

    @property
    def files(self) -> list[FileInfo]:
        return [scanner.info for scanner in self._scanners]

    @property
    def channels(self) -> list[Channel]:
        """Return every channel declared so far, the first one seen per topic."""
        by_topic: dict[str, Channel] = {}
        for scanner in self._scanners:
            for channel in scanner.channels.values():
                by_topic.setdefault(channel.topic, channel)
        return list(by_topic.values())

    def file_of(self, channel: Channel) -> Path:
        """The file that declared ``channel`` (a split recording repeats topics per file)."""
        for scanner in self._scanners:
            if any(c is channel for c in scanner.channels.values()):
                return scanner.path
        return self.paths[0]

    def messages(self) -> Iterator[CaptureMessage]:
        """Yield every message of every file, merged by log time.

        Raises CaptureReadError when a file is truncated or corrupt.
        """
        if len(self._scanners) == 1:
            return iter(self._scanners[0])
        return heapq.merge(*self._scanners, key=_log_time)


def read_messages(paths: Sequence[Path | str]) -> Iterator[CaptureMessage]:
    """Yield the messages of the recording in ``paths`` lazily, ordered by log time.

    Raises CaptureReadError for missing, empty, non-MCAP, truncated or corrupt files.
    """
    return Recording(paths).messages()
