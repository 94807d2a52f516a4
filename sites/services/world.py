"""Embodiments (with action dimensions and cameras), sites (with access windows) and deployments."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from django.apps import apps
from django.db import transaction

from accounts.models import Organization
from accounts.services import audit_record
from sites.models import (
    AccessWindow,
    ActionDimension,
    Camera,
    ConditionValue,
    Deployment,
    Embodiment,
    Site,
)
from sites.services.conditions import deployment_profile_set
from sites.services.writes import (
    LinkRefused,
    RigInUse,
    Row,
    children_sync,
    customer_kept,
    fields_set,
    jsonable,
    links_check,
    refuse_if_used,
)


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
    dims = children_sync(
        model=ActionDimension, parent={"embodiment": embodiment}, rows=action_dimensions
    )
    cams = children_sync(model=Camera, parent={"embodiment": embodiment}, rows=cameras)
    audit_record(
        organization=organization,
        actor=actor,
        verb="embodiment.create",
        obj=embodiment,
        changes={"fields": jsonable(fields), "action_dimensions": dims, "cameras": cams},
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
        changes["action_dimensions"] = children_sync(
            model=ActionDimension,
            parent={"embodiment": embodiment},
            rows=action_dimensions,
            on_remove=_refuse_rig_change(embodiment, "action dimension", "action_dimensions"),
        )
    if cameras is not None:
        changes["cameras"] = children_sync(
            model=Camera,
            parent={"embodiment": embodiment},
            rows=cameras,
            on_remove=_refuse_rig_change(embodiment, "camera", "cameras"),
        )
    changes["fields"] = fields_set(embodiment, fields)
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


def _refuse_rig_change(
    embodiment: Embodiment, noun: str, field: str
) -> Callable[[list[str]], None]:
    def users(names: list[str]) -> str:
        in_use = _rig_users(embodiment)
        if not in_use:
            return ""
        return f"{'they are' if len(names) > 1 else 'it is'} named by {in_use} made with this embodiment"

    return refuse_if_used(
        noun=noun,
        owner=f"embodiment {embodiment.name}",
        users=users,
        advice="create a new embodiment for the new rig",
        error=RigInUse,
        field=field,
    )


@transaction.atomic
def site_create(
    *,
    organization: Organization,
    actor: Any,
    fields: Row,
    access_windows: Sequence[Row] = (),
    presents: Sequence[ConditionValue] = (),
) -> Site:
    """Create a site with its weekly access windows and the condition values it presents.

    Raises LinkRefused for a customer or condition value of another organization,
    DuplicateChild for two access windows starting together.
    """
    links_check(
        organization=organization,
        links={"customer": fields.get("customer"), "presents": list(presents)},
    )
    site = Site.objects.create(organization=organization, **fields)
    windows = children_sync(
        model=AccessWindow, parent={"site": site}, rows=access_windows, key=_window_key
    )
    site.presents.set(presents)
    audit_record(
        organization=organization,
        actor=actor,
        verb="site.create",
        obj=site,
        changes={
            "fields": jsonable(fields),
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
    the presented condition values replaced. Audited.

    Raises LinkRefused for a customer or condition value of another organization, or a
    customer other than the one the site's deployments serve; DuplicateChild as
    :func:`site_create`.
    """
    site = Site.objects.select_for_update().get(pk=site.pk)
    links_check(
        organization=site.organization_id,
        links={"customer": fields.get("customer"), "presents": list(presents or [])},
    )
    customer_kept(instance=site, fields=fields)
    customer = fields.get("customer")
    if customer is not None:
        others = site.deployments.exclude(customer=customer).select_related("customer")
        other = others.first()
        if other is not None:
            raise LinkRefused(
                f"Deployment '{other}' at this site serves customer {other.customer}; a site "
                f"of customer {customer} can hold only that customer's deployments.",
                field="customer",
            )
    changes: dict[str, Any] = {"fields": fields_set(site, fields)}
    if access_windows is not None:
        changes["access_windows"] = children_sync(
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

    Raises ConditionError (see :func:`deployment_profile_set`); LinkRefused when its site,
    embodiment, task or customer is another organization's, or the site another customer's.
    """
    _deployment_links_check(organization=organization, fields=fields, deployment=None)
    deployment = Deployment.objects.create(organization=organization, **fields)
    if condition_profile is not None:
        deployment_profile_set(deployment=deployment, shares=condition_profile)
    audit_record(
        organization=organization,
        actor=actor,
        verb="deployment.create",
        obj=deployment,
        changes={"fields": jsonable(fields), "condition_profile": jsonable(condition_profile)},
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

    Raises ConditionError (see :func:`deployment_profile_set`); LinkRefused as
    :func:`deployment_create`.
    """
    deployment = Deployment.objects.select_for_update().get(pk=deployment.pk)
    _deployment_links_check(
        organization=deployment.organization_id, fields=fields, deployment=deployment
    )
    changes: dict[str, Any] = {"fields": fields_set(deployment, fields)}
    if condition_profile is not None:
        deployment_profile_set(deployment=deployment, shares=condition_profile)
        changes["condition_profile"] = jsonable(condition_profile)
    audit_record(
        organization=deployment.organization_id,
        actor=actor,
        verb="deployment.update",
        obj=deployment,
        changes=changes,
    )
    return deployment


def _deployment_links_check(
    *, organization: Organization | int, fields: Row, deployment: Deployment | None
) -> None:
    """A deployment's site, embodiment, task and customer are its organization's, and its
    site, when a customer owns it, is the deployment's customer's."""
    links_check(
        organization=organization,
        links={name: fields.get(name) for name in ("customer", "site", "embodiment", "task")},
    )
    if deployment is not None:
        customer_kept(instance=deployment, fields=fields)
    site = fields.get("site", deployment.site if deployment else None)
    customer = fields.get("customer", deployment.customer if deployment else None)
    if site is not None and customer is not None and site.customer_id not in (None, customer.pk):
        raise LinkRefused(
            f"The site '{site}' belongs to customer {site.customer}, not {customer}: a "
            "deployment links objects of one customer only.",
            field="site",
        )
