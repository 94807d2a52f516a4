"""Celery tasks of the labeling app: thin wrappers around services."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="labeling.tasks.inventory_import")
def inventory_import(*, job_id: str) -> None:
    from labeling.services import inventory_import_run

    inventory_import_run(job_id=job_id)
