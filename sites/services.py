"""Writes for the world model."""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from django.apps import apps
from django.db import connection, models, transaction

from accounts.models import Organization
from accounts.services import audit_record
from sites.models import (
    AccessWindow,
    ActionDimension,
    Camera,
    ConditionDimension,
    ConditionSet,
    ConditionShare,
    ConditionValue,
    Deployment,
    Embodiment,
    Site,
)


class ConditionError(ValueError):
    """Condition values that do not fit the taxonomy (names what was wrong)."""


def condition_sets_intern(
    *, organization: Organization | int, combinations: Iterable[Sequence[int]]
) -> dict[tuple[int, ...], int]:
    """Return the ConditionSet id for each combination of value ids, creating missing ones.

    Combinations are normalised (sorted, de-duplicated). Safe under concurrency: inserts use
    ON CONFLICT DO NOTHING and the ids are read back afterwards.
    """
    org_id = organization if isinstance(organization, int) else organization.pk
    keys = {tuple(ConditionSet.key_for(c)) for c in combinations}
    if not keys:
        return {}
    # Array literals in one text, split and cast in SQL: combinations have different
    # lengths, so they cannot travel as one rectangular int[][] parameter, and one text
    # is far cheaper to send than a list of thousands.
    literals = ";".join("{" + ",".join(map(str, key)) + "}" for key in keys)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO sites_conditionset (organization_id, value_ids) "
            "SELECT %s, k::int[] FROM unnest(string_to_array(%s, ';')) AS k "
            "ON CONFLICT (organization_id, value_ids) DO NOTHING",
            [org_id, literals],
        )
        cursor.execute(
            "SELECT id, value_ids::text FROM sites_conditionset WHERE organization_id = %s "
            "AND value_ids IN (SELECT k::int[] FROM unnest(string_to_array(%s, ';')) AS k)",
            [org_id, literals],
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
        v.pk: v for v in ConditionValue.objects.filter(pk__in=shares).select_related("dimension")
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


# --- Embodiments, sites and deployments ---------------------------------------------------------


class DuplicateChild(ValueError):
    """Two rows given for one list (cameras, access windows ...) share a name or key."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class RigInUse(ValueError):
    """A change would remove a camera or action dimension that stored work still names."""


Row = Mapping[str, Any]


@transaction.atomic
def embodiment_create(
    *,
    organization: Organization,
    actor: Any,
    fields: Row,
    action_dimensions: Sequence[Row] = (),
    cameras: Sequence[Row] = (),
) -> Embodiment:
    """Create an embodiment with its action dimensions and camera rig, audited.

    Raises DuplicateChild when two cameras or two action dimensions share a name.
    """
    embodiment = Embodiment.objects.create(organization=organization, **fields)
    dims = _children_sync(
        model=ActionDimension, parent={"embodiment": embodiment}, rows=action_dimensions
    )
    cams = _children_sync(model=Camera, parent={"embodiment": embodiment}, rows=cameras)
    audit_record(
        organization=organization,
        actor=actor,
        verb="embodiment.create",
        obj=embodiment,
        changes={"fields": _jsonable(fields), "action_dimensions": dims, "cameras": cams},
    )
    return embodiment


@transaction.atomic
def embodiment_update(
    *,
    embodiment: Embodiment,
    actor: Any,
    fields: Row,
    action_dimensions: Sequence[Row] | None = None,
    cameras: Sequence[Row] | None = None,
) -> Embodiment:
    """Change an embodiment; cameras and action dimensions, when given, are matched by name:
    kept ones are updated in place, new ones added, missing ones removed. Audited.

    Raises RigInUse, changing nothing, when a camera or action dimension to remove is named
    by recordings captured with this embodiment or by LeRobot exports of its datasets;
    DuplicateChild when two of them share a name.
    """
    embodiment = Embodiment.objects.select_for_update().get(pk=embodiment.pk)
    changes: dict[str, Any] = {}
    if action_dimensions is not None:
        changes["action_dimensions"] = _children_sync(
            model=ActionDimension,
            parent={"embodiment": embodiment},
            rows=action_dimensions,
            on_remove=_refuse_if_used(embodiment, "action dimension"),
        )
    if cameras is not None:
        changes["cameras"] = _children_sync(
            model=Camera,
            parent={"embodiment": embodiment},
            rows=cameras,
            on_remove=_refuse_if_used(embodiment, "camera"),
        )
    changes["fields"] = _fields_set(embodiment, fields)
    audit_record(
        organization=embodiment.organization_id,
        actor=actor,
        verb="embodiment.update",
        obj=embodiment,
        changes=changes,
    )
    return embodiment


def _rig_users(embodiment: Embodiment) -> str:
    """What stored work names this embodiment's cameras and action dimensions ('' if none).

    Recordings map their streams to camera and joint names, and a LeRobot export's files
    are laid out by them (CSV and Parquet manifests name neither). Those models live in
    ``labeling``, above ``sites``, so they are looked up by name rather than imported.
    """
    recordings = (
        apps.get_model("labeling", "Recording").objects.filter(embodiment=embodiment).count()
    )
    exports = (
        apps.get_model("labeling", "DatasetExport")
        .objects.filter(dataset__embodiment=embodiment, format__startswith="lerobot")
        .count()
    )
    parts = [
        f"{n} {noun}{'' if n == 1 else 's'}"
        for n, noun in ((recordings, "recording"), (exports, "LeRobot export"))
        if n
    ]
    return " and ".join(parts)


def _refuse_if_used(embodiment: Embodiment, noun: str) -> Callable[[list[str]], None]:
    def check(names: list[str]) -> None:
        in_use = _rig_users(embodiment)
        if not in_use:
            return
        many = len(names) > 1
        raise RigInUse(
            f"Cannot remove {noun}{'s' if many else ''} {', '.join(repr(n) for n in names)} "
            f"from embodiment {embodiment.name}: {'they are' if many else 'it is'} named by "
            f"{in_use} made with this embodiment. Keep {'them' if many else 'it'} (other "
            "fields may change), or create a new embodiment for the new rig."
        )

    return check


@transaction.atomic
def site_create(
    *,
    organization: Organization,
    actor: Any,
    fields: Row,
    access_windows: Sequence[Row] = (),
    presents: Sequence[ConditionValue] = (),
) -> Site:
    """Create a site with its weekly access windows and the condition values it presents."""
    site = Site.objects.create(organization=organization, **fields)
    windows = _children_sync(
        model=AccessWindow, parent={"site": site}, rows=access_windows, key=_window_key
    )
    site.presents.set(presents)
    audit_record(
        organization=organization,
        actor=actor,
        verb="site.create",
        obj=site,
        changes={
            "fields": _jsonable(fields),
            "access_windows": windows,
            "presents": sorted(v.pk for v in presents),
        },
    )
    return site


@transaction.atomic
def site_update(
    *,
    site: Site,
    actor: Any,
    fields: Row,
    access_windows: Sequence[Row] | None = None,
    presents: Sequence[ConditionValue] | None = None,
) -> Site:
    """Change a site; access windows, when given, are matched by weekday and start time and
    the presented condition values replaced. Audited."""
    site = Site.objects.select_for_update().get(pk=site.pk)
    changes: dict[str, Any] = {"fields": _fields_set(site, fields)}
    if access_windows is not None:
        changes["access_windows"] = _children_sync(
            model=AccessWindow, parent={"site": site}, rows=access_windows, key=_window_key
        )
    if presents is not None:
        site.presents.set(presents)
        changes["presents"] = sorted(v.pk for v in presents)
    audit_record(
        organization=site.organization_id,
        actor=actor,
        verb="site.update",
        obj=site,
        changes=changes,
    )
    return site


def _window_key(row: Row) -> Hashable:
    return (row["weekday"], str(row["start_time"])[:8])


@transaction.atomic
def deployment_create(
    *,
    organization: Organization,
    actor: Any,
    fields: Row,
    condition_profile: dict[int, float] | None = None,
) -> Deployment:
    """Create a deployment and, when given, its surveyed condition profile ({value id: share}).

    Raises ConditionError (see :func:`deployment_profile_set`).
    """
    deployment = Deployment.objects.create(organization=organization, **fields)
    if condition_profile is not None:
        deployment_profile_set(deployment=deployment, shares=condition_profile)
    audit_record(
        organization=organization,
        actor=actor,
        verb="deployment.create",
        obj=deployment,
        changes={"fields": _jsonable(fields), "condition_profile": _jsonable(condition_profile)},
    )
    return deployment


@transaction.atomic
def deployment_update(
    *,
    deployment: Deployment,
    actor: Any,
    fields: Row,
    condition_profile: dict[int, float] | None = None,
) -> Deployment:
    """Change a deployment and, when given, replace its condition profile. Audited.

    Raises ConditionError (see :func:`deployment_profile_set`).
    """
    deployment = Deployment.objects.select_for_update().get(pk=deployment.pk)
    changes: dict[str, Any] = {"fields": _fields_set(deployment, fields)}
    if condition_profile is not None:
        deployment_profile_set(deployment=deployment, shares=condition_profile)
        changes["condition_profile"] = _jsonable(condition_profile)
    audit_record(
        organization=deployment.organization_id,
        actor=actor,
        verb="deployment.update",
        obj=deployment,
        changes=changes,
    )
    return deployment


def _fields_set(instance: models.Model, fields: Row) -> dict[str, Any]:
    """Set ``fields`` on ``instance`` and save it; return {field: [old, new]} of what changed."""
    changed: dict[str, Any] = {}
    for name, value in fields.items():
        old = getattr(instance, name)
        if old != value:
            changed[name] = _jsonable([getattr(old, "pk", old), getattr(value, "pk", value)])
            setattr(instance, name, value)
    if changed:
        instance.save(update_fields=list(changed))
    return changed


def _children_sync(
    *,
    model: type[models.Model],
    parent: dict[str, models.Model],
    rows: Sequence[Row],
    key: Callable[[Row], Hashable] = lambda row: row["name"],
    on_remove: Callable[[list[str]], None] | None = None,
) -> dict[str, list[str]]:
    """Make ``parent``'s children of ``model`` match ``rows``, matched by ``key``: update kept
    ones in place, add new ones, remove missing ones (after ``on_remove`` had its say).

    Returns {"added", "updated", "removed"} lists of the children's names. Raises
    DuplicateChild when two rows share a key.
    """
    wanted: dict[Hashable, Row] = {}
    for row in rows:
        if key(row) in wanted:
            (link,) = parent
            raise DuplicateChild(
                f"Two {model._meta.verbose_name_plural} are both '{_label(key(row))}'; "
                "each needs its own.",
                field=str(getattr(model._meta.get_field(link).remote_field, "related_name", link)),
            )
        wanted[key(row)] = row
    manager = model._default_manager
    existing = {key(vars(child)): child for child in manager.filter(**parent)}
    gone = [k for k in existing if k not in wanted]
    if gone and on_remove is not None:
        on_remove([_label(k) for k in gone])
    manager.filter(pk__in=[existing[k].pk for k in gone]).delete()
    updated = [_label(k) for k in existing if k in wanted and _fields_set(existing[k], wanted[k])]
    added = [k for k in wanted if k not in existing]
    manager.bulk_create([model(**parent, **wanted[k]) for k in added])
    return {
        "added": [_label(k) for k in added],
        "updated": updated,
        "removed": [_label(k) for k in gone],
    }


def _label(key: Hashable) -> str:
    return " ".join(str(part) for part in key) if isinstance(key, tuple) else str(key)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda v: getattr(v, "pk", None) or str(v)))
