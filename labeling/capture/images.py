"""Decode camera messages to RGB arrays (HxWx3 uint8, C-contiguous).

Supported streams:

- ``sensor_msgs/msg/CompressedImage`` and ``sensor_msgs/msg/Image`` (and their ROS 1 names
  ``sensor_msgs/CompressedImage``, ``sensor_msgs/Image``), ``foxglove_msgs/msg/CompressedImage``
  and ``foxglove_msgs/msg/RawImage``, in CDR (ROS 2) or ROS 1 serialization;
- ``foxglove.CompressedImage`` and ``foxglove.RawImage`` in protobuf (the schema is the
  ``FileDescriptorSet`` the file stores) and in JSON (``data`` base64).

The ROS messages are parsed here by hand rather than with a generic decoder: this runs on every
frame of every recording, and the generic decoders copy the pixel data byte by byte. A raw
``rgb8`` frame without row padding comes back as a read-only view on the message bytes; other
raw layouts cost one copy (two for mono16), and compressed frames the codec's work plus Pillow's
copy out of its own image memory.

Compressed frames are decoded with Pillow whatever their ``format`` says about colour order:
image_transport converts colour frames to ``bgr8`` and OpenCV's encoder writes standard JPEG
(YCbCr) and PNG (RGB) files from them, so ``"rgb8; jpeg compressed bgr8"`` and ``"bgr8; png
compressed bgr8"`` alike decode to the camera's true colours.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image, features

from .decode import protobuf_class
from .messages import Channel

__all__ = ["ImageDecodeError", "ImageDecoder", "image_decoder_for"]

RgbImage = npt.NDArray[np.uint8]
ImageDecoder = Callable[[bytes], RgbImage]


class ImageDecodeError(ValueError):
    """A camera stream or message cannot be decoded; the message says what is wrong."""


# Raw encodings: bytes per pixel. 8UC3 is shown as BGR, as RViz and Foxglove show it (it is what
# OpenCV hands out); mono16 is big-endian only when the message's is_bigendian says so.
_RAW_BYTES_PER_PIXEL = {
    "rgb8": 3,
    "bgr8": 3,
    "8UC3": 3,
    "rgba8": 4,
    "bgra8": 4,
    "mono8": 1,
    "8UC1": 1,
    "mono16": 2,
}
_SUPPORTED_RAW = ", ".join(_RAW_BYTES_PER_PIXEL)
# Pillow sniffs the codec from the bytes; only image codecs a camera stream uses are tried.
_PILLOW_FORMATS = ("JPEG", "PNG", "WEBP") if features.check_module("webp") else ("JPEG", "PNG")

_U32_LE = struct.Struct("<I")
_U32_BE = struct.Struct(">I")

# Top-level field names of the ROS messages parsed here, in wire order.
_ROS_FIELDS = {
    ("sensor", "compressed"): ("header", "format", "data"),
    ("sensor", "raw"): ("header", "height", "width", "encoding", "is_bigendian", "step", "data"),
    ("foxglove", "compressed"): ("timestamp", "frame_id", "data", "format"),
    ("foxglove", "raw"): ("timestamp", "frame_id", "width", "height", "encoding", "step", "data"),
}
_ROS_SCHEMAS = {
    "sensor_msgs/msg/CompressedImage": ("sensor", "compressed"),
    "sensor_msgs/CompressedImage": ("sensor", "compressed"),
    "sensor_msgs/msg/Image": ("sensor", "raw"),
    "sensor_msgs/Image": ("sensor", "raw"),
    "foxglove_msgs/msg/CompressedImage": ("foxglove", "compressed"),
    "foxglove_msgs/CompressedImage": ("foxglove", "compressed"),
    "foxglove_msgs/msg/RawImage": ("foxglove", "raw"),
    "foxglove_msgs/RawImage": ("foxglove", "raw"),
}
_FOXGLOVE_SCHEMAS = {"foxglove.CompressedImage": "compressed", "foxglove.RawImage": "raw"}
_PROTOBUF_FIELDS = {
    "compressed": ("data", "format"),
    "raw": ("width", "height", "encoding", "step", "data"),
}


def image_decoder_for(channel: Channel) -> ImageDecoder:
    """Return a function turning one message of ``channel`` into an HxWx3 uint8 RGB array.

    Raises ImageDecodeError when the channel's schema or encoding is not supported. The decoder
    raises ImageDecodeError, and nothing else, on a malformed message. Arrays may be read-only
    views on the message bytes: copy one before writing to it.
    """
    name, encoding = channel.schema_name, channel.message_encoding
    if encoding in ("cdr", "ros1") and name in _ROS_SCHEMAS:
        family, kind = _ROS_SCHEMAS[name]
        _check_ros_schema(channel, _ROS_FIELDS[family, kind])
        return _ros_decoder(family, kind, ros1=encoding == "ros1")
    if encoding == "protobuf" and name in _FOXGLOVE_SCHEMAS:
        return _protobuf_decoder(channel, _FOXGLOVE_SCHEMAS[name])
    if encoding == "json" and (name in _FOXGLOVE_SCHEMAS or name in _ROS_SCHEMAS):
        kind = _FOXGLOVE_SCHEMAS.get(name) or _ROS_SCHEMAS[name][1]
        return _json_decoder(kind)
    if name in _ROS_SCHEMAS or name in _FOXGLOVE_SCHEMAS:
        raise ImageDecodeError(
            f"topic {channel.topic}: message encoding {encoding!r} is not supported for {name}"
        )
    raise ImageDecodeError(
        f"topic {channel.topic}: schema {name!r} is not a supported image message (supported: "
        "sensor_msgs CompressedImage and Image, foxglove CompressedImage and RawImage)"
    )


# --- decoding the pixels --------------------------------------------------------------------


def _decode_compressed(data: bytes, image_format: str) -> RgbImage:
    """Decode JPEG/PNG/WebP bytes with Pillow, whatever colour order ``image_format`` names."""
    if "compresseddepth" in image_format.lower():
        raise ImageDecodeError(
            f"format {image_format!r} is a compressed depth image, not a camera image"
        )
    try:
        with Image.open(io.BytesIO(data), formats=_PILLOW_FORMATS) as image:
            image.load()
            return _pillow_rgb(image)
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError... on bad bytes
        raise ImageDecodeError(
            f"compressed image data ({len(data):,} bytes, format {image_format!r}) is not a "
            f"decodable image: {exc}"
        ) from None


def _pillow_rgb(image: Image.Image) -> RgbImage:
    mode = image.mode
    if mode == "RGB":
        return np.asarray(image)
    if mode == "L":
        return _gray_to_rgb(np.asarray(image))
    if mode.startswith("I"):  # 16-bit grey PNG ("I;16", "I;16B") or 32-bit "I"
        return _gray_to_rgb((np.clip(np.asarray(image), 0, 65535) >> 8).astype(np.uint8))
    return np.asarray(image.convert("RGB"))


def _gray_to_rgb(gray: npt.NDArray[np.uint8]) -> RgbImage:
    return np.repeat(gray[:, :, np.newaxis], 3, axis=2)


def _decode_raw(
    data: bytes,
    offset: int,
    size: int,
    *,
    width: int,
    height: int,
    encoding: str,
    step: int,
    big_endian: bool,
) -> RgbImage:
    """Turn ``size`` bytes of raw pixels at ``offset`` of ``data`` into RGB, copying only what
    the layout forces (row padding, channel order, alpha, grey)."""
    bytes_per_pixel = _RAW_BYTES_PER_PIXEL.get(encoding)
    if bytes_per_pixel is None:
        raise ImageDecodeError(
            f"raw image encoding {encoding!r} is not supported (supported: {_SUPPORTED_RAW})"
        )
    if width <= 0 or height <= 0:
        raise ImageDecodeError(f"raw image is {width}x{height}: it has no pixels")
    row_bytes = width * bytes_per_pixel
    if step < row_bytes:
        raise ImageDecodeError(
            f"raw image step {step} is shorter than a row of {width} {encoding} pixels "
            f"({row_bytes} bytes)"
        )
    if size != step * height:
        raise ImageDecodeError(
            f"raw image data holds {size:,} bytes; a {width}x{height} {encoding} image with "
            f"step {step} needs {step * height:,}"
        )
    rows = np.frombuffer(data, np.uint8, count=size, offset=offset).reshape(height, step)
    pixels = rows[:, :row_bytes] if step != row_bytes else rows
    if bytes_per_pixel == 2:
        wide = pixels.view(">u2" if big_endian else "<u2")
        return _gray_to_rgb((wide >> 8).astype(np.uint8))
    if bytes_per_pixel == 1:
        return _gray_to_rgb(pixels)
    image = pixels.reshape(height, width, bytes_per_pixel)
    if encoding == "rgb8":
        return image if step == row_bytes else np.ascontiguousarray(image)
    if encoding in ("bgr8", "8UC3", "bgra8"):
        return np.ascontiguousarray(image[:, :, 2::-1])
    return np.ascontiguousarray(image[:, :, :3])  # rgba8


# --- ROS 2 CDR and ROS 1 messages -----------------------------------------------------------


class _Cursor:
    """Read the fields of one serialized ROS message in order.

    CDR aligns each 4-byte field to a multiple of 4 counted from the end of the 4-byte
    encapsulation header; as that header is 4 bytes long, aligning the absolute offset is the
    same thing. CDR strings count and carry a terminating NUL. ROS 1 has no header, no
    alignment, no NUL, and is always little-endian.
    """

    __slots__ = ("align", "data", "nul", "pos", "u32", "what")

    def __init__(self, data: bytes, what: str, *, ros1: bool) -> None:
        self.data, self.what = data, what
        if ros1:
            self.u32, self.pos, self.align, self.nul = _U32_LE, 0, 0, 0
            return
        if len(data) < 4:
            raise ImageDecodeError(
                f"{what} message truncated: {len(data)} bytes, shorter than the CDR header"
            )
        # Plain CDR (XCDR1) or plain XCDR2: the same layout for the 4-byte fields used here.
        if data[0] != 0 or data[1] not in (0, 1, 6, 7):
            raise ImageDecodeError(
                f"{what} message is not plain CDR (encapsulation {bytes(data[:2]).hex()})"
            )
        self.u32 = _U32_LE if data[1] & 1 else _U32_BE
        self.pos, self.align, self.nul = 4, 3, 1

    def truncated(self, field: str, need: int) -> ImageDecodeError:
        return ImageDecodeError(
            f"{self.what} message truncated: {field} at byte {self.pos} needs {need:,} bytes, "
            f"{max(len(self.data) - self.pos, 0):,} remain"
        )

    def skip(self, field: str, size: int) -> None:
        """Skip ``size`` bytes of 4-byte-aligned fields (a stamp, a sequence number)."""
        self.pos = (self.pos + self.align) & ~self.align
        if self.pos + size > len(self.data):
            raise self.truncated(field, size)
        self.pos += size

    def uint32(self, field: str) -> int:
        self.pos = (self.pos + self.align) & ~self.align
        if self.pos + 4 > len(self.data):
            raise self.truncated(field, 4)
        (value,) = self.u32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def uint8(self, field: str) -> int:
        if self.pos >= len(self.data):
            raise self.truncated(field, 1)
        self.pos += 1
        return self.data[self.pos - 1]

    def span(self, field: str) -> tuple[int, int]:
        """Return (offset, length) of a byte sequence, or of a string's characters."""
        length = self.uint32(field)
        start = self.pos
        if start + length > len(self.data):
            raise self.truncated(field, length)
        self.pos = start + length
        return start, length

    def string(self, field: str) -> str:
        start, length = self.span(field)
        raw = bytes(self.data[start : start + length])
        if self.nul and raw.endswith(b"\x00"):
            raw = raw[:-1]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ImageDecodeError(f"{self.what} message: {field} is not UTF-8") from None


