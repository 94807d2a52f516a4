"""Parse one MCAP file front to back (https://mcap.dev/spec), yielding its messages.

The records are parsed here rather than through the ``mcap`` package so that a damaged file is
reported the way a field lead needs it: which file, at which byte, what was wrong, and how much
was readable before. Chunk CRCs and the data and summary section CRCs are verified when the
writer recorded them.

Ordering within a file: each chunk (or unchunked message) is sorted, and its messages are held
back until a later chunk starts after them, so overlapping chunks and locally shuffled messages
still come out in order; memory grows only with the amount of disorder. A message older than one
already yielded is yielded late and counted in ``FileInfo.out_of_order``.
"""

from __future__ import annotations

import heapq
import struct
import zlib
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from operator import attrgetter
from pathlib import Path
from typing import BinaryIO

import lz4.frame
import zstandard

from .messages import CaptureMessage, CaptureReadError, Channel, FileInfo

MAGIC = b"\x89MCAP0\r\n"

# Record opcodes from the MCAP specification (https://mcap.dev/spec).
_OP_HEADER = 0x01
_OP_FOOTER = 0x02
_OP_SCHEMA = 0x03
_OP_CHANNEL = 0x04
_OP_MESSAGE = 0x05
_OP_CHUNK = 0x06
_OP_STATISTICS = 0x0B
_OP_DATA_END = 0x0F

_RECORD_HEADER = struct.Struct("<BQ")
_MESSAGE_HEADER = struct.Struct("<HIQQ")
_CHUNK_HEADER = struct.Struct("<QQQI")
_STATISTICS_HEADER = struct.Struct("<QHIIIIQQ")
_FOOTER = struct.Struct("<QQI")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

_RECORD_NAMES = {
    _OP_HEADER: "header record",
    _OP_FOOTER: "footer record",
    _OP_SCHEMA: "schema record",
    _OP_CHANNEL: "channel record",
    _OP_MESSAGE: "message record",
    _OP_CHUNK: "chunk record",
    _OP_STATISTICS: "statistics record",
    _OP_DATA_END: "data end record",
}

# A record header claiming more than this is corruption, not data: refuse before allocating.
_MAX_RECORD_BYTES = 8 * 2**30

_FOREIGN_FORMATS = (
    (b"#ROSBAG", "a ROS 1 bag, not MCAP"),
    (b"SQLite format 3", "a rosbag2 SQLite (.db3) file, not MCAP"),
)

_log_time = attrgetter("log_time_ns")


class _Malformed(ValueError):
    """A field inside a record runs past the record's end."""


