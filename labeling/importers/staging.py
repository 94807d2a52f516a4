"""The set-based half of an import: COPY into a staging table, check and write in SQL.

A source (a manifest, or a LeRobot dataset turned into rows) is streamed with ``COPY`` into
an UNLOGGED table of text columns ``c0..cN`` plus ``row_no`` (file order). From there every
step is one statement over all rows: normalising numbers (thousands separators, blanks such
as ``N/A``), listing the first problems, collecting the distinct raw values of lookup columns
(resolved in Python against a small taxonomy), counting condition combinations, and finally
one ``INSERT ... SELECT ... ON CONFLICT (dataset_id, key) DO UPDATE`` into the episodes.
Nothing is saved row by row.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from psycopg import errors as pg_errors
from psycopg import sql

from labeling.importers.cells import (
    Lit,
    Rule,
    lit,
    prepared,
    quote_value,
    raw,
    rules_for,
)
from labeling.importers.errors import MAX_REPORTED, ImportFailed, ImportProblem
from labeling.importers.mapping import MappedColumn
from labeling.importers.records import END_OF_DATA, Scan, scan
from labeling.importers.statements import StagingTables, TypedPlan, UpsertPlan

MAX_DISTINCT = 10_000

STAGING_PREFIX = "import_staging_"


def sweep_orphans() -> int:
    """Drop the scratch tables of imports no longer running (their worker died); return how many."""
    from accounts.models import Job

    with connection.cursor() as cur:
        cur.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename ~ %s",
            [f"^{STAGING_PREFIX}[0-9a-f]{{32}}(_typed|_vmap)?$"],
        )
        names = [r[0] for r in cur.fetchall()]
        if not names:
            return 0
        ids = {n[len(STAGING_PREFIX) : len(STAGING_PREFIX) + 32] for n in names}
        running = {
            job_id.hex
            for job_id in Job.objects.filter(pk__in=ids, status=Job.Status.RUNNING).values_list(
                "pk", flat=True
            )
        }
        dropped = 0
        for name in names:
            if name[len(STAGING_PREFIX) : len(STAGING_PREFIX) + 32] not in running:
                cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))
                dropped += 1
    return dropped


# COPY's own messages for what the record scan reports too (in more detail).
_STRUCTURAL = ("this row has", "the row is empty", "a quoted field is never closed")


def _line_is_blank(data: bytes, line: int) -> bool:
    pos = 0
    for _ in range(line - 1):
        pos = data.find(b"\n", pos) + 1
        if pos == 0:
            return False
    end = data.find(b"\n", pos)
    return not data[pos : end if end >= 0 else len(data)].strip()


def record_of_line(data: bytes, line: int) -> int:
    """The 1-based CSV record that physical line ``line`` of ``data`` belongs to."""
    record, quotes, pos = 1, 0, 0
    for _ in range(line - 1):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        quotes += data.count(b'"', pos, nl)
        if quotes % 2 == 0:
            record += 1
        pos = nl + 1
    return record


@dataclass
class CheckResult:
    rows: int
    bad_cells: int
    episodes: int
    frames: int
    problems: list[ImportProblem] = field(default_factory=list)


class Staging(StagingTables):
    """One import's scratch tables: raw text rows, typed rows, and small lookup tables.

    ``<name>`` holds the raw text (``c0..cN``, ``row_no`` in file order); ``<name>_typed``
    the cleaned, parsed and resolved rows; ``<name>_vmap`` the distinct raw lookup values
    and their value keys; ``<name>_vref`` and ``<name>_cmap`` (created in the write phase)
    the ids those keys and condition combinations stand for.
    """

    def __init__(
        self,
        *,
        name: str,
        ncols: int,
        file_label: str,
        row_offset: int,
        line_label: str = "row",
        columns: list[str] | None = None,
    ) -> None:
        super().__init__(name)
        self.ncols = ncols
        self.file_label = file_label
        self.row_offset = row_offset  # added to row_no to give the row a person sees
        self.line_label = line_label
        self.columns = columns  # the header's names, for problems that name a column
        self.rows = 0
        self.lines = 0  # physical lines COPYed so far

    # --- lifecycle -------------------------------------------------------------------

    def create(self) -> None:
        cols = sql.SQL(", ").join(
            sql.SQL("{} text").format(sql.Identifier(f"c{i}")) for i in range(self.ncols)
        )
        with connection.cursor() as cur:
            self._drop(cur)
            cur.execute(
                sql.SQL(
                    "CREATE UNLOGGED TABLE {} (row_no bigint GENERATED ALWAYS AS IDENTITY "
                    "(CACHE 10000), {}) WITH (autovacuum_enabled = false)"
                ).format(sql.Identifier(self.name), cols)
            )

    def _drop(self, cur: Any) -> None:
        for table in (self.name, self.typed, self.vmap, self.vref, self.cmap):
            cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))

    def drop(self) -> None:
        """Drop every scratch table (safe to call twice, and after a failure)."""
        if connection.needs_rollback:
            return  # the surrounding transaction is rolling back; the tables go with it
        with connection.cursor() as cur:
            self._drop(cur)

    # --- loading ---------------------------------------------------------------------

    def copy(
        self,
        chunks: Iterable[bytes],
        *,
        delimiter: str,
        header: bool,
        on_chunk: Callable[[int, int], None] | None = None,
    ) -> int:
        """COPY each chunk (whole CSV records) as its own statement; return the row count.

        The first chunk may start with the header record (``header``). A malformed record
        becomes an ImportFailed listing the first malformed records of the whole source
        (:mod:`labeling.importers.records`) with their rows. A chunk COPY reads as fewer
        rows than it has lines is re-read the same way, so that a line COPY takes for the
        end of the data, or a stray quote swallowing lines, is an error rather than rows
        silently missing. Between chunks ``on_chunk`` reports progress (and may raise to
        cancel).
        """
        columns = sql.SQL(", ").join(sql.Identifier(f"c{i}") for i in range(self.ncols))
        first = True
        rest = iter(chunks)
        for data in rest:
            with_header = first and header
            opts = sql.SQL("FORMAT csv, DELIMITER {}, HEADER {}").format(
                lit(delimiter), sql.SQL("true" if with_header else "false")
            )
            statement = sql.SQL("COPY {} ({}) FROM STDIN ({})").format(
                sql.Identifier(self.name), columns, opts
            )
            try:
                with transaction.atomic(), connection.cursor() as cur:
                    with cur.copy(statement) as cp:
                        cp.write(data)
                    copied = cur.rowcount
            except pg_errors.DataError as exc:
                raise self._copy_failure(
                    exc, data, rest, delimiter=delimiter, with_header=with_header
                ) from None
            lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
            # PostgreSQL up to 17 ends the data at a line holding only \. (it reads fewer
            # rows); from 18 it reads the line as a value. Either way the file is refused alike.
            if copied != lines - (1 if with_header else 0) or _may_end_data(data):
                self._check_short(copied, data, rest, delimiter=delimiter, with_header=with_header)
            self.rows += max(copied, 0)
            self.lines += lines
            first = False
            if on_chunk is not None:
                on_chunk(self.rows, len(data))
        return self.rows

    def _scan(
        self, data: bytes, rest: Iterable[bytes], *, delimiter: str, with_header: bool
    ) -> Scan:
        """Read this chunk and the rest of the source with COPY's rules (first problems)."""
        return scan(
            itertools.chain([data], rest),
            ncols=self.ncols,
            delimiter=delimiter,
            file_label=self.file_label,
            header=with_header,
            row_offset=self.row_offset,
            columns=self.columns,
            line_label=self.line_label,
            first_record=self.rows,
            first_line=self.lines,
        )

    def _check_short(
        self,
        copied: int,
        data: bytes,
        rest: Iterable[bytes],
        *,
        delimiter: str,
        with_header: bool,
    ) -> None:
        """Fewer rows than lines: fine when quoted values span lines; otherwise an error."""
        alone = scan(
            [data],
            ncols=self.ncols,
            delimiter=delimiter,
            file_label=self.file_label,
            header=with_header,
            row_offset=self.row_offset,
            columns=self.columns,
            line_label=self.line_label,
            first_record=self.rows,
            first_line=self.lines,
        )
        if not alone.problems and alone.records - self.rows == copied:
            return
        found = self._scan(data, rest, delimiter=delimiter, with_header=with_header)
        if found.problems:
            raise ImportFailed(found.problems, total=found.total)
        first, last = self.rows + 1 + self.row_offset, alone.records + self.row_offset
        raise ImportFailed.one(
            self.file_label,
            f"PostgreSQL read {copied:,} rows where {self.line_label}s {first:,}-{last:,} "
            f"hold {alone.records - self.rows:,}; nothing was imported rather than rows lost",
        )

    def _copy_failure(
        self,
        exc: Exception,
        data: bytes,
        rest: Iterable[bytes],
        *,
        delimiter: str,
        with_header: bool,
    ) -> ImportFailed:
        """The first malformed records of the source, or COPY's own message if it names
        something the scan does not see."""
        own = self._copy_problem(exc, data, with_header=with_header)
        found = self._scan(data, rest, delimiter=delimiter, with_header=with_header)
        if not found.problems:
            return own
        problems, total = found.problems, found.total
        primary = own.problems[0]
        if not primary.message.startswith(_STRUCTURAL) and primary.row not in {
            p.row for p in problems
        }:
            problems = sorted([primary, *problems], key=lambda p: p.row or 0)
            total += 1
        return ImportFailed(problems, total=total)

    def _copy_problem(self, exc: Exception, data: bytes, *, with_header: bool) -> ImportFailed:
        diag = getattr(exc, "diag", None)
        primary = (getattr(diag, "message_primary", None) or str(exc)).strip()
        context = getattr(diag, "context", None) or ""
        match = re.search(r"line (\d+)", context)
        row = None
        if match:
            # COPY counts physical lines of each statement from 1 (the header included); a
            # person counts records, and a quoted value may span lines.
            record = record_of_line(data, int(match.group(1)))
            row = self.rows + record - (1 if with_header else 0) + self.row_offset
        if "extra data after last expected column" in primary:
            message = (
                f"this row has more fields than the header's {self.ncols}; "
                "is a value containing the delimiter left unquoted?"
            )
        elif (
            "missing data for column" in primary
            and match
            and _line_is_blank(data, int(match.group(1)))
        ):
            message = "the row is empty; remove it"
        elif "missing data for column" in primary:
            message = f"this row has fewer fields than the header's {self.ncols}"
        elif "unterminated CSV quoted field" in primary:
            message = 'a quoted field is never closed (a stray " character?)'
        else:
            message = primary
        return ImportFailed(
            [
                ImportProblem(
                    file=self.file_label, row=row, message=message, line_label=self.line_label
                )
            ]
        )

    # --- lookups ---------------------------------------------------------------------

    def distinct_values(self, indexes: Sequence[int]) -> dict[int, list[tuple[str, int, int]]]:
        """For each column: its distinct raw values with their row count and first row.

        One scan (GROUPING SETS). A column's list stops at MAX_DISTINCT values.
        """
        if not indexes:
            return {}
        cols = [sql.SQL("s.{}").format(sql.Identifier(f"c{i}")) for i in indexes]
        statement = sql.SQL(
            "SELECT GROUPING({cols}), {cols}, count(*), min(s.row_no) FROM {t} s "
            "GROUP BY GROUPING SETS ({sets})"
        ).format(
            cols=sql.SQL(", ").join(cols),
            t=sql.Identifier(self.name),
            sets=sql.SQL(", ").join(sql.SQL("({})").format(c) for c in cols),
        )
        n = len(indexes)
        bit_to_pos = {((1 << n) - 1) ^ (1 << (n - 1 - j)): j for j in range(n)}
        out: dict[int, list[tuple[str, int, int]]] = {i: [] for i in indexes}
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(sql.SQL("SET LOCAL work_mem = '256MB'"))
            cur.execute(statement)
            while True:
                batch = cur.fetchmany(5000)
                if not batch:
                    break
                for rec in batch:
                    j = bit_to_pos[rec[0]]
                    value = rec[1 + j]
                    if value is None:
                        continue
                    values = out[indexes[j]]
                    if len(values) >= MAX_DISTINCT:
                        continue
                    values.append((value, int(rec[1 + n]), int(rec[2 + n]) + self.row_offset))
        return out

    def load_vmap(
        self, entries: Iterable[tuple[int, str, int, int | None]], *, term_type: str = "bigint"
    ) -> None:
        """(column, raw value, value key, combination term) for every resolved raw value."""
        with connection.cursor() as cur:
            cur.execute(
                # Not TEMP: a temporary table would keep the typing pass from running in
                # parallel workers.
                sql.SQL("CREATE UNLOGGED TABLE {} (col int, raw text, vkey int, term {})").format(
                    sql.Identifier(self.vmap), sql.SQL(term_type)
                )
            )
            with cur.copy(
                sql.SQL("COPY {} (col, raw, vkey, term) FROM STDIN").format(
                    sql.Identifier(self.vmap)
                )
            ) as cp:
                for entry in entries:
                    cp.write_row(entry)
            cur.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(self.vmap)))

    # --- typing and checking ---------------------------------------------------------

    def build_typed(self, plan: TypedPlan) -> None:
        """Clean, parse and resolve every staged row once, into ``<name>_typed``.

        Columns: key, cnt, frames, duration, outcome, uri, rec, features, extra, site_k,
        emb_k, task_k, fm_k (value keys), sync, lstat (statuses), combo (condition
        combination key) and bad (a bit per
        check that failed; 0 when the row is fine).
        """
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(sql.SQL("SET LOCAL work_mem = '256MB'"))
            cur.execute(sql.SQL("SET LOCAL enable_mergejoin = off"))
            cur.execute(plan.statement(self))

    def check(self, columns: Sequence[MappedColumn]) -> CheckResult:
        """Totals and bad-cell count from the typed rows; the first bad cells explained."""
        rules = rules_for(columns)
        per_rule = (
            sql.SQL(" + ").join(
                sql.SQL("((bad & {}) <> 0)::int").format(Lit(1 << i)) for i in range(len(rules))
            )
            if rules
            else sql.SQL("0")
        )
        with connection.cursor() as cur:
            cur.execute(
                sql.SQL(
                    "SELECT count(*), coalesce(sum({per_rule}) FILTER (WHERE bad <> 0), 0), "
                    "coalesce(sum(cnt), 0), coalesce(sum(frames), 0) FROM {t}"
                ).format(per_rule=per_rule, t=sql.Identifier(self.typed))
            )
            rows, bad_cells, episodes, frames = cur.fetchone()
            result = CheckResult(
                rows=int(rows), bad_cells=int(bad_cells), episodes=int(episodes), frames=int(frames)
            )
            if bad_cells:
                cur.execute(
                    sql.SQL("SELECT row_no FROM {} WHERE bad <> 0 ORDER BY row_no LIMIT {}").format(
                        sql.Identifier(self.typed), Lit(MAX_REPORTED)
                    )
                )
                row_nos = [r[0] for r in cur.fetchall()]
                result.problems = self.explain(columns, rules, row_nos=row_nos)
        return result

    def explain(
        self, columns: Sequence[MappedColumn], rules: list[Rule], *, row_nos: list[int] | None
    ) -> list[ImportProblem]:
        """Problems (file, row, column, message) for the given rows, or the first bad rows."""
        if not rules:
            return []
        where = sql.SQL(" OR ").join(sql.SQL("({}) IS NOT NULL").format(r.code) for r in rules)
        if row_nos is not None:
            where = sql.SQL("p.row_no = ANY({}) AND ({})").format(Lit(row_nos), where)
        problems: list[ImportProblem] = []
        with connection.cursor() as cur:
            cur.execute(
                sql.SQL(
                    "SELECT p.row_no, {codes}, {raws} FROM {p} WHERE {where} "
                    "ORDER BY p.row_no LIMIT {limit}"
                ).format(
                    codes=sql.SQL(", ").join(r.code for r in rules),
                    raws=sql.SQL(", ").join(raw(r.column.index) for r in rules),
                    p=prepared(self.name, columns),
                    where=where,
                    limit=Lit(MAX_REPORTED),
                )
            )
            for rec in cur.fetchall():
                row_no, codes_row, raw_row = rec[0], rec[1 : 1 + len(rules)], rec[1 + len(rules) :]
                for rule, code, value in zip(rules, codes_row, raw_row, strict=True):
                    if code is not None:
                        problems.append(
                            ImportProblem(
                                file=self.file_label,
                                row=row_no + self.row_offset,
                                column=rule.column.name,
                                message=rule.messages[code].format(value=quote_value(value)),
                                line_label=self.line_label,
                            )
                        )
        return problems

    def strict_problems(self, columns: Sequence[MappedColumn]) -> list[ImportProblem]:
        """Re-check every row with the strict date rule (after a date failed to store)."""
        return self.explain(columns, rules_for(columns, strict_dates=True), row_nos=None)

    def duplicate_keys(self, *, key_column: str) -> list[ImportProblem]:
        """Keys that appear on more than one row (reported with the rows they repeat)."""
        with connection.cursor() as cur:
            cur.execute(
                sql.SQL(
                    "SELECT key, rows FROM (SELECT key, array_agg(row_no ORDER BY row_no) AS rows "
                    "FROM {t} WHERE key IS NOT NULL GROUP BY key HAVING count(*) > 1) d "
                    "ORDER BY rows[2] LIMIT {limit}"
                ).format(t=sql.Identifier(self.typed), limit=Lit(MAX_REPORTED))
            )
            found = cur.fetchall()
        return [
            ImportProblem(
                file=self.file_label,
                row=rows[1] + self.row_offset,
                column=key_column,
                message=f"the key {quote_value(k)} repeats row {rows[0] + self.row_offset}; "
                "keys must be unique within a dataset",
                line_label=self.line_label,
            )
            for k, rows in found
        ]

    def combinations(self) -> list[tuple[int, int]]:
        """Distinct condition combination keys with their row counts."""
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(sql.SQL("SET LOCAL work_mem = '256MB'"))
            cur.execute(
                sql.SQL("SELECT combo, count(*) FROM {} GROUP BY combo").format(
                    sql.Identifier(self.typed)
                )
            )
            return [(int(combo), int(n)) for combo, n in cur.fetchall() if combo is not None]

    # --- writing ---------------------------------------------------------------------

    def load_refs(self, refs: dict[int, int]) -> None:
        """The ids value keys stand for (known once new values and tasks exist)."""
        self._load(self.vref, "vkey int PRIMARY KEY, ref bigint", "vkey, ref", refs.items())

    def load_cmap(
        self, rows: Iterable[tuple[int, int | None]], *, combo_type: str = "bigint"
    ) -> None:
        """Condition combination key -> ConditionSet id."""
        self._load(self.cmap, f"combo {combo_type} PRIMARY KEY, cs bigint", "combo, cs", rows)

    def _load(self, table: str, columns: str, names: str, rows: Iterable[Any]) -> None:
        with connection.cursor() as cur:
            cur.execute(
                sql.SQL("CREATE TEMP TABLE {} ({})").format(sql.Identifier(table), sql.SQL(columns))
            )
            with cur.copy(
                sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(table), sql.SQL(names))
            ) as cp:
                for row in rows:
                    cp.write_row(tuple(row))
            cur.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))

    def upsert(self, plan: UpsertPlan) -> int:
        """Insert or update every typed row as an episode; return rows written or changed."""
        with connection.cursor() as cur:
            # Check the foreign keys as the statement ends, while the new rows are still in
            # the buffer cache, rather than re-reading them all at commit.
            cur.execute(sql.SQL("SET CONSTRAINTS ALL IMMEDIATE"))
            cur.execute(sql.SQL("SET LOCAL work_mem = '256MB'"))
            cur.execute(sql.SQL("SET LOCAL enable_mergejoin = off"))
            cur.execute(plan.statement(self))
            return int(cur.rowcount)


# A line holding only \. (outside quotes the scan decides whether it is one).
_END_OF_DATA_LINE = re.compile(rb"^" + re.escape(END_OF_DATA) + rb"\r?$", re.MULTILINE)


def _may_end_data(data: bytes) -> bool:
    """Whether a line of ``data`` holds only ``\\.``."""
    return _END_OF_DATA_LINE.search(data) is not None
