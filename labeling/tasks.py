"""Celery tasks of the labeling app: thin wrappers around services."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="labeling.tasks.inventory_import")
def inventory_import(*, job_id: str) -> None:
    from labeling.services import inventory_import_run

    inventory_import_run(job_id=job_id)


@shared_task(name="labeling.tasks.inventory_uploads_purge")
def inventory_uploads_purge() -> int:
    from labeling.services import inventory_uploads_purge as purge

    return purge()


@shared_task(name="labeling.tasks.recording_validate", acks_late=True)
def recording_validate(*, job_id: str) -> None:
    from labeling.recording_services import recording_validate_run

    recording_validate_run(job_id=job_id)


@shared_task(name="labeling.tasks.dataset_export")
def dataset_export(*, job_id: str) -> None:
    from labeling.exports.services import dataset_export_run

    dataset_export_run(job_id=job_id)


@shared_task(name="labeling.tasks.recording_convert", acks_late=True)
def recording_convert(*, job_id: str) -> None:
    from labeling.playback import recording_convert_run

    recording_convert_run(job_id=job_id)


@shared_task(name="labeling.tasks.recording_uploads_purge")
def recording_uploads_purge() -> int:
    from labeling.recording_services import recording_uploads_purge as purge

    return purge()
