"""Writing a checked batch: the ledger, the day counts and the intervention records.

The usual batch is all new events. Its rows are COPYed straight into the ledger as they are
built (:func:`new_batch_write`), a chunk at a time, so the database stores one chunk while the
next is built; the ledger's primary key (deployment, event id) is the idempotency check: no
lookup first. If any id is already there (a replay, a batch racing an identical one), an event
needs a closer look, or the batch retracts or corrects, the COPY is rolled back to its
savepoint and the batch goes the careful way (:func:`batch_write`): the stored events under
its ids are read and locked, each event is classified (duplicate, conflict, retraction,
correction, new) and only the new ones are inserted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from enum import Enum
from typing import Any

import numpy as np
import psycopg
from django.db import transaction

from accounts.models import Organization
from analytics.services.production.checks import (
    CYCLE_COLUMNS,
    CYCLE_REST,
    ROW,
    Checked,
    NeedsCloserLook,
    Rows,
)
from analytics.services.production.errors import (
    MAX_ERRORS,
    IngestError,
    IngestResult,
    ProductionBusy,
    ProductionConflict,
    ProductionInvalid,
)

_TYPES = [
    "int8",
    "text",
    "text",
    "timestamptz",
    "date",
    "int8",
    "text",
    "bool",
    "float8",
    "int8",
    "text",
    "text",
    "text",
]
_ATTEMPTS = 5


class _Retry(Exception):
    """Another batch stored some of these events meanwhile: classify again."""


class Refused(Enum):
    """Why :func:`new_batch_write` stored nothing."""

    CLOSER_LOOK = "an event needs a closer look"
    KNOWN_ID = "an id is in the ledger already, or twice in the batch"


def new_batch_write(
    cursor: Any,
    organization: Organization,
    actor: Any,
    chunks: Iterator[tuple[Rows, Rows]],
    result: IngestResult,
) -> Rows | Refused:
    """Store a batch of new events as its rows are built (:func:`~.checks.column_chunks`):
    each chunk's cycles are COPYed into the ledger and counted before the next chunk is built.
    Returns the rows of the interventions it added, or why it stored nothing."""
    days = _DayCounts()
    interventions: Rows = []
    try:
        with transaction.atomic():
            with cursor.copy(_COPY_CYCLES) as copy:
                copy.set_types(_TYPES[:CYCLE_COLUMNS])
                for cycles, others in chunks:
                    for row in cycles:
                        copy.write_row(row)
                    days.add(cycles)
                    interventions += others
            if interventions:
                _copy_rows(cursor, interventions, len(ROW))
    except NeedsCloserLook:
        return Refused.CLOSER_LOOK
    except (psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected):
        return Refused.KNOWN_ID
    days.store(cursor, result)
    result.interventions += len(interventions)
    if interventions:
        _records(cursor, organization, actor, interventions)
    return interventions


def batch_write(
    cursor: Any,
    organization: Organization,
    actor: Any,
    checked: Checked,
    result: IngestResult,
    copy_first: bool = True,
) -> Rows:
    """Store the batch; return the rows of the interventions it added. A batch of new events
    is COPYed first (unless ``copy_first`` is false: some of its ids are known to be taken);
    the careful way takes the rest."""
    if copy_first and not any(checked.ops):
        try:
            with transaction.atomic():
                _copy(cursor, checked.rows)
        except (psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected):
            pass
        else:
            return _count(cursor, organization, actor, checked.rows, result)
    for _attempt in range(_ATTEMPTS):
        outcome = IngestResult()
        try:
            with transaction.atomic():
                added = _careful(cursor, organization, actor, checked, outcome)
        except (_Retry, psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected):
            continue
        result.add(outcome)
        return added
    raise ProductionBusy(_ATTEMPTS)


_COPY_CYCLES = (
    f"COPY sites_productionevent ({', '.join(ROW[:CYCLE_COLUMNS])}) FROM STDIN (FORMAT BINARY)"
)


def _copy(cursor: Any, rows: Sequence[tuple[Any, ...]]) -> None:
    """COPY new events into the ledger: cycles with their own columns, then interventions."""
    cycles = [row for row in rows if row[2] == "cycle"]
    if cycles:
        _copy_rows(cursor, cycles, CYCLE_COLUMNS)
    interventions = [row for row in rows if row[2] != "cycle"]
    if interventions:
        _copy_rows(cursor, interventions, len(ROW))


def _copy_rows(cursor: Any, rows: Sequence[tuple[Any, ...]], width: int) -> None:
    """COPY rows of the ledger's first ``width`` columns."""
    with cursor.copy(
        f"COPY sites_productionevent ({', '.join(ROW[:width])}) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.set_types(_TYPES[:width])
        for row in rows:
            copy.write_row(row)


def _careful(
    cursor: Any, organization: Organization, actor: Any, checked: Checked, result: IngestResult
) -> list[tuple[Any, ...]]:
    """Classify the batch against what the ledger holds under its ids, then store it."""
    stored = _stored(cursor, checked.rows)
    new: list[tuple[Any, ...]] = []
    removed: list[tuple[int, str]] = []
    corrected: list[tuple[Any, ...]] = []
    conflicts: list[str] = []
    missing: list[IngestError] = []
    for row, line, op in zip(checked.rows, checked.lines, checked.ops, strict=True):
        key = (row[0], row[1])
        before = stored.get(key)
        if before is None:
            if op == "retract":
                missing.append(
                    IngestError(line, "event_id", f"no event {row[1]!r} was received to retract")
                )
            else:
                new.append(row)  # a correction of an id never seen is a new event
            continue
        held, retracted = before
        if op == "retract":
            if retracted:
                result.duplicates += 1
            else:
                removed.append(key)
                result.retracted += 1
        elif held[: len(row)] == row:  # the same event again, counted or since retracted: no change
            result.duplicates += 1
        elif op == "correct":
            corrected.append(row)
            if not retracted:
                removed.append(key)
            result.corrected += 1
        else:
            conflicts.append(row[1])
    if missing:
        raise ProductionInvalid(missing[:MAX_ERRORS])
    if conflicts:
        raise ProductionConflict(sorted(conflicts))
    if removed:
        _subtract(cursor, removed)
    if corrected:
        _replace(cursor, corrected)
    if new:
        _insert_new(cursor, new)
    added = _count(cursor, organization, actor, [*new, *corrected], result)
    for row in corrected:  # counted again, but answered as corrected, not as new
        if row[2] == "cycle":
            result.cycles -= 1
        else:
            result.interventions -= 1
    return added


def _stored(cursor: Any, rows: Sequence[tuple[Any, ...]]) -> dict[tuple[int, str], Any]:
    """{(deployment id, event id): (stored row, retracted)} for the batch's ids, locked in key
    order (so batches sharing events never wait on each other in a circle)."""
    cursor.execute(
        f"SELECT {', '.join('pe.' + c for c in ROW)}, pe.retracted FROM sites_productionevent pe "
        "JOIN unnest(%b::int8[], %b::text[]) AS k(deployment_id, event_id) "
        "ON pe.deployment_id = k.deployment_id AND pe.event_id = k.event_id "
        "ORDER BY pe.deployment_id, pe.event_id FOR UPDATE OF pe",
        [[row[0] for row in rows], [row[1] for row in rows]],
    )
    return {(r[0], r[1]): (tuple(r[:-1]), r[-1]) for r in cursor.fetchall()}


def _whole(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows with every column (a cycle's row stops at its duration)."""
    return [row if len(row) == len(ROW) else row + CYCLE_REST for row in rows]


def _insert_new(cursor: Any, rows: list[tuple[Any, ...]]) -> None:
    columns = list(zip(*sorted(_whole(rows), key=lambda row: (row[0], row[1])), strict=True))
    casts = ", ".join(f"%b::{t}[]" for t in _TYPES)
    cursor.execute(
        f"INSERT INTO sites_productionevent ({', '.join(ROW)}) SELECT * FROM unnest({casts}) "
        "ON CONFLICT (deployment_id, event_id) DO NOTHING",
        [list(column) for column in columns],
    )
    if cursor.rowcount != len(rows):
        raise _Retry


def _replace(cursor: Any, rows: list[tuple[Any, ...]]) -> None:
    """Give corrected events their new bodies (their counts were taken out already)."""
    columns = list(zip(*_whole(rows), strict=True))
    casts = ", ".join(f"%b::{t}[]" for t in _TYPES)
    sets = ", ".join(f"{c} = b.{c}" for c in ROW[2:])
    cursor.execute(
        f"UPDATE sites_productionevent pe SET {sets}, retracted = false, failure_record_id = NULL "
        f"FROM unnest({casts}) AS b({', '.join(ROW)}) "
        "WHERE pe.deployment_id = b.deployment_id AND pe.event_id = b.event_id",
        [list(column) for column in columns],
    )


def _subtract(cursor: Any, keys: list[tuple[int, str]]) -> None:
    """Take what these ledger rows counted back out: cycles from the day counts,
    interventions by deleting their failure records; mark them retracted."""
    keyed = [[k[0] for k in keys], [k[1] for k in keys]]
    these = (
        "sites_productionevent pe JOIN unnest(%b::int8[], %b::text[]) AS k(deployment_id, "
        "event_id) ON pe.deployment_id = k.deployment_id AND pe.event_id = k.event_id"
    )
    cursor.execute(
        "WITH gone AS (SELECT pe.deployment_id, condition_set_id, day, policy, count(*) AS n, "
        "count(*) FILTER (WHERE failed) AS f, coalesce(sum(duration_seconds), 0) AS d, "
        f"count(duration_seconds) AS t FROM {these} WHERE pe.kind = 'cycle' "
        "GROUP BY 1, 2, 3, 4) "
        "UPDATE sites_productionlog l SET cycles = l.cycles - g.n, failures = l.failures - g.f, "
        "timed_cycles = l.timed_cycles - g.t, duration_seconds = CASE WHEN l.timed_cycles = g.t "
        "THEN 0 ELSE greatest(0, l.duration_seconds - g.d) END FROM gone g "
        "WHERE l.deployment_id = g.deployment_id AND l.condition_set_id = g.condition_set_id "
        "AND l.day = g.day AND l.policy = g.policy RETURNING l.id, l.cycles",
        keyed,
    )
    empty = [pk for pk, cycles in cursor.fetchall() if cycles == 0]
    if empty:
        cursor.execute("DELETE FROM sites_productionlog WHERE id = ANY(%s)", [empty])
    cursor.execute(
        f"SELECT pe.failure_record_id FROM {these} WHERE pe.failure_record_id IS NOT NULL",
        keyed,
    )
    records = [pk for (pk,) in cursor.fetchall()]
    cursor.execute(
        "UPDATE sites_productionevent pe SET retracted = true, failure_record_id = NULL "
        "FROM unnest(%b::int8[], %b::text[]) AS k(deployment_id, event_id) "
        "WHERE pe.deployment_id = k.deployment_id AND pe.event_id = k.event_id",
        keyed,
    )
    if records:
        cursor.execute("DELETE FROM sites_failurerecord WHERE id = ANY(%s)", [records])


def _count(
    cursor: Any,
    organization: Organization,
    actor: Any,
    rows: Iterable[tuple[Any, ...]],
    result: IngestResult,
) -> Rows:
    """Count newly stored events: cycles into the day counts, interventions as failure
    records linked from their ledger rows. Returns the interventions' rows."""
    cycles: Rows = []
    interventions: Rows = []
    for row in rows:
        (cycles if row[2] == "cycle" else interventions).append(row)
    days = _DayCounts()
    days.add(cycles)
    days.store(cursor, result)
    result.interventions += len(interventions)
    if interventions:
        _records(cursor, organization, actor, interventions)
    return interventions


class _DayCounts:
    """Cycles counted per deployment x condition set x site-local day x policy version."""

    def __init__(self) -> None:
        self._slots: dict[tuple[Any, ...], int] = {}  # key -> its position in the sums
        # cycles, failures, seconds of the timed ones, timed ones: per key
        self._sums = [np.zeros(0) for _ in range(4)]

    def add(self, cycles: Sequence[tuple[Any, ...]]) -> None:
        if not cycles:
            return
        # A column at a time: each row's key is numbered by a dict, the sums are bincounts.
        deployments, _i, _k, _a, days, sets, policies, failed, durations = zip(*cycles, strict=True)
        slots = self._slots
        keys = list(zip(deployments, sets, days, policies, strict=True))
        for key in set(keys).difference(slots):
            slots[key] = len(slots)
        index = np.fromiter(map(slots.__getitem__, keys), dtype=np.int64, count=len(keys))
        seconds = np.array(durations, dtype=np.float64)  # None -> NaN: no duration sent
        timed = ~np.isnan(seconds)
        size = len(slots)
        for column, weights in enumerate(
            (None, np.array(failed, dtype=np.float64), np.where(timed, seconds, 0.0), timed)
        ):
            sums = np.bincount(index, weights=weights, minlength=size)
            if self._sums[column].size < size:
                self._sums[column] = np.pad(self._sums[column], (0, size - self._sums[column].size))
            self._sums[column] += sums

    def store(self, cursor: Any, result: IngestResult) -> None:
        """Add the counts to the stored ones, in one lock order for every batch (by key)."""
        if not self._slots:
            return
        cycles, failures, seconds, timed = self._sums
        result.cycles += int(cycles.sum())
        keys = sorted(self._slots)
        at = [self._slots[key] for key in keys]
        cursor.execute(
            "INSERT INTO sites_productionlog (deployment_id, condition_set_id, day, policy, "
            "cycles, failures, duration_seconds, timed_cycles) SELECT * FROM unnest(%b::int8[], "
            "%b::int8[], %b::date[], %b::text[], %b::int8[], %b::int8[], %b::float8[], %b::int8[]) "
            "ON CONFLICT (deployment_id, condition_set_id, day, policy) DO UPDATE SET "
            "cycles = sites_productionlog.cycles + EXCLUDED.cycles, "
            "failures = sites_productionlog.failures + EXCLUDED.failures, "
            "duration_seconds = sites_productionlog.duration_seconds + EXCLUDED.duration_seconds, "
            "timed_cycles = sites_productionlog.timed_cycles + EXCLUDED.timed_cycles",
            [[key[i] for key in keys] for i in range(4)]
            + [
                cycles[at].astype(np.int64).tolist(),
                failures[at].astype(np.int64).tolist(),
                seconds[at].tolist(),
                timed[at].astype(np.int64).tolist(),
            ],
        )


def _records(
    cursor: Any, organization: Organization, actor: Any, rows: list[tuple[Any, ...]]
) -> None:
    """A failure record per intervention, linked from its ledger row."""
    keyed = [[row[0] for row in rows], [row[1] for row in rows]]
    cursor.execute(
        "SELECT f.external_id FROM sites_failurerecord f "
        "JOIN unnest(%b::int8[], %b::text[]) AS k(deployment_id, event_id) "
        "ON f.deployment_id = k.deployment_id AND f.external_id = k.event_id",
        keyed,
    )
    taken = {event_id for (event_id,) in cursor.fetchall()}
    if taken:
        raise ProductionInvalid(
            [
                IngestError(
                    None,
                    "event_id",
                    f"a failure record with external id {event_id!r} already exists at this "
                    "deployment (entered another way); use another event id",
                )
                for event_id in sorted(taken)[:MAX_ERRORS]
            ]
        )
    columns = list(zip(*rows, strict=True))
    cursor.execute(
        "WITH b AS (SELECT * FROM unnest(%b::int8[], %b::text[], %b::timestamptz[], %b::int8[], "
        "%b::text[], %b::int8[], %b::text[], %b::text[], %b::text[]) AS b(deployment_id, "
        "event_id, occurred_at, condition_set_id, policy, failure_mode_id, intervened_by, note, "
        "recording)), fr AS (INSERT INTO sites_failurerecord (organization_id, deployment_id, "
        "failure_mode_id, condition_set_id, occurred_at, intervention, intervened_by, policy, "
        "recording_ref, external_id, notes, created_by_id) SELECT %s, deployment_id, "
        "failure_mode_id, condition_set_id, occurred_at, true, intervened_by, policy, recording, "
        "event_id, note, %s FROM b ORDER BY deployment_id, event_id "
        "RETURNING id, deployment_id, external_id) "
        "UPDATE sites_productionevent pe SET failure_record_id = fr.id FROM fr "
        "WHERE pe.deployment_id = fr.deployment_id AND pe.event_id = fr.external_id",
        [
            list(columns[0]),
            list(columns[1]),
            list(columns[3]),
            list(columns[5]),
            list(columns[6]),
            list(columns[9]),
            list(columns[10]),
            list(columns[11]),
            list(columns[12]),
            organization.pk,
            getattr(actor, "pk", None),
        ],
    )
