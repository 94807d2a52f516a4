"""A deployment's production events imported from a file on its page, as a job."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import Sum

from accounts.models import Job
from sites.models import ProductionLog

CSV = (
    b"event_id,occurred_at,outcome,lighting\n"
    b"c-1,2026-11-30T08:00:00Z,success,dim\n"
    b"c-2,2026-11-30T08:01:00Z,failure,dim\n"
)


def _upload(client, deployment, content=CSV, name="fleet.csv"):
    return client.post(
        f"/planner/deployments/{deployment.pk}/production/",
        {"file": SimpleUploadedFile(name, content)},
    )


def test_a_manager_imports_a_file_and_sees_what_it_stored(
    world_a, client_for, django_capture_on_commit_callbacks
):
    client = client_for(world_a.manager)
    logs = ProductionLog.objects.filter(deployment=world_a.deployment)
    before = logs.aggregate(n=Sum("cycles"))["n"] or 0

    with django_capture_on_commit_callbacks(execute=True):
        response = _upload(client, world_a.deployment)
    page = client.get(f"/planner/deployments/{world_a.deployment.pk}/production/")

    assert response.status_code == 302
    job = Job.objects.get(kind="production_import")
    assert job.status == Job.Status.SUCCEEDED, (job.message, job.errors)
    assert job.result["cycles"] == 2
    assert (logs.aggregate(n=Sum("cycles"))["n"] or 0) - before == 2
    assert "2 cycles and 0 interventions stored" in page.content.decode()


def test_a_refused_file_says_row_and_column_on_the_page(
    world_a, client_for, django_capture_on_commit_callbacks
):
    client = client_for(world_a.manager)
    bad = CSV + b"c-3,2026-11-30T08:02:00Z,success,foggy\n"

    with django_capture_on_commit_callbacks(execute=True):
        _upload(client, world_a.deployment, bad)
    page = client.get(f"/planner/deployments/{world_a.deployment.pk}/production/").content.decode()

    assert Job.objects.get(kind="production_import").status == Job.Status.FAILED
    assert "fleet.csv row 4" in page and "foggy" in page


def test_another_organization_cannot_import_into_a_deployment(world_a, world_b, client_for):
    response = _upload(client_for(world_b.manager), world_a.deployment)

    assert response.status_code == 404
    assert not Job.objects.filter(kind="production_import").exists()


def test_a_viewer_cannot_open_the_import_page(world_a, client_for):
    response = client_for(world_a.viewer).get(
        f"/planner/deployments/{world_a.deployment.pk}/production/"
    )

    assert response.status_code == 403


def test_an_uploaded_events_file_is_kept_while_its_import_is_queued(world_a, client_for):
    import os
    from datetime import timedelta
    from pathlib import Path

    from django.utils import timezone

    from labeling.services import inventory_uploads_purge

    _upload(client_for(world_a.manager), world_a.deployment)  # queued: not run (no on_commit)
    job = Job.objects.get(kind="production_import")
    path = Path(job.task_kwargs["path"])
    three_days_ago = (timezone.now() - timedelta(days=3)).timestamp()
    os.utime(path.parent, (three_days_ago, three_days_ago))

    inventory_uploads_purge()

    assert job.status == Job.Status.QUEUED
    assert path.is_file()
