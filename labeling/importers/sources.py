"""Reading import sources: format detection, encoding checks, record-aligned chunks, archives.

Everything here streams: a text file is read in blocks and handed on in chunks that end on a
record boundary (so each chunk can be one ``COPY`` statement), a Parquet file in record
batches. Nothing holds a whole file in memory.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from labeling.importers.errors import ImportFailed, ImportProblem

BLOCK_BYTES = 8 * 1024 * 1024
# A record longer than this (an unclosed quote swallowing the rest of the file) is cut at a
# line end anyway; PostgreSQL then reports the unterminated quoted field.
MAX_PENDING_BYTES = 64 * 1024 * 1024
HEADER_PEEK_BYTES = 1024 * 1024
FORMATS = ("lerobot", "csv", "tsv", "parquet")
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")
MAX_ARCHIVE_MEMBERS = 100_000
MAX_EXTRACTED_BYTES = 2 * 1024**3
# The most one metadata file may hold once unpacked (a zip of 1 MB can hold 1 GB of spaces).
# JSON Lines are read a line at a time, so their total is capped and each line as a JSON
# document; a JSON document (info.json, stats.json) is read and parsed whole.
MAX_JSONL_BYTES = 256 * 1024**2
MAX_JSON_BYTES = 64 * 1024**2
MAX_METADATA_FILE_BYTES = 256 * 1024**2  # any other file under meta/ (Parquet)
READ_BLOCK_BYTES = 1024**2


def detect_format(path: Path) -> str:
    """Name the format of ``path`` from its name, else from its first bytes.

    Raises ImportFailed when the path is missing or nothing fits.
    """
    label = path.name or str(path)
    if not path.exists():
        raise ImportFailed.one(str(path), "no such file or folder")
    if path.is_dir() or is_archive(path):
        return "lerobot"
    name = path.name.lower()
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith((".tsv", ".tab")):
        return "tsv"
    if name.endswith(".csv"):
        return "csv"
    if name == "info.json":
        return "lerobot"
    with path.open("rb") as fh:
        head = fh.read(64 * 1024)
    if head.startswith(b"PAR1"):
        return "parquet"
    if not head.strip():
        raise ImportFailed.one(label, "the file is empty")
    first_line = head.split(b"\n", 1)[0]
    if b"\x00" in head:
        raise ImportFailed.one(
            label, "not a text, Parquet or archive file; give --format or a known extension"
        )
    return "tsv" if first_line.count(b"\t") > first_line.count(b",") else "csv"


def is_archive(path: Path) -> bool:
    name = path.name.lower()
    if name.endswith(ARCHIVE_SUFFIXES):
        return True
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        head = fh.read(262)
    return head.startswith((b"PK\x03\x04", b"\x1f\x8b"))


# --- text: encoding and record-aligned chunks -------------------------------------------


def _encoding_problem(label: str, data: bytes, offset: int) -> ImportFailed | None:
    """A clear message for text that is not UTF-8, or None when ``data`` starts fine."""
    if offset == 0 and data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return ImportFailed.one(label, "UTF-16 text, not UTF-8; save it as UTF-8")
    nul = data.find(b"\x00")
    if nul >= 0:
        return ImportFailed.one(
            label,
            f"contains a NUL byte at offset {offset + nul}: UTF-16 or binary data, not UTF-8 "
            "text; save it as UTF-8",
        )
    return None


def not_utf8(label: str, byte: int, offset: int) -> ImportFailed:
    return ImportFailed.one(
        label, f"not UTF-8 text (byte 0x{byte:02x} at offset {offset}); save it as UTF-8"
    )


def size_text(n: int) -> str:
    return f"{n / 1024**2:g} MB" if n >= 1024**2 else f"{n:,} bytes"


def metadata_cap(name: str) -> tuple[int, str]:
    """The most a metadata file of this name may hold unpacked, and what it is called."""
    lower = name.lower()
    if lower.endswith(".jsonl"):
        return MAX_JSONL_BYTES, "a JSON Lines file"
    if lower.endswith(".json"):
        return MAX_JSON_BYTES, "a JSON document"
    return MAX_METADATA_FILE_BYTES, "a metadata file"


def read_text(path: Path, label: str) -> str:
    """Read a small text file (JSON metadata) as UTF-8, with a clear message if it is not.

    Reads at most :data:`MAX_JSON_BYTES` (one byte more tells it is over); raises
    ImportFailed beyond that.
    """
    cap = MAX_JSON_BYTES
    blocks: list[bytes] = []
    read = 0
    with path.open("rb") as fh:
        # In blocks: read(cap + 1) would allocate the whole cap up front.
        while block := fh.read(READ_BLOCK_BYTES):
            read += len(block)
            if read > cap:
                raise ImportFailed.one(
                    label,
                    f"is larger than {size_text(cap)}, the most a JSON document in meta/ may hold",
                )
            blocks.append(block)
    data = b"".join(blocks)
    problem = _encoding_problem(label, data, 0)
    if problem is not None:
        raise problem
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if data.startswith(codecs.BOM_UTF8) else 0)
        raise not_utf8(label, data[start], start) from None


def read_header(path: Path, *, delimiter: str, label: str) -> list[str]:
    """Parse the first record of a CSV/TSV file into column names (stripped, never empty)."""
    with path.open("rb") as fh:
        head = fh.read(HEADER_PEEK_BYTES)
    if not head.strip(b" \t\r\n\xef\xbb\xbf"):
        raise ImportFailed.one(label, "the file is empty")
    problem = _encoding_problem(label, head, 0)
    if problem is not None:
        raise problem
    bom = 3 if head.startswith(codecs.BOM_UTF8) else 0
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(head[bom:], final=len(head) < HEADER_PEEK_BYTES)
    except UnicodeDecodeError as exc:
        raise not_utf8(label, head[bom + exc.start], bom + exc.start) from None
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader)
    except (StopIteration, csv.Error) as exc:
        raise ImportFailed.one(label, f"cannot read the header row ({exc})") from None
    names = [" ".join(h.split()) or f"(unnamed column {i + 1})" for i, h in enumerate(header)]
    if len(names) == 1 and delimiter == "," and "\t" in header[0]:
        raise ImportFailed.one(
            label, "the header has tabs but no commas: is this TSV? give --format tsv"
        )
    return names


@dataclass
class TextChunk:
    data: bytes
    offset: int  # byte offset of the chunk in the file
    end: int  # byte offset just past the chunk


def iter_text_chunks(
    path: Path, *, label: str, block_bytes: int | None = None
) -> Iterator[TextChunk]:
    """Yield the file in chunks that each end on a record boundary, checking it is UTF-8.

    A newline ends a record when the number of quote characters before it is even (a quote
    inside a quoted field is doubled, so this holds for well-formed CSV, and PostgreSQL's CSV
    parser reads quotes the same way). A UTF-8 byte-order mark is dropped; blank lines at the
    end of the file are dropped.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    pending = b""
    pending_offset = 0
    read_offset = 0
    first = True
    with path.open("rb") as fh:
        while True:
            block = fh.read(block_bytes or BLOCK_BYTES)
            block_offset = read_offset
            read_offset += len(block)
            problem = _encoding_problem(label, block, block_offset)
            if problem is not None:
                raise problem
            if first:
                first = False
                if block.startswith(codecs.BOM_UTF8):
                    block = block[3:]
                    block_offset += 3
                    pending_offset = 3
            buffered = decoder.getstate()[0]
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                data = buffered + block
                raise not_utf8(
                    label, data[exc.start], block_offset - len(buffered) + exc.start
                ) from None
            if not block:
                break
            data = pending + block
            cut = _record_cut(data, force=len(data) > MAX_PENDING_BYTES)
            if cut > 0:
                # Blank lines at a chunk's end stay pending: at the end of the file they go.
                body_end = len(data[:cut].rstrip(b" \t\r\n"))
                newline = data.find(b"\n", body_end, cut)
                if body_end == 0:
                    cut = 0
                elif newline >= 0:
                    cut = newline + 1
            if cut > 0:
                yield TextChunk(data[:cut], pending_offset, pending_offset + cut)
                pending_offset += cut
                pending = data[cut:]
            else:
                pending = data
    tail = pending.rstrip(b" \t\r\n")
    if tail:
        yield TextChunk(tail + b"\n", pending_offset, pending_offset + len(pending))


