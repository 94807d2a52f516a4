"""Condition sets and values: interning, resolving names, a deployment's surveyed profile."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import connection, transaction

from accounts.models import Organization
from sites.models import (
    ConditionDimension,
    ConditionSet,
    ConditionShare,
    ConditionValue,
    Deployment,
)


class ConditionError(ValueError):
    """Condition values that do not fit the taxonomy (names what was wrong)."""


def condition_sets_intern(
    *, organization: Organization | int, combinations: Iterable[Sequence[int]]
) -> dict[tuple[int, ...], int]:
    """Return the ConditionSet id for each combination of value ids, creating missing ones.

    Combinations are normalised (sorted, de-duplicated). Known ones are read (one query once
    they all exist, the usual case); missing ones are inserted with ON CONFLICT DO NOTHING,
    so concurrent callers agree, and read back.
    """
    org_id = organization if isinstance(organization, int) else organization.pk
    keys = {tuple(ConditionSet.key_for(c)) for c in combinations}
    if not keys:
        return {}
    # Array literals in one text, split and cast in SQL: combinations have different
    # lengths, so they cannot travel as one rectangular int[][] parameter, and one text
    # is far cheaper to send than a list of thousands.
    found = _condition_sets_find(org_id, keys)
    missing = keys - set(found)
    if missing:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO sites_conditionset (organization_id, value_ids) "
                "SELECT %s, k::int[] FROM unnest(string_to_array(%s, ';')) AS k "
                "ON CONFLICT (organization_id, value_ids) DO NOTHING",
                [org_id, _literals(missing)],
            )
        found.update(_condition_sets_find(org_id, missing))
    return found


def _literals(keys: Iterable[tuple[int, ...]]) -> str:
    # Array literals in one text, split and cast in SQL: combinations have different
    # lengths, so they cannot travel as one rectangular int[][] parameter, and one text
    # is far cheaper to send than a list of thousands.
    return ";".join("{" + ",".join(map(str, key)) + "}" for key in keys)


def _condition_sets_find(org_id: int, keys: set[tuple[int, ...]]) -> dict[tuple[int, ...], int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, value_ids::text FROM sites_conditionset WHERE organization_id = %s "
            "AND value_ids IN (SELECT k::int[] FROM unnest(string_to_array(%s, ';')) AS k)",
            [org_id, _literals(keys)],
        )
        return {
            tuple(int(v) for v in values[1:-1].split(",")): pk for pk, values in cursor.fetchall()
        }


def condition_set_intern(
    *, organization: Organization | int, value_ids: Sequence[int]
) -> ConditionSet:
    """Return the ConditionSet for one combination of value ids, creating it if missing."""
    if not value_ids:
        raise ConditionError("A condition set needs at least one condition value.")
    mapping = condition_sets_intern(organization=organization, combinations=[value_ids])
    return ConditionSet.objects.get(pk=next(iter(mapping.values())))


def condition_values_resolve(
    *, organization: Organization | int, pairs: dict[str, str]
) -> list[int]:
    """Map {dimension slug or name: value slug or label} to value ids (case-insensitive).

    Raises ConditionError listing every unknown dimension or value.
    """
    org_id = organization if isinstance(organization, int) else organization.pk
    lookup = condition_lookup(organization=org_id)
    ids: list[int] = []
    problems: list[str] = []
    for dim, value in pairs.items():
        key = (_norm(dim), _norm(value))
        if _norm(dim) not in lookup.dimensions:
            problems.append(f"unknown condition dimension {dim!r}")
        elif key not in lookup.values:
            known = ", ".join(sorted(lookup.dimension_values[_norm(dim)]))
            problems.append(f"unknown value {value!r} for {dim!r} (known: {known})")
        else:
            ids.append(lookup.values[key])
    if problems:
        raise ConditionError("; ".join(problems))
    return ids


def _norm(text: str) -> str:
    return " ".join(str(text).strip().lower().replace("_", " ").replace("-", " ").split())


class ConditionLookup:
    """Case- and punctuation-insensitive lookup of an organization's condition taxonomy."""

    def __init__(self, organization_id: int) -> None:
        self.dimensions: dict[str, ConditionDimension] = {}
        self.values: dict[tuple[str, str], int] = {}
        self.dimension_values: dict[str, set[str]] = {}
        self.value_dimension: dict[int, int] = {}
        for dim in ConditionDimension.objects.filter(
            organization_id=organization_id
        ).prefetch_related("values"):
            for name in {_norm(dim.slug), _norm(dim.name)}:
                self.dimensions[name] = dim
                self.dimension_values.setdefault(name, set())
            for value in dim.values.all():
                self.value_dimension[value.pk] = dim.pk
                for dname in {_norm(dim.slug), _norm(dim.name)}:
                    self.dimension_values[dname].add(value.slug)
                    for vname in {_norm(value.slug), _norm(value.label)}:
                        self.values[(dname, vname)] = value.pk

    def value_id(self, dimension: str, value: str) -> int | None:
        return self.values.get((_norm(dimension), _norm(value)))

    def dimension(self, name: str) -> ConditionDimension | None:
        return self.dimensions.get(_norm(name))


def condition_lookup(*, organization: Organization | int) -> ConditionLookup:
    org_id = organization if isinstance(organization, int) else organization.pk
    return ConditionLookup(org_id)


@transaction.atomic
def deployment_profile_set(*, deployment: Deployment, shares: dict[int, float]) -> None:
    """Replace a deployment's surveyed condition profile ({value id: share}).

    Raises ConditionError when a dimension's shares do not sum to 1 (±0.01).
    """
    values = {
        v.pk: v
        for v in ConditionValue.objects.filter(
            pk__in=shares, dimension__organization_id=deployment.organization_id
        ).select_related("dimension")
    }
    missing = set(shares) - set(values)
    if missing:
        raise ConditionError(f"unknown condition value ids: {sorted(missing)}")
    totals: dict[str, float] = {}
    for value_id, share in shares.items():
        if not 0 <= share <= 1:
            raise ConditionError(f"share for {values[value_id]} must be within 0..1, got {share}")
        totals[values[value_id].dimension.name] = (
            totals.get(values[value_id].dimension.name, 0) + share
        )
    bad = {dim: total for dim, total in totals.items() if abs(total - 1) > 0.01}
    if bad:
        detail = ", ".join(f"{dim} sums to {total:.3f}" for dim, total in sorted(bad.items()))
        raise ConditionError(f"each dimension's shares must sum to 1: {detail}")
    ConditionShare.objects.filter(deployment=deployment).delete()
    ConditionShare.objects.bulk_create(
        [ConditionShare(deployment=deployment, value_id=v, share=s) for v, s in shares.items()]
    )
