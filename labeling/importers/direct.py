"""Direct load: a clean tabular manifest into a dataset with no episodes yet, in one pass.

The staging path (:mod:`labeling.importers.staging`) copies the raw text into PostgreSQL,
types and checks it there, then inserts: three passes over the rows, one after another, on
one core. For the common case — a CSV, TSV or Parquet manifest into a new dataset — this
module types each chunk with pyarrow while PostgreSQL is still writing the previous one, and
COPYs the typed rows straight into ``labeling_episode``: one pass, the two halves on the two
cores at once.

It is strict on purpose. Any cell it would not type exactly as the staging path does (a
number format outside the common ones, a bad date, an unknown lookup value, a malformed
record, a duplicate key) makes it give up with :class:`NotDirect`: its transaction rolls back
(nothing is written) and the staging path runs from the start, with its diagnostics naming
file, row and column. The staging path is the reference; ``tests/labeling/
test_import_direct.py`` checks that both store the same episodes for the same input.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from django.db import DatabaseError, connection
from psycopg import sql
from psycopg.copy import QueuedLibpqWriter

from accounts.beside import Beside
from accounts.services import JobCancelled, JobContext
from labeling.coverage import DELTA_COLUMNS, coverage_defer, coverage_settle
from labeling.importers import pgcopy
from labeling.importers.mapping import FIELDS, MappedColumn
from labeling.importers.resolve import Resolved, resolve_lookups
from labeling.importers.rules import (
    BLANKS,
    DECIMAL_RE,
    DIRECT_DATE_RE,
    GROUP_SEPARATORS,
    INT4_MAX,
    OUTCOMES,
    STATUSES,
    TRIM,
    WHOLE_RE,
)
from labeling.importers.writes import create_tasks, create_values, lock_references
from labeling.models import Episode
from labeling.selectors import DatasetCounts, DatasetTotals
from sites.services import ConditionLookup, condition_sets_intern

# Every episode field a column can be mapped to, and condition columns; not feature:/extra:
# (JSON built per row), which the staging path writes.
DIRECT_KINDS = frozenset((*FIELDS, "condition"))
REF_KINDS = ("site", "embodiment", "task", "failure_mode")
COPY_COLUMNS = {  # column -> its type in the binary COPY (labeling.importers.pgcopy)
    "organization_id": "int8",
    "dataset_id": "int8",
    "key": "text",
    "episode_count": "int4",
    "frames": "int8",
    "duration_s": "float8",
    "outcome": "text",
    "storage_uri": "text",
    "recorded_at": "timestamptz",
    "sync_status": "text",
    "label_status": "text",
    "site_id": "int8",
    "embodiment_id": "int8",
    "task_id": "int8",
    "failure_mode_id": "int8",
    "condition_set_id": "int8",
}
_NULL_TEXT = pa.scalar(None, pa.string())
_BLANKS = pa.array(BLANKS)
_GROUP_RE = "[" + GROUP_SEPARATORS + "]"
_SUCCESS = pa.array(list(OUTCOMES["success"]))
_FAILURE = pa.array(list(OUTCOMES["failure"]))
_OUTCOME_WORDS = pa.array([w for words in OUTCOMES.values() for w in words])
_ZERO_NANOS_RE = r"([.][0-9]{6})0{1,3}(Z|[+-][0-9:]+)?$"
_HAS_OFFSET_RE = r":[0-9]{2}([.][0-9]+)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)$"
_MAX_DIGITS = 18  # a whole number with more digits goes to the staging path (bigint ends at 19)


# Tests turn it off to exercise the staging path on inputs the direct load would take.
ENABLED = True


class NotDirect(Exception):
    """The source needs the staging path; ``str()`` says why (kept in the summary)."""


def ineligible(columns: list[MappedColumn]) -> str | None:
    """Why these mapped columns cannot load directly, or None when they can."""
    other = sorted({str(c.target) for c in columns if c.target.kind not in DIRECT_KINDS})
    if other:
        return "mapped to " + ", ".join(other)
    return None


# --- typing one chunk ---------------------------------------------------------------------


def clean(raw: pa.Array) -> pa.Array:
    """Trim and NULL blank-like cells by :mod:`labeling.importers.rules` (as the SQL path does)."""
    trimmed = pc.utf8_trim(raw, characters=TRIM)
    blank = pc.is_in(pc.utf8_lower(trimmed), value_set=_BLANKS)
    return pc.if_else(blank, _NULL_TEXT, trimmed)


def _all(mask: pa.Array) -> bool:
    return bool(pc.all(mask, skip_nulls=True).as_py() is not False)


def _fits(values: pa.Array, pattern: str, column: MappedColumn, what: str) -> None:
    ok = pc.match_substring_regex(values, pattern)
    if not _all(ok):
        raise NotDirect(f"column {column.name!r}: a cell is not {what}")


def whole(values: pa.Array, column: MappedColumn) -> pa.Array:
    """Whole numbers as the staging path reads them (thousands separators, ``12.0``)."""
    _fits(values, WHOLE_RE, column, "a whole number")
    digits = pc.replace_substring_regex(values, _GROUP_RE + r"|^\+|\.0*$", "")
    if not _all(pc.less_equal(pc.utf8_length(digits), _MAX_DIGITS)):
        raise NotDirect(f"column {column.name!r}: a number too large")
    try:
        return pc.cast(digits, pa.int64())
    except pa.ArrowInvalid:
        raise NotDirect(f"column {column.name!r}: a number outside 64 bits") from None


def decimal(values: pa.Array, column: MappedColumn) -> pa.Array:
    _fits(values, DECIMAL_RE, column, "a number")
    try:
        numbers = pc.cast(pc.replace_substring_regex(values, _GROUP_RE, ""), pa.float64())
    except pa.ArrowInvalid:
        raise NotDirect(f"column {column.name!r}: a number pyarrow does not read") from None
    if not _all(pc.is_finite(numbers)):
        raise NotDirect(f"column {column.name!r}: a number out of range")
    return numbers


def timestamps(values: pa.Array, column: MappedColumn, *, naive_ok: bool) -> pa.Array:
    """ISO 8601 dates and times as UTC microseconds (``timestamp[us]``), as PostgreSQL reads
    them: with an offset, converted; without, in the session's time zone (``naive_ok`` says
    it is UTC). Anything else goes to the staging path."""
    # Nanoseconds that are all zeros (Parquet's timestamp[ns] written as text) say nothing
    # PostgreSQL would keep: microseconds are its resolution.
    values = pc.replace_substring_regex(values, _ZERO_NANOS_RE, r"\1\2")
    _fits(values, DIRECT_DATE_RE, column, "an ISO 8601 date the direct load reads")
    aware = pc.match_substring_regex(values, _HAS_OFFSET_RE)
    if not naive_ok and not _all(pc.or_kleene(pc.is_null(values), aware)):
        raise NotDirect(f"column {column.name!r}: dates without an offset, session not in UTC")
    try:
        naive = pc.cast(pc.if_else(aware, None, values), pa.timestamp("us"))
        offset = pc.cast(
            pc.cast(pc.if_else(aware, values, None), pa.timestamp("us", tz="UTC")),
            pa.timestamp("us"),
        )
    except pa.ArrowInvalid:
        raise NotDirect(f"column {column.name!r}: a date pyarrow does not read") from None
    return pc.coalesce(naive, offset)


class Refs:
    """Raw lookup values → ids, grown as chunks show new values (resolved like the staging
    path: :func:`labeling.importers.resolve.resolve_lookups`)."""

    def __init__(
        self,
        *,
        organization_id: int,
        create_values: bool,
        lookup: ConditionLookup,
        label: str,
        line_label: str,
    ) -> None:
        self.organization_id = organization_id
        self.create_values = create_values
        self.lookup = lookup
        self.label = label
        self.line_label = line_label
        self.resolved = Resolved()
        self.vkey_of: dict[int, dict[str, int | None]] = {}  # column -> raw -> vkey (None: blank)
        self.created_values: list[str] = []
        self.created_tasks: list[str] = []

    def pending(self, column: MappedColumn, uniques: list[str]) -> list[str]:
        seen = self.vkey_of.setdefault(column.index, {})
        return [u for u in uniques if u not in seen]

    def resolve(self, new: dict[MappedColumn, list[tuple[str, int]]]) -> None:
        """Resolve new raw values (with their first row); create values and tasks as asked.

        Runs between COPY statements (it may write, in the import's transaction).
        """
        distinct = {
            col.index: [(raw, 1, row) for raw, row in values] for col, values in new.items()
        }
        before = len(self.resolved.entries)
        problems = resolve_lookups(
            organization_id=self.organization_id,
            create_values=self.create_values,
            lookup=self.lookup,
            lookup_cols=list(new),
            distinct=distinct,
            resolved=self.resolved,
            label=self.label,
            line_label=self.line_label,
        )
        if problems:
            raise NotDirect(f"{len(problems)} lookup problem(s), e.g. {problems[0].message}")
        self.created_values += create_values(self.resolved)
        self.resolved.new_values.clear()
        self.created_tasks += create_tasks(self.organization_id, self.resolved)
        self.resolved.new_tasks.clear()
        for col_index, raw, vkey, _ref in self.resolved.entries[before:]:
            self.vkey_of[col_index][raw] = vkey
        for col, values in new.items():
            for raw, _row in values:
                self.vkey_of[col.index].setdefault(raw, None)  # blank-like: no value

    def ids(self, column: MappedColumn, raw: pa.Array) -> tuple[pa.Array, pa.Array]:
        """(value keys, ids) per row of a lookup column; NULL where blank."""
        encoded = pc.dictionary_encode(raw)
        dictionary = encoded.dictionary.to_pylist()
        vkeys = [self.vkey_of[column.index][v] if v else None for v in dictionary]
        refs = self.resolved.refs
        ids = [refs[k] if k is not None else None for k in vkeys]
        indices = encoded.indices
        return (
            pc.take(pa.array(vkeys, pa.int64()), indices),
            pc.take(pa.array(ids, pa.int64()), indices),
        )


class ConditionSets:
    """Rows' condition columns → condition set ids, interned as new combinations appear.

    Each condition column's value keys get digits 1..k (0: no value) in order of first
    appearance; a row's combination is its digits packed into one int64 (as many bits per
    column as its digits need, so codes are recomputed when a column gains a bit).
    """

    def __init__(
        self,
        columns: list[MappedColumn],
        refs: Refs,
        set_ids: dict[int, int],
        organization_id: int,
    ) -> None:
        self.columns = columns
        self.refs = refs
        self.set_ids = set_ids
        self.organization_id = organization_id
        self.digit_of: list[dict[int, int]] = [{} for _ in columns]  # vkey -> digit (1..)
        self.vkey_at: list[list[int]] = [[] for _ in columns]
        self.known: dict[tuple[int, ...], int | None] = {}  # digits -> condition set id
        self._table: tuple[tuple[int, ...], np.ndarray, pa.Array] | None = None

    def digits(self, vkeys: list[pa.Array]) -> np.ndarray:
        """(rows × columns) digits of one chunk; new value keys get the next digits."""
        out = np.zeros((len(vkeys[0]), len(vkeys)), dtype=np.int64)
        for i, arr in enumerate(vkeys):
            digit_of = self.digit_of[i]
            for k in pc.unique(arr.drop_null()).to_pylist():
                if k not in digit_of:
                    digit_of[k] = len(digit_of) + 1
                    self.vkey_at[i].append(k)
            table = np.zeros(max(digit_of, default=0) + 2, dtype=np.int64)
            for k, d in digit_of.items():
                table[k + 1] = d
            keys = arr.fill_null(-1).to_numpy(zero_copy_only=False)
            out[:, i] = table[keys + 1]
        return out

    def _widths(self) -> tuple[int, ...]:
        return tuple(max(1, len(d).bit_length()) for d in self.digit_of)

    def _codes(self, digits: np.ndarray, widths: tuple[int, ...]) -> np.ndarray:
        if sum(widths) > 62:
            raise NotDirect("too many condition values to key a combination in 62 bits")
        code = np.zeros(digits.shape[0], dtype=np.int64)
        shift = 0
        for i, bits in enumerate(widths):
            code |= digits[:, i] << shift
            shift += bits
        return code

    def _decode(self, code: int, widths: tuple[int, ...]) -> tuple[int, ...]:
        out = []
        for bits in widths:
            out.append(code & ((1 << bits) - 1))
            code >>= bits
        return tuple(out)

    def _known_table(self, widths: tuple[int, ...]) -> tuple[np.ndarray, pa.Array]:
        if self._table is None or self._table[0] != widths:
            combos = np.array(list(self.known), dtype=np.int64).reshape(-1, len(widths))
            ids = pa.array(list(self.known.values()), pa.int64())
            self._table = (widths, self._codes(combos, widths), ids)
        return self._table[1], self._table[2]

    def ids(self, digits: np.ndarray, *, before_new: Callable[[], None]) -> pa.Array:
        """The condition set id of every row; ``before_new`` runs before any interning."""
        widths = self._widths()
        codes = self._codes(digits, widths)
        unique = np.unique(codes)
        known_codes, _ids = self._known_table(widths)
        new = unique[~np.isin(unique, known_codes)]
        if len(new):
            before_new()
            self._intern([self._decode(int(c), widths) for c in new])
            self._table = None
        known_codes, ids = self._known_table(widths)
        index = pc.index_in(pa.array(codes), value_set=pa.array(known_codes))
        return pc.take(ids, index)

    def _intern(self, combos: list[tuple[int, ...]]) -> None:
        resolved = self.refs.resolved
        keys: dict[tuple[int, ...], tuple[int, ...]] = {}
        for combo in combos:
            ids: dict[int, int] = {}
            for i, d in enumerate(combo):
                if d:
                    vkey = self.vkey_at[i][d - 1]
                    ids[resolved.dimension_of[vkey]] = resolved.refs[vkey]
            for dim_id, value_id in self.set_ids.items():
                ids.setdefault(dim_id, value_id)  # values in the rows win over dataset-wide ones
            keys[combo] = tuple(sorted(ids.values()))
        interned = condition_sets_intern(
            organization=self.organization_id, combinations=[k for k in keys.values() if k]
        )
        for combo, key in keys.items():
            self.known[combo] = interned[key] if key else None
        lock_references(condition_sets=[interned[k] for k in keys.values() if k])


BLOCK_BYTES = 2 << 20
"""pyarrow's read block: each is typed and sent as one piece of the COPY (2 MB: the peak
RSS of a 1,000,000-row import 442 -> 320 MB against 8 MB, at the same speed)."""


def _text_options(
    ncols: int, delimiter: str
) -> tuple[pacsv.ReadOptions, pacsv.ParseOptions, pacsv.ConvertOptions]:
    """Read every column as text, as PostgreSQL's CSV COPY in the staging path does."""
    names = [f"c{i}" for i in range(ncols)]
    return (
        pacsv.ReadOptions(column_names=names, block_size=BLOCK_BYTES),
        pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True, ignore_empty_lines=False),
        pacsv.ConvertOptions(
            column_types={n: pa.string() for n in names},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )


