"""Decoding camera messages to RGB arrays: every supported stream, and malformed messages."""

from __future__ import annotations

import base64
import io
import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcap_ros2._dynamic import serialize_dynamic
from PIL import Image

from labeling.capture import Channel, Recording
from labeling.capture import synthetic as syn
from labeling.capture.decode import stamp_reader_for
from labeling.capture.images import ImageDecodeError, image_decoder_for

TIME_DEF = "\n================================================================================\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n"
FOXGLOVE_COMPRESSED_DEF = (
    "builtin_interfaces/Time timestamp\nstring frame_id\nuint8[] data\nstring format\n" + TIME_DEF
)
FOXGLOVE_RAW_DEF = (
    "builtin_interfaces/Time timestamp\nstring frame_id\nuint32 width\nuint32 height\n"
    "string encoding\nuint32 step\nuint8[] data\n" + TIME_DEF
)
STAMP = {"sec": 1_700_000_000, "nanosec": 5}


def cdr_channel(schema: str = "sensor_msgs/msg/Image", text: str = syn.IMAGE_MSG) -> Channel:
    return Channel("/camera/front/image_raw", schema, "ros2msg", "cdr", text.encode())


COMPRESSED = cdr_channel("sensor_msgs/msg/CompressedImage", syn.COMPRESSED_IMAGE_MSG)
RAW = cdr_channel()


def compressed_message(data: bytes, image_format: str = "jpeg", frame_id: str = "front") -> bytes:
    encode = serialize_dynamic("sensor_msgs/msg/CompressedImage", syn.COMPRESSED_IMAGE_MSG)
    header = {"stamp": STAMP, "frame_id": frame_id}
    return bytes(
        encode["sensor_msgs/msg/CompressedImage"](
            {"header": header, "format": image_format, "data": data}
        )
    )


def raw_message(
    data: bytes,
    width: int,
    height: int,
    encoding: str = "rgb8",
    step: int | None = None,
    *,
    big_endian: bool = False,
    frame_id: str = "front",
) -> bytes:
    encode = serialize_dynamic("sensor_msgs/msg/Image", syn.IMAGE_MSG)["sensor_msgs/msg/Image"]
    message = {
        "header": {"stamp": STAMP, "frame_id": frame_id},
        "height": height,
        "width": width,
        "encoding": encoding,
        "is_bigendian": int(big_endian),
        "step": step if step is not None else len(data) // max(height, 1),
        "data": data,
    }
    return bytes(encode(message))


def big_endian_raw_message(data: bytes, width: int, height: int, encoding: str, step: int) -> bytes:
    """sensor_msgs/msg/Image in big-endian CDR, which the mcap_ros2 writer cannot produce."""

    def pad(buf: bytearray) -> None:
        buf.extend(b"\x00" * (-(len(buf) - 4) % 4))

    def string(buf: bytearray, text: str) -> None:
        pad(buf)
        raw = text.encode() + b"\x00"
        buf.extend(struct.pack(">I", len(raw)) + raw)

    buf = bytearray(b"\x00\x00\x00\x00") + struct.pack(">iI", 1_700_000_000, 5)
    string(buf, "cam")  # 3 letters: the next field needs padding
    pad(buf)
    buf.extend(struct.pack(">II", height, width))
    string(buf, encoding)
    buf.append(1)
    pad(buf)
    buf.extend(struct.pack(">I", step))
    buf.extend(struct.pack(">I", len(data)) + data)
    return bytes(buf)


