"""Resolving a batch's deployments, condition values, failure modes and policies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from accounts.models import Organization
from accounts.services import audit_record
from analytics.models import PolicyVersion
from analytics.services.production.checks import EVENT, INTERVENTION, OP
from analytics.services.production.errors import (
    FUTURE_TOLERANCE,
    MAX_ERRORS,
    SHOWN_KNOWN,
    DeploymentNotFound,
    IngestError,
    IngestResult,
    ProductionInvalid,
)
from labeling.importers.writes import create_value
from sites.models import ConditionValue, Deployment, FailureMode
from sites.services import condition_lookup, condition_sets_intern

# --- references ------------------------------------------------------------------------------


@dataclass
class _Refs:
    deployments: dict[str, tuple[int, str]] = field(default_factory=dict)  # slug -> id, tz
    set_of: dict[str, list[int]] = field(default_factory=dict)  # conditions text -> value ids
    failure_modes: dict[str, int] = field(default_factory=dict)


def references_check(
    cursor: Any,
    organization: Organization,
    actor: Any,
    create_values: bool,
    errors: list[IngestError],
    result: IngestResult,
) -> _Refs:
    """Resolve the distinct deployments, condition values, failure modes and policies.

    Appends an error per unknown name (with its count) to ``errors``; raises
    DeploymentNotFound for deployments the organization does not have.
    """
    # One pass, one group per distinct name (GROUPING tells which set a row belongs to).
    cursor.execute(
        "SELECT grouping(dep, mode, policy, cond), coalesce(dep, mode, policy, cond), "
        "count(*), min(line) FROM (SELECT line, CASE WHEN jsonb_typeof(body->'deployment') = "
        "'string' THEN body->>'deployment' END AS dep, "
        f"CASE WHEN {INTERVENTION} AND jsonb_typeof(body->'failure_mode') = 'string' "
        "THEN body->>'failure_mode' END AS mode, "
        f"CASE WHEN {EVENT} AND jsonb_typeof(body->'policy') = 'string' "
        "THEN body->>'policy' END AS policy, "
        f"CASE WHEN {EVENT} AND body->>'kind' IN ('cycle', 'intervention') "
        "AND jsonb_typeof(body->'conditions') = 'object' THEN (body->'conditions')::text "
        "END AS cond FROM production_stage) s "
        "GROUP BY GROUPING SETS ((dep), (mode), (policy), (cond))"
    )
    names = {0b0111: "deployment", 0b1011: "failure_mode", 0b1101: "policy", 0b1110: "set"}
    rows: dict[str, list[tuple[str, int, int]]] = {}
    for which, name, count, line in cursor.fetchall():
        if name is not None:
            rows.setdefault(names[which], []).append((name, count, line))
    refs = _Refs()
    slugs = {name for name, _c, _l in rows.get("deployment", [])}
    for dep_id, slug, tz in Deployment.objects.filter(
        organization=organization, slug__in=slugs
    ).values_list("pk", "slug", "site__timezone"):
        refs.deployments[slug] = (dep_id, tz)
    missing = sorted(slugs - set(refs.deployments))
    if missing:
        raise DeploymentNotFound(missing)

    sets = [(json.loads(text), text, count, line) for text, count, line in rows.get("set", [])]
    pairs: dict[tuple[str, str], tuple[int, int]] = {}
    for conditions, _text, count, line in sets:
        for key, value in conditions.items():
            if not isinstance(value, str):
                message = f"expected a value slug (a string) ({count} events, first on line {line})"
                errors.append(IngestError(line, f"conditions.{key}", message))
                continue
            seen = pairs.get((key, value), (0, line))
            pairs[(key, value)] = (seen[0] + count, min(seen[1], line))
    value_ids, result.created_values = _condition_values(
        organization,
        actor,
        [(key, value, count, line) for (key, value), (count, line) in pairs.items()],
        create_values,
        errors,
    )
    for conditions, text, _count, _line in sets:
        if all(pair in value_ids for pair in conditions.items()):
            refs.set_of[text] = [value_ids[pair] for pair in conditions.items()]

    codes = rows.get("failure_mode", [])
    known_modes = dict(
        FailureMode.objects.filter(organization=organization).values_list("code", "pk")
    )
    for code, count, line in codes:
        if code in known_modes:
            refs.failure_modes[code] = known_modes[code]
        else:
            errors.append(
                IngestError(
                    line, "failure_mode", _unknown("failure mode", code, count, line, known_modes)
                )
            )
    policies = rows.get("policy", [])
    known_policies = set(
        PolicyVersion.objects.filter(organization=organization).values_list("slug", flat=True)
    )
    for slug, count, line in policies:
        if slug not in known_policies:
            errors.append(
                IngestError(
                    line, "policy", _unknown("policy version", slug, count, line, known_policies)
                )
            )
    return refs


def _unknown(what: str, name: str, count: int, line: int, known: Any) -> str:
    shown = sorted(known)[:SHOWN_KNOWN]
    more = f" and {len(known) - len(shown)} more" if len(known) > len(shown) else ""
    events = f"{count} event{'s' if count != 1 else ''}"
    return (
        f"unknown {what} {name!r} ({events}, first on line {line}); "
        f"known: {', '.join(shown) or 'none defined'}{more}"
    )


def _condition_values(
    organization: Organization,
    actor: Any,
    pairs: list[tuple[str, str, int, int]],
    create_values: bool,
    errors: list[IngestError],
) -> tuple[dict[tuple[str, str], int], list[str]]:
    """{(dimension, value) as sent: value id} and the values created; an unknown value is an
    error (one per value, with its count) or, with ``create_values``, a new value."""
    lookup = condition_lookup(organization=organization)
    known_dimensions = sorted({d.slug for d in lookup.dimensions.values()})
    out: dict[tuple[str, str], int] = {}
    created: list[str] = []
    for dim, value, count, line in sorted(pairs, key=lambda p: p[3]):
        where = f"conditions.{dim}"
        dimension = lookup.dimension(dim)
        if dimension is None:
            message = _unknown("condition dimension", dim, count, line, known_dimensions)
            errors.append(IngestError(line, where, message))
            continue
        value_id = lookup.value_id(dim, value)
        if value_id is None and create_values:
            value_id = create_value(dimension.pk, value)
            created.append(f"{dimension.slug}: {value}")
            audit_record(
                organization=organization,
                actor=actor,
                verb="create",
                obj=ConditionValue.objects.get(pk=value_id),
                changes={"source": "production ingest"},
            )
        if value_id is None:
            known = ConditionValue.objects.filter(dimension=dimension).values_list(
                "slug", flat=True
            )
            message = _unknown("value", value, count, line, set(known))
            errors.append(IngestError(line, where, message + "; or send create_values"))
            continue
        out[(dim, value)] = value_id
    return out, created


def batch_resolve(cursor: Any, organization: Organization, refs: _Refs) -> None:
    """Build the batch: every event with its deployment, day, condition set and codes."""
    set_ids = condition_sets_intern(organization=organization, combinations=refs.set_of.values())
    conditions = list(refs.set_of)
    condition_set = [set_ids[tuple(sorted(set(refs.set_of[c])))] for c in conditions]
    slugs = list(refs.deployments)
    cursor.execute(
        "CREATE TEMP TABLE production_batch ON COMMIT DROP AS "
        "SELECT s.line, d.id AS deployment_id, s.body->>'event_id' AS event_id, "
        f"{OP} AS op, s.body->>'kind' AS kind, md5((s.body - 'op')::text) AS digest, "
        "t.at AS occurred_at, (t.at AT TIME ZONE d.tz)::date AS day, "
        "cs.set_id AS condition_set_id, coalesce(s.body->>'policy', '') AS policy, "
        "coalesce(s.body->>'outcome' = 'failure', false) AS failed, "
        "CASE WHEN s.body->>'kind' = 'cycle' AND jsonb_typeof(s.body->'duration_s') = 'number' "
        "THEN (s.body->>'duration_s')::float8 END AS duration, fm.id AS failure_mode_id, "
        "coalesce(s.body->>'intervened_by', 'person') AS intervened_by, "
        "coalesce(s.body->>'note', '') AS notes, coalesce(s.body->>'recording', '') AS recording "
        "FROM production_stage s "
        "JOIN unnest(%s::text[], %s::int[], %s::text[]) AS d(slug, id, tz) "
        "ON d.slug = s.body->>'deployment' "
        "CROSS JOIN LATERAL (SELECT CASE WHEN coalesce(s.body->>'op', '') <> 'retract' "
        "THEN (s.body->>'occurred_at')::timestamptz END AS at) t "
        "LEFT JOIN unnest(%s::text[], %s::int[]) AS cs(conditions, set_id) "
        "ON cs.conditions::jsonb = s.body->'conditions' "
        "LEFT JOIN unnest(%s::text[], %s::int[]) AS fm(code, id) "
        "ON fm.code = s.body->>'failure_mode' AND s.body->>'kind' = 'intervention'",
        [
            slugs,
            [refs.deployments[s][0] for s in slugs],
            [refs.deployments[s][1] for s in slugs],
            conditions,
            condition_set,
            list(refs.failure_modes),
            list(refs.failure_modes.values()),
        ],
    )


def future_check(cursor: Any) -> None:
    """Refuse events ahead of the server clock by more than FUTURE_TOLERANCE."""
    cursor.execute(
        "SELECT line, round(extract(epoch FROM occurred_at - now()) / 60) FROM production_batch "
        "WHERE occurred_at > now() + %s ORDER BY line LIMIT %s",
        [FUTURE_TOLERANCE, MAX_ERRORS],
    )
    tolerance = int(FUTURE_TOLERANCE.total_seconds() // 60)
    errors = [
        IngestError(
            line,
            "occurred_at",
            f"is {int(minutes)} minutes in the future (beyond the tolerance of {tolerance} "
            "minutes); check the robot's clock",
        )
        for line, minutes in cursor.fetchall()
    ]
    if errors:
        raise ProductionInvalid(errors)


def drop_repeats(cursor: Any) -> int:
    """Keep the first of identical copies of an event within the batch; return how many went."""
    cursor.execute(
        "DELETE FROM production_batch b USING production_batch f "
        "WHERE f.deployment_id = b.deployment_id AND f.event_id = b.event_id AND f.line < b.line"
    )
    return int(cursor.rowcount)
