"""Field uploads of recordings: resumable, checksummed, stored once, validated in Celery."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from campaigns.models import CollectionTask, TaskRecording
from labeling import recording_services as recordings
from labeling.models import Episode, Recording, RecordingUpload
from sites.models import ActionDimension, Camera, Embodiment
from tests.labeling import mcap_fixtures as fx


@pytest.fixture
def rig(world_a, tmp_path, settings):
    """A collection task whose embodiment matches the recordings the fixtures write."""
    settings.MEDIA_ROOT = tmp_path / "media"
    emb = Embodiment.objects.create(
        organization=world_a.operator,
        slug="mm-1",
        name="MM-1",
        morphology="arm",
        end_effector="gripper",
        control_rate_hz=fx.SPEC["control_rate_hz"],
        calibration_threshold=fx.SPEC["calibration_threshold"],
    )
    for i, d in enumerate(fx.SPEC["action_dimensions"]):
        ActionDimension.objects.create(
            embodiment=emb,
            order=i,
            name=d["name"],
            unit=d["unit"],
            min_value=d["min"],
            max_value=d["max"],
        )
    for c in fx.SPEC["cameras"]:
        Camera.objects.create(
            embodiment=emb, name=c["name"], mount="head", width=640, height=480, fps=c["fps"]
        )
    CollectionTask.objects.filter(pk=world_a.collection_task.pk).update(embodiment=emb)
    episode = Episode.objects.create(
        organization=world_a.operator,
        dataset=world_a.round.dataset,
        key="rec-1",
        embodiment=emb,
        provenance="captured",
        validated=False,
    )
    return world_a, episode, tmp_path


def upload(client, task_id, path: Path, *, kind="episode", episode="rec-1", chunk=40_000):
    data = path.read_bytes()
    start = client.post(
        f"/api/collection-tasks/{task_id}/recordings/",
        {
            "filename": path.name,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "kind": kind,
            "episode": episode,
        },
        content_type="application/json",
    )
    if start.status_code == 200:
        return start
    upload_id = start.json()["id"]
    response = start
    for offset in range(0, len(data), chunk):
        body = data[offset : offset + chunk]
        response = client.put(
            f"/api/recording-uploads/{upload_id}/",
            body,
            content_type="application/octet-stream",
            HTTP_CONTENT_RANGE=f"bytes {offset}-{offset + len(body) - 1}/{len(data)}",
        )
    return response


def test_good_recording_uploads_in_chunks_validates_and_marks_its_episode_synced(
    rig, client_for, django_capture_on_commit_callbacks
):
    world, episode, tmp = rig
    path = fx.write_good(tmp / "good.mcap")
    client = client_for(world.field)

    with django_capture_on_commit_callbacks(execute=True):
        response = upload(client, world.collection_task.pk, path)

    assert response.status_code == 201
    recording = Recording.objects.exclude(storage_path="/nonexistent").get()
    assert recording.status == "passed"
    assert Path(recording.storage_path).read_bytes() == path.read_bytes()
    episode.refresh_from_db()
    assert (episode.sync_status, episode.validated) == ("synced", True)
    assert episode.extra["capture"]["passed"] is True
    assert TaskRecording.objects.filter(task=world.collection_task, recording=recording).exists()


def test_resending_the_same_file_is_recognised_not_stored_twice(
    rig, client_for, django_capture_on_commit_callbacks
):
    world, _, tmp = rig
    path = fx.write_good(tmp / "good.mcap")
    client = client_for(world.field)
    with django_capture_on_commit_callbacks(execute=True):
        upload(client, world.collection_task.pk, path)

    again = upload(client, world.collection_task.pk, path)

    assert again.status_code == 200
    assert again.json()["recording"]["status"] == "passed"
    assert Recording.objects.exclude(storage_path="/nonexistent").count() == 1
    assert RecordingUpload.objects.exclude(path="/nonexistent").count() == 1


def test_a_chunk_at_the_wrong_offset_gets_409_with_where_to_resume(rig, client_for):
    world, _, tmp = rig
    data = fx.write_good(tmp / "good.mcap").read_bytes()
    client = client_for(world.field)
    start = client.post(
        f"/api/collection-tasks/{world.collection_task.pk}/recordings/",
        {"filename": "good.mcap", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()},
        content_type="application/json",
    ).json()
    client.put(
        f"/api/recording-uploads/{start['id']}/",
        data[:1000],
        content_type="application/octet-stream",
        HTTP_CONTENT_RANGE=f"bytes 0-999/{len(data)}",
    )

    skipped = client.put(
        f"/api/recording-uploads/{start['id']}/",
        data[2000:3000],
        content_type="application/octet-stream",
        HTTP_CONTENT_RANGE=f"bytes 2000-2999/{len(data)}",
    )
    resume = client.get(f"/api/recording-uploads/{start['id']}/")

    assert skipped.status_code == 409
    assert skipped.json()["offset"] == 1000
    assert resume.json()["offset"] == 1000


def test_a_checksum_mismatch_is_refused_and_the_upload_reset(rig, client_for):
    world, _, tmp = rig
    data = fx.write_good(tmp / "good.mcap").read_bytes()
    client = client_for(world.field)
    start = client.post(
        f"/api/collection-tasks/{world.collection_task.pk}/recordings/",
        {"filename": "good.mcap", "size": len(data), "sha256": "0" * 64},
        content_type="application/json",
    ).json()

    done = client.put(
        f"/api/recording-uploads/{start['id']}/",
        data,
        content_type="application/octet-stream",
        HTTP_CONTENT_RANGE=f"bytes 0-{len(data) - 1}/{len(data)}",
    )

    assert done.status_code == 422
    assert "sha256" in done.json()["detail"]
    assert RecordingUpload.objects.get(pk=start["id"]).received == 0
    assert not Recording.objects.exclude(storage_path="/nonexistent").exists()


def test_a_checksum_mismatch_names_the_file_and_the_byte_range_it_covers(rig, client_for):
    world, _, tmp = rig
    data = fx.write_good(tmp / "good.mcap").read_bytes()
    client = client_for(world.field)
    start = _start(client, world, data, sha256="0" * 64)

    done = client.put(
        f"/api/recording-uploads/{start['id']}/",
        data,
        content_type="application/octet-stream",
        HTTP_CONTENT_RANGE=f"bytes 0-{len(data) - 1}/{len(data)}",
    )

    assert done.status_code == 422
    assert f"good.mcap, bytes 0-{len(data) - 1}" in done.json()["detail"]
    assert "from offset 0" in done.json()["detail"]


def _start(client, world, data, *, sha256=None):
    return client.post(
        f"/api/collection-tasks/{world.collection_task.pk}/recordings/",
        {
            "filename": "good.mcap",
            "size": len(data),
            "sha256": sha256 or hashlib.sha256(data).hexdigest(),
        },
        content_type="application/json",
    ).json()


class _Body:
    """A request body that counts what is read from it (and never ends, unless ``size``)."""

    def __init__(self, size=None):
        self.size = size
        self.read_bytes = 0

    def read(self, n=-1):
        if n is None or n < 0:
            raise AssertionError("the body was read whole")
        if self.size is not None:
            n = min(n, self.size - self.read_bytes)
        self.read_bytes += n
        return b"\x00" * n

    def readline(self, n=-1):
        raise AssertionError("the body was read as lines")


def test_a_chunk_over_the_limit_gets_413_naming_the_limit(rig, client_for, monkeypatch):
    monkeypatch.setattr(recordings, "MAX_CHUNK_BYTES", 32 * 1024)
    world, _, tmp = rig
    data = fx.write_good(tmp / "good.mcap").read_bytes() * 3
    assert len(data) > 32 * 1024
    client = client_for(world.field)
    start = _start(client, world, data)

    response = client.put(
        f"/api/recording-uploads/{start['id']}/",
        data,
        content_type="application/octet-stream",
        HTTP_CONTENT_RANGE=f"bytes 0-{len(data) - 1}/{len(data)}",
    )

    assert response.status_code == 413
    assert "32,768 bytes" in response.json()["detail"]
    assert response.json()["limit"] == 32 * 1024
    assert RecordingUpload.objects.get(pk=start["id"]).received == 0


def test_a_content_length_over_the_limit_is_refused_before_the_body_is_read(rig, client_for):
    world, _, tmp = rig
    data = fx.write_good(tmp / "good.mcap").read_bytes()
    client = client_for(world.field)
    start = _start(client, world, data)
    body = _Body()
    claimed = 150 * 1024**2

    response = client.generic(
        "PUT",
        f"/api/recording-uploads/{start['id']}/",
        CONTENT_TYPE="application/octet-stream",
        CONTENT_LENGTH=str(claimed),
        HTTP_CONTENT_RANGE=f"bytes 0-{claimed - 1}/{len(data)}",
        **{"wsgi.input": body},
    )

    assert response.status_code == 413
    assert f"{recordings.MAX_CHUNK_BYTES:,} bytes" in response.json()["detail"]
    assert body.read_bytes == 0


def test_a_body_longer_than_it_says_is_read_no_further_than_the_limit(rig, monkeypatch):
    monkeypatch.setattr(recordings, "MAX_CHUNK_BYTES", 32 * 1024)
    world, _, tmp = rig
    data = fx.write_good(tmp / "good.mcap").read_bytes() * 3
    upload = recordings.upload_start(
        organization=world.operator,
        filename="good.mcap",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        context={},
    )
    endless = _Body()

    with pytest.raises(recordings.UploadChunkTooLarge, match="32,768 bytes"):
        recordings.upload_append(upload=upload, offset=0, chunk=endless, length=32 * 1024)
    short = _Body()
    with pytest.raises(recordings.UploadChunkMismatch, match="more than 1,000 bytes"):
        recordings.upload_append(upload=upload, offset=0, chunk=short, length=1000)

    assert endless.read_bytes == 32 * 1024 + 1
    assert short.read_bytes == 1001
    upload.refresh_from_db()
    assert upload.received == 0
    assert list(Path(upload.path).parent.glob("*.chunk")) == []


def test_a_chunk_is_streamed_to_disk_not_held_in_memory(rig, client_for):
    import tracemalloc

    from django.test.client import FakePayload

    world, _, tmp = rig
    size = 12 * 1024**2
    data = fx.write_good(tmp / "good.mcap").read_bytes()
    data = (data * (size // len(data) + 1))[:size]
    client = client_for(world.field)
    start = _start(client, world, data)
    payload = FakePayload(data)

    tracemalloc.start()
    try:
        response = client.generic(
            "PUT",
            f"/api/recording-uploads/{start['id']}/",
            CONTENT_TYPE="application/octet-stream",
            CONTENT_LENGTH=str(size),
            HTTP_CONTENT_RANGE=f"bytes 0-{size - 1}/{size}",
            **{"wsgi.input": payload},
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert response.status_code == 201, response.content
    assert peak < size / 3, f"peak {peak:,} bytes for a {size:,}-byte chunk"
    stored = Recording.objects.get(sha256=hashlib.sha256(data).hexdigest())
    assert Path(stored.storage_path).read_bytes() == data


@pytest.mark.parametrize(
    ("writer", "sync", "check"),
    [
        (fx.write_desync_camera, "desynced", "synchronisation"),
        (fx.write_truncated, "incomplete", "files_read"),
    ],
)
def test_bad_recordings_leave_the_episode_uncounted_with_the_reason(
    rig, client_for, writer, sync, check, django_capture_on_commit_callbacks
):
    world, episode, tmp = rig
    path = writer(tmp / "bad.mcap")

    with django_capture_on_commit_callbacks(execute=True):
        upload(client_for(world.field), world.collection_task.pk, path)

    episode.refresh_from_db()
    assert episode.sync_status == sync
    assert episode.validated is False
    assert check in episode.extra["capture"]["failed_checks"]


def test_incomplete_calibration_names_the_joint_on_the_tablet_report(
    rig, client_for, django_capture_on_commit_callbacks
):
    world, _, tmp = rig
    path = fx.write_joint_never_moved(tmp / "calib.mcap", joint="wrist_roll")
    client = client_for(world.field)

    with django_capture_on_commit_callbacks(execute=True):
        upload(client, world.collection_task.pk, path, kind="calibration")
    page = client.get(f"/field/tasks/{world.collection_task.pk}/captures/")

    recording = Recording.objects.exclude(storage_path="/nonexistent").get()
    assert recording.is_calibration and recording.status == "failed"
    body = page.content.decode()
    assert "FAILED" in body and "wrist_roll" in body and "Redo the calibration" in body


def test_another_organizations_field_member_cannot_upload_or_read(rig, world_b, client_for):
    world, _, tmp = rig
    data = fx.write_good(tmp / "good.mcap").read_bytes()
    other = client_for(world_b.field)

    start = other.post(
        f"/api/collection-tasks/{world.collection_task.pk}/recordings/",
        {"filename": "good.mcap", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()},
        content_type="application/json",
    )
    listing = other.get(f"/api/collection-tasks/{world.collection_task.pk}/recordings/")
    page = other.get(f"/field/tasks/{world.collection_task.pk}/captures/")

    assert (start.status_code, listing.status_code, page.status_code) == (404, 404, 404)
    assert not RecordingUpload.objects.exclude(path="/nonexistent").exists()


def test_uploads_refuse_non_mcap_files_and_bad_checksums_clearly(rig, client_for):
    world, _, _ = rig
    client = client_for(world.field)

    wrong = client.post(
        f"/api/collection-tasks/{world.collection_task.pk}/recordings/",
        {"filename": "notes.txt", "size": 10, "sha256": "a" * 64},
        content_type="application/json",
    )
    bad_sha = client.post(
        f"/api/collection-tasks/{world.collection_task.pk}/recordings/",
        {"filename": "x.mcap", "size": 10, "sha256": "z" * 64},
        content_type="application/json",
    )

    assert wrong.status_code == 400 and "expected an .mcap recording" in wrong.json()["detail"]
    assert bad_sha.status_code == 400 and "64 hexadecimal" in bad_sha.json()["detail"]


def test_validate_capture_command_passes_good_and_fails_desync_with_evidence(rig, tmp_path):

    from django.core.management import call_command
    from django.core.management.base import CommandError

    world, _, tmp = rig
    good = fx.write_good(tmp / "good.mcap")
    bad = fx.write_desync_camera(tmp / "desync.mcap")

    call_command("validate_capture", str(good), "--embodiment", "mm-1")
    with pytest.raises(CommandError, match="synchronisation"):
        call_command("validate_capture", str(bad), "--embodiment", "mm-1")


WBAG = Path(__file__).resolve().parents[2].parent / "shared/realdata/mcap/ros2_rosbag2/wbag"


@pytest.mark.skipif(
    not WBAG.exists(), reason=f"the shared real data is not beside this checkout ({WBAG})"
)
def test_validate_capture_command_passes_a_real_ros2_bag_without_an_embodiment():
    result = subprocess.run(
        [sys.executable, "manage.py", "validate_capture", str(WBAG), "--json"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert '"passed": true' in result.stdout


def test_an_upload_abandoned_halfway_is_cleaned_up_after_the_retention_period(rig, client_for):
    from datetime import timedelta

    from django.utils import timezone

    from labeling.models import RecordingUpload
    from labeling.recording_services import recording_uploads_purge

    world, _, tmp_path = rig
    client = client_for(world.field)
    data = fx.write_good(tmp_path / "half.mcap").read_bytes()
    start = client.post(
        f"/api/collection-tasks/{world.collection_task.pk}/recordings/",
        {
            "filename": "half.mcap",
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "kind": "episode",
        },
        content_type="application/json",
    )
    upload_id = start.json()["id"]
    client.put(
        f"/api/recording-uploads/{upload_id}/",
        data[:1000],
        content_type="application/octet-stream",
        HTTP_CONTENT_RANGE=f"bytes 0-999/{len(data)}",
    )
    part = Path(RecordingUpload.objects.get(pk=upload_id).path)
    assert part.stat().st_size == 1000

    pending = RecordingUpload.objects.filter(recording__isnull=True).count()
    assert recording_uploads_purge() == 0  # still within the retention period
    later = timezone.now() + timedelta(days=8)
    assert recording_uploads_purge(now=later) == pending
    assert not part.exists()
    assert not RecordingUpload.objects.filter(pk=upload_id).exists()
    # A finished upload is never purged, and the same content can be sent afresh.
    done = upload(client, world.collection_task.pk, tmp_path / "half.mcap", episode="")
    assert done.status_code == 201, done.content
    assert recording_uploads_purge(now=later + timedelta(days=30)) == 0