class FileScanner:
    """Parse one MCAP file front to back, yielding its messages and filling in a FileInfo."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise CaptureReadError(path, "file not found") from None
        except OSError as exc:
            raise CaptureReadError(path, f"cannot be read ({exc.strerror})") from None
        self.info = FileInfo(path=path, size_bytes=size)
        self.channels: dict[int, Channel] = {}
        self.schemas: dict[int, tuple[str, str, bytes]] = {}
        self._ends_with_magic = False
        self._check_magic()

    def fail(self, problem: str, offset: int | None = None) -> CaptureReadError:
        if self.info.messages:
            problem += f"; {self.info.messages:,} messages were readable before it"
        return CaptureReadError(self.path, problem, offset=offset)

    def _check_magic(self) -> None:
        size = self.info.size_bytes
        if size == 0:
            raise CaptureReadError(self.path, "empty file (0 bytes)")
        with self.path.open("rb") as fh:
            head = fh.read(len(MAGIC))
            if size >= 2 * len(MAGIC):
                fh.seek(-len(MAGIC), 2)
                self._ends_with_magic = fh.read(len(MAGIC)) == MAGIC
        if head == MAGIC:
            return
        for prefix, what in _FOREIGN_FORMATS:
            if head.startswith(prefix) or (len(head) == len(MAGIC) and prefix.startswith(head)):
                raise CaptureReadError(self.path, f"not an MCAP file: {what}")
        if MAGIC.startswith(head):
            raise CaptureReadError(self.path, f"truncated after {size:,} bytes (inside the magic)")
        raise CaptureReadError(
            self.path, f"not an MCAP file (starts with {head.hex(' ')}, expected the MCAP magic)"
        )

    def _truncated(self, offset: int, what: str, detail: str = "") -> CaptureReadError:
        size = self.info.size_bytes
        detail = f": {detail}" if detail else ""
        if self._ends_with_magic:
            # The file ends where a complete file ends, so a record overrunning it is a corrupt
            # length field rather than missing bytes.
            return self.fail(
                f"corrupt: {what} at offset {offset:,} runs past the end of the file{detail}",
                offset,
            )
        return self.fail(
            f"truncated after {size:,} bytes ({what} at offset {offset:,} incomplete{detail})",
            offset,
        )

    def __iter__(self) -> Iterator[CaptureMessage]:
        # A fresh pass re-reads the file, so start its counts afresh.
        self.info = FileInfo(path=self.path, size_bytes=self.info.size_bytes)
        self.channels.clear()
        self.schemas.clear()
        # Messages a later chunk may still interleave with, sorted by log time.
        pending: list[CaptureMessage] = []
        last_yielded = -1
        for batch in self._batches():
            if not batch:
                continue
            batch_start = batch[0].log_time_ns
            cut = bisect_right(pending, batch_start, key=_log_time)
            yield from pending[:cut]
            if cut:
                last_yielded = pending[cut - 1].log_time_ns
            rest = pending[cut:]
            if batch_start < last_yielded:
                self.info.out_of_order += sum(m.log_time_ns < last_yielded for m in batch)
            pending = list(heapq.merge(rest, batch, key=_log_time)) if rest else batch
        yield from pending

    def _batches(self) -> Iterator[list[CaptureMessage]]:
        """Yield messages a chunk (or one unchunked message) at a time, each batch sorted."""
        size = self.info.size_bytes
        crc = zlib.crc32(MAGIC)
        summary_crc, summary_from = 0, -1
        with self.path.open("rb", buffering=1024 * 1024) as fh:
            fh.seek(len(MAGIC))
            offset = len(MAGIC)
            in_data_section = True
            while True:
                head = fh.read(_RECORD_HEADER.size)
                if len(head) < _RECORD_HEADER.size:
                    if not head:
                        raise self.fail(
                            f"truncated after {size:,} bytes (ends at a record boundary with "
                            "no footer: the recorder did not close the file)",
                            offset,
                        )
                    raise self._truncated(offset, "record header")
                opcode, length = _RECORD_HEADER.unpack(head)
                if opcode == 0:
                    raise self.fail(
                        f"corrupt: invalid record opcode 0x00 at offset {offset:,}", offset
                    )
                if length > _MAX_RECORD_BYTES:
                    raise self.fail(
                        f"corrupt: record at offset {offset:,} claims {length:,} bytes", offset
                    )
                present = size - offset - _RECORD_HEADER.size
                if length > present:
                    name = _RECORD_NAMES.get(opcode, f"record (opcode 0x{opcode:02x})")
                    raise self._truncated(
                        offset, name, f"{length:,} bytes declared, {present:,} present"
                    )
                body = fh.read(length)
                if len(body) < length:
                    raise self._truncated(offset, "record")
                if opcode == _OP_DATA_END:
                    self._check_data_crc(body, crc, offset)
                    in_data_section = False
                    summary_from = offset + _RECORD_HEADER.size + length
                elif in_data_section:
                    crc = zlib.crc32(body, zlib.crc32(head, crc))
                elif opcode != _OP_FOOTER:
                    summary_crc = zlib.crc32(body, zlib.crc32(head, summary_crc))
                if opcode == _OP_CHUNK:
                    yield self._read_chunk(memoryview(body), offset)
                elif opcode in (_OP_MESSAGE, _OP_SCHEMA, _OP_CHANNEL):
                    yield self._read_records(memoryview(body), offset, [(opcode, 0, length)])
                elif opcode == _OP_STATISTICS:
                    self._read_statistics(body, offset)
                elif opcode == _OP_FOOTER:
                    if summary_from == -1:
                        raise self.fail(
                            f"corrupt: footer at offset {offset:,} before data end", offset
                        )
                    self._read_footer(fh, head, body, offset, summary_crc, summary_from)
                    return
                offset += _RECORD_HEADER.size + length

    def _check_data_crc(self, body: bytes, crc: int, offset: int) -> None:
        if len(body) < 4:
            raise self.fail(f"corrupt: data end record at offset {offset:,} is too short", offset)
        (expected,) = _U32.unpack_from(body)
        # Zero means the writer did not compute a CRC.
        if expected and expected != crc:
            raise self.fail(
                f"corrupt: data section CRC mismatch over bytes {len(MAGIC):,}-{offset - 1:,} "
                f"(checked at the data end record at offset {offset:,}; bytes changed after "
                "writing)",
                offset,
            )

    def _read_footer(
        self,
        fh: BinaryIO,
        head: bytes,
        body: bytes,
        offset: int,
        summary_crc: int,
        summary_from: int,
    ) -> None:
        if len(body) < _FOOTER.size:
            raise self.fail(f"corrupt: footer at offset {offset:,} is too short", offset)
        summary_start, _summary_offset_start, expected_crc = _FOOTER.unpack_from(body)
        self.info.has_summary = summary_start != 0
        # The CRC runs from the summary start through the footer's fields before the CRC;
        # zero means the writer did not compute it.
        if expected_crc and summary_start == summary_from:
            actual = zlib.crc32(body[: _FOOTER.size - 4], zlib.crc32(head, summary_crc))
            if actual != expected_crc:
                end = offset + _RECORD_HEADER.size + _FOOTER.size - 5
                raise self.fail(
                    f"corrupt: summary section CRC mismatch over bytes {summary_from:,}-{end:,} "
                    f"(checked at the footer at offset {offset:,}; index damaged)",
                    offset,
                )
        tail = fh.read(len(MAGIC))
        if tail != MAGIC:
            end = offset + _RECORD_HEADER.size + len(body)
            if len(tail) < len(MAGIC):
                raise self.fail(
                    f"truncated after {self.info.size_bytes:,} bytes (closing magic incomplete)",
                    end,
                )
            raise self.fail(f"corrupt: closing magic at offset {end:,} is wrong", end)
        self.info.complete = True

    def _read_statistics(self, body: bytes, offset: int) -> None:
        if len(body) < _STATISTICS_HEADER.size:
            raise self.fail(f"corrupt: statistics record at offset {offset:,} is too short", offset)
        self.info.indexed_message_count = _STATISTICS_HEADER.unpack_from(body)[0]

    def _read_chunk(self, body: memoryview, offset: int) -> list[CaptureMessage]:
        where = f"chunk at offset {offset:,}"
        try:
            _start, _end, uncompressed_size, uncompressed_crc = _CHUNK_HEADER.unpack_from(body)
            pos = _CHUNK_HEADER.size
            compression, pos = _string(body, pos)
            (records_length,) = _U64.unpack_from(body, pos)
            pos += 8
        except (struct.error, UnicodeDecodeError, _Malformed):
            raise self.fail(f"corrupt: {where} has a malformed header", offset) from None
        compressed = body[pos : pos + records_length]
        if len(compressed) != records_length:
            raise self.fail(f"corrupt: {where} declares more data than it holds", offset)
        if uncompressed_size > _MAX_RECORD_BYTES:
            raise self.fail(
                f"corrupt: {where} declares {uncompressed_size:,} uncompressed bytes", offset
            )
        data = self._decompress(compression, compressed, uncompressed_size, where, offset)
        if len(data) != uncompressed_size:
            raise self.fail(
                f"corrupt: {where} decompressed to {len(data):,} bytes, header says {uncompressed_size:,}",
                offset,
            )
        # Zero means the writer did not compute a CRC.
        if uncompressed_crc and zlib.crc32(data) != uncompressed_crc:
            raise self.fail(f"corrupt: {where} fails its CRC check", offset)
        self.info.chunks += 1
        self.info.compressions.add(compression or "none")
        view = memoryview(data)
        return self._read_records(view, offset, self._walk(view, offset))

    def _decompress(
        self, compression: str, data: memoryview, size: int, where: str, offset: int
    ) -> bytes | memoryview:
        try:
            if compression == "":
                return data
            if compression == "zstd":
                return zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
            if compression == "lz4":
                decompressed: bytes = lz4.frame.decompress(data)
                return decompressed
        except (zstandard.ZstdError, RuntimeError, ValueError) as exc:
            raise self.fail(
                f"corrupt: {where} cannot be decompressed ({compression}: {exc})", offset
            ) from None
        raise self.fail(f"{where} uses unsupported compression {compression!r}", offset)

    def _read_records(
        self, buf: memoryview, file_offset: int, records: Iterable[tuple[int, int, int]]
    ) -> list[CaptureMessage]:
        """Parse the schema, channel and message records in ``buf`` at ``(opcode, start, end)``."""
        messages: list[CaptureMessage] = []
        channels = self.channels
        try:
            for opcode, pos, end in records:
                if opcode == _OP_MESSAGE:
                    channel_id, _seq, log_time, publish_time = _MESSAGE_HEADER.unpack_from(buf, pos)
                    channel = channels.get(channel_id)
                    if channel is None:
                        raise self.fail(
                            f"corrupt: message in record at offset {file_offset:,} refers to "
                            f"channel {channel_id}, which was never declared",
                            file_offset,
                        )
                    messages.append(
                        CaptureMessage(
                            channel,
                            log_time,
                            publish_time,
                            bytes(buf[pos + _MESSAGE_HEADER.size : end]),
                        )
                    )
                elif opcode == _OP_SCHEMA:
                    self._read_schema(buf, pos)
                elif opcode == _OP_CHANNEL:
                    self._read_channel(buf, pos)
        except (struct.error, UnicodeDecodeError, _Malformed):
            raise self.fail(
                f"corrupt: record at offset {file_offset:,} has malformed contents", file_offset
            ) from None
        self.info.messages += len(messages)
        messages.sort(key=_log_time)
        return messages

    def _walk(self, buf: memoryview, file_offset: int) -> Iterator[tuple[int, int, int]]:
        pos, end = 0, len(buf)
        while pos < end:
            if pos + _RECORD_HEADER.size > end:
                raise self.fail(
                    f"corrupt: chunk at offset {file_offset:,} ends mid-record", file_offset
                )
            opcode, length = _RECORD_HEADER.unpack_from(buf, pos)
            body = pos + _RECORD_HEADER.size
            if body + length > end:
                raise self.fail(
                    f"corrupt: chunk at offset {file_offset:,} holds a record that overruns it",
                    file_offset,
                )
            yield opcode, body, body + length
            pos = body + length

    def _read_schema(self, buf: memoryview, pos: int) -> None:
        (schema_id,) = _U16.unpack_from(buf, pos)
        name, pos = _string(buf, pos + 2)
        encoding, pos = _string(buf, pos)
        (length,) = _U32.unpack_from(buf, pos)
        data = bytes(buf[pos + 4 : pos + 4 + length])
        if len(data) != length:
            raise _Malformed("schema data overruns its record")
        self.schemas[schema_id] = (name, encoding, data)

    def _read_channel(self, buf: memoryview, pos: int) -> None:
        channel_id, schema_id = struct.unpack_from("<HH", buf, pos)
        topic, pos = _string(buf, pos + 4)
        message_encoding, pos = _string(buf, pos)
        if channel_id in self.channels:
            return  # the summary repeats channels already declared in the data section
        # Schema 0 means "no schema"; an unknown id we treat the same rather than reject the file.
        name, encoding, data = self.schemas.get(schema_id, ("", "", b""))
        self.channels[channel_id] = Channel(topic, name, encoding, message_encoding, data)


def _string(buf: memoryview | bytes, pos: int) -> tuple[str, int]:
    (length,) = _U32.unpack_from(buf, pos)
    pos += 4
    raw = bytes(buf[pos : pos + length])
    if len(raw) != length:
        raise _Malformed("string overruns its record")
    return raw.decode("utf-8"), pos + length
