"""Helpers the import tests share: run an import through its job, count what it could write."""

from __future__ import annotations

from labeling.models import Dataset, Episode
from labeling.services import inventory_import_run, inventory_import_start
from sites.models import ActionDimension, Camera, ConditionSet, ConditionValue, Embodiment, Task


def run(world, path, name="Manifest", **options):
    """Import ``path`` into dataset ``name`` through the service and its job, inline."""
    record = inventory_import_start(
        organization=world.operator, dataset_name=name, path=path, enqueue=False, **options
    )
    inventory_import_run(job_id=str(record.job_id))
    record.refresh_from_db()
    record.job.refresh_from_db()
    return record


def snapshot():
    """Row counts of everything an import may create (a failed import leaves them as they were)."""
    models = (
        Episode,
        Dataset,
        ConditionValue,
        ConditionSet,
        Task,
        Embodiment,
        ActionDimension,
        Camera,
    )
    return {m.__name__: m.objects.count() for m in models}
