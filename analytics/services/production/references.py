"""Resolving a batch's deployments, condition values, failure modes and policies: each distinct
name once, and every unknown one named once with how many events carry it."""

from __future__ import annotations

from collections.abc import Collection
from operator import attrgetter
from typing import Any
from zoneinfo import ZoneInfo

from accounts.models import Organization
from accounts.services import audit_record
from analytics.models import PolicyVersion
from analytics.services.production.checks import OP, Resolved, first_lines
from analytics.services.production.decode import Batch, conditions_of
from analytics.services.production.errors import (
    SHOWN_KNOWN,
    DeploymentNotFound,
    IngestError,
    IngestResult,
)
from labeling.importers.writes import create_value
from sites.models import ConditionValue, Deployment, FailureMode
from sites.services import ConditionLookup, condition_lookup, condition_sets_intern

_DEPLOYMENT = attrgetter("deployment")
_FAILURE_MODE = attrgetter("failure_mode")
_POLICY = attrgetter("policy")


def references_resolve(
    batch: Batch,
    organization: Organization,
    actor: Any,
    create_values: bool,
    errors: list[IngestError],
    result: IngestResult,
) -> Resolved:
    """Resolve the batch's distinct names within the organization.

    Appends an error per unknown name (with its count) to ``errors``; raises
    DeploymentNotFound for deployments the organization does not have (nothing is confirmed
    about another organization's).
    """
    events = batch.events
    slugs = set(map(_DEPLOYMENT, events))
    deployments = {
        slug: (pk, ZoneInfo(tz))
        for pk, slug, tz in Deployment.objects.filter(
            organization=organization, slug__in=slugs
        ).values_list("pk", "slug", "site__timezone")
    }
    missing = sorted(slugs - set(deployments))
    if missing:
        raise DeploymentNotFound(missing)
    sets = set(batch.condition_texts())
    sets.discard(b"null")  # no conditions at all: an error of the event's own (or a retraction)
    condition_sets = _condition_sets(
        batch, organization, actor, create_values, sets, errors, result
    )
    counted = events
    if any(map(OP, events)):
        counted = [event for event in events if event.op != "retract"]
    modes = set(map(_FAILURE_MODE, counted))
    modes.discard(None)
    known_modes: dict[str, int] = {}
    if modes:  # (an intervention's; a cycle's failure mode is not read)
        modes = {
            event.failure_mode
            for event in counted
            if event.kind == "intervention" and event.failure_mode is not None
        }
        known_modes = dict(
            FailureMode.objects.filter(organization=organization).values_list("code", "pk")
        )
        _name_unknown(batch, modes, known_modes, "failure_mode", "failure mode", errors)
    policies = set(map(_POLICY, counted))
    policies.discard(None)
    if policies:
        known_policies = set(
            PolicyVersion.objects.filter(organization=organization).values_list("slug", flat=True)
        )
        _name_unknown(batch, policies, known_policies, "policy", "policy version", errors)
    return Resolved(
        deployments=deployments,
        condition_sets=condition_sets,
        failure_modes={code: known_modes[code] for code in modes if code in known_modes},
    )


def _name_unknown(
    batch: Batch,
    names: set[str],
    known: Collection[str],
    field: str,
    what: str,
    errors: list[IngestError],
) -> None:
    """An error for each name the organization does not have, with its count and first line."""
    unknown = sorted(names.difference(known))
    if unknown:
        for name, (count, line) in first_lines(batch, unknown, field).items():
            errors.append(IngestError(line, field, _unknown(what, name, count, line, known)))


def _condition_sets(
    batch: Batch,
    organization: Organization,
    actor: Any,
    create_values: bool,
    sets: Collection[bytes],
    errors: list[IngestError],
    result: IngestResult,
) -> dict[bytes, int]:
    """{conditions text as sent: condition set id} for every set whose values are known."""
    firsts: dict[bytes, tuple[int, int]] = {}

    def first(text: bytes) -> tuple[int, int]:
        """(events carrying this set, its first line): found only when something is wrong."""
        if not firsts:
            firsts.update(first_lines(batch, list(sets), "conditions"))
        return firsts[text]

    parsed: dict[bytes, dict[str, str]] = {}
    pairs: dict[tuple[str, str], list[bytes]] = {}
    for text in sets:
        conditions, problems = conditions_of(text)
        if problems:
            count, line = first(text)
            for where, message in problems:
                errors.append(
                    IngestError(
                        line,
                        where,
                        f"{message} ({_events(count)}, first on line {line})"
                        if count > 1
                        else message,
                    )
                )
            continue
        assert conditions is not None
        parsed[text] = conditions
        for pair in conditions.items():
            pairs.setdefault(pair, []).append(text)
    if not parsed:
        return {}
    unresolved: list[tuple[str, str, int, int]] = []
    value_ids: dict[tuple[str, str], int] = {}
    lookup = condition_lookup(organization=organization)
    for dim, value in pairs:
        value_id = lookup.value_id(dim, value) if lookup.dimension(dim) is not None else None
        if value_id is None:
            texts = pairs[(dim, value)]
            lines = [first(text) for text in texts]
            unresolved.append(
                (dim, value, sum(c for c, _l in lines), min(line for _c, line in lines))
            )
        else:
            value_ids[(dim, value)] = value_id
    if unresolved:
        created, result.created_values = _condition_values(
            organization, lookup, actor, unresolved, create_values, errors
        )
        value_ids.update(created)
    combinations = {
        text: [value_ids[pair] for pair in conditions.items()]
        for text, conditions in parsed.items()
        if all(pair in value_ids for pair in conditions.items())
    }
    set_ids = condition_sets_intern(organization=organization, combinations=combinations.values())
    return {text: set_ids[tuple(sorted(set(ids)))] for text, ids in combinations.items()}


def _events(count: int) -> str:
    return f"{count} event{'s' if count != 1 else ''}"


def _unknown(what: str, name: str, count: int, line: int, known: Any) -> str:
    shown = sorted(known)[:SHOWN_KNOWN]
    more = f" and {len(known) - len(shown)} more" if len(known) > len(shown) else ""
    return (
        f"unknown {what} {name!r} ({_events(count)}, first on line {line}); "
        f"known: {', '.join(shown) or 'none defined'}{more}"
    )


def _condition_values(
    organization: Organization,
    lookup: ConditionLookup,
    actor: Any,
    pairs: list[tuple[str, str, int, int]],
    create_values: bool,
    errors: list[IngestError],
) -> tuple[dict[tuple[str, str], int], list[str]]:
    """{(dimension, value) as sent: value id} and the values created; an unknown value is an
    error (one per value, with its count) or, with ``create_values``, a new value."""
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
