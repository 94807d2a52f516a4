"""Interventions become data: an intervention's recording, uploaded as field recordings are,
is one episode of its deployment's production dataset, validated, labelled and exported like
a field capture; replays make nothing twice; a URI-only record is at least listed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.db import connection

from labeling.capture.synthetic import CameraPlan, RecordingPlan, write_recording
from labeling.exports.services import dataset_export_write
from labeling.labels.services import annotation_submit, label_job_create, label_next
from labeling.models import Dataset, Episode, Recording
from labeling.production import failure_record_episode_ensure, production_episodes_sync
from sites.models import FailureRecord
from tests.labeling.player_support import JOINTS, small_cameras


def _intervention_recording(folder: Path, *, seed: int = 0) -> Path:
    """One second of the world's robot (front camera 96x64 at 30 fps, joints at 50 Hz, its
    control rate): a recording that passes its capture validation."""
    path = folder / f"intervention-{seed}.mcap"
    write_recording(
        path,
        RecordingPlan(
            duration_s=1.0,
            joints=JOINTS,
            cameras=[CameraPlan("front", width=96, height=64, fps=30)],
            state_hz=50,
            action_hz=50,
            seed=seed,
        ),
    )
    return path


def _start(client, record_id: int, data: bytes, *, name: str = "intervention.mcap"):
    return client.post(
        f"/api/failure-records/{record_id}/recordings/",
        {
            "filename": name,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "kind": "episode",
        },
        content_type="application/json",
    )


def _put(client, upload_id: str, data: bytes, start: int, end: int):
    return client.put(
        f"/api/recording-uploads/{upload_id}/",
        data[start:end],
        content_type="application/octet-stream",
        HTTP_CONTENT_RANGE=f"bytes {start}-{end - 1}/{len(data)}",
    )


@pytest.fixture
def intervention(world_a, tmp_path):
    """The world's failure record as the fleet sent it (an event id, the harness stepped in)
    and the robot's recording of it."""
    small_cameras(world_a.embodiment)
    FailureRecord.objects.filter(pk=world_a.failure_record.pk).update(
        external_id="evt-0042", intervened_by="harness", policy="pol-v3"
    )
    world_a.failure_record.refresh_from_db()
    return world_a, world_a.failure_record, _intervention_recording(tmp_path).read_bytes()


@pytest.fixture
def uploaded(intervention, client_for, django_capture_on_commit_callbacks):
    """The recording uploaded by the field member in two chunks (validated as it is stored)."""
    world, record, data = intervention
    client = client_for(world.field)
    with django_capture_on_commit_callbacks(execute=True):
        started = _start(client, record.pk, data)
    upload_id = started.json()["id"]
    half = len(data) // 2
    with django_capture_on_commit_callbacks(execute=True):
        first = _put(client, upload_id, data, 0, half)
    with django_capture_on_commit_callbacks(execute=True):
        last = _put(client, upload_id, data, half, len(data))
    return world, record, data, (started, first, last)


def test_an_uploaded_intervention_is_one_validated_episode_of_the_production_dataset(uploaded):
    world, record, _, (started, first, last) = uploaded

    episode = Episode.objects.get(failure_record=record)

    assert (started.status_code, first.status_code, last.status_code) == (201, 200, 201)
    assert first.json()["offset"] > 0
    dataset = Dataset.objects.get(deployment=world.deployment)
    assert dataset.source == Dataset.Source.PRODUCTION
    assert dataset.embodiment == world.deployment.embodiment
    assert dataset.name == f"{world.deployment.name} — production"
    assert Episode.objects.filter(dataset=dataset).count() == 1
    assert episode.dataset == dataset
    assert episode.key == "evt-0042"
    assert episode.outcome == "failure"
    assert episode.failure_mode_id == record.failure_mode_id
    assert episode.condition_set_id == record.condition_set_id
    assert episode.task_id == world.deployment.task_id
    assert episode.provenance == "production"
    assert episode.extra["intervened_by"] == "harness"
    recording = Recording.objects.get(episode=episode)
    assert last.json()["recording"]["id"] == recording.pk
    assert recording.status == "passed"
    assert (episode.sync_status, episode.validated) == ("synced", True)
    assert episode.extra["capture"] == {
        "passed": True,
        "failed_checks": [],
        "recording": recording.pk,
    }
    record.refresh_from_db()
    assert record.recording_ref == str(recording.pk)