class _CountingFile(io.FileIO):
    """The file as pyarrow reads it, counting line ends and quote characters on the way
    (``bytes.count``: no Python loop per row), so a short read shows once the file ends."""

    def __init__(self, path: Any) -> None:
        super().__init__(path, "rb")
        self.newlines = 0
        self.quotes = 0
        self.bare_returns = 0  # a carriage return not followed by a line feed
        self.crlf = 0  # line ends written "\r\n"
        self.nul = False  # the staging path refuses NUL bytes; pyarrow would read them
        self.last = b""

    def read(self, size: int | None = -1, /) -> bytes:
        data = super().read(size)
        if data:
            self.newlines += data.count(b"\n")
            self.quotes += data.count(b'"')
            if b"\r" in data:  # rare: counting "\r\n" costs more than the others together
                pairs = data.count(b"\r\n")
                self.crlf += pairs
                self.bare_returns += data.count(b"\r") - pairs
            if self.last == b"\r" and data.startswith(b"\n"):
                self.bare_returns -= 1
                self.crlf += 1
            self.nul = self.nul or b"\x00" in data
            self.last = data[-1:]
        return data


def _values(col: pa.Array) -> np.ndarray:
    """The bytes of a text column's values: a view of its data buffer, no copy."""
    _validity, offsets, data = col.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int32)
    start, end = int(bounds[col.offset]), int(bounds[col.offset + len(col)])
    if data is None:
        return np.empty(0, dtype=np.uint8)
    return np.frombuffer(data, dtype=np.uint8)[start:end]


