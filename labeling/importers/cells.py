"""SQL for one staged cell: cleaning, parsing and the checks a person can act on.

The rules themselves (blanks, trimming, number and date shapes, limits) are
:mod:`labeling.importers.rules`; this module says them in SQL.

A staged cell is text. ``clean`` trims it and turns blank markers (``N/A``, ``null``, ``-`` …)
into NULL; ``number`` parses it with thousands separators; ``rules_for`` says, per mapped
column, which cells are wrong and how to say so. ``prepared`` evaluates all of that once per
row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import sql

from labeling.importers.mapping import LOOKUP_KINDS, MappedColumn
from labeling.importers.rules import (
    BLANKS,
    DATE_RE,
    DECIMAL_KINDS,
    DECIMAL_RE,
    GROUP_SEPARATORS,
    INT4_MAX,
    INT8_MAX,
    OUTCOMES,
    STATUSES,
    TRIM,
    WHOLE_KINDS,
    WHOLE_RE,
)

Lit = sql.Literal


def lit(text: str) -> sql.Composable:
    return sql.Literal(text)


def _ident(prefix: str, index: int) -> sql.Identifier:
    return sql.Identifier(f"{prefix}{index}")


def clean(index: int, alias: str = "s") -> sql.Composable:
    """The cleaned text of staged column ``index``: trimmed, NULL for blank-like cells.

    Cells that start and end with a digit (most numbers) skip the trimming and the blank
    test; trimmed cells longer than any blank marker skip the blank test.
    """
    c = sql.SQL("{}.{}").format(sql.Identifier(alias), _ident("c", index))
    t = sql.SQL("btrim({}, {})").format(c, lit(TRIM))
    return sql.SQL(
        "(CASE WHEN {c} IS NULL THEN NULL "
        "WHEN ascii({c}) BETWEEN 48 AND 57 AND ascii(right({c}, 1)) BETWEEN 48 AND 57 THEN {c} "
        "WHEN octet_length({t}) > 6 THEN {t} "
        "WHEN lower({t}) = ANY({blanks}) THEN NULL ELSE {t} END)"
    ).format(c=c, t=t, blanks=Lit(list(BLANKS)))


def cell(index: int) -> sql.Composable:
    """A mapped column's cleaned text in the prepared rows (see :func:`prepared`)."""
    return sql.SQL("p.{}").format(_ident("v", index))


def number(index: int) -> sql.Composable:
    """A numeric column's value in the prepared rows: NULL when blank or malformed."""
    return sql.SQL("p.{}").format(_ident("n", index))


def raw(index: int) -> sql.Composable:
    return sql.SQL("p.{}").format(_ident("c", index))


def _digits(value: sql.Composable) -> sql.Composable:
    return sql.SQL("translate({}, {}, '')").format(value, lit(GROUP_SEPARATORS))


def _typed(kind: str, v: sql.Composable) -> sql.Composable:
    if kind in WHOLE_KINDS:
        return sql.SQL(
            "(CASE WHEN translate({v}, '0123456789', '') = '' THEN ({v})::numeric "
            "WHEN {v} ~ {re} THEN ({d})::numeric END)"
        ).format(v=v, re=lit(WHOLE_RE), d=_digits(v))
    return sql.SQL(
        "(CASE WHEN translate({v}, '0123456789', '') IN ('', '.') AND {v} <> '.' "
        "THEN ({v})::double precision WHEN {v} ~ {re} THEN ({d})::double precision END)"
    ).format(v=v, re=lit(DECIMAL_RE), d=_digits(v))


def prepared(
    table: str, columns: Sequence[MappedColumn], *, key_from_row: bool = False
) -> sql.Composable:
    """The staged rows with each mapped cell cleaned once and each number parsed once.

    ``p.c<i>`` is the raw cell, ``p.v<i>`` the cleaned text, ``p.n<i>`` the number. The
    ``OFFSET 0`` keeps PostgreSQL from inlining (and so repeating) the expressions.
    """
    raws = [sql.SQL("s.{0} AS {0}").format(_ident("c", c.index)) for c in columns]
    values = [
        sql.SQL("{} AS {}").format(clean(c.index), _ident("v", c.index))
        for c in columns
        if c.target.kind not in LOOKUP_KINDS
    ]
    inner = sql.SQL("SELECT s.row_no{cols} FROM {t} s OFFSET 0").format(
        cols=sql.SQL("").join(sql.SQL(", ") + x for x in raws + values), t=sql.Identifier(table)
    )
    numbers = [
        sql.SQL("{} AS {}").format(
            _typed(c.target.kind, sql.SQL("q.{}").format(_ident("v", c.index))),
            _ident("n", c.index),
        )
        for c in columns
        if c.target.kind in WHOLE_KINDS + DECIMAL_KINDS
    ]
    return sql.SQL("(SELECT q.*{nums} FROM ({inner}) q OFFSET 0) p").format(
        nums=sql.SQL("").join(sql.SQL(", ") + x for x in numbers), inner=inner
    )


