"""Writing a checked batch: the ledger, the day counts and the intervention records."""

from __future__ import annotations

from typing import Any

from accounts.models import Organization
from analytics.services.production.errors import (
    MAX_ERRORS,
    IngestError,
    IngestResult,
    ProductionConflict,
    ProductionInvalid,
)

# --- writes ----------------------------------------------------------------------------------

_LEDGER_COLUMNS = (
    "id, deployment_id, event_id, kind, condition_set_id, day, policy, failed, "
    "duration_seconds, occurred_at"
)


def batch_write(cursor: Any, organization: Organization, actor: Any, result: IngestResult) -> None:
    cursor.execute(
        f"CREATE TEMP TABLE production_new ON COMMIT DROP AS SELECT {_LEDGER_COLUMNS} "
        "FROM sites_productionevent WITH NO DATA"
    )
    # Sorted, so that batches sharing events take their row locks in one order (no deadlock).
    cursor.execute(
        f"WITH ins AS (INSERT INTO sites_productionevent (deployment_id, event_id, kind, digest, "
        "occurred_at, day, condition_set_id, policy, failed, duration_seconds, retracted) "
        "SELECT deployment_id, event_id, kind, digest, occurred_at, day, condition_set_id, "
        "policy, failed, duration, false FROM production_batch WHERE op <> 'retract' "
        "ORDER BY deployment_id, event_id "
        f"ON CONFLICT (deployment_id, event_id) DO NOTHING RETURNING {_LEDGER_COLUMNS}) "
        "INSERT INTO production_new SELECT * FROM ins"
    )
    inserted = int(cursor.rowcount)
    cursor.execute(
        "SELECT count(*) FILTER (WHERE kind = 'cycle'), count(*) FILTER (WHERE kind = "
        "'intervention') FROM production_new"
    )
    result.cycles, result.interventions = cursor.fetchone()
    cursor.execute("SELECT count(*) FROM production_batch")
    (batch_size,) = cursor.fetchone()
    removed: list[int] = []
    corrected: list[int] = []
    if inserted < batch_size:
        removed, corrected = _existing(cursor, result)
    if removed:
        _subtract(cursor, removed)
    if corrected:
        cursor.execute(
            "UPDATE sites_productionevent pe SET kind = b.kind, digest = b.digest, "
            "occurred_at = b.occurred_at, day = b.day, condition_set_id = b.condition_set_id, "
            "policy = b.policy, failed = b.failed, duration_seconds = b.duration, "
            "retracted = false FROM production_batch b WHERE pe.id = ANY(%s) "
            "AND b.deployment_id = pe.deployment_id AND b.event_id = pe.event_id",
            [corrected],
        )
        cursor.execute(
            f"INSERT INTO production_new SELECT {_LEDGER_COLUMNS} FROM sites_productionevent "
            "WHERE id = ANY(%s)",
            [corrected],
        )
    _add(cursor, organization, actor)


def _existing(cursor: Any, result: IngestResult) -> tuple[list[int], list[int]]:
    """Classify the batch's events already in the ledger, locking them; return the ledger ids
    whose contribution goes (retracted or corrected) and those corrected.

    Raises ProductionConflict for another body under a stored id without ``op: correct``, and
    ProductionInvalid for a retraction of an id never received.
    """
    cursor.execute(
        "SELECT b.line, b.event_id FROM production_batch b WHERE b.op = 'retract' "
        "AND NOT EXISTS (SELECT 1 FROM sites_productionevent pe "
        "WHERE pe.deployment_id = b.deployment_id AND pe.event_id = b.event_id) ORDER BY b.line"
    )
    missing = [
        IngestError(line, "event_id", f"no event {event_id!r} was received to retract")
        for line, event_id in cursor.fetchall()
    ]
    if missing:
        raise ProductionInvalid(missing[:MAX_ERRORS])
    cursor.execute(
        "SELECT b.op, b.event_id, pe.id, pe.digest = b.digest, pe.retracted "
        "FROM production_batch b JOIN sites_productionevent pe "
        "ON pe.deployment_id = b.deployment_id AND pe.event_id = b.event_id "
        "WHERE NOT EXISTS (SELECT 1 FROM production_new n WHERE n.id = pe.id) "
        "ORDER BY pe.id FOR UPDATE OF pe"
    )
    conflicts: list[str] = []
    removed: list[int] = []
    corrected: list[int] = []
    for op, event_id, pk, same, retracted in cursor.fetchall():
        if op == "retract":
            if retracted:
                result.duplicates += 1
            else:
                removed.append(pk)
                result.retracted += 1
        elif same and not retracted:
            result.duplicates += 1
        elif op == "correct":
            corrected.append(pk)
            if not retracted:
                removed.append(pk)
            result.corrected += 1
        elif same:  # the same body as an event since retracted: the original answer
            result.duplicates += 1
        else:
            conflicts.append(event_id)
    if conflicts:
        raise ProductionConflict(sorted(conflicts))
    return removed, corrected