_QUOTE, _NEWLINE = ord('"'), ord("\n")


def _check_cells(batch: pa.RecordBatch, *, quotes: bool) -> int:
    """Cells pyarrow reads unlike PostgreSQL's COPY (the staging path) send the file there;
    return the bytes of the batch's values.

    pyarrow takes a quote inside an unquoted value as text, COPY as the start of a quoted
    section; a line holding only ``\\.`` is a value to pyarrow and the end of the data to
    COPY; an empty line is a row to pyarrow. Where they may disagree the staging path
    decides, with its diagnostics. ``quotes``: the file has quote characters so far (else no
    value can hold one).
    """
    nbytes = 0
    for col in batch.columns:
        values = _values(col)
        nbytes += len(values)
        if quotes and np.any(values == _QUOTE):
            raise NotDirect('a value holds a " character: the staging path reads quotes')
    if _has_empty_row(batch):
        raise NotDirect("an empty line")
    if batch.num_columns == 1 and pc.any(pc.equal(batch.column(0), "\\.")).as_py():
        raise NotDirect("a line holding only \\. (the end of the data to PostgreSQL)")
    return nbytes


def file_batches(path: Any, *, ncols: int, delimiter: str) -> Iterator[tuple[pa.RecordBatch, int]]:
    """Stream a CSV/TSV file (with its header) as record batches of text columns.

    Yields (batch, about how many bytes of the file are read once it ends). pyarrow checks
    the UTF-8 and drops a byte-order mark; anything it cannot read (a record with another
    number of fields, bad UTF-8) or may read otherwise than the staging path (a quote
    inside a value, a quoted field never closed, rows that do not add up to the file's line
    ends) sends the import to the staging path, whose messages name the row. pyarrow
    takes an unclosed quote as a value running to the end of the file, and reports nothing:
    the line-end count is what shows it.
    """
    read, parse, convert = _text_options(ncols, delimiter)
    with _CountingFile(path) as fh:
        records = 0
        inside = 0  # line ends inside values (quoted, spanning lines)
        try:
            reader = pacsv.open_csv(
                fh, read_options=read, parse_options=parse, convert_options=convert
            )
            position = 0
            header = True  # read as a record, so its line ends count as the others'
            for batch in reader:
                records += batch.num_rows
                # Only a quoted value holds a line end; the reader has counted this batch's
                # bytes already.
                quotes = fh.quotes > 0
                if quotes:
                    inside += sum(
                        int(np.count_nonzero(_values(col) == _NEWLINE)) for col in batch.columns
                    )
                if header:
                    header = False
                    batch = batch.slice(1)
                position += batch.num_rows * ncols + _check_cells(batch, quotes=quotes)
                yield batch, position
        except pa.ArrowInvalid as exc:
            raise NotDirect(f"pyarrow cannot read it ({str(exc).splitlines()[0][:120]})") from None
        if fh.nul:
            raise NotDirect("a NUL byte")
        if fh.quotes % 2:
            raise NotDirect("a quoted field is never closed")
        if fh.bare_returns:  # a line end to pyarrow, an error or a value to PostgreSQL
            raise NotDirect("a carriage return without a line feed")
        if fh.crlf and fh.crlf != fh.newlines:
            # COPY keeps the first line's end for the whole file; a mix is an error to it.
            raise NotDirect("line ends mix \\r\\n and \\n")
        unterminated = 0 if fh.last in (b"\n", b"") else 1
        if records + inside - unterminated != fh.newlines:
            raise NotDirect(
                f"pyarrow read {records - 1:,} rows and {inside:,} line ends inside values, "
                f"where the file has {fh.newlines:,} line ends"
            )


