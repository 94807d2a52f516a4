"""Condition dimensions with their values, and the failure-mode taxonomy."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from django.apps import apps
from django.db import transaction

from accounts.models import Organization
from accounts.services import audit_record
from sites.models import (
    ConditionDimension,
    ConditionSet,
    ConditionShare,
    ConditionValue,
    FailureMode,
)
from sites.services.writes import (
    LinkRefused,
    Row,
    ValueInUse,
    children_sync,
    fields_set,
    jsonable,
    links_check,
    refuse_if_used,
)


def _value_key(row: Row) -> Hashable:
    return row["slug"]


@transaction.atomic
def condition_dimension_create(
    *, organization: Organization, actor: Any, fields: Row, values: Sequence[Row] = ()
) -> ConditionDimension:
    """Create a condition dimension with its values, audited.

    Raises DuplicateChild when two values share a slug.
    """
    dimension = ConditionDimension.objects.create(organization=organization, **fields)
    added = children_sync(
        model=ConditionValue, parent={"dimension": dimension}, rows=values, key=_value_key
    )
    audit_record(
        organization=organization,
        actor=actor,
        verb="condition_dimension.create",
        obj=dimension,
        changes={"fields": jsonable(fields), "values": added},
    )
    return dimension


@transaction.atomic
def condition_dimension_update(
    *,
    dimension: ConditionDimension,
    actor: Any,
    fields: Row,
    values: Sequence[Row] | None = None,
    keep_unlisted: bool = False,
) -> ConditionDimension:
    """Change a condition dimension; its values, when given, are matched by slug: kept ones
    are updated in place, new ones added, and ones left out removed (or, with
    ``keep_unlisted``, kept as they are). Audited.

    Raises ValueInUse, changing nothing, when a value to remove is named by stored work
    (condition sets and so episodes, labels, deployment profiles, sites); DuplicateChild
    when two values share a slug.
    """
    dimension = ConditionDimension.objects.select_for_update().get(pk=dimension.pk)
    changes: dict[str, Any] = {}
    if values is not None:
        rows = list(values)
        if keep_unlisted:
            listed = {_value_key(row) for row in rows}
            rows += [
                {f: getattr(v, f) for f in _VALUE_FIELDS}
                for v in dimension.values.all()
                if v.slug not in listed
            ]
        changes["values"] = children_sync(
            model=ConditionValue,
            parent={"dimension": dimension},
            rows=rows,
            key=_value_key,
            on_remove=refuse_if_used(
                noun="condition value",
                owner=f"dimension {dimension.name}",
                users=_value_users(dimension),
                advice="add a new value beside it",
                error=ValueInUse,
                field="values",
            ),
        )
    changes["fields"] = fields_set(dimension, fields)
    audit_record(
        organization=dimension.organization_id,
        actor=actor,
        verb="condition_dimension.update",
        obj=dimension,
        changes=changes,
    )
    return dimension


_VALUE_FIELDS = ("slug", "label", "order", "low", "high", "stageable", "setup_instruction")


def _value_users(dimension: ConditionDimension) -> Callable[[list[str]], str]:
    """Say, per value slug, what stored work names it ('' when none does).

    Episodes, production logs, targets and evaluation results name values through their
    interned condition set; labels carry value ids of their own. Labelling lives above
    ``sites``, so its models are looked up by name.
    """
    episodes = apps.get_model("labeling", "Episode").objects
    label_models = [apps.get_model("labeling", name) for name in ("Annotation", "GoldLabel")]
    label_models.append(apps.get_model("labeling", "Review"))

    def users(slugs: list[str]) -> str:
        parts = []
        for value in dimension.values.filter(slug__in=slugs).order_by("slug"):
            contains = {"value_ids__contains": [value.pk]}
            counts = (
                (ConditionSet.objects.filter(**contains).count(), "condition set"),
                (episodes.filter(condition_set__value_ids__contains=[value.pk]).count(), "episode"),
                (sum(m.objects.filter(**contains).count() for m in label_models), "label"),
                (ConditionShare.objects.filter(value=value).count(), "deployment profile"),
                (value.sites.count(), "site"),
            )
            used = [f"{n} {noun}{'' if n == 1 else 's'}" for n, noun in counts if n]
            if used:
                listed = ", ".join(used[:-1]) + (" and " if len(used) > 1 else "") + used[-1]
                parts.append(f"'{value.slug}' is used by {listed}")
        return "; ".join(parts)

    return users


@transaction.atomic
def failure_mode_create(*, organization: Organization, actor: Any, fields: Row) -> FailureMode:
    """Create a node of the failure taxonomy, audited.

    Raises LinkRefused when its parent is another organization's.
    """
    links_check(organization=organization, links={"parent": fields.get("parent")})
    mode = FailureMode.objects.create(organization=organization, **fields)
    audit_record(
        organization=organization,
        actor=actor,
        verb="failure_mode.create",
        obj=mode,
        changes={"fields": jsonable(fields)},
    )
    return mode


@transaction.atomic
def failure_mode_update(*, failure_mode: FailureMode, actor: Any, fields: Row) -> FailureMode:
    """Change a node of the failure taxonomy, audited.

    Raises LinkRefused, changing nothing, when the new parent is another organization's, the
    mode itself or one of its descendants (the taxonomy is a tree).
    """
    mode = FailureMode.objects.select_for_update().get(pk=failure_mode.pk)
    parent = fields.get("parent")
    links_check(organization=mode.organization_id, links={"parent": parent})
    ancestor, seen = parent, set()
    while ancestor is not None and ancestor.pk not in seen:
        seen.add(ancestor.pk)
        if ancestor.pk == mode.pk:
            raise LinkRefused(
                f"Failure mode '{parent}' is '{mode}' itself or sits under it; a mode cannot "
                "be its own parent or ancestor. Choose a mode outside its branch.",
                field="parent",
            )
        ancestor = ancestor.parent
    changed = fields_set(mode, fields)
    audit_record(
        organization=mode.organization_id,
        actor=actor,
        verb="failure_mode.update",
        obj=mode,
        changes={"fields": changed},
    )
    return mode