def frame(width: int = 24, height: int = 16, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def png(image: np.ndarray, mode: str | None = None) -> bytes:
    buffer = io.BytesIO()
    picture = Image.fromarray(image)
    picture.save(buffer, "PNG") if mode is None else picture.convert(mode).save(buffer, "PNG")
    return buffer.getvalue()


def jpeg(image: np.ndarray, quality: int = 90) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def luma(image: np.ndarray) -> np.ndarray:
    return np.repeat(np.asarray(Image.fromarray(image).convert("L"))[:, :, None], 3, axis=2)


# --- every stream the synthetic recordings write ------------------------------------------


@pytest.mark.parametrize("encoding", syn.ENCODINGS)
def test_every_encoding_decodes_to_the_frame_that_was_written(tmp_path: Path, encoding: str):
    camera = syn.CameraPlan("front", encoding=encoding, fps=10.0)
    plan = syn.RecordingPlan(duration_s=0.5, cameras=[camera], state_topic=None, action_topic=None)
    files = syn.write_recording(tmp_path / "rec.mcap", plan)

    messages = list(Recording(files).messages())
    decode = image_decoder_for(messages[0].channel)
    read_stamp = stamp_reader_for(messages[0].channel)

    assert len(messages) == 5
    assert read_stamp is not None
    for message in messages:
        stamp = read_stamp(message.data)
        assert stamp is not None
        t_us = (stamp - syn.T0_NS) // 1000
        written = syn.render_clock(t_us, camera.width, camera.height, scene=camera.scene)
        image = decode(message.data)
        assert image.shape == (camera.height, camera.width, 3)
        assert image.dtype == np.uint8
        assert image.flags.c_contiguous
        if "jpeg" in encoding:
            assert syn.read_clock(image) == t_us
        elif encoding == "mono8":
            np.testing.assert_array_equal(image, luma(written))
        else:
            np.testing.assert_array_equal(image, written)


def test_unpadded_rgb8_is_a_view_on_the_message_bytes():
    pixels = frame()
    data = raw_message(pixels.tobytes(), 24, 16)

    image = image_decoder_for(RAW)(data)

    np.testing.assert_array_equal(image, pixels)
    assert np.shares_memory(image, np.frombuffer(data, np.uint8))
    assert not image.flags.writeable


# --- sensor_msgs/msg/Image ----------------------------------------------------------------


def stored(pixels: np.ndarray, encoding: str) -> tuple[np.ndarray, np.ndarray]:
    """The bytes a camera sends in ``encoding`` for ``pixels``, and the RGB they stand for."""
    grey = np.asarray(Image.fromarray(pixels).convert("L"))
    alpha = np.full((*pixels.shape[:2], 1), 7, np.uint8)
    if encoding == "rgb8":
        return pixels, pixels
    if encoding in ("bgr8", "8UC3"):
        return pixels[:, :, ::-1], pixels
    if encoding == "rgba8":
        return np.concatenate([pixels, alpha], axis=2), pixels
    if encoding == "bgra8":
        return np.concatenate([pixels[:, :, ::-1], alpha], axis=2), pixels
    return grey, np.repeat(grey[:, :, None], 3, axis=2)  # mono8, 8UC1


@pytest.mark.parametrize("encoding", ["rgb8", "bgr8", "8UC3", "rgba8", "bgra8", "mono8", "8UC1"])
@pytest.mark.parametrize("padding", [0, 3])
def test_raw_encodings_decode_to_rgb_skipping_row_padding(encoding: str, padding: int):
    pixels = frame(width=13, height=7)
    raw, expected = stored(pixels, encoding)
    rows = raw.reshape(7, -1)
    padded = np.concatenate([rows, np.full((7, padding), 99, np.uint8)], axis=1)
    data = raw_message(padded.tobytes(), 13, 7, encoding, step=padded.shape[1], frame_id="ab")

    image = image_decoder_for(RAW)(data)

    np.testing.assert_array_equal(image, expected)
    assert image.flags.c_contiguous


@pytest.mark.parametrize("big_endian", [False, True])
def test_mono16_is_scaled_to_8_bits_in_the_byte_order_the_message_names(big_endian: bool):
    values = np.array([[0, 255, 256, 32768, 65535]], np.uint16)
    data = values.astype(">u2" if big_endian else "<u2").tobytes() + b"\x00\x00"  # padded step

    image = image_decoder_for(RAW)(raw_message(data, 5, 1, "mono16", 12, big_endian=big_endian))

    assert image[0, :, 0].tolist() == [0, 0, 1, 128, 255]
    assert (image == image[:, :, :1]).all()


def test_big_endian_cdr_decodes_like_little_endian():
    pixels = frame(width=5, height=3)

    big = image_decoder_for(RAW)(big_endian_raw_message(pixels.tobytes(), 5, 3, "rgb8", 15))

    np.testing.assert_array_equal(big, pixels)


# --- sensor_msgs/msg/CompressedImage --------------------------------------------------------


@pytest.mark.parametrize(
    "image_format",
    ["png", "rgb8; png compressed bgr8", "bgr8; png compressed bgr8", "bgr8; png compressed"],
)
def test_png_decodes_exactly_in_true_colours_whatever_the_format_string_says(image_format: str):
    pixels = frame()

    image = image_decoder_for(COMPRESSED)(compressed_message(png(pixels), image_format))

    np.testing.assert_array_equal(image, pixels)


@pytest.mark.parametrize(
    "image_format", ["jpeg", "jpg", "rgb8; jpeg compressed bgr8", "bgr8; jpeg compressed bgr8"]
)
def test_jpeg_decodes_in_true_colours_whatever_the_format_string_says(image_format: str):
    # image_transport hands OpenCV bgr8 and OpenCV writes a standard (YCbCr) JPEG, so a red
    # frame is red here, never blue.
    red = np.zeros((16, 16, 3), np.uint8)
    red[:, :, 0] = 250
    clock = syn.render_clock(123_456, 96, 64)

    decode = image_decoder_for(COMPRESSED)
    decoded_red = decode(compressed_message(jpeg(red), image_format))

    assert (decoded_red[:, :, 0] > 240).all() and (decoded_red[:, :, 2] < 15).all()
    assert syn.read_clock(decode(compressed_message(jpeg(clock), image_format))) == 123_456


def test_grey_and_16_bit_compressed_frames_become_three_channel_rgb():
    pixels = frame()
    grey = np.asarray(Image.fromarray(pixels).convert("L"))
    wide = (grey.astype(np.uint16) << 8) | 0xFF
    buffer = io.BytesIO()
    Image.fromarray(wide).save(buffer, "PNG")
    decode = image_decoder_for(COMPRESSED)

    from_grey = decode(compressed_message(png(pixels, "L"), "mono8; png compressed "))
    from_wide = decode(compressed_message(buffer.getvalue(), "mono16; png compressed "))
    from_palette = decode(compressed_message(png(pixels, "P"), "png"))

    np.testing.assert_array_equal(from_grey, np.repeat(grey[:, :, None], 3, axis=2))
    np.testing.assert_array_equal(from_wide, from_grey)
    assert from_palette.shape == (16, 24, 3) and from_palette.flags.c_contiguous


def test_ros1_style_schema_names_are_accepted():
    pixels = frame()
    channel = Channel("/cam", "sensor_msgs/CompressedImage", "ros2msg", "cdr", b"")
    raw_channel = Channel("/cam", "sensor_msgs/Image", "ros2msg", "cdr", b"")

    from_compressed = image_decoder_for(channel)(compressed_message(png(pixels)))
    from_raw = image_decoder_for(raw_channel)(raw_message(pixels.tobytes(), 24, 16))

    np.testing.assert_array_equal(from_compressed, pixels)
    np.testing.assert_array_equal(from_raw, pixels)


def test_ros1_serialised_image_decodes():
    pixels = frame(width=4, height=2)
    frame_id = b"cam"
    data = (
        struct.pack("<IIII", 9, 1_700_000_000, 5, len(frame_id))
        + frame_id
        + struct.pack("<III", 2, 4, 4)
        + b"bgr8"
        + b"\x00"
        + struct.pack("<II", 12, 24)
        + pixels[:, :, ::-1].tobytes()
    )
    channel = Channel("/cam", "sensor_msgs/Image", "ros1msg", "ros1", b"")

    np.testing.assert_array_equal(image_decoder_for(channel)(data), pixels)


def test_foxglove_ros2_messages_decode():
    pixels = frame()
    stamp = {"timestamp": STAMP, "frame_id": "cam7"}
    compressed = serialize_dynamic("foxglove_msgs/msg/CompressedImage", FOXGLOVE_COMPRESSED_DEF)[
        "foxglove_msgs/msg/CompressedImage"
    ]({**stamp, "data": png(pixels), "format": "png"})
    raw = serialize_dynamic("foxglove_msgs/msg/RawImage", FOXGLOVE_RAW_DEF)[
        "foxglove_msgs/msg/RawImage"
    ](
        {
            **stamp,
            "width": 24,
            "height": 16,
            "encoding": "rgb8",
            "step": 72,
            "data": pixels.tobytes(),
        }
    )

    decode_compressed = image_decoder_for(
        cdr_channel("foxglove_msgs/msg/CompressedImage", FOXGLOVE_COMPRESSED_DEF)
    )
    decode_raw = image_decoder_for(cdr_channel("foxglove_msgs/msg/RawImage", FOXGLOVE_RAW_DEF))

    np.testing.assert_array_equal(decode_compressed(bytes(compressed)), pixels)
    np.testing.assert_array_equal(decode_raw(bytes(raw)), pixels)


# --- streams that cannot be decoded -------------------------------------------------------


@pytest.mark.parametrize(
    ("channel", "problem"),
    [
        (Channel("/c", "sensor_msgs/msg/CameraInfo", "ros2msg", "cdr", b""), "not a supported"),
        (Channel("/c", "foxglove.CompressedVideo", "protobuf", "protobuf", b""), "not a supported"),
        (Channel("/c", "foxglove.RawImage", "", "cbor", b""), "encoding 'cbor'"),
        (cdr_channel(text="std_msgs/Header header\nstring data\n"), "fields header, data"),
        (Channel("/c", "foxglove.RawImage", "protobuf", "protobuf", b"\xff"), "FileDescriptorSet"),
        (
            Channel(
                "/c",
                "foxglove.RawImage",
                "protobuf",
                "protobuf",
                syn.foxglove_descriptors("foxglove.CompressedImage"),
            ),
            "does not define",
        ),
    ],
)
def test_unsupported_streams_are_refused_when_the_decoder_is_made(channel: Channel, problem: str):
    with pytest.raises(ImageDecodeError, match=problem):
        image_decoder_for(channel)


def test_a_protobuf_schema_missing_image_fields_is_refused():
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto(name="x.proto", package="foxglove", syntax="proto3")
    proto.message_type.add(name="RawImage").field.add(
        name="data", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    )
    schema = descriptor_pb2.FileDescriptorSet(file=[proto]).SerializeToString()
    channel = Channel("/c", "foxglove.RawImage", "protobuf", "protobuf", schema)

    with pytest.raises(ImageDecodeError, match="lacks the field.*width"):
        image_decoder_for(channel)


# --- malformed messages -------------------------------------------------------------------

GOOD_RAW = raw_message(frame(width=3, height=2).tobytes(), 3, 2, frame_id="odd")
GOOD_COMPRESSED = compressed_message(png(frame(width=3, height=2)), "png", frame_id="odd")
PROTO_RAW = Channel(
    "/c", "foxglove.RawImage", "protobuf", "protobuf", syn.foxglove_descriptors("foxglove.RawImage")
)
JSON_RAW = Channel("/c", "foxglove.RawImage", "jsonschema", "json", b"{}")
JSON_COMPRESSED = Channel("/c", "foxglove.CompressedImage", "jsonschema", "json", b"{}")


def json_raw(**fields: object) -> bytes:
    value = {"width": 2, "height": 1, "encoding": "rgb8", "step": 6}
    value["data"] = base64.b64encode(bytes(6)).decode()
    value.update(fields)
    return json.dumps(value).encode()


@pytest.mark.parametrize(
    ("channel", "data", "problem"),
    [
        (RAW, b"\x00\x01", "shorter than the CDR header"),
        (RAW, GOOD_RAW[:30], "truncated"),
        (RAW, GOOD_RAW[:-1], "truncated: data"),
        (RAW, b"\x00\x03\x00\x00" + GOOD_RAW[4:], "not plain CDR"),
        (RAW, raw_message(bytes(17), 3, 2, step=9), "holds 17 bytes.*needs 18"),
        (RAW, raw_message(bytes(6), 3, 2, "rgb8", step=3), "step 3 is shorter"),
        (RAW, raw_message(bytes(6), 3, 0, "rgb8", step=9), "no pixels"),
        (RAW, raw_message(bytes(6), 3, 2, "bayer_rggb8", step=3), "'bayer_rggb8' is not supported"),
        (COMPRESSED, GOOD_COMPRESSED[:-10], "truncated: data"),
        (COMPRESSED, compressed_message(b"not an image at all"), "not a decodable image"),
        (COMPRESSED, compressed_message(png(frame())[:60], "png"), "not a decodable image"),
        (COMPRESSED, compressed_message(jpeg(frame())[:200], "jpeg"), "not a decodable image"),
        (COMPRESSED, compressed_message(b"x", "16UC1; compressedDepth png"), "depth"),
        (PROTO_RAW, b"\xff\xff\xff", "does not parse as protobuf"),
        (PROTO_RAW, b"", "encoding '' is not supported"),
        (JSON_RAW, b"{not json", "does not parse"),
        (JSON_RAW, b"[]", "not an object"),
        (JSON_RAW, json_raw(data="***"), "not valid base64"),
        (JSON_RAW, json_raw(width="2"), "valid 'width'"),
        (JSON_RAW, json_raw(step=True), "valid 'step'"),
        (JSON_COMPRESSED, json.dumps({"format": "png"}).encode(), "no 'data'"),
    ],
)
def test_malformed_messages_raise_an_error_naming_the_problem(
    channel: Channel, data: bytes, problem: str
):
    decode = image_decoder_for(channel)

    with pytest.raises(ImageDecodeError, match=problem):
        decode(data)


@pytest.mark.parametrize("message", [GOOD_RAW, GOOD_COMPRESSED], ids=["raw", "compressed"])
def test_every_truncation_of_a_message_raises_image_decode_error(message: bytes):
    decode = image_decoder_for(RAW if message is GOOD_RAW else COMPRESSED)

    for length in range(len(message)):
        with pytest.raises(ImageDecodeError):
            decode(message[:length])


@pytest.mark.parametrize(
    "channel",
    [
        RAW,
        COMPRESSED,
        PROTO_RAW,
        JSON_RAW,
        Channel(
            "/c",
            "foxglove.CompressedImage",
            "protobuf",
            "protobuf",
            syn.foxglove_descriptors("foxglove.CompressedImage"),
        ),
        Channel("/cam", "sensor_msgs/Image", "ros1msg", "ros1", b""),
    ],
    ids=["cdr-raw", "cdr-compressed", "protobuf-raw", "json-raw", "protobuf-compressed", "ros1"],
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_image_decode_error(channel: Channel, data: bytes):
    decode = image_decoder_for(channel)

    try:
        image = decode(data)
    except ImageDecodeError:
        return
    assert image.ndim == 3 and image.shape[2] == 3 and image.dtype == np.uint8