@dataclass(frozen=True)
class Rule:
    """How one mapped column is checked: an SQL error code per row, and the messages."""

    column: MappedColumn
    code: sql.Composable  # NULL when fine, else a short code
    messages: dict[str, str]


def rules_for(columns: Sequence[MappedColumn], *, strict_dates: bool = False) -> list[Rule]:
    rules: list[Rule] = []
    for col in columns:
        v = cell(col.index)
        n = number(col.index)
        kind = col.target.kind
        if kind == "key":
            code = sql.SQL(
                "CASE WHEN {v} IS NULL THEN 'blank' "
                "WHEN octet_length({v}) > 200 AND length({v}) > 200 THEN 'long' END"
            ).format(v=v)
            messages = {
                "blank": "the key is blank",
                "long": "the key is longer than 200 characters",
            }
        elif kind == "episode_count":
            code = sql.SQL(
                "CASE WHEN {v} IS NULL THEN 'blank' WHEN {n} IS NULL THEN 'bad' "
                "WHEN {n} < 1 THEN 'small' WHEN {n} > {max} THEN 'big' END"
            ).format(v=v, n=n, max=Lit(INT4_MAX))
            messages = {
                "blank": "no episode count (got {value}); fill it in or leave the row out",
                "bad": "expected a whole number of episodes, got {value}",
                "small": "expected at least 1 episode, got {value}",
                "big": "the episode count {value} is too large",
            }
        elif kind == "frames":
            code = sql.SQL(
                "CASE WHEN {v} IS NOT NULL AND {n} IS NULL THEN 'bad' WHEN {n} > {max} THEN 'big' END"
            ).format(v=v, n=n, max=Lit(INT8_MAX))
            messages = {
                "bad": "expected a whole number of frames, got {value}",
                "big": "the frame count {value} is too large",
            }
        elif kind in DECIMAL_KINDS:
            low = "<= 0" if kind == "fps" else "< 0"
            if kind == "feature":
                code = sql.SQL("CASE WHEN {v} IS NOT NULL AND {n} IS NULL THEN 'bad' END").format(
                    v=v, n=n
                )
            else:
                code = sql.SQL(
                    "CASE WHEN {v} IS NOT NULL AND {n} IS NULL THEN 'bad' "
                    "WHEN {n} " + low + " THEN 'range' END"
                ).format(v=v, n=n)
            what = {"duration_s": "a duration in seconds", "fps": "frames per second"}.get(
                kind, "a number"
            )
            messages = {
                "bad": f"expected {what} (a number), got {{value}}",
                "range": "expected a positive number, got {value}"
                if kind == "fps"
                else "expected zero or more seconds, got {value}",
            }
        elif kind == "outcome":
            known = [w for words in OUTCOMES.values() for w in words]
            code = sql.SQL(
                "CASE WHEN {v} IS NOT NULL AND NOT (lower({v}) = ANY({k})) THEN 'bad' END"
            ).format(v=v, k=Lit(known))
            messages = {"bad": "expected success, failure or unknown, got {value}"}
        elif kind in STATUSES:
            code = sql.SQL(
                "CASE WHEN {v} IS NOT NULL AND NOT (lower({v}) = ANY({k})) THEN 'bad' END"
            ).format(v=v, k=Lit(list(STATUSES[kind])))
            messages = {"bad": f"expected one of {', '.join(STATUSES[kind])}, got {{value}}"}
        elif kind == "recorded_at":
            if strict_dates:
                # The regex bounds each field; the day is then checked against its month.
                code = sql.SQL(
                    "CASE WHEN {v} IS NULL THEN NULL WHEN {v} !~ {re} THEN 'bad' "
                    "WHEN substr({v}, 9, 2)::int > extract(day FROM make_date("
                    "substr({v}, 1, 4)::int, substr({v}, 6, 2)::int, 1) "
                    "+ interval '1 month - 1 day') THEN 'bad' END"
                ).format(v=v, re=lit(DATE_RE))
            else:
                # Cheap shape test; a value that still fails to cast makes the write fail,
                # and the strict pass then names the cell.
                code = sql.SQL(
                    "CASE WHEN {v} IS NOT NULL AND NOT ({v} LIKE '____-__-__%' "
                    "AND octet_length({v}) <= 40) THEN 'bad' END"
                ).format(v=v)
            messages = {
                "bad": "expected a date such as 2024-06-30 or 2024-06-30T14:05:00Z, got {value}"
            }
        elif kind == "storage_uri":
            code = sql.SQL(
                "CASE WHEN octet_length({v}) > 500 AND length({v}) > 500 THEN 'long' END"
            ).format(v=v)
            messages = {"long": "the storage URI is longer than 500 characters"}
        elif kind == "extra":
            continue
        else:
            continue
        rules.append(Rule(column=col, code=code, messages=messages))
    return rules


def quote_value(raw: str | None) -> str:
    text = "" if raw is None else " ".join(raw.split())
    if len(text) > 60:
        text = text[:59] + "…"
    return repr(text)
