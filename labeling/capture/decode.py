"""Recognise camera and joint streams and decode the little we need from their messages.

Decoding support: ROS 2 CDR (with the ``ros2msg`` schema text stored in the file), JSON, and
protobuf with its ``FileDescriptorSet`` stored in the file (as the MCAP spec has it for the
``protobuf`` schema encoding) — no generated classes needed.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Callable, Mapping
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError
from mcap.records import Schema
from mcap_ros2.decoder import DecoderFactory

from .reader import Channel

StampReader = Callable[[bytes], int | None]
JointDecoder = Callable[[bytes], dict[str, float]]

# sensor_msgs/msg/Image, CompressedImage, foxglove.RawImage, foxglove_msgs/msg/CompressedVideo...
# but not ImageAnnotations or ImageMarker.
_IMAGE_SCHEMA = re.compile(r"(Image|CompressedVideo)$")
_JOINT_SCHEMAS = {"sensor_msgs/msg/JointState", "sensor_msgs/JointState"}
# "action" as a word of the topic, so that /transaction_log is not an action stream.
_JOINT_TOPIC = re.compile(r"joint_states|(^|[/_.])actions?($|[/_.])")
_TIME_FIRST_FIELDS = {
    "std_msgs/Header",
    "std_msgs/msg/Header",
    "Header",
    "builtin_interfaces/Time",
    "builtin_interfaces/msg/Time",
    "time",
}
_STAMP_LE = struct.Struct("<iI")
_STAMP_BE = struct.Struct(">iI")


def is_image_channel(channel: Channel) -> bool:
    """Tell whether the channel carries camera frames, judged by its schema name."""
    short_name = re.split(r"[/.]", channel.schema_name)[-1]
    return bool(_IMAGE_SCHEMA.search(short_name))


def is_joint_channel(channel: Channel) -> bool:
    """Tell whether the channel carries joint states or actions (by schema, else by topic)."""
    if channel.schema_name in _JOINT_SCHEMAS:
        return True
    return bool(_JOINT_TOPIC.search(channel.topic.lower()))


def _first_field_type(schema_text: str) -> str | None:
    for line in schema_text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith(("=", "MSG:")):
            return None
        if line:
            return line.split()[0]
    return None


def _cdr_stamp(data: bytes) -> int | None:
    # 4-byte encapsulation header, then the Header's stamp (int32 sec, uint32 nanosec); the
    # low bit of the second byte says little-endian.
    if len(data) < 12:
        return None
    sec, nanosec = (_STAMP_LE if data[1] & 1 else _STAMP_BE).unpack_from(data, 4)
    if nanosec >= 1_000_000_000:
        return None
    return int(sec) * 1_000_000_000 + int(nanosec)


def _json_stamp(data: bytes) -> int | None:
    try:
        value = json.loads(data)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    header = value.get("header")
    stamp = header.get("stamp") if isinstance(header, dict) else value.get("timestamp")
    if not isinstance(stamp, dict):
        return None
    sec = stamp.get("sec")
    nanosec = stamp.get("nanosec", stamp.get("nsec", 0))
    if not isinstance(sec, int) or not isinstance(nanosec, int):
        return None
    return sec * 1_000_000_000 + nanosec


def protobuf_class(channel: Channel) -> Any:
    """The message class of a protobuf channel, built from the ``FileDescriptorSet`` that the
    file stores as its schema. Raises ValueError when the schema does not describe it."""
    try:
        files = descriptor_pb2.FileDescriptorSet.FromString(channel.schema_data).file
    except DecodeError as exc:
        raise ValueError(
            f"protobuf schema {channel.schema_name!r} is not a FileDescriptorSet"
        ) from exc
    pool = descriptor_pool.DescriptorPool()
    pending = list(files)
    while pending:  # a file can be added once the files it imports are in
        added = [f for f in pending if all(_in_pool(pool, d) for d in f.dependency)]
        if not added:
            missing = sorted({d for f in pending for d in f.dependency if not _in_pool(pool, d)})
            raise ValueError(f"protobuf schema {channel.schema_name!r} lacks {', '.join(missing)}")
        for f in added:
            try:
                pool.Add(f)
            except Exception as exc:  # upb raises TypeError on a file that does not build
                raise ValueError(
                    f"protobuf schema {channel.schema_name!r}: {f.name} does not build ({exc})"
                ) from exc
            pending.remove(f)
    try:
        descriptor = pool.FindMessageTypeByName(channel.schema_name)
    except KeyError as exc:
        raise ValueError(
            f"protobuf schema does not define message {channel.schema_name!r}"
        ) from exc
    try:
        return message_factory.GetMessageClass(descriptor)
    except Exception as exc:
        raise ValueError(
            f"protobuf message {channel.schema_name!r} cannot be built ({exc})"
        ) from exc


def _in_pool(pool: Any, name: str) -> bool:
    try:
        pool.FindFileByName(name)
    except KeyError:
        return False
    return True


def _protobuf_parse(cls: Any, data: bytes) -> Any:
    try:
        return cls.FromString(data)
    except Exception as exc:  # DecodeError, or upb's own errors on malformed input
        raise ValueError(f"protobuf message does not parse ({exc})") from exc


def _protobuf_dict(cls: Any) -> Callable[[bytes], dict[str, Any]]:
    def decode(data: bytes) -> dict[str, Any]:
        return json_format.MessageToDict(
            _protobuf_parse(cls, data),
            preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True,
        )

    return decode


# Where a protobuf message keeps its capture stamp: (field path, seconds field, nanos field).
_PROTO_STAMPS = (
    (("header", "stamp"), ("sec", "seconds"), ("nanosec", "nsec", "nanos")),
    (("timestamp",), ("seconds", "sec"), ("nanos", "nsec", "nanosec")),
)


def _protobuf_stamp_reader(channel: Channel) -> StampReader | None:
    """Read the stamp field straight from the parsed message (a camera frame is not turned
    into a dict, which would base64 its image), found once from the message's descriptor."""
    try:
        cls = protobuf_class(channel)
    except ValueError:
        return None
    for path, sec_names, nsec_names in _PROTO_STAMPS:
        descriptor = cls.DESCRIPTOR
        for name in path:
            field = descriptor.fields_by_name.get(name)
            descriptor = field.message_type if field is not None else None
            if descriptor is None:
                break
        if descriptor is None:
            continue
        sec = next((n for n in sec_names if n in descriptor.fields_by_name), None)
        nsec = next((n for n in nsec_names if n in descriptor.fields_by_name), None)
        if sec is None:
            continue

        def read(
            data: bytes, path: tuple[str, ...] = path, sec: str = sec, nsec: Any = nsec
        ) -> int | None:
            try:
                value = _protobuf_parse(cls, data)
            except ValueError:
                return None
            for name in path:
                value = getattr(value, name)
            nanos = int(getattr(value, nsec)) if nsec else 0
            if not 0 <= nanos < 1_000_000_000:
                return None
            return int(getattr(value, sec)) * 1_000_000_000 + nanos

        return read
    return None