def csv_batches(
    chunks: Iterator[tuple[bytes, int]], *, ncols: int
) -> Iterator[tuple[pa.RecordBatch, int]]:
    """Parse headerless CSV chunks (Parquet batches as the staging path writes them).

    ``chunks`` are (CSV bytes, rows read so far); each must parse to the rows it stands for.
    """
    read, parse, convert = _text_options(ncols, ",")
    done = 0
    for data, position in chunks:
        try:
            table = pacsv.read_csv(
                io.BytesIO(data), read_options=read, parse_options=parse, convert_options=convert
            )
        except pa.ArrowInvalid as exc:
            raise NotDirect(f"pyarrow cannot read it ({str(exc).splitlines()[0][:120]})") from None
        if table.num_rows != position - done:
            raise NotDirect(
                f"pyarrow read {table.num_rows:,} rows of a Parquet batch of {position - done:,}"
            )
        done = position
        batches = table.to_batches()
        for i, batch in enumerate(batches):
            if _has_empty_row(batch):
                raise NotDirect("an empty line")
            yield batch, position if i == len(batches) - 1 else 0


class _Writer(QueuedLibpqWriter):
    """psycopg's writer thread, with a shorter queue: about 32 MB (~16 blocks) ahead of the
    server instead of 128 MB. The server is the slower half, so a longer queue only holds
    more memory, not more speed."""

    QUEUE_BLOCKS = 256  # of psycopg's 128 KB pieces

    def __init__(self, cursor: Any) -> None:
        super().__init__(cursor)
        assert self._worker is None  # the queue is replaced before psycopg's thread starts
        self._queue = type(self._queue)(maxsize=self.QUEUE_BLOCKS)


