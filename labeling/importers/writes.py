"""The write phase's creations: condition values, tasks, the dataset, a LeRobot embodiment.

Called inside the import's transaction (see :mod:`labeling.importers.runner`); a failure
later in that transaction undoes all of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import Max, Q
from django.utils.text import slugify

from labeling.importers import lerobot
from labeling.importers.errors import ImportFailed
from labeling.importers.mapping import MappedColumn, describe_mapping
from labeling.importers.resolve import Resolved
from labeling.models import Dataset
from sites.models import ActionDimension, Camera, ConditionValue, Embodiment, Task


def create_value(dimension_id: int, label: str) -> int:
    slug = slugify(label)[:64] or "value"
    existing = ConditionValue.objects.filter(dimension_id=dimension_id, slug=slug).first()
    if existing is not None:
        return existing.pk
    order = (
        ConditionValue.objects.filter(dimension_id=dimension_id).aggregate(m=Max("order"))["m"] or 0
    ) + 1
    return ConditionValue.objects.create(
        dimension_id=dimension_id, slug=slug, label=label[:100], order=order
    ).pk


def create_values(resolved: Resolved) -> list[str]:
    labels: list[str] = []
    for vkey, (dim_id, label) in resolved.new_values.items():
        resolved.refs[vkey] = create_value(dim_id, label)
        labels.append(label)
    return labels


def create_tasks(org: int, resolved: Resolved) -> list[str]:
    names: list[str] = []
    if not resolved.new_tasks:
        return names
    taken = set(Task.objects.filter(organization_id=org).values_list("slug", flat=True))
    for vkey, name in resolved.new_tasks.items():
        base = slugify(name)[:90] or "task"
        existing = Task.objects.filter(organization_id=org, slug=base).first()
        if existing is not None:
            resolved.refs[vkey] = existing.pk
            continue
        slug = unique_slug(base, taken)
        resolved.refs[vkey] = Task.objects.create(
            organization_id=org, slug=slug, name=name[:500]
        ).pk
        names.append(name)
    return names


def unique_slug(base: str, taken: set[str]) -> str:
    slug, n = base, 2
    while slug in taken:
        slug = f"{base}-{n}"
        n += 1
    taken.add(slug)
    return slug


def dataset_for_import(
    *,
    organization_id: int,
    dataset_name: str,
    source_name: str,
    format_version: str,
    header: list[str],
    columns: list[MappedColumn],
    lerobot_dataset: lerobot.LeRobotDataset | None,
    embodiment: Embodiment | None,
) -> Dataset:
    """Get or create the imported dataset (locked for this transaction) and describe the source.

    Raises ImportFailed when the name belongs to a dataset that was not imported.
    """
    org = organization_id
    name = dataset_name.strip()[:200]
    slug = slugify(name)[:100] or "dataset"
    dataset, _ = Dataset.objects.get_or_create(
        organization_id=org, slug=slug, defaults={"name": name, "source": Dataset.Source.IMPORTED}
    )
    dataset = Dataset.objects.select_for_update().get(pk=dataset.pk)
    if dataset.source != Dataset.Source.IMPORTED:
        raise ImportFailed.one(
            source_name,
            f"dataset {dataset.name!r} holds {dataset.get_source_display().lower()} episodes; "
            "import into another dataset",
        )
    dataset.format_version = format_version[:32]
    if lerobot_dataset is not None:
        dataset.fps = lerobot_dataset.fps
        dataset.metadata = lerobot_dataset.metadata()
    else:
        dataset.metadata = {
            **(dataset.metadata or {}),
            "manifest": {
                "file": source_name,
                "columns": [h[:100] for h in header[:200]],
                "mapping": describe_mapping(columns),
            },
        }
    if embodiment is not None:
        dataset.embodiment = embodiment
    dataset.save()
    return dataset


def _mount(name: str) -> str:
    lowered = name.lower()
    for word, mount in (
        ("wrist", "wrist"),
        ("hand", "wrist"),
        ("top", "overhead"),
        ("high", "overhead"),
        ("overhead", "overhead"),
        ("head", "head"),
        ("ego", "head"),
        ("front", "front"),
        ("side", "side"),
    ):
        if word in lowered:
            return mount
    return "unknown"


def _unit(name: str) -> str:
    lowered = name.lower()
    for suffix, unit in (("_rad", "rad"), ("_deg", "deg"), (".pos", "pos"), ("_m", "m")):
        if lowered.endswith(suffix):
            return unit
    return ""


def lerobot_embodiment(
    org: int,
    ds: lerobot.LeRobotDataset,
    given: Embodiment | None,
    dataset_name: str,
    warnings: list[str],
    created: dict[str, Any],
) -> Embodiment | None:
    """The embodiment the dataset's episodes ran on: given, matched by robot_type, or created."""
    embodiment = given
    if embodiment is None and ds.robot_type:
        embodiment = (
            Embodiment.objects.filter(organization_id=org)
            .filter(Q(robot_type__iexact=ds.robot_type) | Q(slug=slugify(ds.robot_type)[:64]))
            .order_by("pk")
            .first()
        )
    if embodiment is None and not ds.robot_type:
        warnings.append(
            "info.json names no robot_type and no --embodiment was given: episodes have no embodiment"
        )
        return None
    if embodiment is not None:
        _compare_embodiment(embodiment, ds, warnings)
        return embodiment
    assert ds.robot_type is not None
    taken = set(Embodiment.objects.filter(organization_id=org).values_list("slug", flat=True))
    unknown_ranges = [n for n in ds.action_names if n not in ds.action_ranges]
    description = f"Created by importing LeRobot dataset {dataset_name!r} ({ds.version})."
    if unknown_ranges:
        description += (
            " No statistics for "
            + (", ".join(unknown_ranges[:10]) + (" …" if len(unknown_ranges) > 10 else ""))
            + ": their ranges are placeholders [-1, 1] (unknown)."
        )
    if not ds.fps:
        warnings.append(
            "no fps in info.json: the new embodiment's control rate is a placeholder 30 Hz"
        )
    embodiment = Embodiment.objects.create(
        organization_id=org,
        slug=unique_slug(slugify(ds.robot_type)[:60] or "robot", taken),
        name=ds.robot_type[:200],
        morphology="unknown",
        end_effector="unknown",
        control_rate_hz=ds.fps or 30.0,
        robot_type=ds.robot_type[:100],
        description=description,
    )
    dims: list[ActionDimension] = []
    seen: set[str] = set()
    for i, name in enumerate(ds.action_names):
        short = name[:100]
        if short in seen:
            short = f"{name[:90]}#{i}"
        seen.add(short)
        lo, hi = ds.action_ranges.get(name, (-1.0, 1.0))
        dims.append(
            ActionDimension(
                embodiment=embodiment,
                order=i,
                name=short,
                unit=_unit(name),
                min_value=lo,
                max_value=hi,
            )
        )
    ActionDimension.objects.bulk_create(dims)
    cameras = {c.name[:100]: c for c in ds.cameras}
    Camera.objects.bulk_create(
        [
            Camera(
                embodiment=embodiment,
                name=name,
                mount=_mount(name),
                width=c.width,
                height=c.height,
                fps=c.fps,
            )
            for name, c in cameras.items()
        ]
    )
    created["embodiment"] = embodiment.slug
    created["action_dimensions"] = len(dims)
    created["cameras"] = sorted(cameras)
    return embodiment


