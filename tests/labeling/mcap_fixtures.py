"""Synthetic MCAP recordings for the capture-validation tests.

A recording has a camera (sensor_msgs/msg/CompressedImage on /cam/front/image at 30 Hz, tiny
payloads) and /joint_states (sensor_msgs/msg/JointState at 50 Hz) whose joints each sweep their
whole range once, matching ``SPEC``. Times start at ``T0`` and are in nanoseconds; each message
carries its capture stamp in its header and is logged ``LATENCY_NS`` later.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from mcap.writer import CompressionType, IndexType
from mcap.writer import Writer as McapWriter
from mcap_ros2._dynamic import serialize_dynamic

from labeling.capture.synthetic import COMPRESSED_IMAGE_MSG, JOINT_STATE_MSG

T0 = 1_700_000_000_000_000_000
LATENCY_NS = 2_000_000
DURATION_S = 4.0
CAMERA_TOPIC = "/cam/front/image"
JOINT_TOPIC = "/joint_states"

SPEC: dict[str, Any] = {
    "slug": "mm-1",
    "control_rate_hz": 50,
    "calibration_threshold": 0.8,
    "cameras": [{"name": "front", "fps": 30}],
    "action_dimensions": [
        {"name": "shoulder_pan", "unit": "rad", "min": -1.5, "max": 1.5},
        {"name": "elbow_flex", "unit": "rad", "min": -2.0, "max": 2.0},
        {"name": "wrist_roll", "unit": "rad", "min": -3.0, "max": 3.0},
        {"name": "gripper", "unit": "m", "min": 0.0, "max": 0.08},
    ],
}
JOINTS = [d["name"] for d in SPEC["action_dimensions"]]

# The message definitions the product's synthetic recordings use (one copy).
JOINT_STATE_DEF = JOINT_STATE_MSG
COMPRESSED_IMAGE_DEF = COMPRESSED_IMAGE_MSG


@dataclass
class Plan:
    """How to synthesise one recording; the ``write_*`` helpers tweak a default plan."""

    duration_s: float = DURATION_S
    camera_hz: float = 30.0
    joint_hz: float = 50.0
    camera_topic: str = CAMERA_TOPIC
    camera_stop_s: float | None = None  # camera stops early at this time
    camera_stamp_offset_ms: Callable[[int], float] = field(default=lambda i: 0.0)
    frozen_joint: str | None = None
    joint_encoding: str = "cdr"  # or "json", "protobuf"
    compression: CompressionType = CompressionType.ZSTD
    chunked: bool = True
    chunk_size: int = 4096  # small, so every recording spans many chunks
    summary: bool = True
    extra_empty_topic: str | None = None
    with_joints: bool = True


def joint_position(name: str, t: float, plan: Plan) -> float:
    """Sweep each joint once over its whole range (a sine wave over the recording)."""
    dim = next(d for d in SPEC["action_dimensions"] if d["name"] == name)
    middle, half = (dim["min"] + dim["max"]) / 2, (dim["max"] - dim["min"]) / 2
    if name == plan.frozen_joint:
        return middle
    return middle + half * math.sin(2 * math.pi * t / plan.duration_s)


def _stamp(ns: int) -> dict[str, Any]:
    return {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000}


def _events(plan: Plan) -> Iterator[tuple[int, str, int, Any]]:
    """Yield (log_time, topic, stamp, payload dict) in log-time order."""
    events: list[tuple[int, str, int, Any]] = []
    n_frames = int(plan.duration_s * plan.camera_hz)
    for i in range(n_frames):
        t = i / plan.camera_hz
        if plan.camera_stop_s is not None and t > plan.camera_stop_s:
            break
        capture = T0 + round(t * 1e9)
        stamp = capture + round(plan.camera_stamp_offset_ms(i) * 1e6)
        payload = {
            "header": {"stamp": _stamp(stamp), "frame_id": "front"},
            "format": "jpeg",
            "data": bytes(16),
        }
        events.append((capture + LATENCY_NS, plan.camera_topic, stamp, payload))
    for i in range(int(plan.duration_s * plan.joint_hz) + 1 if plan.with_joints else 0):
        t = i / plan.joint_hz
        capture = T0 + round(t * 1e9)
        payload = {
            "header": {"stamp": _stamp(capture), "frame_id": ""},
            "name": JOINTS,
            "position": [joint_position(name, t, plan) for name in JOINTS],
            "velocity": [],
            "effort": [],
        }
        events.append((capture + LATENCY_NS, JOINT_TOPIC, capture, payload))
    events.sort(key=lambda e: e[0])
    return iter(events)


def write_plan(path: Path, plan: Plan) -> Path:
    """Write the recording described by ``plan`` to ``path`` and return ``path``."""
    index = IndexType.ALL if plan.summary else IndexType.NONE
    with path.open("wb") as fh:
        writer = McapWriter(
            fh,
            chunk_size=plan.chunk_size,
            compression=plan.compression,
            use_chunking=plan.chunked,
            index_types=index,
            repeat_channels=plan.summary,
            repeat_schemas=plan.summary,
            use_statistics=plan.summary,
            use_summary_offsets=plan.summary,
            enable_data_crcs=True,
        )
        writer.start(profile="ros2", library="fieldcraft-tests")
        image_schema = writer.register_schema(
            "sensor_msgs/msg/CompressedImage", "ros2msg", COMPRESSED_IMAGE_DEF.encode()
        )
        encode_image = serialize_dynamic("sensor_msgs/msg/CompressedImage", COMPRESSED_IMAGE_DEF)[
            "sensor_msgs/msg/CompressedImage"
        ]
        camera = writer.register_channel(plan.camera_topic, "cdr", image_schema)
        joints, encode_joints = _register_joints(writer, plan)
        if plan.extra_empty_topic:
            writer.register_channel(plan.extra_empty_topic, "cdr", image_schema)
        for sequence, (log_time, topic, _stamp_ns, payload) in enumerate(_events(plan)):
            if topic == JOINT_TOPIC:
                channel, data = joints, encode_joints(payload)
            else:
                channel, data = camera, encode_image(payload)
            writer.add_message(
                channel, log_time=log_time, data=data, publish_time=log_time, sequence=sequence
            )
        writer.finish()
    return path


PROTO_JOINT_STATE = "fieldcraft.test.JointState"


def joint_state_descriptors() -> bytes:
    """A FileDescriptorSet (as an MCAP ``protobuf`` schema stores it) for a foxglove-style
    ``JointState { Timestamp timestamp = 1; repeated string name = 2; repeated double
    position = 3; }``, with the Timestamp file it imports listed after it."""
    joint = descriptor_pb2.FileDescriptorProto(
        name="fieldcraft/test/joint_state.proto",
        package="fieldcraft.test",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    message = joint.message_type.add(name="JointState")
    f = descriptor_pb2.FieldDescriptorProto
    message.field.add(
        name="timestamp", number=1, type=f.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp"
    )
    message.field.add(name="name", number=2, type=f.TYPE_STRING, label=f.LABEL_REPEATED)
    message.field.add(name="position", number=3, type=f.TYPE_DOUBLE, label=f.LABEL_REPEATED)
    timestamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp)
    return descriptor_pb2.FileDescriptorSet(file=[joint, timestamp]).SerializeToString()


def _protobuf_encoder(descriptors: bytes) -> Callable[[Any], bytes]:
    pool = descriptor_pool.DescriptorPool()
    files = {f.name: f for f in descriptor_pb2.FileDescriptorSet.FromString(descriptors).file}
    pool.Add(files.pop("google/protobuf/timestamp.proto"))
    for f in files.values():
        pool.Add(f)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(PROTO_JOINT_STATE))

    def encode(payload: dict[str, Any]) -> bytes:
        stamp = payload["header"]["stamp"]
        message = cls(name=payload["name"], position=payload["position"])
        message.timestamp.seconds = stamp["sec"]
        message.timestamp.nanos = stamp["nanosec"]
        return bytes(message.SerializeToString())

    return encode


def _register_joints(writer: McapWriter, plan: Plan) -> tuple[int, Callable[[Any], bytes]]:
    if not plan.with_joints:
        return -1, lambda m: b""
    if plan.joint_encoding == "protobuf":
        descriptors = joint_state_descriptors()
        schema = writer.register_schema(PROTO_JOINT_STATE, "protobuf", descriptors)
        channel = writer.register_channel(JOINT_TOPIC, "protobuf", schema)
        return channel, _protobuf_encoder(descriptors)
    if plan.joint_encoding == "json":
        schema = writer.register_schema("sensor_msgs/msg/JointState", "jsonschema", b"{}")
        return writer.register_channel(JOINT_TOPIC, "json", schema), lambda m: json.dumps(
            m
        ).encode()
    schema = writer.register_schema(
        "sensor_msgs/msg/JointState", "ros2msg", JOINT_STATE_DEF.encode()
    )
    encode = serialize_dynamic("sensor_msgs/msg/JointState", JOINT_STATE_DEF)
    return writer.register_channel(JOINT_TOPIC, "cdr", schema), encode["sensor_msgs/msg/JointState"]


def write_good(path: Path) -> Path:
    return write_plan(path, Plan())


def write_desync_camera(path: Path) -> Path:
    """Camera stamps run 150-300 ms behind the joint states they arrive with."""
    rng = random.Random(7)
    return write_plan(path, Plan(camera_stamp_offset_ms=lambda i: -rng.uniform(150, 300)))


def write_joint_never_moved(path: Path, joint: str = "wrist_roll") -> Path:
    return write_plan(path, Plan(frozen_joint=joint))


def write_camera_stops_early(path: Path, stop_s: float = 2.5) -> Path:
    return write_plan(path, Plan(camera_stop_s=stop_s))


def write_truncated(path: Path, keep_fraction: float = 0.6) -> Path:
    """Write a good recording, then cut bytes off its end as a crashed recorder would."""
    write_good(path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep_fraction)])
    return path


def write_lz4(path: Path) -> Path:
    return write_plan(path, Plan(compression=CompressionType.LZ4))


def write_zstd(path: Path) -> Path:
    return write_plan(path, Plan(compression=CompressionType.ZSTD))


def write_uncompressed(path: Path) -> Path:
    return write_plan(path, Plan(compression=CompressionType.NONE))


def write_unchunked(path: Path) -> Path:
    return write_plan(path, Plan(chunked=False))


def write_without_summary(path: Path) -> Path:
    return write_plan(path, Plan(summary=False))


def write_json_joints(path: Path) -> Path:
    return write_plan(path, Plan(joint_encoding="json"))


def write_protobuf_joints(path: Path, **plan: Any) -> Path:
    return write_plan(path, Plan(joint_encoding="protobuf", **plan))


def write_split(directory: Path, parts: int = 3) -> list[Path]:
    """Write a good recording split by time into ``parts`` files, like a rosbag2 split."""
    directory.mkdir(parents=True, exist_ok=True)
    whole = write_good(directory / "whole.tmp")
    from mcap.reader import make_reader

    with whole.open("rb") as fh:
        reader = make_reader(fh)
        summary = reader.get_summary()
        assert summary is not None
        records = list(reader.iter_messages())
    whole.unlink()
    paths: list[Path] = []
    size = math.ceil(len(records) / parts)
    for part in range(parts):
        path = directory / f"split_{part}.mcap"
        with path.open("wb") as fh:
            writer = McapWriter(fh, chunk_size=4096)
            writer.start(profile="ros2", library="fieldcraft-tests")
            ids: dict[int, int] = {}
            for schema_id, schema in summary.schemas.items():
                ids[schema_id] = writer.register_schema(schema.name, schema.encoding, schema.data)
            channels = {
                channel_id: writer.register_channel(c.topic, c.message_encoding, ids[c.schema_id])
                for channel_id, c in summary.channels.items()
            }
            for _schema, channel, message in records[part * size : (part + 1) * size]:
                writer.add_message(
                    channels[channel.id],
                    log_time=message.log_time,
                    data=message.data,
                    publish_time=message.publish_time,
                )
            writer.finish()
        paths.append(path)
    return paths
