"""Calibration coverage: decoding joint messages and judging how much of each range moved."""

from __future__ import annotations

import json
import math

import pytest

from labeling.capture import (
    ActionDimension,
    CalibrationTracker,
    CaptureMessage,
    CaptureSpec,
    Channel,
    calibration_check,
    validate_recording,
)
from labeling.capture.calibration import JointRange, exercised_fraction
from tests.labeling import mcap_fixtures as fx

JSON_CHANNEL = Channel("/joint_states", "sensor_msgs/msg/JointState", "jsonschema", "json", b"{}")


def json_message(payload: object, channel: Channel = JSON_CHANNEL) -> CaptureMessage:
    return CaptureMessage(channel, 0, 0, json.dumps(payload).encode())


def spec_with_dimensions(*dimensions: tuple[str, float, float], threshold: float = 0.8):
    return CaptureSpec.from_embodiment(
        {
            "slug": "arm",
            "calibration_threshold": threshold,
            "action_dimensions": [{"name": n, "min": lo, "max": hi} for n, lo, hi in dimensions],
        }
    )


def test_joint_that_never_moved_fails_calibration_naming_it(tmp_path):
    path = fx.write_joint_never_moved(tmp_path / "rec.mcap", joint="wrist_roll")
    spec = CaptureSpec.from_embodiment(fx.SPEC)

    report = validate_recording([path], spec, calibration=True)

    check = report.check("calibration_coverage")
    assert not check.passed
    assert check.message == "wrist_roll exercised 0% of its range (needs 80%)"
    assert check.evidence["dimensions"]["wrist_roll"]["fraction"] == 0.0
    assert check.evidence["dimensions"]["shoulder_pan"]["fraction"] == pytest.approx(1.0, abs=0.01)
    assert [c.name for c in report.failed_checks] == ["calibration_coverage"]


@pytest.mark.parametrize(
    "write",
    [fx.write_good, fx.write_json_joints, fx.write_protobuf_joints],
    ids=["cdr", "json", "protobuf"],
)
def test_sweeping_every_joint_passes_calibration(tmp_path, write):
    path = write(tmp_path / "rec.mcap")

    report = validate_recording([path], CaptureSpec.from_embodiment(fx.SPEC), calibration=True)

    check = report.check("calibration_coverage")
    assert check.passed, check.message
    assert check.evidence["decoded_messages"] == {fx.JOINT_TOPIC: 201}


def test_dimension_absent_from_every_message_is_listed_as_never_seen(tmp_path):
    path = fx.write_good(tmp_path / "rec.mcap")
    dimensions = [*fx.SPEC["action_dimensions"], {"name": "elbow_roll", "min": -1, "max": 1}]
    spec = CaptureSpec.from_embodiment({**fx.SPEC, "action_dimensions": dimensions})

    report = validate_recording([path], spec, calibration=True)

    check = report.check("calibration_coverage")
    assert not check.passed
    assert check.message.startswith("never seen in any joint/action message: elbow_roll")
    assert "joints seen: elbow_flex, gripper, shoulder_pan, wrist_roll" in check.message
    assert check.evidence["dimensions"]["elbow_roll"] == {"seen": False}


def test_exercised_fraction_by_hand():
    dimension = ActionDimension("pan", min=-1.5, max=1.5)

    assert exercised_fraction(dimension, JointRange(-0.3, 0.6)) == pytest.approx(0.3)
    assert exercised_fraction(dimension, JointRange(-3.0, 3.0)) == 1.0
    assert exercised_fraction(dimension, JointRange(2.0, 3.0)) == 0.0
    assert exercised_fraction(dimension, JointRange(0.2, 0.2)) == 0.0


def test_partly_exercised_dimension_reports_its_percentage():
    tracker = CalibrationTracker()
    for value in (0.0, 0.09):
        tracker.observe(json_message({"name": ["wrist_roll"], "position": [value]}))
    spec = spec_with_dimensions(("wrist_roll", -1.5, 1.5))

    check = calibration_check(spec, tracker)

    assert not check.passed
    assert check.message == "wrist_roll exercised 3% of its range (needs 80%)"


def test_json_joint_messages_may_be_a_flat_dict_of_positions():
    tracker = CalibrationTracker()

    tracker.observe(json_message({"shoulder_pan": -1.0, "gripper": 0.0, "label": "x", "ok": True}))
    tracker.observe(json_message({"shoulder_pan": 1.0, "gripper": 0.08}))

    assert set(tracker.ranges) == {"shoulder_pan", "gripper"}
    assert (tracker.ranges["shoulder_pan"].low, tracker.ranges["shoulder_pan"].high) == (-1.0, 1.0)
    assert tracker.ranges["gripper"].samples == 2


