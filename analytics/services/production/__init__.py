"""Production events from the fleet: validated as a batch, kept in a ledger, counted on arrival.

One event per JSON object (a line of JSON Lines, or an element of a JSON array):

* a cycle — ``{"event_id", "deployment": "<slug>", "kind": "cycle", "occurred_at": ISO-8601
  with a UTC offset, "outcome": "success" | "failure", "conditions": {"<dimension slug>":
  "<value slug>", ...}, "duration_s"?: seconds >= 0, "policy"?: "<policy version slug>"}``;
* an intervention — ``{"event_id", "deployment", "kind": "intervention", "occurred_at",
  "failure_mode": "<code>", "conditions", "intervened_by": "harness" | "person", "note"?,
  "recording"?: "<uri or upload id>", "policy"?}``;
* a retraction — ``{"event_id", "deployment", "op": "retract"}``: the event stops counting;
* a correction — the whole event again with ``"op": "correct"``: it replaces the earlier body
  and the counts move (a correction of an id never seen is a new event).

Rules:

* The whole batch is validated before anything is written and is stored in one transaction or
  not at all. Every error names its line (``first_line`` + index), the field and what was
  expected; unknown condition values, failure modes and policy versions are listed once each
  with how many events carry them. ``create_values`` adds unknown values of known dimensions.
* Deployments resolve within the caller's organization only: any other slug is
  :class:`DeploymentNotFound` (a 404: another organization's deployment is not confirmed).
* An event more than :data:`FUTURE_TOLERANCE` ahead of the server clock is refused; late and
  out-of-order events are accepted. An event counts on its site-local day (``Site.timezone``).
* ``(deployment, event_id)`` is the ledger's key. The same id with the same event (what the
  ledger keeps of it: kind, time as an instant, condition set, policy, outcome, duration,
  failure mode, who intervened, note, recording; fields Fieldcraft does not know are ignored)
  is a duplicate and changes nothing; the same id with another event is
  :class:`ProductionConflict` (nothing stored) unless it is a correction.
* Concurrent batches rely on that key: a batch whose COPY meets an id another batch stored
  meanwhile rolls back to a savepoint, reads and locks the stored events under its ids and
  answers them as duplicates.

How it stays fast (a batch is up to 10,000 events and a fleet sends millions a day): the batch
decodes in one msgspec call against the declared shape of an event (:mod:`.decode`); the
distinct deployments, condition sets, failure modes and policies are resolved once each
(:mod:`.references`); the events become ledger rows a chunk at a time (:mod:`.checks`), each chunk
COPYed into the ledger and counted into the day counts while the next is built (:mod:`.writes`). Only a batch with
something wrong is decoded again line by line, to name every wrong line and field.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction

from accounts.models import Organization
from analytics.services.production.checks import check_batch, column_chunks
from analytics.services.production.decode import (
    Batch,
    decode_body,
    decode_json_body,
    decode_lines,
    decode_values,
    jsonl_lines,
)
from analytics.services.production.errors import (
    FUTURE_TOLERANCE,
    MAX_ERRORS,
    MAX_EVENTS,
    BatchTooLarge,
    DeploymentNotFound,
    IngestError,
    IngestResult,
    ProductionBusy,
    ProductionConflict,
    ProductionInvalid,
)
from analytics.services.production.references import references_resolve
from analytics.services.production.writes import Refused, batch_write, new_batch_write


def production_ingest(
    *,
    organization: Organization,
    events: Sequence[Mapping[str, Any]],
    actor: Any,
    create_values: bool = False,
    first_line: int = 1,
) -> IngestResult:
    """Validate a batch of production events (parsed JSON values) and store it whole (see the
    module docstring).

    Raises BatchTooLarge, ProductionInvalid, DeploymentNotFound or ProductionConflict; in each
    case nothing is stored.
    """
    if len(events) > MAX_EVENTS:
        raise BatchTooLarge(len(events))
    return _ingest(organization, decode_values(events, first_line), actor, create_values)


def production_ingest_lines(
    *,
    organization: Organization,
    lines: Sequence[tuple[int, str | bytes]],
    actor: Any,
    create_values: bool = False,
) -> IngestResult:
    """Ingest events given as JSON texts with their line numbers. Raises as
    :func:`production_ingest`."""
    if len(lines) > MAX_EVENTS:
        raise BatchTooLarge(len(lines))
    return _ingest(organization, decode_lines(lines), actor, create_values)


def production_ingest_body(
    *,
    organization: Organization,
    body: bytes,
    actor: Any,
    create_values: bool = False,
) -> IngestResult:
    """Ingest a JSON Lines body. Raises as :func:`production_ingest`."""
    if body.count(b"\n") > MAX_EVENTS:
        count = len(jsonl_lines(body))
        if count > MAX_EVENTS:
            raise BatchTooLarge(count)
    return production_ingest_batch(
        organization=organization, batch=decode_body(body), actor=actor, create_values=create_values
    )


def production_ingest_batch(
    *,
    organization: Organization,
    batch: Batch,
    actor: Any,
    create_values: bool = False,
) -> IngestResult:
    """Ingest decoded events (:func:`decode_json_body`). Raises as :func:`production_ingest`."""
    if len(batch.events) > MAX_EVENTS:
        raise BatchTooLarge(len(batch.events))
    return _ingest(organization, batch, actor, create_values)


@transaction.atomic
def _ingest(
    organization: Organization, batch: Batch, actor: Any, create_values: bool
) -> IngestResult:
    result = IngestResult()
    if not batch.events:
        return result
    errors: list[IngestError] = []
    with _collector_paused(), connection.cursor() as cursor:
        resolved = references_resolve(batch, organization, actor, create_values, errors, result)
        added: list[tuple[Any, ...]] | Refused = Refused.CLOSER_LOOK
        if not errors:
            chunks = column_chunks(batch, resolved)
            added = new_batch_write(cursor, organization, actor, chunks, result)
        if isinstance(added, Refused):
            checked = check_batch(batch, resolved, errors)
            if errors:
                raise ProductionInvalid(sorted(errors, key=_error_order)[:MAX_ERRORS])
            result.duplicates += checked.repeats
            copy_first = added is not Refused.KNOWN_ID
            added = batch_write(cursor, organization, actor, checked, result, copy_first)
        recorded = {row[0] for row in added if row[12]}
        if recorded:
            _recorded_episodes(recorded, actor)
    return result


_paused = 0
_paused_lock = threading.Lock()
_collector_was_on = False


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a batch is checked and written.

    A batch makes tens of thousands of short-lived rows, and every few hundred of them set
    off a collection that may walk the server's whole heap (a third of a batch's time in
    the benchmark); rows are freed by reference counting, so nothing waits for the
    collector. Concurrent batches (threads) share one pause; the collector is back as it
    was when the last one ends.
    """
    global _paused, _collector_was_on
    with _paused_lock:
        if _paused == 0:
            _collector_was_on = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0 and _collector_was_on:
                gc.enable()


def _recorded_episodes(deployment_ids: set[int], actor: Any) -> None:
    """Give the batch's new interventions whose recording is at a URI their episodes in the
    deployment's production dataset, in the batch's transaction (an uploaded recording links
    to the same episode later: :mod:`labeling.production`)."""
    from labeling.production import production_episodes_sync
    from sites.models import Deployment

    for deployment in Deployment.objects.filter(pk__in=deployment_ids).select_related(
        "organization"
    ):
        production_episodes_sync(deployment=deployment, actor=actor)


def _error_order(error: IngestError) -> tuple[int, str]:
    return (error.line or 0, error.field)


__all__ = [
    "FUTURE_TOLERANCE",
    "MAX_EVENTS",
    "Batch",
    "BatchTooLarge",
    "DeploymentNotFound",
    "IngestError",
    "IngestResult",
    "ProductionBusy",
    "ProductionConflict",
    "ProductionInvalid",
    "decode_json_body",
    "jsonl_lines",
    "production_ingest",
    "production_ingest_batch",
    "production_ingest_body",
    "production_ingest_lines",
]
