"""The imports, datasets and episodes API: uploads, progress, problems, scoping, query counts."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Job
from labeling.models import Episode, InventoryImport

DATA = Path(__file__).resolve().parents[1] / "data"
V30 = DATA / "lerobot" / "v3.0_record-test"


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def zipped(root: Path, prefix: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in root.rglob("*"):
            if f.is_file():
                zf.write(f, f"{prefix}/{f.relative_to(root)}")
    return buf.getvalue()


def upload(client, name, content, **fields):
    return client.post("/api/imports/", {"file": SimpleUploadedFile(name, content), **fields})


def test_manager_uploads_a_lerobot_zip_and_gets_202_then_a_finished_import(
    world_a, client_for, django_capture_on_commit_callbacks
):
    client = client_for(world_a.manager)

    with django_capture_on_commit_callbacks(execute=True):
        response = upload(
            client, "record-test.zip", zipped(V30, "record-test"), dataset="Record test"
        )
    detail = client.get(f"/api/imports/{response.json()['id']}/").json()

    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    assert detail["status"] == "succeeded", detail["message"]
    assert detail["format"] == "lerobot"
    assert (detail["summary"]["episodes"], detail["summary"]["frames"]) == (4, 1492)
    assert detail["progress_done"] == detail["progress_total"] == 4
    assert Episode.objects.filter(dataset__name="Record test").count() == 4


def test_manager_uploads_a_csv_with_a_json_mapping(
    world_a, client_for, django_capture_on_commit_callbacks
):
    client = client_for(world_a.manager)
    csv = b'Name,# Episodes,Light\nA,"1,500",dim\nB,20,Bright\n'

    with django_capture_on_commit_callbacks(execute=True):
        response = upload(
            client,
            "sheet.csv",
            csv,
            dataset="Sheet",
            mapping=json.dumps({"Name": "key", "# Episodes": "count", "Light": "lighting"}),
            sets=json.dumps({}),
        )
    detail = client.get(f"/api/imports/{response.json()['id']}/").json()

    assert detail["status"] == "succeeded", detail["message"]
    assert detail["summary"]["episodes"] == 1520
    assert detail["summary"]["mapping"] == {
        "Name": "key",
        "# Episodes": "episode_count",
        "Light": "condition:Lighting",
    }


def test_repeated_map_and_set_fields_work_like_the_command_line(
    world_a, client_for, django_capture_on_commit_callbacks
):
    client = client_for(world_a.manager)

    with django_capture_on_commit_callbacks(execute=True):
        response = upload(
            client,
            "m.csv",
            b"id,n\nx,2\n",
            dataset="Repeated",
            map=["id=key", "n=count"],
            set=["lighting=dim"],
            site=world_a.site.slug,
        )
    detail = client.get(f"/api/imports/{response.json()['id']}/").json()

    assert detail["status"] == "succeeded", detail["message"]
    episode = Episode.objects.get(dataset__name="Repeated")
    assert (episode.key, episode.episode_count, episode.site) == ("x", 2, world_a.site)
    assert episode.condition_set.value_ids == [world_a.values[1].pk]


def test_a_bad_file_ends_failed_with_problems_naming_file_row_and_column(
    world_a, client_for, django_capture_on_commit_callbacks
):
    client = client_for(world_a.manager)
    before = Episode.objects.count()

    with django_capture_on_commit_callbacks(execute=True):
        response = upload(client, "bad.csv", b"key,count\na,1\nb,many\n", dataset="Bad")
    detail = client.get(f"/api/imports/{response.json()['id']}/").json()

    assert detail["status"] == "failed"
    assert detail["problems"] == [
        {
            "file": "bad.csv",
            "row": 3,
            "column": "count",
            "message": "expected a whole number of episodes, got 'many'",
            "text": "bad.csv row 3, column 'count': expected a whole number of episodes, got 'many'",
        }
    ]
    assert detail["problems_total"] == 1
    assert Episode.objects.count() == before


def test_a_malformed_request_is_a_400_with_the_problem(world_a, client_for, settings):
    client = client_for(world_a.manager)

    response = upload(client, "m.csv", b"key\na\n", dataset="X", map=["no-equals-sign"])

    assert response.status_code == 400
    assert "is not of the form A=B" in response.json()["detail"]
    assert not list(Path(settings.MEDIA_ROOT, "imports").iterdir())


def test_an_upload_without_a_file_is_a_400(world_a, client_for):
    response = client_for(world_a.manager).post("/api/imports/", {"dataset": "X"})

    assert response.status_code == 400
    assert "file" in response.json()


def test_uploads_are_stored_under_media_imports(world_a, client_for, settings):
    upload(client_for(world_a.manager), "../../etc/passwd.csv", b"key\na\n", dataset="X")

    record = InventoryImport.objects.get(dataset_name="X")
    stored = Path(record.source_path)
    assert stored.is_file()
    assert Path(settings.MEDIA_ROOT, "imports") in stored.parents
    assert stored.name == "passwd.csv"


def test_uploads_are_purged_once_their_import_has_ended_long_enough_ago(
    world_a, client_for, settings
):
    import os
    from datetime import timedelta

    from django.utils import timezone

    from labeling.services import inventory_uploads_purge

    client = client_for(world_a.manager)
    for name in ("done-long-ago", "done-yesterday", "queued"):
        upload(client, f"{name}.csv", b"key\na\n", dataset=name)
    records = {r.dataset_name: r for r in InventoryImport.objects.select_related("job")}
    now = timezone.now()
    Job.objects.filter(pk=records["done-long-ago"].job_id).update(
        status=Job.Status.SUCCEEDED, finished_at=now - timedelta(days=8)
    )
    Job.objects.filter(pk=records["done-yesterday"].job_id).update(
        status=Job.Status.FAILED, finished_at=now - timedelta(days=1)
    )
    root = Path(settings.MEDIA_ROOT, "imports")
    stray_old, stray_new = root / "refused-old", root / "refused-new"
    for stray in (stray_old, stray_new):
        stray.mkdir()
        (stray / "x.csv").write_text("key\n")
    two_days_ago = (now - timedelta(days=2)).timestamp()
    os.utime(stray_old, (two_days_ago, two_days_ago))

    assert inventory_uploads_purge(now=now) == 2

    assert not Path(records["done-long-ago"].source_path).exists()
    assert Path(records["done-yesterday"].source_path).is_file()  # kept to look into
    assert Path(records["queued"].source_path).is_file()  # still to run
    assert not stray_old.exists()
    assert stray_new.exists()  # may be a request being accepted right now
    assert inventory_uploads_purge(now=now) == 0


def test_cancel_stops_a_queued_import(world_a, client_for):
    client = client_for(world_a.manager)
    created = upload(client, "m.csv", b"key\na\n", dataset="X").json()  # not run: still queued

    response = client.post(f"/api/imports/{created['id']}/cancel/")

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert not Episode.objects.filter(dataset__name="X").exists()


def test_a_viewer_cannot_upload(world_a, client_for):
    response = upload(client_for(world_a.viewer), "m.csv", b"key\na\n", dataset="X")

    assert response.status_code == 403


def test_another_organizations_manager_gets_404_on_the_import_and_the_dataset(
    world_a, world_b, client_for
):
    other = client_for(world_b.manager)

    responses = [
        other.get(f"/api/imports/{world_a.inventory_import.pk}/"),
        other.post(f"/api/imports/{world_a.inventory_import.pk}/cancel/"),
        other.get(f"/api/datasets/{world_a.dataset.pk}/"),
        other.get(f"/api/episodes/{world_a.episode.pk}/"),
    ]

    assert [r.status_code for r in responses] == [404, 404, 404, 404]
    assert other.get(f"/api/episodes/?dataset={world_a.dataset.pk}").json()["results"] == []


def test_a_customer_viewer_sees_no_imports_or_datasets(world_a, client_for):
    viewer = client_for(world_a.viewer)

    assert viewer.get(f"/api/imports/{world_a.inventory_import.pk}/").status_code == 403
    assert viewer.get(f"/api/datasets/{world_a.dataset.pk}/").status_code == 403
    assert viewer.get("/api/imports/").status_code == 403


def test_dataset_detail_has_totals_and_episodes_per_condition_and_site(world_a, client_for):
    Episode.objects.filter(pk=world_a.episode.pk).update(site=world_a.site, episode_count=3)

    detail = client_for(world_a.manager).get(f"/api/datasets/{world_a.dataset.pk}/").json()

    assert (detail["rows"], detail["episodes"], detail["frames"]) == (1, 3, 100)
    assert detail["conditions"] == [
        {"dimension": "Lighting", "values": {"Dim": 3}, "not_recorded": 0}
    ]
    assert detail["sites"] == [
        {"site": world_a.site.pk, "name": world_a.site.name, "episodes": 3, "frames": 100}
    ]


def test_episodes_of_a_dataset_are_cursor_paginated(world_a, client_for):
    Episode.objects.bulk_create(
        [
            Episode(organization=world_a.operator, dataset=world_a.dataset, key=f"k{i}")
            for i in range(5)
        ]
    )
    client = client_for(world_a.manager)

    first = client.get(f"/api/episodes/?dataset={world_a.dataset.pk}&page_size=4").json()
    second = client.get(first["next"]).json()

    assert len(first["results"]) == 4
    assert len(second["results"]) == 2
    assert "count" not in first
    assert first["results"][0]["condition_values"] == [] or isinstance(
        first["results"][0]["condition_values"], list
    )


def _grow(world, n):
    from labeling.models import Dataset

    for i in range(n):
        dataset = Dataset.objects.create(
            organization=world.operator, slug=f"grow-{i}", name=f"Grow {i}"
        )
        Episode.objects.create(
            organization=world.operator,
            dataset=dataset,
            key="0",
            condition_set=world.episode.condition_set,
        )
        InventoryImport.objects.create(
            organization=world.operator,
            dataset_name=dataset.name,
            dataset=dataset,
            source_path="/x.csv",
            source_name="x.csv",
            format="csv",
            job=Job.objects.create(
                organization=world.operator, kind="import", status="failed", errors=[{"text": "x"}]
            ),
        )


@pytest.mark.parametrize("url", ["/api/imports/", "/api/datasets/", "/api/episodes/"])
def test_list_query_count_does_not_grow_with_rows(world_a, client_for, url):
    client = client_for(world_a.manager)
    client.get(url)
    with CaptureQueriesContext(connection) as small:
        assert client.get(url).status_code == 200

    _grow(world_a, 6)
    with CaptureQueriesContext(connection) as large:
        response = client.get(url)

    assert response.status_code == 200
    assert len(large) <= len(small), f"{url}: {len(small)} queries grew to {len(large)}"
