"""CSV records as PostgreSQL's ``COPY ... (FORMAT csv)`` reads them, for the problems it hides.

COPY stops at the first malformed record, so on its own the staging path could name one
ragged row where a file has hundreds; and some input it reads without complaint but not as a
person meant: a line holding only ``\\.`` ends its data up to PostgreSQL 17 (the rest of
the file is silently dropped; from 18 it is a value), and a ``"`` inside an unquoted value
opens a quoted section that swallows the following lines into that value.
:class:`RecordScanner` reads the text with COPY's rules and lists such problems (the first
:data:`~labeling.importers.errors.MAX_REPORTED`, and how many in all), each naming its row,
column and what was expected.

COPY's rules: a quote character toggles quoting wherever it appears (a doubled quote inside
a quoted value toggles twice); outside quotes a delimiter ends a field and a newline ends a
record. The scanner works a line at a time, so its memory is one record's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from labeling.importers.errors import MAX_REPORTED, ImportProblem

END_OF_DATA = b"\\."


@dataclass
class Scan:
    records: int  # data records (not the header), as COPY counts them
    problems: list[ImportProblem] = field(default_factory=list)  # the first MAX_REPORTED
    total: int = 0  # problems found in all


class RecordScanner:
    """Feed it the text in pieces (each ending on a line end, but for the last); then
    :meth:`finish`.

    ``header``: the first record is the header (not checked). ``row_offset`` is added to the
    1-based data record number to give the row a person sees (1 with a header: it is row 1).
    ``first_record`` and ``first_line`` say how many data records and physical lines came
    before the first piece (to scan from the middle of a file).
    """

    def __init__(
        self,
        *,
        ncols: int,
        delimiter: str,
        file_label: str,
        header: bool,
        row_offset: int,
        columns: list[str] | None = None,
        line_label: str = "row",
        first_record: int = 0,
        first_line: int = 0,
    ) -> None:
        self.ncols = ncols
        self.delimiter = delimiter.encode()
        self.file_label = file_label
        self.columns = columns
        self.line_label = line_label
        self.row_offset = row_offset
        self.in_header = header
        self.records = first_record
        self.line = first_line  # physical lines read
        self.problems: list[ImportProblem] = []
        self.total = 0
        self._pending = b""
        # The record being read (it spans lines while a quote is open).
        self._in_quote = False
        self._fields = 1
        self._start_line = 0
        self._field_start = True  # nothing yet in the current field (outside quotes)
        self._opened: tuple[int, int, bool] | None = None  # (line, field, mid-value) of a quote

    # --- input ----------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        data = self._pending + data
        end = data.rfind(b"\n")
        self._pending = data[end + 1 :]
        for line in data[: end + 1].split(b"\n")[:-1]:
            self._line(line)

    def finish(self) -> Scan:
        if self._pending:
            self._line(self._pending)
            self._pending = b""
        if self._in_quote:
            self._unclosed_at_end()
        return Scan(records=self.records, problems=self.problems, total=self.total)

    # --- one physical line ----------------------------------------------------------------

    def _line(self, line: bytes) -> None:
        self.line += 1
        if line.endswith(b"\r"):
            line = line[:-1]
        if not self._in_quote:
            self._start_line = self.line
            self._fields = 1
            self._field_start = True
            if line == END_OF_DATA and not self.in_header:
                self.records += 1
                self._add(
                    "a line holding only \\. ends the data to PostgreSQL up to version 17 (the "
                    "rest of the file would be dropped) and is a value from 18: quote it "
                    '("\\.") or remove it'
                )
                return
            if b'"' not in line:  # the common case: no quoting at all
                self._fields = line.count(self.delimiter) + 1
                self._end_record(blank=not line.strip())
                return
        self._quoted_line(line)

    def _quoted_line(self, line: bytes) -> None:
        pieces = line.split(b'"')
        for i, piece in enumerate(pieces):
            if i:  # a quote before this piece toggles quoting
                if self._in_quote:
                    self._in_quote = False
                    self._close_quote()
                else:
                    self._in_quote = True
                    # Right after a closing quote it is a doubled quote, not a new section.
                    after_close = i > 1 and pieces[i - 1] == b""
                    mid = not self._field_start and not after_close
                    self._opened = (self.line, self._fields, mid)
            if self._in_quote or not piece:
                continue
            delimiters = piece.count(self.delimiter)
            self._fields += delimiters
            tail = piece.rsplit(self.delimiter, 1)[-1] if delimiters else piece
            self._field_start = (delimiters > 0 or self._field_start) and tail == b""
        if not self._in_quote:
            self._end_record(blank=False)

    def _close_quote(self) -> None:
        """A quote closed: a quote opened inside a value that ran over lines swallowed them."""
        assert self._opened is not None
        line, field_no, mid = self._opened
        self._opened = None
        self._field_start = False
        if mid and line != self.line:
            swallowed = (
                f"line {self.line}" if self.line == line + 1 else f"lines {line + 1}-{self.line}"
            )
            self._add(
                f'a " inside an unquoted value opens a quoted section that runs on to line '
                f"{self.line}, so {swallowed} would be read into this value; quote the whole "
                'value and double its " ("") or remove the "',
                column=field_no,
                line=line,
                current=True,
            )

    def _end_record(self, *, blank: bool) -> None:
        if self.in_header:
            self.in_header = False
            return
        self.records += 1
        n = self._fields
        if n == self.ncols:
            return
        if n > self.ncols:
            self._add(
                f"this row has {n} fields, more than the header's {self.ncols}; is a value "
                "containing the delimiter left unquoted?"
            )
        elif blank:
            self._add("the row is empty; remove it")
        else:
            self._add(
                f"this row has {n} field{'s' if n != 1 else ''}, fewer than the header's "
                f"{self.ncols}"
            )

    def _unclosed_at_end(self) -> None:
        assert self._opened is not None
        line, field_no, _mid = self._opened
        if not self.in_header:
            self.records += 1
        self._add(
            f'a quoted field is never closed (a stray " character?): the " on line {line} '
            'opens a value that runs to the end of the file; expected a closing " after it',
            column=field_no,
            line=line,
        )

    # --- problems -------------------------------------------------------------------------

    def _add(
        self,
        message: str,
        *,
        column: int | None = None,
        line: int | None = None,
        current: bool = False,
    ) -> None:
        """Count a problem of the record just read (``current``: the one still being read)
        and keep it if it is among the first MAX_REPORTED. ``column`` is a 1-based field
        number; ``line`` a physical line the message names already."""
        self.total += 1
        if len(self.problems) >= MAX_REPORTED:
            return
        row = self.records + self.row_offset + (1 if current else 0)
        if self.in_header:
            row = self.row_offset
        if line is None and self.row_offset and self._start_line != row:
            # A value spanning lines earlier in the file: the row is not the line.
            message += f" (the row starts on line {self._start_line} of the file)"
        name = None
        if column is not None and self.columns and column <= len(self.columns):
            name = self.columns[column - 1]
        elif column is not None:
            name = f"field {column}"
        self.problems.append(
            ImportProblem(
                file=self.file_label,
                row=row,
                column=name,
                message=message,
                line_label=self.line_label,
            )
        )


def scan(
    chunks: Iterable[bytes],
    *,
    ncols: int,
    delimiter: str,
    file_label: str,
    header: bool,
    row_offset: int,
    columns: list[str] | None = None,
    line_label: str = "row",
    first_record: int = 0,
    first_line: int = 0,
) -> Scan:
    """Scan every chunk with :class:`RecordScanner`; return the records and problems found."""
    scanner = RecordScanner(
        ncols=ncols,
        delimiter=delimiter,
        file_label=file_label,
        header=header,
        row_offset=row_offset,
        columns=columns,
        line_label=line_label,
        first_record=first_record,
        first_line=first_line,
    )
    for chunk in chunks:
        scanner.feed(chunk)
    return scanner.finish()