def _check_ros_schema(channel: Channel, expected: Sequence[str]) -> None:
    """Refuse a schema that shares a standard name but not its fields, which the hand parser
    would misread. A channel without message-definition text (none, or IDL) is trusted by its
    name."""
    if channel.schema_encoding not in ("ros2msg", "ros1msg"):
        return
    text = channel.schema_data.decode("utf-8", "replace")
    names: list[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith(("==", "MSG:")):
            break
        parts = line.split()
        # A constant ("uint8 FOO=1") is not a field on the wire.
        if len(parts) >= 2 and "=" not in line:
            names.append(parts[1])
    if names and tuple(names) != tuple(expected):
        raise ImageDecodeError(
            f"topic {channel.topic}: schema {channel.schema_name} has fields {', '.join(names)}, "
            f"not the standard {', '.join(expected)}"
        )


def _ros_decoder(family: str, kind: str, *, ros1: bool) -> ImageDecoder:
    what = (
        "CompressedImage"
        if kind == "compressed"
        else ("Image" if family == "sensor" else "RawImage")
    )

    def start(data: bytes) -> _Cursor:
        cursor = _Cursor(data, what, ros1=ros1)
        if family == "sensor" and ros1:
            cursor.skip("header.seq", 4)
        cursor.skip("stamp", 8)
        cursor.span("frame_id")
        return cursor

    if kind == "compressed" and family == "sensor":

        def decode_sensor_compressed(data: bytes) -> RgbImage:
            cursor = start(data)
            image_format = cursor.string("format")
            offset, size = cursor.span("data")
            return _decode_compressed(data[offset : offset + size], image_format)

        return decode_sensor_compressed

    if kind == "compressed":

        def decode_foxglove_compressed(data: bytes) -> RgbImage:
            cursor = start(data)
            offset, size = cursor.span("data")
            image_format = cursor.string("format")
            return _decode_compressed(data[offset : offset + size], image_format)

        return decode_foxglove_compressed

    def decode_raw(data: bytes) -> RgbImage:
        cursor = start(data)
        if family == "sensor":
            height, width = cursor.uint32("height"), cursor.uint32("width")
            encoding = cursor.string("encoding")
            big_endian = bool(cursor.uint8("is_bigendian"))
        else:
            width, height = cursor.uint32("width"), cursor.uint32("height")
            encoding, big_endian = cursor.string("encoding"), False
        step = cursor.uint32("step")
        offset, size = cursor.span("data")
        return _decode_raw(
            data,
            offset,
            size,
            width=width,
            height=height,
            encoding=encoding,
            step=step,
            big_endian=big_endian,
        )

    return decode_raw


# --- protobuf and JSON ----------------------------------------------------------------------


def _protobuf_decoder(channel: Channel, kind: str) -> ImageDecoder:
    try:
        cls = protobuf_class(channel)
    except ValueError as exc:
        raise ImageDecodeError(f"topic {channel.topic}: {exc}") from None
    fields = cls.DESCRIPTOR.fields_by_name
    missing = [name for name in _PROTOBUF_FIELDS[kind] if name not in fields]
    if missing:
        raise ImageDecodeError(
            f"topic {channel.topic}: protobuf schema {channel.schema_name} lacks the field(s) "
            f"{', '.join(missing)}"
        )

    def parse(data: bytes) -> Any:
        try:
            return cls.FromString(data)
        except Exception as exc:  # DecodeError, or upb's own errors on malformed input
            raise ImageDecodeError(
                f"{channel.schema_name} message does not parse as protobuf ({exc})"
            ) from None

    if kind == "compressed":

        def decode_compressed(data: bytes) -> RgbImage:
            message = parse(data)
            return _decode_compressed(message.data, message.format)

        return decode_compressed

    def decode_raw(data: bytes) -> RgbImage:
        message = parse(data)
        pixels = message.data
        return _decode_raw(
            pixels,
            0,
            len(pixels),
            width=message.width,
            height=message.height,
            encoding=message.encoding,
            step=message.step,
            big_endian=False,  # foxglove.RawImage is little-endian by definition
        )

    return decode_raw


def _json_decoder(kind: str) -> ImageDecoder:
    def parse(data: bytes) -> dict[str, Any]:
        try:
            value = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise ImageDecodeError(f"JSON image message does not parse ({exc})") from None
        if not isinstance(value, dict):
            raise ImageDecodeError("JSON image message is not an object")
        return value

    def field(value: dict[str, Any], name: str, kinds: type | tuple[type, ...]) -> Any:
        item = value.get(name)
        if not isinstance(item, kinds) or (isinstance(item, bool) and kinds is int):
            raise ImageDecodeError(f"JSON image message has no valid {name!r} field")
        return item

    def pixels(value: dict[str, Any]) -> bytes:
        raw = value.get("data")
        if isinstance(raw, str):
            try:
                return base64.b64decode(raw, validate=True)
            except (binascii.Error, ValueError):
                raise ImageDecodeError("JSON image message: 'data' is not valid base64") from None
        if isinstance(raw, list):  # rosbridge-style list of byte values
            try:
                return bytes(raw)
            except (TypeError, ValueError):
                raise ImageDecodeError(
                    "JSON image message: 'data' is not a list of bytes"
                ) from None
        raise ImageDecodeError("JSON image message has no 'data' (base64 string or byte list)")

    if kind == "compressed":

        def decode_compressed(data: bytes) -> RgbImage:
            value = parse(data)
            return _decode_compressed(pixels(value), str(value.get("format", "")))

        return decode_compressed

    def decode_raw(data: bytes) -> RgbImage:
        value = parse(data)
        raw = pixels(value)
        width, height, step = (field(value, name, int) for name in ("width", "height", "step"))
        return _decode_raw(
            raw,
            0,
            len(raw),
            width=width,
            height=height,
            encoding=field(value, "encoding", str),
            step=step,
            big_endian=bool(value.get("is_bigendian", False)),
        )

    return decode_raw
