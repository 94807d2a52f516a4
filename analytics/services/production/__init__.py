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
* ``(deployment, event_id)`` is unique in the ledger. The same id with the same body (the MD5 of
  its canonical JSON, ``op`` aside) is a duplicate and changes nothing; the same id with
  another body is :class:`ProductionConflict` (nothing stored) unless it is a correction.
* Concurrent batches rely on that constraint: new events go in with ``INSERT … ON CONFLICT DO
  NOTHING RETURNING`` and only the rows this batch inserted are counted, so a batch that
  raced an identical one finds its events stored and answers them as duplicates.

Why the work happens in SQL: a batch is up to 10,000 events and the fleet sends millions a
day. The raw JSON texts are COPYed into a temporary table as ``jsonb`` (PostgreSQL parses
them), checked there with one query, the distinct deployments, condition values, failure modes
and policies are resolved in Python (a handful each), and the ledger, the per-day counts
(:class:`sites.models.ProductionLog`) and the intervention records are written with a few
set-based statements. Python never loops over the events on the way that succeeds; only a
batch PostgreSQL cannot parse is parsed again here to say which line is wrong and why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection, transaction

from accounts.models import Organization
from analytics.services.production.checks import shape_errors, stage
from analytics.services.production.errors import (
    FUTURE_TOLERANCE,
    MAX_ERRORS,
    MAX_EVENTS,
    BatchTooLarge,
    DeploymentNotFound,
    IngestError,
    IngestResult,
    ProductionConflict,
    ProductionInvalid,
)
from analytics.services.production.references import (
    batch_resolve,
    drop_repeats,
    future_check,
    references_check,
)
from analytics.services.production.writes import batch_write


def production_ingest(
    *,
    organization: Organization,
    events: Sequence[Mapping[str, Any]],
    actor: Any,
    create_values: bool = False,
    first_line: int = 1,
) -> IngestResult:
    """Validate a batch of production events and store it whole (see the module docstring).

    Raises BatchTooLarge, ProductionInvalid, DeploymentNotFound or ProductionConflict; in each
    case nothing is stored.
    """
    texts = [json.dumps(event) for event in events]
    return production_ingest_lines(
        organization=organization,
        lines=[(first_line + i, text) for i, text in enumerate(texts)],
        actor=actor,
        create_values=create_values,
    )


def jsonl_lines(body: bytes) -> list[tuple[int, bytes]]:
    """Split a JSON Lines body into (line number, text), leaving blank lines out."""
    return [(n, line) for n, line in enumerate(body.split(b"\n"), start=1) if line.strip()]


@transaction.atomic
def production_ingest_lines(
    *,
    organization: Organization,
    lines: Sequence[tuple[int, str | bytes]],
    actor: Any,
    create_values: bool = False,
) -> IngestResult:
    """Ingest events given as JSON texts with their line numbers (JSON Lines, unparsed).

    Raises as :func:`production_ingest`.
    """
    if len(lines) > MAX_EVENTS:
        raise BatchTooLarge(len(lines))
    result = IngestResult()
    if not lines:
        return result
    with connection.cursor() as cursor:
        stage(cursor, lines)
        errors, repeats = shape_errors(cursor)
        refs = references_check(cursor, organization, actor, create_values, errors, result)
        if errors:
            raise ProductionInvalid(sorted(errors, key=_error_order)[:MAX_ERRORS])
        batch_resolve(cursor, organization, refs)
        future_check(cursor)
        if repeats:
            result.duplicates += drop_repeats(cursor)
        batch_write(cursor, organization, actor, result)
        if result.interventions or result.corrected:
            _recorded_episodes(cursor, actor)
    return result


def _recorded_episodes(cursor: Any, actor: Any) -> None:
    """Give the batch's new interventions whose recording is at a URI their episodes in the
    deployment's production dataset, in the batch's transaction (an uploaded recording links
    to the same episode later: :mod:`labeling.production`)."""
    from labeling.production import production_episodes_sync
    from sites.models import Deployment

    cursor.execute(
        "SELECT DISTINCT n.deployment_id FROM production_new n JOIN production_batch b "
        "USING (deployment_id, event_id) WHERE n.kind = 'intervention' AND b.recording <> ''"
    )
    ids = [pk for (pk,) in cursor.fetchall()]
    for deployment in Deployment.objects.filter(pk__in=ids).select_related("organization"):
        production_episodes_sync(deployment=deployment, actor=actor)


def _error_order(error: IngestError) -> tuple[int, str]:
    return (error.line or 0, error.field)


__all__ = [
    "FUTURE_TOLERANCE",
    "MAX_EVENTS",
    "BatchTooLarge",
    "DeploymentNotFound",
    "IngestError",
    "IngestResult",
    "ProductionConflict",
    "ProductionInvalid",
    "jsonl_lines",
    "production_ingest",
    "production_ingest_lines",
]
