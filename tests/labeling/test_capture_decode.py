"""Recognising camera and joint streams and reading capture stamps."""

from __future__ import annotations

import json
import struct

import pytest

from labeling.capture import Channel
from labeling.capture.decode import is_image_channel, is_joint_channel, stamp_reader_for
from tests.labeling import mcap_fixtures as fx


def channel(topic: str = "/t", schema: str = "", encoding: str = "cdr", text: str = "") -> Channel:
    schema_encoding = "ros2msg" if encoding == "cdr" else "jsonschema"
    return Channel(topic, schema, schema_encoding, encoding, text.encode())


@pytest.mark.parametrize(
    ("schema", "is_image"),
    [
        ("sensor_msgs/msg/Image", True),
        ("sensor_msgs/msg/CompressedImage", True),
        ("foxglove.CompressedImage", True),
        ("foxglove.RawImage", True),
        ("foxglove_msgs/msg/CompressedVideo", True),
        ("foxglove.ImageAnnotations", False),
        ("sensor_msgs/msg/CameraInfo", False),
        ("sensor_msgs/msg/JointState", False),
    ],
)
def test_image_streams_are_recognised_by_schema(schema, is_image):
    assert is_image_channel(channel(schema=schema)) is is_image


@pytest.mark.parametrize(
    ("topic", "schema", "is_joint"),
    [
        ("/robot/state", "sensor_msgs/msg/JointState", True),
        ("/joint_states", "std_msgs/msg/String", True),
        ("/arm/action", "std_msgs/msg/Float64MultiArray", True),
        ("/action_chunk", "x/Y", True),
        ("/transaction_log", "std_msgs/msg/String", False),
        ("/rosout", "rcl_interfaces/msg/Log", False),
    ],
)
def test_joint_streams_are_recognised_by_schema_or_topic(topic, schema, is_joint):
    assert is_joint_channel(channel(topic=topic, schema=schema)) is is_joint


def test_cdr_stamp_is_read_from_the_header_in_either_byte_order():
    read = stamp_reader_for(channel(schema="sensor_msgs/msg/JointState", text=fx.JOINT_STATE_DEF))
    little = b"\x00\x01\x00\x00" + struct.pack("<iI", 12, 345)
    big = b"\x00\x00\x00\x00" + struct.pack(">iI", 12, 345)

    assert read is not None
    assert read(little) == read(big) == 12_000_000_345
    assert read(b"\x00\x01") is None


def test_schema_without_a_leading_header_has_no_stamp():
    assert stamp_reader_for(channel(schema="std_msgs/msg/String", text="string data\n")) is None


def test_json_stamp_is_read_from_header_or_foxglove_timestamp():
    read = stamp_reader_for(channel(encoding="json"))
    ros = {"header": {"stamp": {"sec": 2, "nanosec": 5}}}
    foxglove = {"timestamp": {"sec": 2, "nsec": 5}}

    assert read is not None
    assert read(json.dumps(ros).encode()) == read(json.dumps(foxglove).encode()) == 2_000_000_005
    assert read(b"{}") is None
    assert read(b"not json") is None


def test_protobuf_stamp_is_read_from_a_timestamp_field_through_the_files_descriptors():
    from tests.labeling import mcap_fixtures as fx

    proto = Channel(
        fx.JOINT_TOPIC, fx.PROTO_JOINT_STATE, "protobuf", "protobuf", fx.joint_state_descriptors()
    )
    encode = fx._protobuf_encoder(fx.joint_state_descriptors())
    message = encode(
        {"header": {"stamp": {"sec": 1_700_000_000, "nanosec": 5}}, "name": [], "position": []}
    )
    read = stamp_reader_for(proto)
    assert read is not None
    assert read(message) == 1_700_000_000_000_000_005
    assert read(b"\xff\xff") is None  # a message that does not parse has no stamp