def _subtract(cursor: Any, ledger_ids: list[int]) -> None:
    """Take what these ledger rows counted back out: cycles from the day counts,
    interventions by deleting their failure records."""
    cursor.execute(
        "WITH gone AS (SELECT deployment_id, condition_set_id, day, policy, count(*) AS n, "
        "count(*) FILTER (WHERE failed) AS f, coalesce(sum(duration_seconds), 0) AS d, "
        "count(duration_seconds) AS t FROM sites_productionevent "
        "WHERE id = ANY(%s) AND kind = 'cycle' GROUP BY 1, 2, 3, 4) "
        "UPDATE sites_productionlog l SET cycles = l.cycles - g.n, failures = l.failures - g.f, "
        "timed_cycles = l.timed_cycles - g.t, duration_seconds = CASE WHEN l.timed_cycles = g.t "
        "THEN 0 ELSE greatest(0, l.duration_seconds - g.d) END FROM gone g "
        "WHERE l.deployment_id = g.deployment_id AND l.condition_set_id = g.condition_set_id "
        "AND l.day = g.day AND l.policy = g.policy RETURNING l.id, l.cycles",
        [ledger_ids],
    )
    empty = [pk for pk, cycles in cursor.fetchall() if cycles == 0]
    if empty:
        cursor.execute("DELETE FROM sites_productionlog WHERE id = ANY(%s)", [empty])
    cursor.execute(
        "SELECT failure_record_id FROM sites_productionevent "
        "WHERE id = ANY(%s) AND failure_record_id IS NOT NULL",
        [ledger_ids],
    )
    records = [pk for (pk,) in cursor.fetchall()]
    if records:
        cursor.execute(
            "UPDATE sites_productionevent SET failure_record_id = NULL WHERE id = ANY(%s)",
            [ledger_ids],
        )
        cursor.execute("DELETE FROM sites_failurerecord WHERE id = ANY(%s)", [records])
    cursor.execute(
        "UPDATE sites_productionevent SET retracted = true WHERE id = ANY(%s)", [ledger_ids]
    )


def _add(cursor: Any, organization: Organization, actor: Any) -> None:
    """Count the events in production_new: cycles into the day counts, interventions as
    failure records linked from their ledger rows."""
    cursor.execute(
        "INSERT INTO sites_productionlog (deployment_id, condition_set_id, day, policy, cycles, "
        "failures, duration_seconds, timed_cycles) "
        "SELECT deployment_id, condition_set_id, day, policy, count(*), "
        "count(*) FILTER (WHERE failed), coalesce(sum(duration_seconds), 0), "
        "count(duration_seconds) FROM production_new WHERE kind = 'cycle' "
        "GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4 "
        "ON CONFLICT (deployment_id, condition_set_id, day, policy) DO UPDATE SET "
        "cycles = sites_productionlog.cycles + EXCLUDED.cycles, "
        "failures = sites_productionlog.failures + EXCLUDED.failures, "
        "duration_seconds = sites_productionlog.duration_seconds + EXCLUDED.duration_seconds, "
        "timed_cycles = sites_productionlog.timed_cycles + EXCLUDED.timed_cycles"
    )
    cursor.execute(
        "SELECT b.line, n.event_id FROM production_new n JOIN production_batch b "
        "USING (deployment_id, event_id) JOIN sites_failurerecord f "
        "ON f.deployment_id = n.deployment_id AND f.external_id = n.event_id "
        "WHERE n.kind = 'intervention' ORDER BY b.line"
    )
    taken = cursor.fetchall()
    if taken:
        raise ProductionInvalid(
            [
                IngestError(
                    line,
                    "event_id",
                    f"a failure record with external id {event_id!r} already exists at this "
                    "deployment (entered another way); use another event id",
                )
                for line, event_id in taken[:MAX_ERRORS]
            ]
        )
    cursor.execute(
        "WITH fr AS (INSERT INTO sites_failurerecord (organization_id, deployment_id, "
        "failure_mode_id, condition_set_id, occurred_at, intervention, intervened_by, policy, "
        "recording_ref, external_id, notes, created_by_id) "
        "SELECT %s, n.deployment_id, b.failure_mode_id, n.condition_set_id, n.occurred_at, "
        "true, b.intervened_by, n.policy, b.recording, n.event_id, b.notes, %s "
        "FROM production_new n JOIN production_batch b USING (deployment_id, event_id) "
        "WHERE n.kind = 'intervention' ORDER BY n.id RETURNING id, deployment_id, external_id) "
        "UPDATE sites_productionevent pe SET failure_record_id = fr.id FROM fr "
        "WHERE pe.deployment_id = fr.deployment_id AND pe.event_id = fr.external_id",
        [organization.pk, getattr(actor, "pk", None)],
    )
