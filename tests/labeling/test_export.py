"""Exports: only synchronised, accepted episodes; LeRobot v3.0/v2.1 and manifests; the round
trip through our own importer; the command; the Celery job and its download."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from labeling.exports.services import ExportError, dataset_export_start, dataset_export_write
from labeling.labels.selectors import export_eligibility
from labeling.models import Dataset, DatasetExport, Episode
from labeling.services import inventory_import_run, inventory_import_start
from sites.models import ConditionValue
from tests.factories import captured_dataset

FIELDS = [
    "episode_count",
    "frames",
    "duration_s",
    "outcome",
    "failure_mode_id",
    "site_id",
    "task_id",
    "embodiment_id",
    "storage_uri",
    "recorded_at",
    "sync_status",
    "label_status",
    "features",
]


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


@pytest.fixture
def labelled(media, world_a):
    """A capture dataset in every state an episode can be in."""
    dataset, episodes = captured_dataset(world_a, 9, label_status="accepted")
    high = ConditionValue.objects.get(
        dimension__slug="clutter", slug="high", dimension__organization=world_a.operator
    )
    from sites.services import condition_set_intern

    Episode.objects.filter(pk=episodes[1].pk).update(
        outcome="failure",
        failure_mode=world_a.failure_mode,
        condition_set=condition_set_intern(
            organization=world_a.operator, value_ids=[world_a.values[0].pk, high.pk]
        ),
        recorded_at=None,
        features={},
    )
    states = {
        3: {"sync_status": "unknown"},
        4: {"sync_status": "desynced"},
        5: {"label_status": "rejected"},
        6: {"label_status": "unlabelled"},
        7: {"label_status": "labelled", "sync_status": "incomplete"},
        8: {"episode_count": 5},  # a summary row: manifests only
    }
    for i, change in states.items():
        Episode.objects.filter(pk=episodes[i].pk).update(**change)
    return dataset, [Episode.objects.get(pk=e.pk) for e in episodes]


def test_eligibility_counts_what_exports_and_every_reason_for_what_does_not(labelled):
    dataset, _ = labelled

    lerobot = export_eligibility(dataset_id=dataset.pk, single_episodes_only=True)
    manifest = export_eligibility(dataset_id=dataset.pk)

    assert (lerobot.rows, manifest.rows, manifest.episodes) == (3, 4, 8)
    reasons = {r.reason: r.rows for r in lerobot.reasons}
    assert reasons == {
        "sync_unknown": 1,
        "desynced": 1,
        "incomplete": 1,
        "unlabelled": 1,
        "in_review": 1,
        "rejected": 1,
        "summary_row": 1,
    }
    assert lerobot.excluded_rows == 6
    assert "summary_row" not in {r.reason for r in manifest.reasons}


def test_unsynchronised_or_rejected_episodes_never_export(labelled, tmp_path):
    dataset, episodes = labelled

    for fmt in ("lerobot-v3", "lerobot-v2.1", "parquet", "csv"):
        out = tmp_path / fmt
        dataset_export_write(dataset=dataset, format=fmt, outdir=out)
        keys = _exported_keys(out, fmt)
        assert keys <= {
            e.key for e in episodes if e.sync_status == "synced" and e.label_status == "accepted"
        }
        assert episodes[3].key not in keys and episodes[5].key not in keys
        assert (episodes[8].key in keys) == (fmt in ("parquet", "csv"))


def _exported_keys(out: Path, fmt: str) -> set[str]:
    if fmt == "lerobot-v3":
        table = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet")
        return set(table.column("fieldcraft.key").to_pylist())
    if fmt == "lerobot-v2.1":
        lines = (out / "meta/episodes.jsonl").read_text().splitlines()
        return {json.loads(line)["fieldcraft.key"] for line in lines}
    name = next(out.iterdir())
    if fmt == "parquet":
        return set(pq.read_table(name).column("key").to_pylist())
    import csv

    return {row["key"] for row in csv.DictReader(name.open())}


def test_lerobot_v3_layout_has_info_tasks_and_episodes_with_our_fields(labelled, tmp_path, world_a):
    dataset, episodes = labelled

    summary = dataset_export_write(dataset=dataset, format="lerobot-v3", outdir=tmp_path / "v3")

    info = json.loads((tmp_path / "v3/meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (
        3,
        summary.frames,
        1,
    )
    assert info["robot_type"] == world_a.embodiment.slug
    assert info["features"]["action"]["names"] == ["j1", "gripper"]
    assert info["features"]["observation.images.front"]["shape"] == [480, 640, 3]
    assert info["fps"] == 30.0
    assert info["fieldcraft"]["excluded"]["excluded_rows"] == 6
    tasks = pq.read_table(tmp_path / "v3/meta/tasks.parquet").to_pylist()
    assert tasks == [{"task_index": 0, "task": world_a.task.name}]
    rows = pq.read_table(tmp_path / "v3/meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [r["episode_index"] for r in rows] == [0, 1, 2]
    second = rows[1]
    assert second["fieldcraft.key"] == episodes[1].key
    assert second["length"] == episodes[1].frames
    assert second["tasks"] == [world_a.task.name]
    assert second["fieldcraft.outcome"] == "failure"
    assert second["fieldcraft.failure_mode"] == "grasp"
    assert second["fieldcraft.conditions.lighting"] == "bright"
    assert second["fieldcraft.conditions.clutter"] == "high"
    assert second["fieldcraft.site"] == world_a.site.slug
    assert rows[0]["dataset_to_index"] == rows[1]["dataset_from_index"] == episodes[0].frames


def test_lerobot_v21_layout_has_info_episodes_and_tasks_jsonl(labelled, tmp_path, world_a):
    dataset, episodes = labelled

    dataset_export_write(dataset=dataset, format="lerobot-v2.1", outdir=tmp_path / "v21")

    info = json.loads((tmp_path / "v21/meta/info.json").read_text())
    assert info["codebase_version"] == "v2.1"
    assert info["total_episodes"] == 3
    assert "{episode_chunk" in info["data_path"]
    tasks = [
        json.loads(line) for line in (tmp_path / "v21/meta/tasks.jsonl").read_text().splitlines()
    ]
    assert tasks == [{"task_index": 0, "task": world_a.task.name}]
    first = json.loads((tmp_path / "v21/meta/episodes.jsonl").read_text().splitlines()[0])
    assert first["episode_index"] == 0 and first["length"] == episodes[0].frames
    assert first["fieldcraft.conditions.lighting"] == "dim"
    assert first["fieldcraft.features.light_lux"] == 80.0


def _import(world, path, name, fmt=None):
    record = inventory_import_start(
        organization=world.operator, dataset_name=name, path=path, format=fmt, enqueue=False
    )
    inventory_import_run(job_id=str(record.job_id))
    record.refresh_from_db()
    record.job.refresh_from_db()
    assert record.job.status == "succeeded", (record.job.message, record.job.errors)
    return Dataset.objects.get(pk=record.summary["dataset"]["id"]), record.summary


def _state(dataset, fields=FIELDS):
    return {
        e.key: {
            **{f: getattr(e, f) for f in fields},
            "values": sorted(e.condition_set.value_ids) if e.condition_set else [],
        }
        for e in Episode.objects.filter(dataset=dataset).select_related("condition_set")
    }


@pytest.mark.parametrize("fmt", ["lerobot-v3", "lerobot-v2.1"])
def test_a_lerobot_export_imports_back_with_every_field_we_own(labelled, tmp_path, world_a, fmt):
    dataset, episodes = labelled
    out = tmp_path / fmt
    dataset_export_write(dataset=dataset, format=fmt, outdir=out)
    exported = {
        e.key
        for e in episodes
        if e.sync_status == "synced" and e.label_status == "accepted" and e.episode_count == 1
    }

    again, summary = _import(world_a, out, f"Re-import {fmt}")

    assert summary["warnings"] == []
    assert summary["ignored_columns"] == []
    original = {k: v for k, v in _state(dataset).items() if k in exported}
    assert _state(again) == original
    assert again.fps == dataset.fps


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_manifest_export_imports_back_with_every_field_it_carries(
    labelled, tmp_path, world_a, fmt
):
    dataset, episodes = labelled
    out = tmp_path / fmt
    dataset_export_write(dataset=dataset, format=fmt, outdir=out)
    exported = {
        e.key for e in episodes if e.sync_status == "synced" and e.label_status == "accepted"
    }

    again, _ = _import(world_a, next(out.iterdir()), f"Re-import {fmt}", fmt=fmt)

    fields = [f for f in FIELDS if f != "features"]  # manifests carry no features
    original = {k: v for k, v in _state(dataset, fields).items() if k in exported}
    assert _state(again, fields) == original


def test_an_export_of_an_export_is_the_same_export(labelled, tmp_path, world_a):
    dataset, _ = labelled
    dataset_export_write(dataset=dataset, format="lerobot-v3", outdir=tmp_path / "one")
    again, _ = _import(world_a, tmp_path / "one", "Round trip")

    dataset_export_write(dataset=again, format="lerobot-v3", outdir=tmp_path / "two")

    first = pq.read_table(tmp_path / "one/meta/episodes/chunk-000/file-000.parquet").to_pylist()
    second = pq.read_table(tmp_path / "two/meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert first == second


def test_nothing_to_export_says_why(media, world_a, tmp_path):
    dataset, _ = captured_dataset(world_a, 2, sync_status="unknown")

    with pytest.raises(ExportError, match="synchronisation not validated: 2"):
        dataset_export_write(dataset=dataset, format="csv", outdir=tmp_path / "x")


def test_the_command_writes_the_export_and_lists_what_was_left_out(labelled, tmp_path):
    dataset, _ = labelled
    out = io.StringIO()

    call_command(
        "export_dataset",
        str(tmp_path / "cmd"),
        "--dataset",
        dataset.name,
        "--format",
        "lerobot-v3",
        "--organization",
        dataset.organization.slug,
        stdout=out,
    )

    text = out.getvalue()
    assert "Exported 3 episodes" in text
    assert "out of sync: 1 episode row" in text
    assert (tmp_path / "cmd/meta/info.json").is_file()


def test_the_command_fails_when_nothing_qualifies(media, world_a, tmp_path):
    dataset, _ = captured_dataset(world_a, 1, label_status="rejected")

    with pytest.raises(CommandError, match="rejected in review: 1"):
        call_command(
            "export_dataset",
            str(tmp_path / "none"),
            "--dataset",
            dataset.slug,
            "--format",
            "csv",
            "--organization",
            dataset.organization.slug,
        )


def test_an_export_job_writes_a_zip_that_downloads(
    labelled, world_a, client_for, django_capture_on_commit_callbacks
):
    dataset, _ = labelled

    with django_capture_on_commit_callbacks(execute=True):
        export = dataset_export_start(dataset=dataset, format="lerobot-v3", actor=world_a.manager)

    export.refresh_from_db()
    export.job.refresh_from_db()
    assert export.job.status == "succeeded", export.job.message
    assert export.summary["rows"] == 3
    response = client_for(world_a.manager).get(f"/api/exports/{export.pk}/download/")
    assert response.status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    names = set(archive.namelist())
    root = f"{dataset.slug}-lerobot-v3"
    assert {
        f"{root}/meta/info.json",
        f"{root}/meta/tasks.parquet",
        f"{root}/meta/episodes/chunk-000/file-000.parquet",
    } <= names
    page = client_for(world_a.manager).get(f"/label/exports/{export.pk}/download/")
    assert page.status_code == 200


def test_an_export_with_nothing_to_export_fails_with_the_reasons(
    media, world_a, django_capture_on_commit_callbacks
):
    dataset, _ = captured_dataset(world_a, 2, sync_status="desynced", label_status="accepted")

    with django_capture_on_commit_callbacks(execute=True):
        export = dataset_export_start(dataset=dataset, format="csv", actor=world_a.manager)

    export.job.refresh_from_db()
    assert export.job.status == "failed"
    assert "out of sync: 2" in export.job.message
    export.refresh_from_db()
    assert export.summary["excluded"]["excluded_rows"] == 2


def test_the_export_api_starts_a_job_and_reports_status(
    labelled, world_a, world_b, client_for, django_capture_on_commit_callbacks
):
    dataset, _ = labelled
    manager = client_for(world_a.manager)

    with django_capture_on_commit_callbacks(execute=True):
        response = manager.post(
            "/api/exports/",
            {"dataset": dataset.pk, "format": "parquet"},
            content_type="application/json",
        )

    assert response.status_code == 202
    body = manager.get(f"/api/exports/{response.json()['id']}/").json()
    assert body["status"] == "succeeded"
    assert body["download"].endswith(f"/api/exports/{body['id']}/download/")
    other = client_for(world_b.manager)
    assert other.get(f"/api/exports/{body['id']}/").status_code == 404
    assert other.get(f"/api/exports/{body['id']}/download/").status_code == 404
    refused = other.post(
        "/api/exports/", {"dataset": dataset.pk, "format": "csv"}, content_type="application/json"
    )
    assert refused.status_code == 400
    assert DatasetExport.objects.filter(dataset=dataset).count() == 1


def test_an_unfinished_export_does_not_download(media, world_a, client_for):
    from accounts.models import Job

    export = DatasetExport.objects.create(
        organization=world_a.operator,
        dataset=world_a.dataset,
        format="csv",
        job=Job.objects.create(organization=world_a.operator, kind="export", status="running"),
    )

    assert client_for(world_a.manager).get(f"/api/exports/{export.pk}/download/").status_code == 409
    page = client_for(world_a.manager).get(f"/label/exports/{export.pk}/download/")
    assert page.status_code == 302


def test_a_manifest_naming_an_unknown_failure_mode_or_status_is_refused(media, world_a, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(
        "key,frames,outcome,failure_mode,label_status\n"
        "a,10,failure,grasp,accepted\n"
        "b,10,failure,teleported,accepted\n"
        "c,10,success,,maybe\n"
    )
    record = inventory_import_start(
        organization=world_a.operator, dataset_name="Bad", path=path, enqueue=False
    )

    inventory_import_run(job_id=str(record.job_id))

    record.job.refresh_from_db()
    messages = " ".join(e["message"] for e in record.job.errors)
    assert record.job.status == "failed"
    assert "unknown failure mode 'teleported'" in messages
    assert (
        "expected one of unlabelled, in_progress, labelled, accepted, rejected, got 'maybe'"
        in messages
    )
    assert not Dataset.objects.filter(slug="bad").exists()


@pytest.mark.parametrize("fmt", ["lerobot-v3", "lerobot-v2.1"])
def test_lerobot_exports_stream_in_batches_and_index_tasks_in_order(
    labelled, tmp_path, world_a, monkeypatch, fmt
):
    import labeling.exports.services as exports
    from sites.models import Task

    dataset, episodes = labelled
    other = Task.objects.create(organization=world_a.operator, slug="place", name="Place it")
    Episode.objects.filter(pk=episodes[1].pk).update(task=other)
    monkeypatch.setattr(exports, "CHUNK", 2)

    summary = dataset_export_write(dataset=dataset, format=fmt, outdir=tmp_path / fmt)

    assert summary.rows == 3 and summary.tasks == 2
    if fmt == "lerobot-v3":
        rows = pq.read_table(
            tmp_path / fmt / "meta/episodes/chunk-000/file-000.parquet"
        ).to_pylist()
        tasks = [
            r["task"] for r in pq.read_table(tmp_path / fmt / "meta/tasks.parquet").to_pylist()
        ]
    else:
        rows = [
            json.loads(line)
            for line in (tmp_path / fmt / "meta/episodes.jsonl").read_text().splitlines()
        ]
        tasks = [
            json.loads(line)["task"]
            for line in (tmp_path / fmt / "meta/tasks.jsonl").read_text().splitlines()
        ]
    assert [r["episode_index"] for r in rows] == [0, 1, 2]
    assert tasks == [world_a.task.name, "Place it"]
    assert [r["tasks"] for r in rows] == [[world_a.task.name], ["Place it"], [world_a.task.name]]