def test_the_production_episode_is_labelled_in_the_queue_and_exported(uploaded, tmp_path):
    world, record, _, _ = uploaded
    dataset = Dataset.objects.get(deployment=world.deployment)
    episode = Episode.objects.get(failure_record=record)
    job = label_job_create(dataset=dataset, actor=world.manager, overlap_share=0, gold_share=0)

    assignment = label_next(annotator=world.annotator, job=job)
    assert assignment is not None and assignment.episode_id == episode.pk
    annotation_submit(
        assignment=assignment,
        actor=world.annotator,
        value_ids=list(record.condition_set.value_ids),
        outcome="failure",
        failure_mode_id=record.failure_mode_id,
    )
    summary = dataset_export_write(
        dataset=dataset, format="lerobot-v3", outdir=tmp_path / "v3"
    ).as_dict()

    episode.refresh_from_db()
    assert episode.label_status == "accepted"
    root = tmp_path / "v3"
    info = json.loads((root / "meta/info.json").read_text())
    assert info["total_episodes"] == 1
    assert info["fieldcraft"]["metadata_only"] is False
    assert summary["rows"] == 1
    assert summary["frames"] > 0
    (row,) = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert row["fieldcraft.key"] == "evt-0042"
    assert row["fieldcraft.outcome"] == "failure"
    assert list(root.glob("videos/observation.images.front/*/*.mp4"))


def test_replaying_the_upload_makes_no_second_episode(
    uploaded, client_for, django_capture_on_commit_callbacks
):
    world, record, data, (started, _, _) = uploaded
    client = client_for(world.field)
    episode = Episode.objects.get(failure_record=record)

    with django_capture_on_commit_callbacks(execute=True):
        again = _start(client, record.pk, data)
        last_chunk_again = _put(client, started.json()["id"], data, len(data) // 2, len(data))

    assert again.status_code == 200
    assert again.json()["recording"]["episode"] == episode.pk
    assert last_chunk_again.status_code == 201
    assert Episode.objects.filter(failure_record=record).count() == 1
    assert Episode.objects.filter(dataset__deployment=world.deployment).count() == 1
    assert Recording.objects.filter(episode=episode).count() == 1
    listed = client.get(f"/api/failure-records/{record.pk}/recordings/").json()
    assert [r["id"] for r in listed] == [again.json()["recording"]["id"]]


def test_another_organizations_record_is_404_and_nothing_is_stored(
    intervention, world_b, client_for
):
    _, record, data = intervention

    answers = [_start(client_for(u), record.pk, data) for u in (world_b.manager, world_b.field)]

    assert [a.status_code for a in answers] == [404, 404]
    assert not Dataset.objects.filter(source=Dataset.Source.PRODUCTION).exists()
    assert not Recording.objects.filter(sha256=hashlib.sha256(data).hexdigest()).exists()


def test_a_customer_viewer_cannot_upload_and_an_annotator_neither(intervention, client_for):
    world, record, data = intervention

    viewer = _start(client_for(world.viewer), record.pk, data)
    annotator = _start(client_for(world.annotator), record.pk, data)

    assert (viewer.status_code, annotator.status_code) == (403, 403)
    assert not Episode.objects.filter(failure_record=record).exists()


def test_a_manager_may_upload_too(intervention, client_for):
    world, record, data = intervention

    started = _start(client_for(world.manager), record.pk, data)

    assert started.status_code == 201
    assert started.json()["offset"] == 0


def test_a_record_whose_recording_is_at_a_uri_gets_a_listed_episode_without_media(
    world_a, client_for
):
    uri = "s3://fleet-recordings/dep-qzalpha/evt-7.mcap"
    record = FailureRecord.objects.create(
        organization=world_a.operator,
        deployment=world_a.deployment,
        failure_mode=world_a.failure_mode,
        condition_set=world_a.failure_record.condition_set,
        occurred_at="2026-10-02T08:30:00Z",
        external_id="evt-7",
        recording_ref=uri,
    )

    made = production_episodes_sync(deployment=world_a.deployment)
    again = production_episodes_sync(deployment=world_a.deployment)

    assert (made, again) == (1, 0)
    episode = failure_record_episode_ensure(record=record)
    assert episode is not None
    assert (episode.storage_uri, episode.key, episode.validated) == (uri, "evt-7", False)
    assert not Recording.objects.filter(episode=episode).exists()
    dataset = Dataset.objects.get(deployment=world_a.deployment)
    listed = client_for(world_a.manager).get(f"/api/episodes/?dataset={dataset.pk}").json()
    assert [(e["key"], e["storage_uri"], e["failure_record"]) for e in listed["results"]] == [
        ("evt-7", uri, record.pk)
    ]
    # The world's own record (no recording reference) got no episode.
    assert not Episode.objects.filter(failure_record=world_a.failure_record).exists()


def test_a_retracted_intervention_leaves_its_episode_unlinked(world_a):
    record = FailureRecord.objects.create(
        organization=world_a.operator,
        deployment=world_a.deployment,
        failure_mode=world_a.failure_mode,
        occurred_at="2026-10-02T08:30:00Z",
        external_id="evt-8",
        recording_ref="https://fleet.example/evt-8.mcap",
    )
    episode = failure_record_episode_ensure(record=record)
    assert episode is not None

    # As the production ingest retracts: in SQL, where Django's SET_NULL does not run.
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM sites_failurerecord WHERE id = %s", [record.pk])

    episode.refresh_from_db()
    assert episode.failure_record_id is None
    assert episode.storage_uri == "https://fleet.example/evt-8.mcap"