def _record_cut(data: bytes, *, force: bool) -> int:
    """The length of the longest prefix of ``data`` that ends on a record boundary (0: none)."""
    total_quotes = data.count(b'"')
    pos = data.rfind(b"\n")
    quotes_after = 0
    end = len(data)
    while pos >= 0:
        quotes_after += data.count(b'"', pos, end)
        if (total_quotes - quotes_after) % 2 == 0:
            return pos + 1
        end = pos
        pos = data.rfind(b"\n", 0, pos)
    if force:
        last = data.rfind(b"\n")
        return last + 1 if last >= 0 else 0
    return 0


# --- Parquet ----------------------------------------------------------------------------


def parquet_open(path: Path, label: str):  # type: ignore[no-untyped-def]
    """Open a Parquet file, turning a truncated or foreign file into a clear problem."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.stat().st_size == 0:
        raise ImportFailed.one(label, "the file is empty")
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise ImportFailed.one(
            label, f"not a readable Parquet file ({_first_line(exc)}); it may be truncated"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def parquet_csv_batches(
    pf, *, label: str, batch_rows: int = 100_000
) -> Iterator[tuple[bytes, int]]:  # type: ignore[no-untyped-def]
    """Yield (CSV bytes without header, row count) per record batch of a Parquet file.

    Nested columns (lists, structs) are written as JSON text; binary columns as UTF-8 text.
    """
    import json

    import pyarrow as pa
    import pyarrow.csv as pacsv

    def plain(field: pa.Field) -> bool:
        t = field.type
        return not (
            pa.types.is_nested(t)
            or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)
            or pa.types.is_fixed_size_binary(t)
        )

    options = pacsv.WriteOptions(include_header=False)
    try:
        for batch in pf.iter_batches(batch_size=batch_rows):
            columns = []
            for i, field in enumerate(batch.schema):
                col = batch.column(i)
                if pa.types.is_dictionary(field.type):
                    col = col.dictionary_decode()
                    field = pa.field(field.name, col.type)
                if not plain(field):
                    values = col.to_pylist()
                    col = pa.array(
                        [
                            None
                            if v is None
                            else v.decode("utf-8", "replace")
                            if isinstance(v, bytes)
                            else json.dumps(v, default=str)
                            for v in values
                        ],
                        type=pa.string(),
                    )
                columns.append(col)
            table = pa.Table.from_arrays(columns, names=[f"c{i}" for i in range(len(columns))])
            buf = io.BytesIO()
            pacsv.write_csv(table, buf, write_options=options)
            yield buf.getvalue(), batch.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise ImportFailed.one(
            label, f"cannot read the Parquet data ({_first_line(exc)}); it may be truncated"
        ) from None


# --- archives ---------------------------------------------------------------------------


def extract_archive(archive: Path, dest: Path, *, only_meta: bool = True) -> Path:
    """Extract a .zip or .tar(.gz) safely into ``dest`` and return it.

    Refuses absolute paths, ``..`` components, links and devices; caps members and size.
    With ``only_meta`` only files under a ``meta/`` folder are extracted (a LeRobot dataset's
    data and videos are not needed to import its inventory).
    """
    label = archive.name
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()

    def target_for(name: str) -> Path | None:
        pure = PurePosixPath(name.replace("\\", "/"))
        if pure.is_absolute() or ".." in pure.parts or (pure.parts and ":" in pure.parts[0]):
            raise ImportFailed.one(label, f"unsafe path in archive: {name!r}")
        if only_meta and "meta" not in pure.parts[:-1]:
            return None
        target = (root / pure).resolve()
        if root not in target.parents:
            raise ImportFailed.one(label, f"unsafe path in archive: {name!r}")
        return target

    total = 0
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                infos = zf.infolist()
                if len(infos) > MAX_ARCHIVE_MEMBERS:
                    raise ImportFailed.one(label, "the archive has too many files")
                for info in infos:
                    if info.is_dir():
                        continue
                    target = target_for(info.filename)
                    if target is None:
                        continue
                    if total + info.file_size > MAX_EXTRACTED_BYTES:
                        raise ImportFailed.one(label, "the archive's metadata is too large")
                    _refuse_oversized(label, info.filename, info.file_size)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as src, target.open("wb") as out:
                        total += _copy_capped(src, out, label=label, name=info.filename)
                    if total > MAX_EXTRACTED_BYTES:  # the sizes it declared were too small
                        raise ImportFailed.one(label, "the archive's metadata is too large")
        else:
            with tarfile.open(archive, "r:*") as tf:
                count = 0
                for member in tf:
                    count += 1
                    if count > MAX_ARCHIVE_MEMBERS:
                        raise ImportFailed.one(label, "the archive has too many files")
                    if member.isdir():
                        continue
                    if not member.isfile():
                        raise ImportFailed.one(
                            label, f"the archive holds a link or device: {member.name!r}"
                        )
                    target = target_for(member.name)
                    if target is None:
                        continue
                    if total + member.size > MAX_EXTRACTED_BYTES:
                        raise ImportFailed.one(label, "the archive's metadata is too large")
                    _refuse_oversized(label, member.name, member.size)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    extracted = tf.extractfile(member)
                    if extracted is None:
                        continue
                    with extracted, target.open("wb") as out:
                        total += _copy_capped(extracted, out, label=label, name=member.name)
                    if total > MAX_EXTRACTED_BYTES:  # the sizes it declared were too small
                        raise ImportFailed.one(label, "the archive's metadata is too large")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise ImportFailed.one(
            label, f"not a readable .zip or .tar.gz archive ({_first_line(exc)})"
        ) from None
    return dest


def _oversized(label: str, name: str) -> ImportFailed:
    cap, what = metadata_cap(name)
    return ImportFailed.one(
        label,
        f"the member {name!r} unpacks to more than {size_text(cap)}, the most {what} in a "
        "dataset's meta/ may hold",
    )


def _refuse_oversized(label: str, name: str, declared: int) -> None:
    if declared > metadata_cap(name)[0]:
        raise _oversized(label, name)


def _copy_capped(src: Any, out: Any, *, label: str, name: str) -> int:
    """Copy one archive member a block at a time, counting what it really unpacks to (the
    size an archive declares may lie); return the bytes written."""
    cap = metadata_cap(name)[0]
    copied = 0
    while True:
        block = src.read(READ_BLOCK_BYTES)
        if not block:
            return copied
        copied += len(block)
        if copied > cap:
            raise _oversized(label, name)
        out.write(block)


def file_size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


# --- JSON Lines and Git-LFS pointers ----------------------------------------------------


def iter_jsonl(
    path: Path, label: str, problems: list[ImportProblem]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) per line of a JSON Lines file, reading it a line at a time.

    Malformed lines become problems. Raises ImportFailed when the file holds more than
    :data:`MAX_JSONL_BYTES`, a line more than :data:`MAX_JSON_BYTES`, or it is not UTF-8.
    """
    with path.open("rb") as fh:
        for lineno, data, offset in _jsonl_lines(fh, label):
            problem = _encoding_problem(label, data, offset)
            if problem is not None:
                raise problem
            if offset == 0 and data.startswith(codecs.BOM_UTF8):
                data, offset = data[3:], 3
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise not_utf8(label, data[exc.start], offset + exc.start) from None
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(
                    ImportProblem(
                        file=label,
                        row=lineno,
                        line_label="line",
                        message=f"invalid JSON ({exc.msg}, column {exc.colno})",
                    )
                )
                continue
            if not isinstance(value, dict):
                problems.append(
                    ImportProblem(
                        file=label, row=lineno, line_label="line", message="expected a JSON object"
                    )
                )
                continue
            yield lineno, value


