"""Recordings become aligned frames: every row's state, action and camera frames come from the
same instant, proven by decoding what was written (images show their own capture time; joint
values are known functions of time)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from labeling.capture.convert import ConversionError, convert_recording
from labeling.capture.streams import CameraMapping, StreamMap
from labeling.capture.synthetic import (
    JOINTS,
    CameraPlan,
    RecordingPlan,
    action_time,
    read_clock,
    state_time,
    write_recording,
)
from labeling.capture.video import decode_video

FPS = 30.0
HALF_FRAME_S = 0.5 / FPS


def stream_map(**kwargs: object) -> StreamMap:
    cameras = kwargs.pop(
        "cameras",
        (CameraMapping("front", fps=FPS, width=96, height=64), CameraMapping("wrist", fps=FPS)),
    )
    return StreamMap(joints=JOINTS, cameras=cameras, **kwargs)  # type: ignore[arg-type]


def convert(tmp_path: Path, plan: RecordingPlan, **map_options: object):  # type: ignore[no-untyped-def]
    files = write_recording(tmp_path / "rec.mcap", plan)
    return convert_recording(files, stream_map(**map_options), tmp_path / "out")


def rows_of(bundle: Path) -> dict[str, np.ndarray]:
    table = pq.read_table(bundle / "frames.parquet")
    return {
        "timestamp": table.column("timestamp").to_numpy(),
        "frame_index": table.column("frame_index").to_numpy(),
        "state": np.array(table.column("observation.state").to_pylist(), dtype=np.float64),
        "action": np.array(table.column("action").to_pylist(), dtype=np.float64),
    }


def assert_same_instant(
    bundle: Path, plan: RecordingPlan, *, state_tolerance_s: float, next_state: bool = False
) -> None:
    """Every row: the frame time on the grid, the state sampled at or before it (never later),
    the action likewise, each camera image captured within half a frame period of it."""
    meta = json.loads((bundle / "bundle.json").read_text())
    start_s = (meta["sync"]["start_ns"] - plan.t0_ns) / 1e9
    rows = rows_of(bundle)
    n = meta["length"]
    assert list(rows["frame_index"]) == list(range(n))
    assert np.array_equal(rows["timestamp"], (np.arange(n) / FPS).astype(np.float32))
    frame_s = start_s + np.arange(n) / FPS
    for j in range(len(JOINTS)):
        state_s = np.array([state_time(j, v) for v in rows["state"][:, j]])
        age = frame_s - state_s
        assert (age >= -1e-5).all(), f"joint {j}: a state sample from the future"
        assert age.max() <= state_tolerance_s + 1e-5
        if next_state:
            target = frame_s + 1 / FPS
            action_s = np.array([state_time(j, v) for v in rows["action"][:, j]])
        else:
            target = frame_s
            action_s = np.array([action_time(j, v) for v in rows["action"][:, j]])
        action_age = target - action_s
        assert (action_age >= -1e-5).all()
        assert action_age.max() <= state_tolerance_s + 1e-5
    for key in meta["cameras"]:
        decoded = list(decode_video(bundle / "videos" / f"{key}.mp4"))
        assert len(decoded) == n
        for k, (pts, image) in enumerate(decoded):
            assert abs(pts - k / FPS) < 1e-9
            shown_s = read_clock(image) / 1e6
            assert abs(shown_s - frame_s[k]) <= HALF_FRAME_S + 1e-6, (key, k, shown_s, frame_s[k])


def test_clean_recording_is_one_synced_episode(tmp_path: Path) -> None:
    plan = RecordingPlan(duration_s=2.0, state_hz=100, action_hz=100)
    result = convert(tmp_path, plan)
    assert result.excluded is None
    assert len(result.episodes) == 1
    bundle = result.episodes[0].path
    assert bundle.parent == tmp_path / "out"
    assert result.report["verdict"] == "synced"
    for stream in result.report["streams"]:
        assert stream["match_rate"] == 1.0
        assert stream["stale"] == 0
    assert_same_instant(bundle, plan, state_tolerance_s=0.0101)
    assert not list(tmp_path.glob(".out.partial-*"))


def test_jitter_offset_and_late_start_still_agree(tmp_path: Path) -> None:
    plan = RecordingPlan(
        duration_s=2.5,
        state_hz=100,
        action_hz=100,
        state_jitter_ms=2.0,
        cameras=[
            CameraPlan("front", jitter_ms=4.0, clock_offset_ms=40.0),
            CameraPlan("wrist", start_s=0.6, jitter_ms=3.0),
        ],
    )
    files = write_recording(tmp_path / "rec.mcap", plan)
    mapping = stream_map(
        cameras=(
            CameraMapping("front", fps=FPS, clock_offset_ms=40.0),
            CameraMapping("wrist", fps=FPS),
        )
    )
    result = convert_recording(files, mapping, tmp_path / "out")
    assert len(result.episodes) == 1
    bundle = result.episodes[0].path
    meta = json.loads((bundle / "bundle.json").read_text())
    # The grid starts when the last required stream (the late wrist camera) has started.
    assert (meta["sync"]["start_ns"] - plan.t0_ns) / 1e9 >= 0.6 - HALF_FRAME_S
    assert_same_instant(bundle, plan, state_tolerance_s=0.0125)


def test_an_offset_not_declared_puts_images_off_their_rows(tmp_path: Path) -> None:
    """Stamps alone cannot reveal a camera clock running ahead: the images land ~40 ms off
    their rows unless the calibration's offset is declared (the test above)."""
    plan = RecordingPlan(duration_s=1.5, cameras=[CameraPlan("front", clock_offset_ms=40.0)])
    files = write_recording(tmp_path / "rec.mcap", plan)
    mapping = stream_map(cameras=(CameraMapping("front", fps=FPS),))
    result = convert_recording(files, mapping, tmp_path / "out")
    bundle = result.episodes[0].path
    meta = json.loads((bundle / "bundle.json").read_text())
    start_s = (meta["sync"]["start_ns"] - plan.t0_ns) / 1e9
    errors = [
        abs(read_clock(image) / 1e6 - (start_s + k / FPS))
        for k, (_, image) in enumerate(
            decode_video(bundle / "videos" / "observation.images.front.mp4")
        )
    ]
    assert np.median(errors) == pytest.approx(0.040, abs=0.017)


