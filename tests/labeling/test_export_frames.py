"""Exports of captured episodes are datasets a policy trains on: data files and video, every
row finding its frame as LeRobot's loader looks it up, the streams of a row from one instant;
episodes without a recording named, never frame-less; a killed worker leaves nothing visible
and the retry finishes from what was converted."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from urllib.parse import quote

import pyarrow.parquet as pq
import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.services import job_create
from labeling.capture.synthetic import (
    T0_NS,
    CameraPlan,
    RecordingPlan,
    read_clock,
    state_time,
    write_recording,
)
from labeling.capture.video import frame_at
from labeling.exports.services import (
    dataset_export_run,
    dataset_export_start,
    dataset_export_write,
    export_folder,
)
from labeling.models import DatasetExport, Episode, Recording
from labeling.recording_services import recording_store_file
from tests.factories import captured_dataset
from tests.labeling.test_export import _import

FPS = 30.0
JOINTS = ("j1", "gripper")
KEY = "observation.images.front"


def _recording(
    tmp_path: Path, name: str, *, seconds: float, seed: int, offset_ms: float = 0.0, **plan: object
) -> Path:
    path = tmp_path / "rec" / f"{name}.mcap"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_recording(
        path,
        RecordingPlan(
            duration_s=seconds,
            t0_ns=T0_NS + seed * 10**12,
            joints=JOINTS,
            cameras=[CameraPlan("front", width=96, height=64, clock_offset_ms=offset_ms)],
            state_hz=100,
            action_hz=100,
            seed=seed,
            **plan,  # type: ignore[arg-type]
        ),
    )
    return path


def _captures(world, tmp_path, *, n=5, with_recordings=(0, 1, 2), broken=(4,), seconds=1.0):
    """A capture dataset: recordings for some episodes, a broken one, one without."""
    world.embodiment.cameras.update(width=96, height=64)
    dataset, episodes = captured_dataset(world, n, label_status="accepted")
    for i, episode in enumerate(episodes):
        Episode.objects.filter(pk=episode.pk).update(
            extra={**episode.extra, "team": "team-a", "round": 1, "calibration": False}
        )
        if i in with_recordings or i in broken:
            path = _recording(
                tmp_path,
                episode.key,
                seconds=seconds,
                seed=i,
                truncate_fraction=0.4 if i in broken else None,
            )
            recording_store_file(
                organization=world.operator,
                path=path,
                episode=episode,
                embodiment=world.embodiment,
            )
    return dataset, episodes


def _check_every_row_finds_its_frame(root: Path) -> int:
    """LeRobot's lookup: a row's frame is at ``from_timestamp + timestamp`` in its episode's
    video file, within 1e-4 s. And the frame shows the instant the row's state was sampled
    (within half a frame period; state sampled at or before the frame, 100 Hz)."""
    info = json.loads((root / "meta/info.json").read_text())
    episodes = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    rows = 0
    for ep in episodes:
        data = root / info["data_path"].format(
            chunk_index=ep["data/chunk_index"], file_index=ep["data/file_index"]
        )
        table = pq.read_table(data).to_pylist()
        mine = [r for r in table if r["episode_index"] == ep["episode_index"]]
        assert len(mine) == ep["length"]
        video = root / info["video_path"].format(
            video_key=KEY,
            chunk_index=ep[f"videos/{KEY}/chunk_index"],
            file_index=ep[f"videos/{KEY}/file_index"],
        )
        for row in mine:
            assert row["timestamp"] == pytest.approx(row["frame_index"] / FPS, abs=1e-6)
            image = frame_at(video, ep[f"videos/{KEY}/from_timestamp"] + row["timestamp"], 1e-4)
            shown_s = read_clock(image) / 1e6
            state_s = state_time(0, row["observation.state"][0])
            assert shown_s - state_s + 0.5 / FPS >= -1e-5
            assert abs(shown_s - state_s) <= 0.5 / FPS + 0.0101
            rows += 1
    return rows


def test_v3_export_has_data_and_video_and_names_what_has_no_recording(world_a, tmp_path):
    dataset, episodes = _captures(world_a, tmp_path)

    summary = dataset_export_write(
        dataset=dataset, format="lerobot-v3", outdir=tmp_path / "v3"
    ).as_dict()

    root = tmp_path / "v3"
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    assert info["fieldcraft"]["metadata_only"] is False
    assert info["total_episodes"] == 3
    assert info["features"][KEY]["dtype"] == "video"
    assert info["features"]["observation.state"]["names"] == list(JOINTS)
    assert summary["metadata_only"] is False
    assert summary["rows"] == 3
    rows = _check_every_row_finds_its_frame(root)
    assert rows == info["total_frames"] == summary["frames"]
    assert (root / "meta/stats.json").is_file()
    left_out = [json.loads(line) for line in (root / "meta/fieldcraft/left_out.jsonl").open()]
    assert {item["key"]: item["why"] for item in left_out} == {
        "cap-003": "no recording",
        "cap-004": "recording cannot be converted",
    }
    assert "truncated" in next(i["reason"] for i in left_out if i["key"] == "cap-004")
    conversion = summary["conversion"]
    assert conversion["left_out"] == {"no recording": 1, "recording cannot be converted": 1}
    assert {n["key"] for n in conversion["left_out_named"]} == {"cap-003", "cap-004"}
    assert conversion["recordings_converted"] == 4


def test_v21_export_has_one_parquet_and_one_video_per_episode(world_a, tmp_path):
    dataset, _ = _captures(world_a, tmp_path, broken=())

    dataset_export_write(dataset=dataset, format="lerobot-v2.1", outdir=tmp_path / "v21")

    root = tmp_path / "v21"
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v2.1"
    episodes = [json.loads(line) for line in (root / "meta/episodes.jsonl").open()]
    assert len(episodes) == 3
    for ep in episodes:
        i = ep["episode_index"]
        data = pq.read_table(root / f"data/chunk-000/episode_{i:06d}.parquet").to_pylist()
        video = root / f"videos/chunk-000/{KEY}/episode_{i:06d}.mp4"
        assert len(data) == ep["length"]
        for row in data:
            image = frame_at(video, row["timestamp"], 1e-4)
            assert abs(read_clock(image) / 1e6 - state_time(0, row["observation.state"][0])) <= (
                0.5 / FPS + 0.0101
            )
    assert (root / "meta/episodes_stats.jsonl").is_file()


@pytest.mark.parametrize("fmt", ["lerobot-v3", "lerobot-v2.1"])
def test_export_with_frames_imports_back_with_our_fields(world_a, tmp_path, fmt):
    dataset, episodes = _captures(world_a, tmp_path, broken=())
    dataset_export_write(dataset=dataset, format=fmt, outdir=tmp_path / "out")

    again, summary = _import(world_a, tmp_path / "out", f"Re-import {fmt}")

    assert summary["warnings"] == []
    by_key = {e.key: e for e in Episode.objects.filter(dataset=again)}
    assert set(by_key) == {"cap-000", "cap-001", "cap-002"}
    for original in Episode.objects.filter(dataset=dataset, key__in=by_key):
        back = by_key[original.key]
        assert back.outcome == original.outcome
        assert back.site_id == original.site_id
        assert back.embodiment_id == original.embodiment_id
        assert back.condition_set.value_ids == original.condition_set.value_ids
        assert back.sync_status == "synced"
        assert back.label_status == "accepted"
        # Frames and duration are what the recording held, not what the database said.
        assert back.frames == round(back.duration_s * FPS)
        assert back.extra["team"] == "team-a"
        assert str(back.extra["round"]) == "1"
        assert str(back.extra["calibration"]).lower() == "false"
        assert back.extra["capture_verdict"] == "synced"
        assert back.extra["source_key"] == original.key


def test_export_without_recordings_is_metadata_only_and_says_so(world_a, tmp_path):
    dataset, _ = _captures(world_a, tmp_path, with_recordings=(), broken=())

    summary = dataset_export_write(
        dataset=dataset, format="lerobot-v3", outdir=tmp_path / "meta-only"
    ).as_dict()

    info = json.loads((tmp_path / "meta-only/meta/info.json").read_text())
    assert summary["metadata_only"] is True
    assert info["fieldcraft"]["metadata_only"] is True
    assert not (tmp_path / "meta-only/data").exists()


def test_export_job_zip_holds_data_and_video_and_conversions_are_reused(
    world_a, tmp_path, client_for, django_capture_on_commit_callbacks
):
    dataset, _ = _captures(world_a, tmp_path, broken=())

    with django_capture_on_commit_callbacks(execute=True):
        export = dataset_export_start(dataset=dataset, format="lerobot-v3", actor=world_a.manager)
    export.refresh_from_db()
    assert export.job.status == "succeeded", export.job.message
    assert export.summary["conversion"]["recordings_converted"] == 3
    response = client_for(world_a.manager).get(f"/api/exports/{export.pk}/download/")
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    names = archive.namelist()
    root = f"{dataset.slug}-lerobot-v3"
    assert f"{root}/data/chunk-000/file-000.parquet" in names
    assert f"{root}/videos/{KEY}/chunk-000/file-000.mp4" in names
    assert archive.getinfo(f"{root}/videos/{KEY}/chunk-000/file-000.mp4").compress_type == (
        zipfile.ZIP_STORED
    )

    page = client_for(world_a.manager).get(f"/label/exports/{export.pk}/").content.decode()
    assert "Data and video" in page
    assert "3 dataset episodes from 3 recorded captures" in page
    assert "Not in the dataset (2)" in page
    assert "<code>cap-003</code>: no recording" in page
    assert "with data files and video; 2 without frames" in export.job.message

    with django_capture_on_commit_callbacks(execute=True):
        second = dataset_export_start(dataset=dataset, format="lerobot-v2.1", actor=None)
    second.refresh_from_db()
    assert second.job.status == "succeeded", second.job.message
    # v2.1 uses the same converted episodes: nothing converted twice.
    assert second.summary["conversion"]["recordings_reused"] == 3
    assert second.summary["conversion"]["recordings_converted"] == 0


def _finished_conversions(media: Path) -> list[Path]:
    """Conversions stored whole: a conversion is written in a hidden work folder
    (``.<key>.<random>``) and renamed into place, and pathlib's glob matches hidden names, so a
    worker killed between writing result.json and the rename must not count as finished."""
    return [
        result
        for result in media.glob("episodes/*/*/*/result.json")
        if not result.parent.name.startswith(".")
    ]


@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_leaves_nothing_visible_and_the_retry_finishes(
    world_a, tmp_path, client_for, settings
):
    media = Path(settings.MEDIA_ROOT)
    dataset, _ = _captures(
        world_a, tmp_path, n=6, with_recordings=(0, 1, 2, 3, 4, 5), broken=(), seconds=4.0
    )
    job = job_create(
        organization=dataset.organization,
        kind="export",
        task_name="labeling.tasks.dataset_export",
        title="Export",
        enqueue=False,
    )
    export = DatasetExport.objects.create(
        organization_id=dataset.organization_id, dataset=dataset, format="lerobot-v3", job=job
    )
    database = django_settings.DATABASES["default"]
    # The host may be the embedded server's socket folder: percent-encoded, as it reads it.
    host = quote(str(database["HOST"] or "127.0.0.1"), safe="")
    url = f"postgres://{database['USER']}@{host}:{database['PORT'] or 5432}/{database['NAME']}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "MEDIA_ROOT": str(media),
        "FIELDCRAFT_CONVERSION_WORKERS": "1",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    code = (
        "import django; django.setup(); "
        "from labeling.exports.services import dataset_export_run; "
        f"dataset_export_run(job_id='{job.pk}')"
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        cwd=django_settings.BASE_DIR,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not _finished_conversions(media):
            assert worker.poll() is None, "the export ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
    converted_before = len(_finished_conversions(media))
    assert converted_before < 6

    export.refresh_from_db()
    assert export.path == ""
    assert not list(export_folder(export).rglob("*.zip"))
    assert client_for(world_a.manager).get(f"/api/exports/{export.pk}/download/").status_code == 409

    # The worker died: its job goes stale, and the next worker takes it and finishes.
    type(job).objects.filter(pk=job.pk).update(
        heartbeat_at=timezone.now() - timezone.timedelta(hours=1)
    )
    dataset_export_run(job_id=str(job.pk))

    export.refresh_from_db()
    assert export.job.status == "succeeded", export.job.message
    assert export.summary["conversion"]["recordings_reused"] >= converted_before
    assert export.summary["rows"] == 6
    with zipfile.ZipFile(export.path) as archive:
        archive.extractall(tmp_path / "unzipped")
    assert (
        _check_every_row_finds_its_frame(next((tmp_path / "unzipped").iterdir()))
        == (export.summary["frames"])
    )
    assert Recording.objects.filter(episode__dataset=dataset).count() == 6


def test_convert_recordings_writes_a_dataset_whose_rows_find_their_frames(world_a, tmp_path):
    world_a.embodiment.cameras.update(width=96, height=64)
    # The same camera, so the same calibrated offset, in both takes.
    first = _recording(tmp_path, "take-1", seconds=1.5, seed=1, offset_ms=25.0)
    split = tmp_path / "take-2"
    write_recording(
        split,
        RecordingPlan(
            duration_s=1.5,
            t0_ns=T0_NS + 2 * 10**12,
            joints=JOINTS,
            cameras=[CameraPlan("front", width=96, height=64, clock_offset_ms=25.0)],
            state_hz=100,
            action_hz=100,
            split_every_s=0.5,
            seed=2,
        ),
    )
    out = io.StringIO()

    call_command(
        "convert_recordings",
        str(tmp_path / "dataset"),
        str(first),
        str(split),
        "--embodiment",
        world_a.embodiment.slug,
        "--task",
        "pick the tote",
        "--clock-offset",
        "front=25",
        stdout=out,
    )

    text = out.getvalue()
    assert "Wrote 2 episodes" in text
    assert "front 100.0% matched" in text
    assert _check_every_row_finds_its_frame(tmp_path / "dataset") > 0
    tasks = pq.read_table(tmp_path / "dataset/meta/tasks.parquet")
    assert tasks.column("task").to_pylist() == ["pick the tote"]
    assert tasks.column("task_index").to_pylist() == [0]


def test_convert_recordings_refuses_bad_input_naming_the_problem(world_a, tmp_path):
    world_a.embodiment.cameras.update(width=96, height=64)
    good = _recording(tmp_path, "good", seconds=1.0, seed=1)
    broken = _recording(tmp_path, "broken", seconds=1.0, seed=2, truncate_fraction=0.5)
    err = io.StringIO()

    with pytest.raises(CommandError, match="1 of 2 recordings were left out"):
        call_command(
            "convert_recordings",
            str(tmp_path / "ds"),
            str(good),
            str(broken),
            "--embodiment",
            world_a.embodiment.slug,
            "--task",
            "t",
            stdout=io.StringIO(),
            stderr=err,
        )
    assert "broken.mcap: truncated after" in err.getvalue()
    assert json.loads((tmp_path / "ds/meta/info.json").read_text())["total_episodes"] == 1

    with pytest.raises(CommandError, match="nothing was written"):
        call_command(
            "convert_recordings",
            str(tmp_path / "none"),
            str(broken),
            "--embodiment",
            world_a.embodiment.slug,
            "--task",
            "t",
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    assert not (tmp_path / "none").exists()
    with pytest.raises(CommandError, match="expected CAMERA=MILLISECONDS"):
        call_command(
            "convert_recordings",
            str(tmp_path / "x"),
            str(good),
            "--embodiment",
            world_a.embodiment.slug,
            "--task",
            "t",
            "--clock-offset",
            "front",
        )
    with pytest.raises(CommandError, match="unknown camera rear"):
        call_command(
            "convert_recordings",
            str(tmp_path / "x"),
            str(good),
            "--embodiment",
            world_a.embodiment.slug,
            "--task",
            "t",
            "--clock-offset",
            "rear=3",
        )


def test_the_stream_mapping_is_editable_through_the_api(world_a, client_for):
    client = client_for(world_a.manager)
    url = f"/api/embodiments/{world_a.embodiment.pk}/"
    body = client.get(url).json()
    assert body["action_source"] == "stream"
    assert body["gap_policy"] == "split"
    body["state_topic"] = "/arm/joint_states"
    body["gap_policy"] = "mark"
    body["cameras"][0]["topic"] = "/arm/front/compressed"
    body["cameras"][0]["clock_offset_ms"] = 12.5
    response = client.put(url, body, content_type="application/json")
    assert response.status_code == 200, response.content
    world_a.embodiment.refresh_from_db()
    assert world_a.embodiment.state_topic == "/arm/joint_states"
    camera = world_a.embodiment.cameras.get()
    assert (camera.topic, camera.clock_offset_ms) == ("/arm/front/compressed", 12.5)
    body["gap_policy"] = "fill"
    refused = client.put(url, body, content_type="application/json")
    assert refused.status_code == 400
    assert "gap_policy" in refused.json()