def stamp_reader_for(channel: Channel) -> StampReader | None:
    """Return a function reading a message's capture stamp in ns, or None if we can't.

    Assumes a ROS 2 message starts with a Header or Time when its schema's first field says so.
    """
    if channel.message_encoding == "cdr" and channel.schema_encoding == "ros2msg":
        first = _first_field_type(channel.schema_data.decode("utf-8", "replace"))
        return _cdr_stamp if first in _TIME_FIRST_FIELDS else None
    if channel.message_encoding == "json":
        return _json_stamp
    if channel.message_encoding == "protobuf" and channel.schema_encoding == "protobuf":
        return _protobuf_stamp_reader(channel)
    return None


def _positions_from_mapping(value: Mapping[str, Any]) -> dict[str, float]:
    names, positions = value.get("name"), value.get("position")
    if isinstance(names, list) and isinstance(positions, list):
        return _pair(names, positions)
    if isinstance(positions, dict):
        value = positions
    return {
        str(key): float(item)
        for key, item in value.items()
        if isinstance(item, int | float) and not isinstance(item, bool)
    }


def _pair(names: Any, positions: Any) -> dict[str, float]:
    # JointState may leave position empty (velocity-only) or hold NaN for unknown joints.
    out: dict[str, float] = {}
    for name, position in zip(names, positions, strict=False):
        try:
            number = float(position)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out[str(name)] = number
    return out


def _decode_json_joints(data: bytes) -> dict[str, float]:
    value = json.loads(data)
    if not isinstance(value, dict):
        raise ValueError("JSON joint message is not an object")
    return _positions_from_mapping(value)


def _cdr_joint_decoder(channel: Channel) -> JointDecoder:
    schema = Schema(
        id=1, name=channel.schema_name, encoding=channel.schema_encoding, data=channel.schema_data
    )
    # A fresh factory per schema: the factory caches by schema id, which files number independently.
    decode = DecoderFactory().decoder_for(channel.message_encoding, schema)
    if decode is None:
        raise ValueError(f"no ROS 2 decoder for schema {channel.schema_name!r}")

    def decode_joints(data: bytes) -> dict[str, float]:
        message = decode(data)
        return _pair(getattr(message, "name", []), getattr(message, "position", []))

    return decode_joints


def joint_decoder_for(channel: Channel) -> tuple[JointDecoder | None, str | None]:
    """Return a decoder from message bytes to {joint name: position}, or None and the reason.

    The decoder raises ValueError (or a decoding error) on a malformed message; the caller
    counts those rather than stopping.
    """
    encoding = channel.message_encoding
    if encoding == "json":
        return _decode_json_joints, None
    if encoding == "cdr" and channel.schema_encoding == "ros2msg":
        if not re.search(
            r"^\s*string\[\]\s+name\b", channel.schema_data.decode("utf-8", "replace"), re.M
        ):
            return None, f"schema {channel.schema_name} has no joint names (string[] name)"
        try:
            return _cdr_joint_decoder(channel), None
        except Exception as exc:  # the schema parser raises assorted types on bad text
            return None, f"schema {channel.schema_name} cannot be parsed ({exc})"
    if encoding == "protobuf" and channel.schema_encoding == "protobuf":
        try:
            decode = _protobuf_dict(protobuf_class(channel))
        except ValueError as exc:
            return None, str(exc)
        return (lambda data: _positions_from_mapping(decode(data))), None
    return (
        None,
        f"message encoding {encoding!r} with schema encoding {channel.schema_encoding!r} is not supported",
    )
