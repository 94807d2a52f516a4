"""What every audited write of the world shares: refusals, link checks, child lists."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from django.db import models

from accounts.models import Organization
from accounts.services import jsonable


class DuplicateChild(ValueError):
    """Two rows given for one list (cameras, access windows ...) share a name or key."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class InUse(ValueError):
    """A change would remove a child row (a camera, a condition value ...) that stored work
    still names; ``field`` is the list it was to be removed from."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class RigInUse(InUse):
    """A change would remove a camera or action dimension that stored work still names."""


class ValueInUse(InUse):
    """A change would remove a condition value that stored work still names."""


class LinkRefused(ValueError):
    """A write would link an object of another organization or customer, or make a loop;
    ``field`` names the field to fix."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


def links_check(*, organization: Organization | int, links: Mapping[str, Any]) -> None:
    """Refuse links to objects another organization owns.

    ``links`` maps a field name to an object, a list of objects or None. A customer
    organization must be one this operator serves; any other object must be owned by the
    organization (through its queryset's ``operator_path``). Raises LinkRefused naming the
    first field that links elsewhere.
    """
    org_id = organization if isinstance(organization, int) else organization.pk
    for field, value in links.items():
        objects = [o for o in (value if isinstance(value, list | tuple) else [value]) if o]
        if not objects:
            continue
        if isinstance(objects[0], Organization):
            foreign = [
                o
                for o in objects
                if o.kind != Organization.Kind.CUSTOMER or o.operator_id != org_id
            ]
        else:
            manager = type(objects[0])._default_manager
            path = getattr(manager.get_queryset(), "operator_path", "organization")
            ours = set(
                manager.filter(pk__in=[o.pk for o in objects], **{path: org_id}).values_list(
                    "pk", flat=True
                )
            )
            foreign = [o for o in objects if o.pk not in ours]
        if foreign:
            raise LinkRefused(
                f"The {foreign[0]._meta.verbose_name} '{foreign[0]}' belongs to another "
                "organization; choose one of yours.",
                field=field,
            )


Row = Mapping[str, Any]


def refuse_if_used(
    *,
    noun: str,
    owner: str,
    users: Callable[[list[str]], str],
    advice: str,
    error: type[InUse],
    field: str,
) -> Callable[[list[str]], None]:
    """An ``on_remove`` check for :func:`children_sync`: raise ``error`` when ``users``
    says (in words, '' when nothing does) what stored work names the children to remove."""

    def check(names: list[str]) -> None:
        in_use = users(names)
        if not in_use:
            return
        many = len(names) > 1
        raise error(
            f"Cannot remove {noun}{'s' if many else ''} {', '.join(repr(n) for n in names)} "
            f"from {owner}: {in_use}. Keep {'them' if many else 'it'} (other fields may "
            f"change), or {advice}.",
            field=field,
        )

    return check


def fields_set(instance: models.Model, fields: Row) -> dict[str, Any]:
    """Set ``fields`` on ``instance`` and save it; return {field: [old, new]} of what changed."""
    changed: dict[str, Any] = {}
    for name, value in fields.items():
        old = getattr(instance, name)
        if old != value:
            changed[name] = jsonable([getattr(old, "pk", old), getattr(value, "pk", value)])
            setattr(instance, name, value)
    if changed:
        instance.save(update_fields=list(changed))
    return changed


def children_sync(
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
    updated = [_label(k) for k in existing if k in wanted and fields_set(existing[k], wanted[k])]
    added = [k for k in wanted if k not in existing]
    manager.bulk_create([model(**parent, **wanted[k]) for k in added])
    return {
        "added": [_label(k) for k in added],
        "updated": updated,
        "removed": [_label(k) for k in gone],
    }


def _label(key: Hashable) -> str:
    return " ".join(str(part) for part in key) if isinstance(key, tuple) else str(key)


def customer_kept(*, instance: Any, fields: Row) -> None:
    """Refuse moving a site or deployment that serves a customer to another customer (the
    rule the API's ``same_customer_check`` applies, for every caller): its data, dashboards
    and share links belong to that customer. Raises LinkRefused on ``customer``."""
    if "customer" not in fields or instance.customer_id is None:
        return
    new = fields["customer"]
    if new is None or new.pk != instance.customer_id:
        raise LinkRefused(
            f"'{instance}' serves customer {instance.customer}; it cannot move to another "
            "customer. Create a new one for the other customer.",
            field="customer",
        )