def _compare_embodiment(
    embodiment: Embodiment, ds: lerobot.LeRobotDataset, warnings: list[str]
) -> None:
    have = list(embodiment.action_dimensions.values_list("name", flat=True))
    if ds.action_names and have != ds.action_names:
        missing = [n for n in ds.action_names if n not in have]
        extra = [n for n in have if n not in ds.action_names]
        parts = []
        if missing:
            parts.append(
                "not in the embodiment: "
                + ", ".join(missing[:8])
                + (" …" if len(missing) > 8 else "")
            )
        if extra:
            parts.append(
                "not in the dataset: " + ", ".join(extra[:8]) + (" …" if len(extra) > 8 else "")
            )
        if not parts:
            parts.append("same names in another order")
        warnings.append(
            f"the dataset's {ds.action_feature} names do not match embodiment "
            f"{embodiment.slug}'s action dimensions ({'; '.join(parts)})"
        )
    cams = set(embodiment.cameras.values_list("name", flat=True))
    missing_cams = [c.name for c in ds.cameras if c.name not in cams]
    if missing_cams:
        warnings.append(
            f"cameras not in embodiment {embodiment.slug}'s rig: {', '.join(missing_cams)}"
        )


_REFERENCED = {
    "sites": "sites_site",
    "embodiments": "sites_embodiment",
    "tasks": "sites_task",
    "failure_modes": "sites_failuremode",
    "condition_sets": "sites_conditionset",
}


def lock_references(**ids: Iterable[int]) -> None:
    """Lock the rows episodes are about to reference (``FOR KEY SHARE``), once per row.

    ``labeling_episode`` carries no per-row foreign-key triggers (see the model): this is
    the check they would make, set-based. Until the import commits, nobody can delete a
    site, task, embodiment, failure mode or condition set its episodes point at; one that
    is already gone fails the import. Keywords: sites, embodiments, tasks, failure_modes,
    condition_sets.
    """
    with connection.cursor() as cur:
        for name, values in ids.items():
            wanted = sorted({int(v) for v in values if v is not None})
            if not wanted:
                continue
            cur.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {_REFERENCED[name]} "
                "WHERE id = ANY(%s) FOR KEY SHARE) t",
                [wanted],
            )
            found = cur.fetchone()[0]
            if found != len(wanted):
                raise ImportFailed.one(
                    "import",
                    f"{len(wanted) - found} of the {name.replace('_', ' ')} these episodes "
                    "reference were deleted while importing; run the import again",
                )