class _Progress:
    """The job's progress, written beside the import (on a connection of its own, autocommit),
    so progress shows and cancellation is seen while the import's own connection is inside
    a COPY.

    Inside a caller's transaction (tests) it is written inline, between statements.
    """

    def __init__(self, reporter: JobContext, *, side: bool, pause: Callable[[], None]) -> None:
        self.reporter = reporter
        self.side = side
        self.pause = pause  # ends the running COPY, so the import's connection is free
        self.last = 0.0

    def __call__(self, done: int, total: int | None, message: str, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < 0.5:
            return
        self.last = now
        if not self.side:
            self.pause()
        Beside(lambda: self._report(done, total, message)).start(inline=not self.side).result()

    def _report(self, done: int, total: int | None, message: str) -> None:
        self.reporter.progress(done, total, message, force=True)
        if self.reporter.cancel_requested():
            raise JobCancelled("Cancelled at the user's request; nothing was written.")


@dataclass
class DirectResult:
    rows: int
    counts: DatasetCounts  # of the rows written: the dataset was empty
    created_values: list[str]
    created_tasks: list[str]
    seconds: float


def load(
    *,
    source: Any,
    organization_id: int,
    dataset_id: int,
    default_site: int | None,
    default_embodiment: int | None,
    set_ids: dict[int, int],
    default_fps: float | None,
    create_values_asked: bool,
    lookup: ConditionLookup,
    reporter: JobContext,
) -> DirectResult:
    """Type and COPY every row into the (empty) dataset, in the caller's transaction.

    ``source`` is the runner's: ``batches()`` (record batches of text columns ``c0..cN``,
    each with how far into the source it ends), ``columns``, ``file_label``, ``line_label``,
    ``row_offset``, ``total_rows``, ``total_bytes``.

    Raises NotDirect (the caller rolls back and takes the staging path), ImportFailed, or
    JobCancelled.
    """
    started = time.monotonic()
    assert connection.in_atomic_block
    by_kind: dict[str, MappedColumn] = {}
    for col in source.columns:
        by_kind.setdefault(col.target.kind, col)
    cond_cols = [c for c in source.columns if c.target.kind == "condition"]
    lookup_cols = [c for c in source.columns if c.target.kind in REF_KINDS] + cond_cols
    refs = Refs(
        organization_id=organization_id,
        create_values=create_values_asked,
        lookup=lookup,
        label=source.file_label,
        line_label=source.line_label,
    )
    sets = ConditionSets(cond_cols, refs, set_ids, organization_id)
    fixed_cs: int | None = None
    if not cond_cols and set_ids:
        key = tuple(sorted(set_ids.values()))
        fixed_cs = condition_sets_intern(organization=organization_id, combinations=[key])[key]
    lock_references(
        sites=[default_site] if default_site else [],
        embodiments=[default_embodiment] if default_embodiment else [],
        condition_sets=[fixed_cs] if fixed_cs else [],
    )
    statement = sql.SQL("COPY labeling_episode ({}) FROM STDIN (FORMAT binary)").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in COPY_COLUMNS)
    )
    rows = 0
    tally = Tally()
    copy_cm: Any = None
    copy: Any = None
    django_cursor = connection.cursor()
    cursor = django_cursor.cursor  # psycopg's own: COPY with a writer thread

    def open_copy() -> None:
        nonlocal copy_cm, copy
        copy_cm = cursor.copy(statement, writer=_Writer(cursor))
        copy = copy_cm.__enter__()
        copy.write(pgcopy.SIGNATURE)

    def close_copy() -> None:
        nonlocal copy_cm, copy
        if copy_cm is not None:
            copy.write(pgcopy.TRAILER)
            cm, copy_cm, copy = copy_cm, None, None
            cm.__exit__(None, None, None)

    # Inside a caller's transaction (a test) the reporter runs on this connection, between
    # COPY statements; otherwise on its own connection, so progress shows at once.
    progress = _Progress(reporter, side=not _in_outer_transaction(), pause=close_copy)
    # Dates without an offset are in the session's time zone, as the staging path's cast.
    cursor.execute("SHOW TimeZone")
    naive_dates_ok = (cursor.fetchone() or ("",))[0] in ("UTC", "Etc/UTC", "GMT", "Z")
    # The coverage counts are summed here as the rows are typed and added once at the end,
    # not aggregated by the insert trigger for each of the COPY's restarts (1.6 times the time).
    coverage_defer(cursor)

    try:
        for batch, position in source.batches():
            n = batch.num_rows
            if n == 0:
                continue
            first_row = rows + 1 + source.row_offset
            # Lookups first: new raw values are resolved (and created) between COPYs.
            new: dict[MappedColumn, list[tuple[str, int]]] = {}
            raws = {c.index: batch.column(c.index) for c in lookup_cols}
            for col in lookup_cols:
                uniques = [u for u in pc.unique(raws[col.index]).to_pylist() if u is not None]
                pending = refs.pending(col, uniques)
                if pending:
                    positions = pc.index_in(pa.array(pending), value_set=raws[col.index])
                    first = [first_row + (p or 0) for p in positions.to_pylist()]
                    new[col] = list(zip(pending, first, strict=True))
            ref_ids: dict[str, pa.Array] = {}
            vkeys: list[pa.Array] = []
            if new:
                close_copy()
                refs.resolve(new)
            for col in lookup_cols:
                col_vkeys, col_ids = refs.ids(col, raws[col.index])
                if col.target.kind == "condition":
                    vkeys.append(col_vkeys)
                else:
                    ref_ids[col.target.kind] = col_ids
            cs: pa.Array | None = None
            if cond_cols:
                cs = sets.ids(sets.digits(vkeys), before_new=close_copy)
            if new:
                lock_references(
                    sites=_non_null(ref_ids.get("site")),
                    embodiments=_non_null(ref_ids.get("embodiment")),
                    tasks=_non_null(ref_ids.get("task")),
                    failure_modes=_non_null(ref_ids.get("failure_mode")),
                )
            typed = _type_batch(
                batch,
                by_kind,
                first_row=first_row,
                default_fps=default_fps,
                naive_dates_ok=naive_dates_ok,
            )
            table = pa.table(
                {
                    "organization_id": pa.array(np.full(n, organization_id)),
                    "dataset_id": pa.array(np.full(n, dataset_id)),
                    **typed,
                    "site_id": _with_default(ref_ids.get("site"), default_site, n),
                    "embodiment_id": _with_default(
                        ref_ids.get("embodiment"), default_embodiment, n
                    ),
                    "task_id": ref_ids.get("task", pa.nulls(n, pa.int64())),
                    "failure_mode_id": ref_ids.get("failure_mode", pa.nulls(n, pa.int64())),
                    "condition_set_id": cs if cs is not None else _with_default(None, fixed_cs, n),
                }
            )
            tally.add(table)
            data = pgcopy.encode([(table[c].combine_chunks(), t) for c, t in COPY_COLUMNS.items()])
            if copy is None:
                open_copy()
            copy.write(data)
            rows += n
            if position:
                total = source.total_rows
                if total is None and source.total_bytes:
                    total = max(rows, round(rows * source.total_bytes / position))
                # Sent, not yet stored: psycopg's writer queues up to ~128 MB ahead of the
                # server, so the last step below waits for PostgreSQL to catch up.
                progress(rows, total, f"Sent {rows:,} rows to the database")
        close_copy()
        coverage_settle(
            cursor, organization_id=organization_id, dataset_id=dataset_id, delta=tally.coverage()
        )
        progress(rows, rows, f"Stored {rows:,} rows; counting them", force=True)
    except (DatabaseError, psycopg.Error) as exc:
        raise NotDirect(f"the database refused a row ({str(exc).splitlines()[0][:160]})") from None
    finally:
        if copy_cm is not None:
            with contextlib.suppress(Exception):  # the transaction is rolling back anyway
                copy_cm.__exit__(NotDirect, NotDirect("abandoned"), None)
        django_cursor.close()
    return DirectResult(
        rows=rows,
        counts=tally.counts(),
        created_values=refs.created_values,
        created_tasks=refs.created_tasks,
        seconds=time.monotonic() - started,
    )