def test_dropped_burst_splits_the_episode(tmp_path: Path) -> None:
    plan = RecordingPlan(
        duration_s=3.0, state_hz=100, action_hz=100, cameras=[CameraPlan("front", drop=(1.0, 1.4))]
    )
    files = write_recording(tmp_path / "rec.mcap", plan)
    mapping = stream_map(cameras=(CameraMapping("front", fps=FPS),))
    result = convert_recording(files, mapping, tmp_path / "out")
    assert result.report["verdict"] == "split"
    assert len(result.episodes) == 2
    assert result.report["bad_rows"]
    for episode in result.episodes:
        assert_same_instant(episode.path, plan, state_tolerance_s=0.0101)
        report = json.loads((episode.path / "bundle.json").read_text())["sync"]
        assert all(s["match_rate"] == 1.0 for s in report["streams"])
    # Together the pieces and the gap account for every grid row.
    kept = sum(e.length for e in result.episodes)
    dropped = sum(b - a for a, b in result.report["dropped_rows"])
    assert kept + dropped == result.report["rows"]


def test_dropped_burst_marked_keeps_every_row(tmp_path: Path) -> None:
    plan = RecordingPlan(duration_s=2.0, cameras=[CameraPlan("front", drop=(0.8, 1.1))])
    files = write_recording(tmp_path / "rec.mcap", plan)
    mapping = stream_map(cameras=(CameraMapping("front", fps=FPS),), gap_policy="mark")
    result = convert_recording(files, mapping, tmp_path / "out")
    assert result.report["verdict"] == "out_of_sync"
    (episode,) = result.episodes
    assert episode.length == result.report["rows"]
    (gap,) = result.report["bad_rows"]
    assert 0 < gap[1] - gap[0] <= round(0.3 * FPS) + 1
    front = next(s for s in result.report["streams"] if s["name"] == "front")
    assert front["stale"] == gap[1] - gap[0]


def test_dropped_burst_excluded_by_policy(tmp_path: Path) -> None:
    plan = RecordingPlan(duration_s=2.0, cameras=[CameraPlan("front", drop=(0.8, 1.1))])
    files = write_recording(tmp_path / "rec.mcap", plan)
    mapping = stream_map(cameras=(CameraMapping("front", fps=FPS),), gap_policy="exclude")
    result = convert_recording(files, mapping, tmp_path / "out")
    assert result.episodes == []
    assert "miss a stream" in (result.excluded or "")
    assert not (tmp_path / "out").exists()


def test_no_action_stream_uses_next_state(tmp_path: Path) -> None:
    plan = RecordingPlan(duration_s=1.5, state_hz=100, action_topic=None)
    files = write_recording(tmp_path / "rec.mcap", plan)
    refused = stream_map()
    with pytest.raises(ConversionError, match="no action stream"):
        convert_recording(files, refused, tmp_path / "out")
    result = convert_recording(files, stream_map(action_source="next_state"), tmp_path / "out")
    assert result.report["action_convention"] == "next_state"
    assert_same_instant(result.episodes[0].path, plan, state_tolerance_s=0.0101, next_state=True)


