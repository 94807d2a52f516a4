"""Staging a batch of JSON texts in PostgreSQL and checking the shape of every event."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
from django.db import DatabaseError, transaction

from accounts.parsers import first_lone_surrogate, first_string_where
from analytics.services.production.errors import MAX_ERRORS, IngestError, ProductionInvalid

# --- staging ---------------------------------------------------------------------------------


def _copy_escape(text: bytes) -> bytes:
    # COPY's text format: backslash escapes, tab separates, newline ends a row.
    return text.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\r", b"\\r")


def stage(cursor: Any, lines: Sequence[tuple[int, str | bytes]]) -> None:
    cursor.execute(
        "DROP TABLE IF EXISTS pg_temp.production_stage, pg_temp.production_batch, "
        "pg_temp.production_new"
    )
    cursor.execute("CREATE TEMP TABLE production_stage (line int, body jsonb) ON COMMIT DROP")
    payload = b"".join(
        b"%d\t%s\n" % (n, _copy_escape(text if isinstance(text, bytes) else text.encode()))
        for n, text in lines
    )
    try:
        with (
            transaction.atomic(),
            cursor.copy("COPY production_stage (line, body) FROM STDIN") as copy,
        ):
            copy.write(payload)
    except (psycopg.Error, DatabaseError) as exc:
        errors = _parse_errors(lines)
        if not errors:
            errors = [IngestError(None, "", f"PostgreSQL refused the batch: {_first_line(exc)}")]
        raise ProductionInvalid(errors[:MAX_ERRORS]) from exc


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _parse_errors(lines: Sequence[tuple[int, str | bytes]]) -> list[IngestError]:
    """Say which lines PostgreSQL could not take as JSON, and why (the slow path)."""
    errors: list[IngestError] = []
    for n, raw in lines:
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError as exc:
            errors.append(
                IngestError(n, "", f"is not UTF-8 text ({exc.reason} at byte {exc.start})")
            )
            continue
        if "\x00" in text:
            errors.append(IngestError(n, "", _nul_message("the line")))
            continue
        try:
            value = json.loads(text, parse_constant=_refuse_constant)
        except ValueError as exc:
            errors.append(IngestError(n, "", f"is not valid JSON: {exc}"))
            continue
        where = first_string_where(value, lambda s: "\x00" in s)
        if where is not None:
            errors.append(IngestError(n, where, _nul_message(where)))
            continue
        where = first_lone_surrogate(value)
        if where is not None:
            errors.append(
                IngestError(n, where, "holds a lone UTF-16 surrogate; send valid Unicode")
            )
    return errors


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _nul_message(where: str) -> str:
    return f"{where} contains a NUL character (U+0000), which cannot be stored; remove it"


# --- shape -----------------------------------------------------------------------------------

# Strict ISO-8601 with an offset, in the range PostgreSQL parses without raising; the day of
# the month is checked against the month's length separately.
_ISO = (
    r"^(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]([01][0-9]|2[0-3])"
    r":[0-5][0-9](:[0-5][0-9](\.[0-9]{1,9})?)?([Zz]|[+-](0[0-9]|1[0-5])(:?[0-5][0-9])?)$"
)
_TIME_EXPECTED = "expected an ISO-8601 time with a UTC offset, e.g. 2026-11-30T14:05:00+01:00"
_VALID_TIME = (
    f"(jsonb_typeof(body->'occurred_at') = 'string' AND body->>'occurred_at' ~ '{_ISO}' "
    "AND (substr(body->>'occurred_at', 9, 2) < '29' "
    "OR substr(body->>'occurred_at', 9, 2)::int <= extract(day from make_date("
    "substr(body->>'occurred_at', 1, 4)::int, substr(body->>'occurred_at', 6, 2)::int, 1)"
    " + interval '1 month - 1 day')))"
)
# (field, message, condition that makes the event wrong). Each condition is guarded so that no
# input makes the query itself fail. ``op``: '' for a new event.
OP = "coalesce(body->>'op', '')"
EVENT = f"jsonb_typeof(body) = 'object' AND {OP} <> 'retract'"
_CYCLE = f"{EVENT} AND body->>'kind' = 'cycle'"
INTERVENTION = f"{EVENT} AND body->>'kind' = 'intervention'"


def _string_check(key: str, max_length: int, *, required: bool, when: str) -> str:
    present = f"body ? '{key}' AND body->'{key}' <> 'null'::jsonb"
    wrong = (
        f"(jsonb_typeof(body->'{key}') IS DISTINCT FROM 'string' "
        f"OR length(body->>'{key}') NOT BETWEEN 1 AND {max_length})"
    )
    if required:
        return f"{when} AND {wrong}"
    return f"{when} AND {present} AND {wrong}"


_CHECKS: list[tuple[str, str, str]] = [
    ("", "expected a JSON object (one event)", "jsonb_typeof(body) <> 'object'"),
    (
        "event_id",
        "expected the event's id: a string of 1 to 100 characters",
        _string_check("event_id", 100, required=True, when="jsonb_typeof(body) = 'object'"),
    ),
    (
        "deployment",
        "expected a deployment's slug (a string)",
        _string_check("deployment", 64, required=True, when="jsonb_typeof(body) = 'object'"),
    ),
    (
        "op",
        'expected "retract" or "correct" (or no op for a new event)',
        "jsonb_typeof(body) = 'object' AND body ? 'op' AND (jsonb_typeof(body->'op') "
        "IS DISTINCT FROM 'string' OR body->>'op' NOT IN ('retract', 'correct'))",
    ),
    (
        "kind",
        'expected "cycle" or "intervention"',
        f"{EVENT} AND (jsonb_typeof(body->'kind') IS DISTINCT FROM 'string' "
        "OR body->>'kind' NOT IN ('cycle', 'intervention'))",
    ),
    ("occurred_at", _TIME_EXPECTED, f"{EVENT} AND NOT coalesce({_VALID_TIME}, false)"),
    (
        "conditions",
        'expected an object of {"<dimension slug>": "<value slug>"} strings, at least one '
        "(the cell the event counts in)",
        # (that the values are strings is checked per distinct set, in references_check)
        f"{EVENT} AND body->>'kind' IN ('cycle', 'intervention') AND "
        "(jsonb_typeof(body->'conditions') IS DISTINCT FROM 'object' "
        "OR body->'conditions' = '{}'::jsonb)",
    ),
    (
        "policy",
        "expected a policy version's slug (a string)",
        _string_check(
            "policy",
            64,
            required=False,
            when=f"{EVENT} AND body->>'kind' IN ('cycle', 'intervention')",
        ),
    ),
    (
        "outcome",
        'expected "success" or "failure"',
        f"{_CYCLE} AND (jsonb_typeof(body->'outcome') IS DISTINCT FROM 'string' "
        "OR body->>'outcome' NOT IN ('success', 'failure'))",
    ),
    (
        "duration_s",
        "expected a number of seconds",
        f"{_CYCLE} AND body ? 'duration_s' AND body->'duration_s' <> 'null'::jsonb "
        "AND jsonb_typeof(body->'duration_s') <> 'number'",
    ),
    (
        "duration_s",
        "must not be negative",
        f"{_CYCLE} AND jsonb_typeof(body->'duration_s') = 'number' "
        "AND (body->'duration_s')::numeric < 0",
    ),
    (
        "duration_s",
        "is implausibly long (over 10^9 seconds)",
        f"{_CYCLE} AND jsonb_typeof(body->'duration_s') = 'number' "
        "AND (body->'duration_s')::numeric > 1e9",
    ),
    (
        "failure_mode",
        "expected a failure mode's code (a string)",
        _string_check("failure_mode", 100, required=True, when=INTERVENTION),
    ),
    (
        "intervened_by",
        'expected "harness" or "person"',
        f"{INTERVENTION} AND (jsonb_typeof(body->'intervened_by') IS DISTINCT FROM 'string' "
        "OR body->>'intervened_by' NOT IN ('harness', 'person'))",
    ),
    (
        "note",
        "expected text",
        f"{INTERVENTION} AND body ? 'note' AND body->'note' <> 'null'::jsonb "
        "AND jsonb_typeof(body->'note') <> 'string'",
    ),
    (
        "recording",
        "expected a recording's URI or upload id: a string of at most 500 characters",
        _string_check("recording", 500, required=False, when=INTERVENTION),
    ),
]


def shape_errors(cursor: Any) -> tuple[list[IngestError], bool]:
    """Every field that does not have the shape the event needs, ids sent twice with
    different bodies, and whether any id was sent twice at all."""
    # One pass that only finds the bad lines (the usual answer: none), then the detail.
    any_bad = " OR ".join(f"({condition})" for _f, _m, condition in _CHECKS)
    cursor.execute(f"SELECT line FROM production_stage WHERE {any_bad} LIMIT {MAX_ERRORS}")
    bad_lines = [line for (line,) in cursor.fetchall()]
    errors: list[IngestError] = []
    if bad_lines:
        values = ", ".join(f"(%s, %s, {condition})" for _f, _m, condition in _CHECKS)
        params = [p for f, m, _c in _CHECKS for p in (f, m)]
        cursor.execute(
            f"SELECT s.line, c.field, c.message FROM production_stage s "
            f"CROSS JOIN LATERAL (VALUES {values}) AS c(field, message, bad) "
            f"WHERE s.line = ANY(%s) AND c.bad ORDER BY s.line",
            [*params, bad_lines],
        )
        errors = [IngestError(line, f, m) for line, f, m in cursor.fetchall()]
    # One id twice in a batch with different bodies: which of them is meant is unknowable.
    cursor.execute(
        "WITH twice AS (SELECT body->>'deployment' AS deployment, body->>'event_id' AS event_id "
        "FROM production_stage GROUP BY 1, 2 HAVING count(*) > 1) "
        "SELECT t.event_id, array_agg(s.line ORDER BY s.line), "
        "array_agg(md5(s.body::text) ORDER BY s.line) FROM production_stage s JOIN twice t "
        "ON s.body->>'deployment' = t.deployment AND s.body->>'event_id' = t.event_id "
        "WHERE jsonb_typeof(s.body->'event_id') = 'string' GROUP BY t.deployment, t.event_id"
    )
    twice = cursor.fetchall()
    for event_id, lines, digests in twice:
        errors += [
            IngestError(
                line,
                "event_id",
                f"{event_id!r} is also on line {lines[0]} with a different body; "
                "send one version of an event per batch",
            )
            for line, digest in zip(lines[1:], digests[1:], strict=True)
            if digest != digests[0]
        ]
    return errors, bool(twice)
