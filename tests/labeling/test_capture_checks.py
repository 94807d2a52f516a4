"""Judging synthetic recordings against a capture spec."""

from __future__ import annotations

import json

import pytest

from labeling.capture import CaptureSpec, CaptureSpecError, validate_recording
from tests.labeling import mcap_fixtures as fx


@pytest.fixture
def spec() -> CaptureSpec:
    return CaptureSpec.from_embodiment(fx.SPEC)


def spec_with(**changes) -> CaptureSpec:
    return CaptureSpec.from_embodiment({**fx.SPEC, **changes})


@pytest.mark.parametrize(
    "write",
    [
        fx.write_good,
        fx.write_lz4,
        fx.write_unchunked,
        fx.write_without_summary,
        fx.write_json_joints,
    ],
    ids=lambda f: f.__name__,
)
def test_good_recording_passes_every_check(tmp_path, spec, write):
    path = write(tmp_path / "rec.mcap")

    report = validate_recording([path], spec, calibration=True)

    assert report.passed, report.to_text()
    assert [c.name for c in report.checks] == [
        "files_read",
        "camera_streams",
        "joint_stream",
        "stream_rates",
        "synchronisation",
        "stream_coverage",
        "calibration_coverage",
    ]
    assert report.duration_s == pytest.approx(fx.DURATION_S, abs=0.05)


def test_good_recording_reports_topic_rates_and_in_sync_skew(tmp_path, spec):
    path = fx.write_good(tmp_path / "rec.mcap")

    report = validate_recording([path], spec)

    camera, joints = report.topic(fx.CAMERA_TOPIC), report.topic(fx.JOINT_TOPIC)
    assert (camera.count, joints.count) == (120, 201)
    assert camera.rate_hz == pytest.approx(30, rel=0.01)
    assert joints.rate_hz == pytest.approx(50, rel=0.01)
    assert camera.jitter_ms == pytest.approx(0, abs=0.01)
    assert camera.longest_gap_ms == pytest.approx(1000 / 30, rel=0.01)
    sync = report.check("synchronisation").evidence[fx.CAMERA_TOPIC]
    assert sync["time_base"] == "header stamps"
    assert sync["worst_ms"] <= 10.0


def test_desynchronised_camera_fails_sync_with_worst_and_p95_skew(tmp_path, spec):
    path = fx.write_desync_camera(tmp_path / "rec.mcap")

    report = validate_recording([path], spec)

    assert not report.passed
    sync = report.check("synchronisation")
    assert not sync.passed
    evidence = sync.evidence[fx.CAMERA_TOPIC]
    assert 150 <= evidence["p95_ms"] <= evidence["worst_ms"] <= 310
    assert evidence["median_offset_ms"] < -150
    assert "worst skew" in sync.message
    assert "p95" in sync.message
    assert [c.name for c in report.failed_checks] == ["synchronisation"]


def test_sync_limits_come_from_the_spec_tolerances(tmp_path):
    path = fx.write_desync_camera(tmp_path / "rec.mcap")
    lenient = CaptureSpec.from_embodiment(fx.SPEC, max_skew_p95_ms=400, max_skew_worst_ms=400)

    report = validate_recording([path], lenient)

    assert report.check("synchronisation").passed


def test_missing_camera_stream_fails_naming_the_camera(tmp_path):
    path = fx.write_good(tmp_path / "rec.mcap")
    spec = spec_with(cameras=[{"name": "front", "fps": 30}, {"name": "wrist", "fps": 30}])

    report = validate_recording([path], spec)

    check = report.check("camera_streams")
    assert not check.passed
    assert "missing camera stream 'wrist'" in check.message
    assert "front" not in check.message
    assert check.evidence["wrist"]["topic"] is None
    assert check.evidence["front"]["topic"] == fx.CAMERA_TOPIC


def test_camera_declared_without_messages_fails(tmp_path):
    path = fx.write_plan(tmp_path / "rec.mcap", fx.Plan(extra_empty_topic="/cam/wrist/image"))
    spec = spec_with(cameras=[{"name": "front", "fps": 30}, {"name": "wrist", "fps": 30}])

    report = validate_recording([path], spec)

    check = report.check("camera_streams")
    assert not check.passed
    assert "/cam/wrist/image is declared but has no messages" in check.message
    assert report.topic("/cam/wrist/image").count == 0