def test_malformed_and_nan_positions_are_counted_not_raised():
    tracker = CalibrationTracker()

    tracker.observe(CaptureMessage(JSON_CHANNEL, 0, 0, b"{not json"))
    tracker.observe(CaptureMessage(JSON_CHANNEL, 0, 0, b"[1, 2]"))
    tracker.observe(json_message({"name": ["a", "b"], "position": [math.nan, 0.5]}))

    assert tracker.failed == {"/joint_states": 2}
    assert set(tracker.ranges) == {"b"}


def test_dimension_names_match_case_insensitively():
    tracker = CalibrationTracker()
    for value in (-1.0, 1.0):
        tracker.observe(json_message({"name": ["Shoulder_Pan"], "position": [value]}))

    check = calibration_check(spec_with_dimensions(("shoulder_pan", -1.0, 1.0)), tracker)

    assert check.passed


def test_protobuf_joint_stream_without_its_message_in_the_schema_is_undecodable():
    channel = Channel("/action", "robot.Action", "protobuf", "protobuf", b"")
    tracker = CalibrationTracker()

    tracker.observe(CaptureMessage(channel, 0, 0, b"\x08\x01"))
    check = calibration_check(spec_with_dimensions(("pan", -1.0, 1.0)), tracker)

    assert not check.passed
    assert "never seen in any joint/action message: pan" in check.message
    assert check.evidence["undecodable_topics"]["/action"] == (
        "protobuf schema does not define message 'robot.Action'"
    )


def test_cdr_schema_without_joint_names_is_reported_as_undecodable():
    channel = Channel(
        "/action", "std_msgs/msg/Float64MultiArray", "ros2msg", "cdr", b"float64[] data\n"
    )
    tracker = CalibrationTracker()

    tracker.observe(CaptureMessage(channel, 0, 0, b"\x00\x01\x00\x00"))

    assert "no joint names" in tracker.undecodable["/action"]


def test_protobuf_joints_that_never_move_fail_calibration_and_their_stamps_sync(tmp_path):
    """Protobuf decoded from the FileDescriptorSet in the file: positions and capture stamps."""
    path = fx.write_protobuf_joints(tmp_path / "rec.mcap", frozen_joint="elbow_flex")

    report = validate_recording([path], CaptureSpec.from_embodiment(fx.SPEC), calibration=True)

    check = report.check("calibration_coverage")
    assert check.message == "elbow_flex exercised 0% of its range (needs 80%)"
    assert check.evidence["dimensions"]["gripper"]["fraction"] == pytest.approx(1.0, abs=0.01)
    sync = report.check("synchronisation")
    assert sync.passed, sync.message
    assert sync.evidence[fx.CAMERA_TOPIC]["time_base"] == "header stamps"  # protobuf's timestamp


def test_a_protobuf_schema_missing_a_file_it_imports_is_reported(tmp_path):
    from google.protobuf import descriptor_pb2

    from labeling.capture.decode import joint_decoder_for
    from labeling.capture.reader import Channel

    full = descriptor_pb2.FileDescriptorSet.FromString(fx.joint_state_descriptors())
    del full.file[1]  # drop google/protobuf/timestamp.proto
    channel = Channel(
        fx.JOINT_TOPIC, fx.PROTO_JOINT_STATE, "protobuf", "protobuf", full.SerializeToString()
    )
    decode, reason = joint_decoder_for(channel)
    assert decode is None
    assert reason == (
        "protobuf schema 'fieldcraft.test.JointState' lacks google/protobuf/timestamp.proto"
    )
    garbage = Channel(fx.JOINT_TOPIC, fx.PROTO_JOINT_STATE, "protobuf", "protobuf", b"\xff\x00")
    assert joint_decoder_for(garbage)[0] is None


def test_a_protobuf_schema_that_does_not_build_is_undecodable_not_a_crash():
    from google.protobuf import descriptor_pb2

    from labeling.capture.decode import joint_decoder_for, stamp_reader_for
    from labeling.capture.reader import Channel

    broken = descriptor_pb2.FileDescriptorSet.FromString(fx.joint_state_descriptors())
    field = broken.file[0].message_type[0].field.add(name="pose", number=9)
    field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
    field.type_name = ".fieldcraft.test.Missing"  # a type no file defines
    channel = Channel(
        fx.JOINT_TOPIC, fx.PROTO_JOINT_STATE, "protobuf", "protobuf", broken.SerializeToString()
    )

    decode, reason = joint_decoder_for(channel)

    assert decode is None
    assert reason.startswith(
        "protobuf schema 'fieldcraft.test.JointState': fieldcraft/test/joint_state.proto does not build"
    )
    assert stamp_reader_for(channel) is None  # the stream is checked on log times instead