COVERAGE_KEYS = ["embodiment_id", "task_id", "condition_set_id"]  # within one dataset
COVERAGE_COLLAPSE_BLOCKS = 16
"""Blocks whose coverage sums are kept apart before they are summed into one table (at
1,000,000 rows, 89 blocks of ~11,000 rows and 62,000 keys: ~30 MB kept apart)."""


def _sum_by_key(table: pa.Table, episodes: str, rows: str, rows_by: str) -> pa.Table:
    """``table``'s episodes (the sum of column ``episodes``) and rows (``rows_by`` of column
    ``rows``: a count of rows, or a sum of counts) per coverage key, in
    :data:`labeling.coverage.DELTA_COLUMNS`."""
    by_key = table.group_by(COVERAGE_KEYS, use_threads=False).aggregate(
        [(episodes, "sum"), (rows, rows_by)]
    )
    columns = [by_key[k] for k in COVERAGE_KEYS]
    columns += [by_key[f"{episodes}_sum"], by_key[f"{rows}_{rows_by}"]]
    return pa.table(dict(zip(DELTA_COLUMNS, columns, strict=True)))


class Tally:
    """Rows, episodes and frames per condition set and per site of the rows written, for the
    summary (the dataset was empty, so no scan of it afterwards); and the coverage counts
    of the countable ones (:mod:`labeling.coverage`)."""

    def __init__(self) -> None:
        self.totals = DatasetTotals(0, 0, 0, 0.0)
        self.per_set: dict[int, int] = {}
        self.per_site: dict[int | None, tuple[int, int]] = {}
        self._coverage: list[pa.Table] = []  # each block's countable rows per key

    def add(self, table: pa.Table) -> None:
        t = self.totals
        t.rows += table.num_rows
        t.episodes += int(pc.sum(table["episode_count"]).as_py() or 0)
        t.frames += int(pc.sum(table["frames"]).as_py() or 0)
        t.duration_s += float(pc.sum(table["duration_s"]).as_py() or 0.0)
        by_set = table.group_by("condition_set_id").aggregate([("episode_count", "sum")])
        for cs, n in zip(
            by_set["condition_set_id"].to_pylist(),
            by_set["episode_count_sum"].to_pylist(),
            strict=True,
        ):
            if cs is not None:
                self.per_set[cs] = self.per_set.get(cs, 0) + n
        by_site = table.group_by("site_id").aggregate([("episode_count", "sum"), ("frames", "sum")])
        for site, n, frames in zip(
            by_site["site_id"].to_pylist(),
            by_site["episode_count_sum"].to_pylist(),
            by_site["frames_sum"].to_pylist(),
            strict=True,
        ):
            episodes, total_frames = self.per_site.get(site, (0, 0))
            self.per_site[site] = (episodes + n, total_frames + frames)
        # Countable as Episode.objects.countable() and the trigger have it: validated (the
        # column's default: the direct load never writes it), not rejected, with a set.
        countable = table.filter(
            pc.and_(
                pc.not_equal(table["label_status"], Episode.LabelStatus.REJECTED.value),
                pc.is_valid(table["condition_set_id"]),
            )
        )
        self._coverage.append(_sum_by_key(countable, "episode_count", "episode_count", "count"))
        if len(self._coverage) >= COVERAGE_COLLAPSE_BLOCKS:  # memory: one table, not a list
            self._coverage = [self.coverage()]

    def coverage(self) -> pa.Table:
        """The countable rows' episodes and rows per coverage key over every block
        (:data:`labeling.coverage.DELTA_COLUMNS`)."""
        if not self._coverage:
            return pa.table({c: pa.array([], pa.int64()) for c in DELTA_COLUMNS})
        return _sum_by_key(pa.concat_tables(self._coverage), "episodes", "rows", "sum")

    def counts(self) -> DatasetCounts:
        return DatasetCounts(self.totals, self.per_set, self.per_site)