def test_camera_that_stops_early_fails_coverage(tmp_path, spec):
    path = fx.write_camera_stops_early(tmp_path / "rec.mcap", stop_s=2.5)

    report = validate_recording([path], spec)

    check = report.check("stream_coverage")
    assert not check.passed
    assert check.message.startswith(f"{fx.CAMERA_TOPIC} stopped 1.50 s before the recording ended")
    assert check.evidence[fx.CAMERA_TOPIC]["stops_before_end_s"] == pytest.approx(1.5, abs=0.05)
    assert check.evidence[fx.JOINT_TOPIC]["stops_before_end_s"] == pytest.approx(0, abs=0.01)


def test_short_stop_within_tolerance_passes(tmp_path, spec):
    path = fx.write_camera_stops_early(tmp_path / "rec.mcap", stop_s=3.7)

    report = validate_recording([path], spec)

    assert report.check("stream_coverage").passed


def test_camera_at_the_wrong_rate_fails_naming_both_rates(tmp_path, spec):
    path = fx.write_plan(tmp_path / "rec.mcap", fx.Plan(camera_hz=15.0))

    report = validate_recording([path], spec)

    check = report.check("stream_rates")
    assert not check.passed
    assert "runs at 15.0 Hz, expected 30 Hz" in check.message
    assert check.evidence[fx.CAMERA_TOPIC]["deviation"] == pytest.approx(0.5, abs=0.01)


def test_recording_without_joint_stream_fails_and_cannot_check_sync(tmp_path, spec):
    path = fx.write_plan(tmp_path / "rec.mcap", fx.Plan(with_joints=False))

    report = validate_recording([path], spec, calibration=True)

    assert not report.check("joint_stream").passed
    assert "no joint/action stream" in report.check("joint_stream").message
    assert report.check("synchronisation").message == "not checked: no joint stream found"
    assert "never seen in any joint/action message" in report.check("calibration_coverage").message
    assert report.check("camera_streams").passed


def test_without_a_spec_the_report_lists_topics_and_passes(tmp_path):
    path = fx.write_desync_camera(tmp_path / "rec.mcap")

    report = validate_recording([path], None)

    assert report.passed
    assert [c.name for c in report.checks] == ["files_read"]
    assert {t.topic for t in report.topics} == {fx.CAMERA_TOPIC, fx.JOINT_TOPIC}


def test_calibration_without_a_spec_is_refused(tmp_path):
    path = fx.write_good(tmp_path / "rec.mcap")

    with pytest.raises(CaptureSpecError, match="needs a spec"):
        validate_recording([path], None, calibration=True)


def test_report_serialises_to_json_and_reads_as_text(tmp_path, spec):
    path = fx.write_desync_camera(tmp_path / "rec.mcap")

    report = validate_recording([path], spec, calibration=True)

    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert data["passed"] is False
    assert data["spec"] == "mm-1"
    assert {c["name"] for c in data["checks"] if not c["passed"]} == {"synchronisation"}
    text = report.to_text()
    assert text.startswith("Capture report for mm-1: FAILED")
    assert "✗ synchronisation: camera front" in text
    assert "worst_ms" in text
    assert "p95_ms" in text
    assert fx.CAMERA_TOPIC in text


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"control_rate_hz": 0}, "control_rate_hz must be positive"),
        ({"calibration_threshold": 1.5}, "calibration_threshold must be within [0, 1]"),
        ({"cameras": [{"fps": 30}]}, "cameras[0] needs a non-empty name"),
        ({"cameras": "front"}, "cameras must be a list"),
        (
            {"action_dimensions": [{"name": "a", "min": 1, "max": 1}]},
            "action dimension a: max (1.0) must exceed min (1.0)",
        ),
        ({"action_dimensions": [{"name": "a", "min": "low", "max": 1}]}, "a min must be a number"),
    ],
)
def test_invalid_embodiment_is_refused_with_the_field_named(changes, message):
    with pytest.raises(CaptureSpecError) as caught:
        CaptureSpec.from_embodiment({**fx.SPEC, **changes})

    assert message in str(caught.value)


def test_spec_from_embodiment_reads_cameras_dimensions_and_tolerances():
    spec = CaptureSpec.from_embodiment(fx.SPEC, rate_tolerance=0.1, stop_tolerance_s=1.0)

    assert spec.slug == "mm-1"
    assert spec.control_rate_hz == 50
    assert [(c.name, c.fps) for c in spec.cameras] == [("front", 30)]
    assert [d.name for d in spec.action_dimensions] == fx.JOINTS
    assert spec.action_dimensions[0].unit == "rad"
    assert spec.rate_tolerance == 0.1
    assert spec.max_skew_p95_ms == 50
    assert spec.max_skew_worst_ms == 100
    assert spec.stop_tolerance_for(4.0) == 1.0
    assert spec.stop_tolerance_for(100.0) == pytest.approx(5.0)