def test_joint_order_follows_names_not_message_order(tmp_path: Path) -> None:
    plan = RecordingPlan(duration_s=1.0, shuffle_joint_order=True, state_hz=100, action_hz=100)
    result = convert(tmp_path, plan)
    rows = rows_of(result.episodes[0].path)
    # Each column inverts to a consistent time only if it holds its own joint.
    times = np.array([[state_time(j, v) for j, v in enumerate(row)] for row in rows["state"]])
    assert np.ptp(times, axis=1).max() < 1e-4


def test_split_files_are_one_recording(tmp_path: Path) -> None:
    plan = RecordingPlan(duration_s=2.0, split_every_s=0.7, state_hz=100, action_hz=100)
    files = write_recording(tmp_path / "bag", plan)
    assert len(files) >= 3
    result = convert_recording([tmp_path / "bag"], stream_map(), tmp_path / "out")
    assert len(result.episodes) == 1
    assert_same_instant(result.episodes[0].path, plan, state_tolerance_s=0.0101)


def test_declared_resolution_mismatch_warns_and_encodes_recorded(tmp_path: Path) -> None:
    plan = RecordingPlan(duration_s=1.0, cameras=[CameraPlan("front", width=128, height=96)])
    files = write_recording(tmp_path / "rec.mcap", plan)
    mapping = stream_map(cameras=(CameraMapping("front", fps=FPS, width=640, height=480),))
    result = convert_recording(files, mapping, tmp_path / "out")
    assert any("128x96" in w and "640x480" in w for w in result.warnings)
    meta = json.loads((result.episodes[0].path / "bundle.json").read_text())
    assert meta["cameras"]["observation.images.front"]["width"] == 128


@pytest.mark.parametrize(
    ("plan", "mapping", "expected"),
    [
        (
            RecordingPlan(duration_s=1.0, cameras=[CameraPlan("front", corrupt_at_s=0.5)]),
            {"cameras": (CameraMapping("front", fps=FPS),)},
            r"rec\.mcap: /camera/front/image_raw/compressed at 0\.[45]\d\d s: image does not decode",
        ),
        (
            RecordingPlan(duration_s=1.0, cameras=[CameraPlan("front", resize_at_s=0.5)]),
            {"cameras": (CameraMapping("front", fps=FPS),)},
            r"rec\.mcap: /camera/front/image_raw/compressed at 0\.[45]\d\d s: camera 'front' changes resolution from 96x64 to 192x128",
        ),
        (
            RecordingPlan(duration_s=1.0, backwards_at_s=0.5),
            {},
            r"rec\.mcap: /joint_states at 0\.[45]\d\d s: capture time goes backwards",
        ),
        (
            RecordingPlan(duration_s=1.0, names_in_messages=False),
            {},
            r"rec\.mcap: /joint_states at 0\.0\d\d s: a JointState without joint names",
        ),
        (
            RecordingPlan(duration_s=1.0, missing_joint="gripper"),
            {},
            r"joint gripper is missing from the state stream \(it carries elbow_flex, shoulder_pan, wrist_roll\)",
        ),
        (
            RecordingPlan(duration_s=1.0, cameras=[CameraPlan("front")]),
            {"cameras": (CameraMapping("front", fps=FPS), CameraMapping("top", fps=FPS))},
            r"no stream for camera 'top'.*it carries /camera/front/image_raw/compressed \(sensor_msgs/msg/CompressedImage",
        ),
        (
            RecordingPlan(duration_s=1.0, truncate_fraction=0.5),
            {},
            r"rec\.mcap: truncated after",
        ),
        (
            RecordingPlan(duration_s=1.0, cameras=[CameraPlan("front", start_s=0.95)]),
            {"cameras": (CameraMapping("front", fps=FPS),)},
            r"do not overlap in time",
        ),
    ],
    ids=[
        "corrupt-image",
        "resolution-change",
        "backwards-stamp",
        "no-joint-names",
        "missing-joint",
        "missing-camera",
        "truncated",
        "no-overlap",
    ],
)
def test_bad_input_names_file_topic_and_time(
    tmp_path: Path, plan: RecordingPlan, mapping: dict[str, object], expected: str
) -> None:
    files = write_recording(tmp_path / "rec.mcap", plan)
    with pytest.raises(ConversionError, match=expected):
        convert_recording(files, stream_map(**mapping), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    "encoding", ["png", "rgb8", "bgr8", "mono8", "foxglove-jpeg", "foxglove-raw-json"]
)
def test_every_image_encoding_converts(tmp_path: Path, encoding: str) -> None:
    plan = RecordingPlan(
        duration_s=0.7,
        state_hz=100,
        action_hz=100,
        cameras=[CameraPlan("front", encoding=encoding)],
    )
    files = write_recording(tmp_path / "rec.mcap", plan)
    mapping = stream_map(cameras=(CameraMapping("front", fps=FPS),))
    result = convert_recording(files, mapping, tmp_path / "out")
    assert_same_instant(result.episodes[0].path, plan, state_tolerance_s=0.0101)


