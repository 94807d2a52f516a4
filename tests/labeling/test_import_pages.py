"""Inventory pages: imports with progress, an import's problems, datasets with breakdowns."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Job
from labeling.models import Dataset, Episode, InventoryImport


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def make_import(world, *, status="succeeded", dataset=None, **job_fields):
    return InventoryImport.objects.create(
        organization=world.operator,
        dataset_name=dataset.name if dataset else "Pending",
        dataset=dataset,
        source_path="/x/m.csv",
        source_name="m.csv",
        format="csv",
        job=Job.objects.create(
            organization=world.operator, kind="import", status=status, **job_fields
        ),
    )


def test_managers_have_an_inventory_link_and_field_members_do_not(world_a, client_for):
    manager = client_for(world_a.manager).get("/planner/").content.decode()
    field = client_for(world_a.field).get("/field/").content.decode()

    assert 'href="/inventory/"' in manager
    assert 'href="/inventory/"' not in field


def test_inventory_page_lists_imports_with_status(world_a, client_for):
    response = client_for(world_a.manager).get("/inventory/")

    body = response.content.decode()
    assert response.status_code == 200
    assert "manifest-qzalpha.csv" in body
    assert "Succeeded" in body
    assert 'hx-trigger="every 2s"' not in body  # nothing running: no polling


def test_a_running_import_shows_progress_and_the_list_polls(world_a, client_for):
    make_import(world_a, status="running", progress_done=250_000, progress_total=1_000_000)

    body = client_for(world_a.manager).get("/inventory/").content.decode()

    assert 'hx-get="/inventory/imports/rows/" hx-trigger="every 2s"' in body
    assert 'data-state="running" max="1000000" value="250000"' in body
    assert "250,000 / 1,000,000 rows" in body


def test_uploading_through_the_form_queues_and_runs_the_import(
    world_a, client_for, django_capture_on_commit_callbacks
):
    client = client_for(world_a.manager)
    upload = SimpleUploadedFile("sheet.csv", b"key,count,lighting\na,3,dim\nb,2,bright\n")

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/inventory/", {"file": upload, "dataset": "From the form"})
    page = client.get(response["Location"])

    record = InventoryImport.objects.get(dataset_name="From the form")
    assert response.status_code == 302
    assert response["Location"] == f"/inventory/imports/{record.pk}/"
    assert record.job.status == "succeeded"
    assert "Dim 3" in page.content.decode()


def test_the_form_shows_a_malformed_mapping_without_starting(world_a, client_for):
    upload = SimpleUploadedFile("m.csv", b"key\na\n")

    response = client_for(world_a.manager).post(
        "/inventory/", {"file": upload, "dataset": "X", "mapping": "key"}
    )

    assert response.status_code == 200
    assert "is not of the form A=B" in response.content.decode()
    assert not InventoryImport.objects.filter(dataset_name="X").exists()


def test_a_failed_import_page_lists_its_problems(world_a, client_for):
    record = make_import(
        world_a,
        status="failed",
        errors=[
            {
                "file": "combined_info.csv",
                "row": 16,
                "column": "episodes",
                "message": "expected a whole number of episodes, got '=64*9'",
                "text": "…",
            }
        ],
    )

    body = client_for(world_a.manager).get(f"/inventory/imports/{record.pk}/").content.decode()

    assert "Problems" in body
    assert "combined_info.csv" in body
    assert '<td class="num">16</td>' in body
    assert "expected a whole number of episodes, got &#x27;=64*9&#x27;" in body
    assert "Nothing was written" in body


def test_the_progress_partial_polls_while_running_and_reloads_when_done(world_a, client_for):
    record = make_import(world_a, status="running", progress_done=10, progress_total=100)
    client = client_for(world_a.manager)

    running = client.get(f"/inventory/imports/{record.pk}/progress/")
    Job.objects.filter(pk=record.job_id).update(status="succeeded")
    done = client.get(f"/inventory/imports/{record.pk}/progress/")

    assert 'hx-trigger="every 2s"' in running.content.decode()
    assert "HX-Refresh" not in running
    assert done["HX-Refresh"] == "true"


def test_cancel_from_the_page_cancels_the_job(world_a, client_for):
    record = make_import(world_a, status="queued")

    response = client_for(world_a.manager).post(f"/inventory/imports/{record.pk}/cancel/")

    record.job.refresh_from_db()
    assert response.status_code == 302
    assert record.job.status == "cancelled"


def test_dataset_detail_shows_episodes_per_condition_value_and_per_site(world_a, client_for):
    bright, dim = world_a.values
    from sites.services import condition_set_intern

    bright_set = condition_set_intern(organization=world_a.operator, value_ids=[bright.pk])
    Episode.objects.filter(pk=world_a.episode.pk).update(episode_count=4, site=world_a.site)
    Episode.objects.create(
        organization=world_a.operator,
        dataset=world_a.dataset,
        key="1",
        condition_set=bright_set,
        episode_count=6,
    )

    body = (
        client_for(world_a.manager)
        .get(f"/inventory/datasets/{world_a.dataset.pk}/")
        .content.decode()
    )

    assert "<h3>Lighting</h3>" in body
    assert '<td>Bright</td><td class="num">6</td>' in body
    assert '<td>Dim</td><td class="num">4</td>' in body
    assert world_a.site.name in body
    assert "(no site)" in body


def test_dataset_list_shows_episode_totals(world_a, client_for):
    Episode.objects.filter(pk=world_a.episode.pk).update(episode_count=1500)

    body = client_for(world_a.manager).get("/inventory/datasets/").content.decode()

    assert world_a.dataset.name in body
    assert "1,500" in body


@pytest.mark.parametrize(
    "url",
    [
        "/inventory/imports/{import_pk}/",
        "/inventory/imports/{import_pk}/progress/",
        "/inventory/datasets/{dataset_pk}/",
    ],
)
def test_another_organizations_manager_gets_404_and_a_viewer_403(world_a, world_b, client_for, url):
    url = url.format(import_pk=world_a.inventory_import.pk, dataset_pk=world_a.dataset.pk)

    other = client_for(world_b.manager).get(url)
    viewer = client_for(world_a.viewer).get(url)

    assert other.status_code == 404
    assert viewer.status_code == 403


def test_another_organizations_manager_cannot_cancel(world_a, world_b, client_for):
    response = client_for(world_b.manager).post(
        f"/inventory/imports/{world_a.inventory_import.pk}/cancel/"
    )

    assert response.status_code == 404


def _grow(world, n):
    for i in range(n):
        dataset = Dataset.objects.create(
            organization=world.operator, slug=f"grow-{i}", name=f"Grow {i}"
        )
        Episode.objects.create(organization=world.operator, dataset=dataset, key="0")
        make_import(world, dataset=dataset, status="running", progress_done=1, progress_total=2)
        make_import(world, status="failed", errors=[{"text": "x"}])


@pytest.mark.parametrize(
    "url",
    [
        "/inventory/",
        "/inventory/imports/rows/",
        "/inventory/datasets/",
        "/inventory/datasets/{dataset_pk}/",
    ],
)
def test_inventory_pages_query_count_does_not_grow_with_rows(world_a, client_for, url):
    url = url.format(dataset_pk=world_a.dataset.pk)
    client = client_for(world_a.manager)
    client.get(url)
    with CaptureQueriesContext(connection) as small:
        assert client.get(url).status_code == 200

    _grow(world_a, 6)
    Episode.objects.bulk_create(
        [
            Episode(organization=world_a.operator, dataset=world_a.dataset, key=f"more-{i}")
            for i in range(50)
        ]
    )
    with CaptureQueriesContext(connection) as large:
        assert client.get(url).status_code == 200

    assert len(large) <= len(small), f"{url}: {len(small)} queries grew to {len(large)}"
