"""The values the reader hands out: channels, messages, per-file scan results, read errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple


class CaptureReadError(Exception):
    """A recording file cannot be read; the message names the file and what is wrong with it."""

    def __init__(self, path: Path, problem: str, *, offset: int | None = None) -> None:
        self.path = path
        self.problem = problem
        self.offset = offset
        super().__init__(f"{path.name}: {problem}")


@dataclass(frozen=True, eq=False, slots=True)
class Channel:
    """A channel of one file. Compared by identity: files number their channels independently."""

    topic: str
    schema_name: str
    schema_encoding: str
    message_encoding: str
    schema_data: bytes = field(repr=False)


class CaptureMessage(NamedTuple):
    """One message; its raw ``data`` is still encoded in the channel's message encoding."""

    channel: Channel
    log_time_ns: int
    publish_time_ns: int
    data: bytes

    @property
    def topic(self) -> str:
        return self.channel.topic

    @property
    def schema_name(self) -> str:
        return self.channel.schema_name

    @property
    def schema_encoding(self) -> str:
        return self.channel.schema_encoding

    @property
    def message_encoding(self) -> str:
        return self.channel.message_encoding


@dataclass
class FileInfo:
    """What the scan of one file found; filled in as the file is read."""

    path: Path
    size_bytes: int
    messages: int = 0
    chunks: int = 0
    compressions: set[str] = field(default_factory=set)
    has_summary: bool = False
    indexed_message_count: int | None = None  # from the summary's Statistics record
    out_of_order: int = 0
    complete: bool = False