def test_h264_is_an_option(tmp_path: Path) -> None:
    plan = RecordingPlan(duration_s=0.7, state_hz=100, action_hz=100)
    files = write_recording(tmp_path / "rec.mcap", plan)
    result = convert_recording(files, stream_map(), tmp_path / "out", codec="libx264")
    meta = json.loads((result.episodes[0].path / "bundle.json").read_text())
    assert {c["codec"] for c in meta["cameras"].values()} == {"h264"}
    assert_same_instant(result.episodes[0].path, plan, state_tolerance_s=0.0101)


def test_capture_validation_honours_the_declared_clock_offset(tmp_path: Path) -> None:
    from labeling.capture import validate_recording
    from labeling.capture.spec import CaptureSpec

    plan = RecordingPlan(duration_s=2.0, cameras=[CameraPlan("front", clock_offset_ms=80.0)])
    files = write_recording(tmp_path / "rec.mcap", plan)
    embodiment = {
        "slug": "x",
        "control_rate_hz": 50,
        "action_dimensions": [{"name": j, "min": -1, "max": 1} for j in JOINTS],
    }
    undeclared = CaptureSpec.from_embodiment(embodiment | {"cameras": [{"name": "front"}]})
    declared = CaptureSpec.from_embodiment(
        embodiment | {"cameras": [{"name": "front", "clock_offset_ms": 80.0}]}
    )
    failed = {c.name for c in validate_recording(files, undeclared).failed_checks}
    assert "synchronisation" in failed
    assert validate_recording(files, declared).passed


def test_a_conversion_whose_encoder_hangs_is_tried_again_then_raised_not_stored(
    tmp_path, monkeypatch
):
    import labeling.capture.convert as convert_module
    import labeling.capture.video as video

    files = write_recording(tmp_path / "rec.mcap", RecordingPlan(duration_s=0.5))
    attempts = []
    real = convert_module._convert_once

    def counted(*args, **kwargs):
        attempts.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(convert_module, "_convert_once", counted)
    # Every flush "hangs": no real flush finishes in a nanosecond.
    monkeypatch.setattr(video, "FLUSH_TIMEOUT_S", 1e-9)

    with pytest.raises(video.VideoHung):
        convert_recording(files, stream_map(), tmp_path / "out")

    assert len(attempts) == convert_module.HUNG_ATTEMPTS == 2
    assert not (tmp_path / "out").exists()


def test_a_stored_conversion_sweeps_away_only_work_folders_a_dead_worker_left(tmp_path):
    import os
    import time

    from labeling.exports.conversions import STALE_WORK_S, conversion_folder, convert_stored

    files = write_recording(tmp_path / "rec.mcap", RecordingPlan(duration_s=0.7))
    mapping = stream_map()
    media = tmp_path / "media"
    sha = "ab" * 32
    folder = conversion_folder(media, sha, mapping, "libx264")
    # A worker killed two hours ago left a half-made folder; one converting now has a fresh one.
    dead = folder.with_name(f".{folder.name}.dead0000")
    live = folder.with_name(f".{folder.name}.live0000")
    for work in (dead, live):
        (work / "out").mkdir(parents=True)
        (work / "out" / "frames.parquet").write_bytes(b"partial")
    old = time.time() - 2 * STALE_WORK_S
    for path in (dead / "out" / "frames.parquet", dead / "out", dead):
        os.utime(path, (old, old))

    first = convert_stored(
        paths=files, sha256=sha, stream_map=mapping, codec="libx264", media_root=media
    )
    assert first.ok and not first.reused
    assert not dead.exists()
    assert live.exists(), "a folder still being written to belongs to a live worker"

    # Reusing the stored conversion sweeps too, once the other folder has gone stale.
    for path in (live / "out" / "frames.parquet", live / "out", live):
        os.utime(path, (old, old))
    again = convert_stored(
        paths=files, sha256=sha, stream_map=mapping, codec="libx264", media_root=media
    )
    assert again.reused and again.bundles == first.bundles
    assert not live.exists()
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]