def _has_empty_row(batch: pa.RecordBatch) -> bool:
    """A blank line reads as a row of empty cells here; the staging path refuses it."""
    empty: Any = None
    for col in batch.columns:
        blank = pc.equal(pc.binary_length(col), 0)
        empty = blank if empty is None else pc.and_(empty, blank)
    return bool(pc.any(empty).as_py()) if empty is not None else False


def _in_outer_transaction() -> bool:
    """True when a caller (a test) wrapped the import in its own transaction."""
    return len(connection.savepoint_ids) > 0


def _non_null(ids: pa.Array | None) -> list[int]:
    if ids is None:
        return []
    return [v for v in pc.unique(ids.drop_null()).to_pylist() if v is not None]


def _with_default(ids: pa.Array | None, default: int | None, n: int) -> pa.Array:
    if ids is None:
        return pa.array(np.full(n, default)) if default else pa.nulls(n, pa.int64())
    return pc.coalesce(ids, pa.scalar(default, pa.int64())) if default else ids


def _type_batch(
    batch: pa.RecordBatch,
    by_kind: dict[str, MappedColumn],
    *,
    first_row: int,
    default_fps: float | None,
    naive_dates_ok: bool,
) -> dict[str, pa.Array]:
    """Type the non-lookup columns of one chunk exactly as the staging path would."""
    n = batch.num_rows
    out: dict[str, pa.Array] = {}
    cleaned: dict[str, pa.Array] = {
        kind: clean(batch.column(col.index))
        for kind, col in by_kind.items()
        if kind not in REF_KINDS and kind != "condition"
    }

    key = by_kind.get("key")
    if key is not None:
        keys = cleaned["key"]
        if keys.null_count:
            raise NotDirect(f"column {key.name!r}: a blank key")
        if not _all(pc.less_equal(pc.utf8_length(keys), 200)):
            raise NotDirect(f"column {key.name!r}: a key longer than 200 characters")
        out["key"] = keys
    else:
        numbers = pa.array(np.arange(first_row, first_row + n, dtype=np.int64))
        out["key"] = pc.binary_join_element_wise("row-", pc.cast(numbers, pa.string()), "")

    count = by_kind.get("episode_count")
    if count is not None:
        values = cleaned["episode_count"]
        if values.null_count:
            raise NotDirect(f"column {count.name!r}: a blank episode count")
        counts = whole(values, count)
        if not _all(pc.and_(pc.greater_equal(counts, 1), pc.less_equal(counts, INT4_MAX))):
            raise NotDirect(f"column {count.name!r}: an episode count out of range")
        out["episode_count"] = counts
    else:
        out["episode_count"] = pa.array(np.ones(n, dtype=np.int64))

    frames_col = by_kind.get("frames")
    frames = whole(cleaned["frames"], frames_col) if frames_col is not None else None
    out["frames"] = (
        pc.fill_null(frames, 0) if frames is not None else pa.array(np.zeros(n, dtype=np.int64))
    )

    fps_col = by_kind.get("fps")
    fps: pa.Array | None = None
    if fps_col is not None:
        fps_values = decimal(cleaned["fps"], fps_col)
        if not _all(pc.greater(fps_values, 0)):
            raise NotDirect(f"column {fps_col.name!r}: frames per second not positive")
        fps = pc.coalesce(fps_values, pa.scalar(default_fps, pa.float64()))
    elif default_fps is not None:
        fps = pa.array(np.full(n, default_fps, dtype=np.float64))
    derived = (
        pc.divide(pc.cast(frames, pa.float64()), pc.if_else(pc.equal(fps, 0), None, fps))
        if frames is not None and fps is not None
        else None
    )
    dur_col = by_kind.get("duration_s")
    duration: pa.Array = pa.nulls(n, pa.float64())
    if dur_col is not None:
        duration = decimal(cleaned["duration_s"], dur_col)
        if not _all(pc.greater_equal(duration, 0)):
            raise NotDirect(f"column {dur_col.name!r}: a negative duration")
    if derived is not None:
        duration = pc.coalesce(duration, derived)
    out["duration_s"] = pc.fill_null(duration, 0.0)

    outcome_col = by_kind.get("outcome")
    if outcome_col is not None:
        lowered = pc.utf8_lower(cleaned["outcome"])
        if not _all(pc.or_kleene(pc.is_null(lowered), pc.is_in(lowered, _OUTCOME_WORDS))):
            raise NotDirect(f"column {outcome_col.name!r}: an unknown outcome")
        out["outcome"] = pc.case_when(
            pc.make_struct(pc.is_in(lowered, _SUCCESS), pc.is_in(lowered, _FAILURE)),
            "success",
            "failure",
            "unknown",
        )
    else:
        out["outcome"] = pa.array(["unknown"] * n)

    uri_col = by_kind.get("storage_uri")
    if uri_col is not None:
        uris = cleaned["storage_uri"]
        if not _all(pc.less_equal(pc.utf8_length(uris), 500)):
            raise NotDirect(f"column {uri_col.name!r}: a storage URI over 500 characters")
        out["storage_uri"] = pc.fill_null(uris, "")
    else:
        out["storage_uri"] = pa.array([""] * n)

    rec_col = by_kind.get("recorded_at")
    if rec_col is not None:
        out["recorded_at"] = timestamps(cleaned["recorded_at"], rec_col, naive_ok=naive_dates_ok)
    else:
        out["recorded_at"] = pa.nulls(n, pa.timestamp("us"))

    for kind, default in (("sync_status", "unknown"), ("label_status", "unlabelled")):
        col = by_kind.get(kind)
        if col is None:
            out[kind] = pa.array([default] * n)
            continue
        lowered = pc.utf8_lower(cleaned[kind])
        if not _all(pc.or_kleene(pc.is_null(lowered), pc.is_in(lowered, pa.array(STATUSES[kind])))):
            raise NotDirect(f"column {col.name!r}: an unknown {kind.replace('_', ' ')}")
        out[kind] = pc.fill_null(lowered, default)
    return out