def _jsonl_lines(fh: Any, label: str) -> Iterator[tuple[int, bytes, int]]:
    """(line number, bytes, offset of those bytes) per line, read in bounded pieces.

    Whitespace before a line's first character is skipped as it is read, so a run of blank
    lines or spaces costs a block of memory, not its length.
    """
    cap, line_cap = MAX_JSONL_BYTES, MAX_JSON_BYTES
    read = 0
    lineno = 0
    while True:
        lineno += 1
        parts: list[bytes] = []
        kept = 0
        start = read
        piece = b""
        while True:
            piece = fh.readline(READ_BLOCK_BYTES)
            if not piece:
                break
            if not parts and not piece.strip():
                start = read + len(piece)
            else:
                parts.append(piece)
                kept += len(piece)
                if kept > line_cap:
                    raise ImportFailed(
                        [
                            ImportProblem(
                                file=label,
                                row=lineno,
                                line_label="line",
                                message=f"the line is longer than {size_text(line_cap)}, the "
                                "most one JSON Lines record may hold",
                            )
                        ]
                    )
            read += len(piece)
            if read > cap:
                raise ImportFailed.one(
                    label,
                    f"is larger than {size_text(cap)}, the most a JSON Lines file in meta/ may "
                    "hold",
                )
            if piece.endswith(b"\n"):
                break
        if parts:
            yield lineno, b"".join(parts), start
        if not piece:
            return


def is_lfs_pointer(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(40).startswith(b"version https://git-lfs.github.com/spec")
