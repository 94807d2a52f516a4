"""Write ROS 2 MCAP recordings whose content can be checked, for tests, benchmarks and the demo.

Every camera frame shows its true capture time in its pixels as a clock code
(:func:`render_clock`; :func:`read_clock` reads it back, also after JPEG, video coding and
resizing), and every joint value is a strictly monotonic function of its sample time
(:func:`state_value` and :func:`action_value`, inverted by :func:`state_time` and
:func:`action_time`). So a converted dataset can be checked row by row from its data alone:
which frame, which state and which action ended up in each row.

Times are integer nanoseconds; ``t0_ns`` is time zero. A camera captures at true times on its
nominal grid plus seeded jitter, in whole microseconds (what the clock code shows), and stamps
each frame with its true time plus its clock offset. Joint messages are stamped with their sample
time (except the one planned ``backwards_at_s`` message). Every message is logged
``log_latency_ns`` after its true time: the recorder's clock is right, so a camera whose clock
runs ahead shows it as stamps ahead of log time minus latency.

Messages are written as they are generated, merged across streams in log-time order, so memory
does not grow with the recording's duration.
"""

from __future__ import annotations

import base64
import functools
import heapq
import io
import json
import math
import os
import random
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from mcap.writer import CompressionType, IndexType
from mcap.writer import Writer as McapWriter
from mcap_ros2._dynamic import serialize_dynamic
from PIL import Image

__all__ = [
    "ENCODINGS",
    "JOINTS",
    "T0_NS",
    "CameraPlan",
    "RecordingPlan",
    "action_time",
    "action_value",
    "read_clock",
    "render_clock",
    "state_time",
    "state_value",
    "write_recording",
]

T0_NS = 1_700_000_000_000_000_000
JOINTS = ("shoulder_pan", "elbow_flex", "wrist_roll", "gripper")

RgbImage = npt.NDArray[np.uint8]

# sensor_msgs/msg/CompressedImage, then sensor_msgs/msg/Image, then the foxglove schemas.
COMPRESSED_ENCODINGS = ("jpeg", "png", "foxglove-jpeg", "foxglove-jpeg-json")
RAW_ENCODINGS = ("rgb8", "bgr8", "mono8", "foxglove-raw", "foxglove-raw-json")
ENCODINGS = COMPRESSED_ENCODINGS + RAW_ENCODINGS


@dataclass
class CameraPlan:
    """One camera stream of a synthetic recording."""

    name: str = "front"
    topic: str | None = None  # default: see resolved_topic
    width: int = 96
    height: int = 64
    fps: float = 30.0
    encoding: str = "jpeg"  # one of ENCODINGS
    clock_offset_ms: float = 0.0  # header stamp = true capture time + offset
    jitter_ms: float = 0.0  # capture times jittered uniformly within ±jitter (seeded)
    drop: tuple[float, float] | None = None  # no frames with true time (s) in [a, b)
    start_s: float = 0.0  # stream starts late
    stop_s: float | None = None  # stream stops early
    resize_at_s: float | None = None  # from then on frames are twice the width and height
    corrupt_at_s: float | None = None  # the first frame at/after this carries undecodable bytes
    quality: int = 90  # JPEG quality

    @property
    def resolved_topic(self) -> str:
        """The topic, defaulting to where image_transport publishes the camera's stream."""
        if self.topic is not None:
            return self.topic
        suffix = "/compressed" if self.encoding in COMPRESSED_ENCODINGS else ""
        return f"/camera/{self.name}/image_raw{suffix}"

    @property
    def scene(self) -> int:
        """The ``scene`` its frames are rendered with: fixed by the name, so the same camera
        looks the same in every recording and two cameras look different."""
        return zlib.crc32(self.name.encode())


@dataclass
class RecordingPlan:
    """What to write: streams, their rates and timing faults, and the file layout."""

    duration_s: float = 3.0
    t0_ns: int = T0_NS
    cameras: list[CameraPlan] = field(
        default_factory=lambda: [CameraPlan("front"), CameraPlan("wrist")]
    )
    joints: tuple[str, ...] = JOINTS
    state_topic: str | None = "/joint_states"  # sensor_msgs/msg/JointState, state_value
    state_hz: float = 50.0
    state_jitter_ms: float = 0.0
    state_start_s: float = 0.0
    state_stop_s: float | None = None
    action_topic: str | None = "/joint_commands"  # sensor_msgs/msg/JointState, action_value
    action_hz: float = 50.0
    shuffle_joint_order: bool = True  # each message lists its joints in a seeded random order
    names_in_messages: bool = True  # False: empty `name`, positions in `joints` order
    missing_joint: str | None = None  # never appears in state or action messages
    backwards_at_s: float | None = None  # one state message stamped before the previous one
    log_latency_ns: int = 2_000_000  # log time = true time + latency
    split_every_s: float | None = None  # a folder of name_0.mcap, name_1.mcap... like rosbag2
    compression: str = "zstd"  # "zstd" | "lz4" | "none"
    chunk_size: int = 1024 * 1024
    seed: int = 0
    truncate_fraction: float | None = None  # cut the last file to this fraction of its bytes
    # Spans (s from start) in which the robot stands still: every joint holds the value it had
    # when the span began (between takes of a long recording).
    still: tuple[tuple[float, float], ...] = ()


# --- joint values -------------------------------------------------------------------------

_STATE_BASE, _STATE_RATE = 0.1, 0.05


def state_value(joint_index: int, t_s: float) -> float:
    """Return joint ``joint_index``'s state at ``t_s`` seconds after t0 (strictly increasing)."""
    return _STATE_BASE * (joint_index + 1) + _STATE_RATE * t_s


def action_value(joint_index: int, t_s: float) -> float:
    """Return joint ``joint_index``'s commanded action at ``t_s`` (strictly decreasing, < 0)."""
    return -_STATE_BASE * (joint_index + 1) - _STATE_RATE * t_s


def state_time(joint_index: int, value: float) -> float:
    """Return the time (s after t0) at which joint ``joint_index``'s state was ``value``."""
    return (value - _STATE_BASE * (joint_index + 1)) / _STATE_RATE


def action_time(joint_index: int, value: float) -> float:
    """Return the time (s after t0) at which joint ``joint_index``'s action was ``value``."""
    return -(value + _STATE_BASE * (joint_index + 1)) / _STATE_RATE


# --- the clock code -----------------------------------------------------------------------
#
# A box at fixed fractions of the image holds a white quiet zone half a cell wide around a grid
# of CLOCK_COLS x CLOCK_ROWS grey cells, black or white. The first and last columns are a fixed
# alternating pattern: the reader finds its black and white levels there and refuses an image
# where they are not what they must be. The other 40 cells carry the 32-bit time and a CRC-8
# over it, most significant bit first, black = 1. Fractions rather than pixels make the code
# independent of the image size, so it reads the same after any resize, aspect ratio included.

CLOCK_COLS, CLOCK_ROWS = 10, 5
_BOX_X = (0.05, 0.95)  # fractions of the width
_BOX_Y = (0.125, 0.875)  # fractions of the height
_BLACK, _WHITE = 0, 255
_FIXED = np.zeros((CLOCK_ROWS, CLOCK_COLS), bool)
_FIXED[:, 0] = _FIXED[:, -1] = True
# Black (True) where the fixed pattern is black: down the first column B W B W B, the last
# column the inverse.
_FIXED_BLACK = np.zeros((CLOCK_ROWS, CLOCK_COLS), bool)
_FIXED_BLACK[::2, 0] = True
_FIXED_BLACK[1::2, -1] = True
_DATA_BITS = int((~_FIXED).sum())  # 40: 32 time bits and 8 CRC bits
# A data cell or fixed cell must lie this fraction of the black-white contrast away from the
# threshold; and the contrast must be at least this many grey levels.
_MIN_MARGIN = 0.2
_MIN_CONTRAST = 64.0
# The reader averages the middle half of each cell, which tolerates blur and resampling.
_WINDOW = 0.5
_SAMPLES = 8


def _crc8_table() -> list[int]:
    # CRC-8/AUTOSAR (polynomial 0x2F): Hamming distance 4 at this length, so any 3 misread
    # cells are caught; its non-zero init and final XOR make an all-white or all-black grid
    # invalid.
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x2F) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
        table.append(crc)
    return table


_CRC8 = _crc8_table()


def _crc8(value: int) -> int:
    crc = 0xFF
    for byte in value.to_bytes(4, "big"):
        crc = _CRC8[crc ^ byte]
    return crc ^ 0xFF


def _clock_cells(t_us: int) -> npt.NDArray[np.uint8]:
    word = (t_us << 8) | _crc8(t_us)
    bits = (word >> np.arange(_DATA_BITS - 1, -1, -1, dtype=np.int64)) & 1
    cells = np.where(_FIXED_BLACK, _BLACK, _WHITE).astype(np.uint8)
    cells[~_FIXED] = np.where(bits == 1, _BLACK, _WHITE)
    return cells


@functools.lru_cache(maxsize=32)
def _unit_runs(pixels: int, lo: float, hi: float, cells: int) -> tuple[int, int, tuple[int, ...]]:
    """Return the box's first and end pixel and how many pixels each unit spans: the quiet
    half-cell, each cell, the quiet half-cell. A pixel belongs where its centre falls."""
    centres = (np.arange(pixels) + 0.5) / pixels
    inside = np.nonzero((centres >= lo) & (centres < hi))[0]
    start, end = int(inside[0]), int(inside[-1]) + 1
    units = np.floor((centres[start:end] - lo) / (hi - lo) * (cells + 1) + 0.5).astype(np.intp)
    counts = np.bincount(np.clip(units, 0, cells + 1), minlength=cells + 2)
    return start, end, tuple(int(c) for c in counts)


def _cell_windows(pixels: int, lo: float, hi: float, cells: int) -> list[tuple[int, int]]:
    """Return the pixel range sampled for each cell: its middle, at least one pixel."""
    unit = (hi - lo) / (cells + 1) * pixels
    windows = []
    for k in range(cells):
        centre = (lo * pixels) + (k + 1) * unit
        first = math.floor(centre - unit * _WINDOW / 2)
        end = max(math.ceil(centre + unit * _WINDOW / 2), first + 1)
        windows.append((max(first, 0), min(end, pixels)))
    return windows


def _check_clock_size(width: int, height: int) -> None:
    unit_w = width * (_BOX_X[1] - _BOX_X[0]) / (CLOCK_COLS + 1)
    unit_h = height * (_BOX_Y[1] - _BOX_Y[0]) / (CLOCK_ROWS + 1)
    if min(unit_w, unit_h) < 2:
        raise ValueError(
            f"a {width}x{height} image is too small for the clock code "
            f"(its cells would be {unit_w:.1f}x{unit_h:.1f} pixels; they need at least 2)"
        )


@functools.lru_cache(maxsize=64)
def _scene(scene: int) -> dict[str, Any]:
    rng = np.random.default_rng(scene)
    return {
        "freq": rng.uniform(0.4, 1.6, (2, 3)),  # cycles across the width / height, per channel
        "speed": rng.uniform(0.05, 0.3, (2, 3)) * rng.choice([-1, 1], (2, 3)),  # cycles per s
        "phase": rng.uniform(0, 1, (2, 3)),
        "blob_speed": rng.uniform(0.1, 0.4, 2),  # sweeps per second
        "blob_phase": rng.uniform(0, 1, 2),
        "blob_colour": rng.integers(0, 256, (2, 3)).astype(np.float32),
    }


def _background(t_s: float, width: int, height: int, scene: int) -> RgbImage:
    """Colour waves drifting in time, and a soft blob sweeping along the top and bottom.

    Only the part around the clock code box is painted (the box is left uninitialised): the
    code covers two thirds of the image, and this runs for every frame.
    """
    p = _scene(scene)
    image = np.empty((height, width, 3), np.uint8)
    x = (np.arange(width) / width)[:, None]
    y = (np.arange(height) / height)[:, None]
    # Each profile is in 0..127, so their sum fits a uint8.
    cols = 63.5 * (1 + np.sin(2 * np.pi * (p["freq"][0] * x + p["speed"][0] * t_s + p["phase"][0])))
    rows = 63.5 * (1 + np.sin(2 * np.pi * (p["freq"][1] * y + p["speed"][1] * t_s + p["phase"][1])))
    cols_u8, rows_u8 = cols.astype(np.uint8), rows.astype(np.uint8)
    y0, y1, _ = _unit_runs(height, *_BOX_Y, CLOCK_ROWS)
    x0, x1, _ = _unit_runs(width, *_BOX_X, CLOCK_COLS)
    everywhere = slice(0, width)
    for ys, xs in (
        (slice(0, y0), everywhere),
        (slice(y1, height), everywhere),
        (slice(y0, y1), slice(0, x0)),
        (slice(y0, y1), slice(x1, width)),
    ):
        # One channel at a time: numpy broadcasts over a trailing axis of 3 far slower.
        for c in range(3):
            np.add(rows_u8[ys, c, None], cols_u8[None, xs, c], out=image[ys, xs, c])
    radius = max(height * _BOX_Y[0] * 0.8, 1.0)
    for k, (cy, top, bottom) in enumerate(((y0 / 2, 0, y0), ((y1 + height) / 2, y1, height))):
        sweep = 0.5 + 0.45 * math.sin(2 * math.pi * (p["blob_speed"][k] * t_s + p["blob_phase"][k]))
        cx = width * sweep
        bx0, bx1 = max(int(cx - radius), 0), min(int(cx + radius) + 1, width)
        by0, by1 = max(int(cy - radius), top), min(int(cy + radius) + 1, bottom)
        if bx0 >= bx1 or by0 >= by1:
            continue
        dx = np.arange(bx0, bx1) + 0.5 - cx
        dy = np.arange(by0, by1) + 0.5 - cy
        alpha = np.clip(1 - np.hypot(dy[:, None], dx[None, :]) / radius, 0, 1)[:, :, None]
        patch = image[by0:by1, bx0:bx1].astype(np.float32)
        patch += alpha * (p["blob_colour"][k] - patch)
        image[by0:by1, bx0:bx1] = patch.astype(np.uint8)
    return image


def render_clock(t_us: int, width: int, height: int, *, scene: int = 0) -> RgbImage:
    """Return a ``height`` x ``width`` x 3 uint8 image showing ``t_us`` as a clock code.

    The code sits in a fixed box (90% x 75% of the image, centred) in grey (R=G=B); around it
    moves a colourful pattern that ``scene`` varies. Raises ValueError when ``t_us`` is not in
    [0, 2**32) or the image is too small for cells of 2 pixels.
    """
    if not 0 <= t_us < 2**32:
        raise ValueError(f"clock time {t_us} µs is outside [0, 2**32)")
    _check_clock_size(width, height)
    image = _background(t_us / 1e6, width, height, scene)
    units = np.full((CLOCK_ROWS + 2, CLOCK_COLS + 2, 3), _WHITE, np.uint8)
    units[1:-1, 1:-1] = _clock_cells(t_us)[:, :, None]
    y0, y1, row_runs = _unit_runs(height, *_BOX_Y, CLOCK_ROWS)
    x0, x1, col_runs = _unit_runs(width, *_BOX_X, CLOCK_COLS)
    # Widen the few unit rows first, then copy whole pixel rows: both are plain memory copies.
    unit_rows = np.repeat(units, col_runs, axis=1)
    image[y0:y1, x0:x1] = np.repeat(unit_rows, row_runs, axis=0)
    return image


def read_clock(image: npt.NDArray[Any]) -> int:
    """Return the time (µs after t0) that :func:`render_clock` drew into ``image``.

    Accepts HxWx3 (or x4) RGB and HxW grey arrays with values in 0..255, of any size.
    Raises ValueError saying the code is unreadable when the fixed pattern is missing, a cell
    is neither clearly black nor white, or the checksum does not match: a damaged code raises
    rather than returning a wrong time.
    """
    pixels = np.asarray(image)
    if pixels.ndim == 3 and pixels.shape[2] in (3, 4):
        pixels = pixels[:, :, :3]
    elif pixels.ndim != 2:
        raise ValueError(
            f"clock code unreadable: expected an HxWx3 or HxW image, got shape {pixels.shape}"
        )
    height, width = pixels.shape[:2]
    try:
        _check_clock_size(width, height)
    except ValueError as exc:
        raise ValueError(f"clock code unreadable: {exc}") from None
    means = _cell_means(pixels, height, width)
    black = float(means[_FIXED_BLACK].mean())
    white = float(means[_FIXED & ~_FIXED_BLACK].mean())
    contrast = white - black
    if contrast < _MIN_CONTRAST:
        raise ValueError(
            f"clock code unreadable: no fixed pattern (black {black:.0f}, white {white:.0f})"
        )
    threshold = (black + white) / 2
    margin = _MIN_MARGIN * contrast
    dark = means < threshold - margin
    light = means > threshold + margin
    if not (dark[_FIXED_BLACK].all() and light[_FIXED & ~_FIXED_BLACK].all()):
        raise ValueError("clock code unreadable: the fixed pattern is damaged")
    unclear = ~(dark | light) & ~_FIXED
    if unclear.any():
        raise ValueError(
            f"clock code unreadable: {int(unclear.sum())} cell(s) neither black nor white"
        )
    word = 0
    for bit in dark[~_FIXED]:
        word = (word << 1) | int(bit)
    t_us, crc = word >> 8, word & 0xFF
    if _crc8(t_us) != crc:
        raise ValueError("clock code unreadable: checksum mismatch")
    return t_us


def _cell_means(pixels: npt.NDArray[Any], height: int, width: int) -> npt.NDArray[np.float64]:
    """Mean grey level of the middle of each cell, in one vectorised pass."""
    row_index, row_counts = _sample_index(_cell_windows(height, *_BOX_Y, CLOCK_ROWS))
    col_index, col_counts = _sample_index(_cell_windows(width, *_BOX_X, CLOCK_COLS))
    sub = pixels[row_index[:, None], col_index[None, :]].astype(np.float64)
    if sub.ndim == 3:
        sub = sub.mean(axis=2)
    row_starts = np.concatenate([[0], np.cumsum(row_counts)[:-1]])
    col_starts = np.concatenate([[0], np.cumsum(col_counts)[:-1]])
    sums = np.add.reduceat(np.add.reduceat(sub, row_starts, axis=0), col_starts, axis=1)
    return np.asarray(sums / np.outer(row_counts, col_counts), dtype=np.float64)


def _sample_index(windows: list[tuple[int, int]]) -> tuple[npt.NDArray[np.intp], list[int]]:
    """Pixel indices of every window, at most _SAMPLES evenly spread per window: in a large
    image that is plenty, and it keeps reading cheap."""
    parts = []
    for first, end in windows:
        count = end - first
        if count > _SAMPLES:
            parts.append(first + np.arange(_SAMPLES) * count // _SAMPLES)
        else:
            parts.append(np.arange(first, end))
    return np.concatenate(parts).astype(np.intp), [len(part) for part in parts]


# --- message definitions ------------------------------------------------------------------

_HEADER_DEFS = """
================================================================================
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id
================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec
"""
JOINT_STATE_MSG = (
    "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\n"
    "float64[] effort\n" + _HEADER_DEFS
)
COMPRESSED_IMAGE_MSG = "std_msgs/Header header\nstring format\nuint8[] data\n" + _HEADER_DEFS
IMAGE_MSG = (
    "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\nuint8 is_bigendian\n"
    "uint32 step\nuint8[] data\n" + _HEADER_DEFS
)

_TIME_JSON = {
    "type": "object",
    "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}},
}
_FOXGLOVE_JSON_SCHEMAS: dict[str, dict[str, Any]] = {
    "foxglove.CompressedImage": {
        "title": "foxglove.CompressedImage",
        "type": "object",
        "properties": {
            "timestamp": _TIME_JSON,
            "frame_id": {"type": "string"},
            "data": {"type": "string", "contentEncoding": "base64"},
            "format": {"type": "string"},
        },
    },
    "foxglove.RawImage": {
        "title": "foxglove.RawImage",
        "type": "object",
        "properties": {
            "timestamp": _TIME_JSON,
            "frame_id": {"type": "string"},
            "width": {"type": "integer"},
            "height": {"type": "integer"},
            "encoding": {"type": "string"},
            "step": {"type": "integer"},
            "data": {"type": "string", "contentEncoding": "base64"},
        },
    },
}


def foxglove_descriptors(schema_name: str) -> bytes:
    """Return the FileDescriptorSet of ``foxglove.CompressedImage`` or ``foxglove.RawImage``,
    as an MCAP ``protobuf`` schema stores it (the message's file and the Timestamp it imports)."""
    short = schema_name.removeprefix("foxglove.")
    proto = descriptor_pb2.FileDescriptorProto(
        name=f"foxglove/{short}.proto",
        package="foxglove",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    message = proto.message_type.add(name=short)
    f = descriptor_pb2.FieldDescriptorProto
    message.field.add(
        name="timestamp", number=1, type=f.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp"
    )
    if short == "CompressedImage":
        layout = [("frame_id", 4, f.TYPE_STRING), ("data", 2, f.TYPE_BYTES)]
        layout.append(("format", 3, f.TYPE_STRING))
    elif short == "RawImage":
        layout = [("frame_id", 7, f.TYPE_STRING), ("width", 2, f.TYPE_FIXED32)]
        layout += [("height", 3, f.TYPE_FIXED32), ("encoding", 4, f.TYPE_STRING)]
        layout += [("step", 5, f.TYPE_FIXED32), ("data", 6, f.TYPE_BYTES)]
    else:
        raise ValueError(f"no foxglove schema {schema_name!r} here")
    for name, number, kind in layout:
        message.field.add(name=name, number=number, type=kind)
    timestamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp)
    return descriptor_pb2.FileDescriptorSet(file=[proto, timestamp]).SerializeToString()


@functools.lru_cache(maxsize=4)
def _foxglove_class(schema_name: str) -> Any:
    pool = descriptor_pool.DescriptorPool()
    files = descriptor_pb2.FileDescriptorSet.FromString(foxglove_descriptors(schema_name)).file
    for proto in reversed(files):  # the Timestamp file first: the image file imports it
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema_name))


# --- camera streams -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Schema:
    name: str
    encoding: str
    data: bytes
    message_encoding: str


@dataclass(frozen=True)
class _Frame:
    """One frame ready to serialise: its pixels in the stream's own encoding."""

    stamp_ns: int
    frame_id: str
    data: bytes
    width: int
    height: int
    pixel_format: str  # CompressedImage format or raw image encoding
    step: int


def _stamp(ns: int) -> dict[str, int]:
    return {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000}


def _camera_schema(encoding: str) -> tuple[_Schema, Callable[[_Frame], bytes]]:
    """Return the camera stream's schema and the function serialising one frame."""
    if encoding in ("jpeg", "png"):
        name = "sensor_msgs/msg/CompressedImage"
        ros = serialize_dynamic(name, COMPRESSED_IMAGE_MSG)[name]

        def compressed(frame: _Frame) -> bytes:
            header = {"stamp": _stamp(frame.stamp_ns), "frame_id": frame.frame_id}
            return bytes(ros({"header": header, "format": frame.pixel_format, "data": frame.data}))

        return _Schema(name, "ros2msg", COMPRESSED_IMAGE_MSG.encode(), "cdr"), compressed
    if encoding in ("rgb8", "bgr8", "mono8"):
        name = "sensor_msgs/msg/Image"
        ros_raw = serialize_dynamic(name, IMAGE_MSG)[name]

        def raw(frame: _Frame) -> bytes:
            return bytes(
                ros_raw(
                    {
                        "header": {"stamp": _stamp(frame.stamp_ns), "frame_id": frame.frame_id},
                        "height": frame.height,
                        "width": frame.width,
                        "encoding": frame.pixel_format,
                        "is_bigendian": 0,
                        "step": frame.step,
                        "data": frame.data,
                    }
                )
            )

        return _Schema(name, "ros2msg", IMAGE_MSG.encode(), "cdr"), raw
    name = "foxglove.CompressedImage" if "jpeg" in encoding else "foxglove.RawImage"
    if encoding.endswith("-json"):
        schema = json.dumps(_FOXGLOVE_JSON_SCHEMAS[name]).encode()

        def as_json(frame: _Frame) -> bytes:
            sec, nsec = divmod(frame.stamp_ns, 1_000_000_000)
            value: dict[str, Any] = {
                "timestamp": {"sec": sec, "nsec": nsec},
                "frame_id": frame.frame_id,
                "data": base64.b64encode(frame.data).decode("ascii"),
            }
            if name == "foxglove.CompressedImage":
                value["format"] = frame.pixel_format
            else:
                value.update(
                    width=frame.width,
                    height=frame.height,
                    encoding=frame.pixel_format,
                    step=frame.step,
                )
            return json.dumps(value).encode()

        return _Schema(name, "jsonschema", schema, "json"), as_json
    cls = _foxglove_class(name)

    def as_protobuf(frame: _Frame) -> bytes:
        message = cls(frame_id=frame.frame_id, data=frame.data)
        message.timestamp.seconds, message.timestamp.nanos = divmod(frame.stamp_ns, 1_000_000_000)
        if name == "foxglove.CompressedImage":
            message.format = frame.pixel_format
        else:
            message.width, message.height = frame.width, frame.height
            message.encoding, message.step = frame.pixel_format, frame.step
        return bytes(message.SerializeToString())

    return _Schema(name, "protobuf", foxglove_descriptors(name), "protobuf"), as_protobuf


def _encode_pixels(encoding: str, image: RgbImage, quality: int) -> tuple[bytes, str, int]:
    """Return the frame's bytes, its format or raw encoding, and its row step (0 if compressed)."""
    width = image.shape[1]
    if encoding in ("jpeg", "png", "foxglove-jpeg", "foxglove-jpeg-json"):
        buffer = io.BytesIO()
        if encoding == "png":
            Image.fromarray(image).save(buffer, "PNG", compress_level=1)
            # image_transport's format string: the camera's encoding; the codec; what it got.
            return buffer.getvalue(), "rgb8; png compressed bgr8", 0
        Image.fromarray(image).save(buffer, "JPEG", quality=quality)
        image_format = "rgb8; jpeg compressed bgr8" if encoding == "jpeg" else "jpeg"
        return buffer.getvalue(), image_format, 0
    if encoding == "bgr8":
        return image[:, :, ::-1].tobytes(), "bgr8", width * 3
    if encoding == "mono8":
        return Image.fromarray(image).convert("L").tobytes(), "mono8", width
    return image.tobytes(), "rgb8", width * 3  # rgb8, foxglove-raw, foxglove-raw-json


# An event is (log time, stream number, sequence, topic, message bytes); the first three are
# unique, so merging never compares the bytes.
_Event = tuple[int, int, int, str, bytes]


def _camera_events(
    plan: RecordingPlan, camera: CameraPlan, order: int, serialise: Callable[[_Frame], bytes]
) -> Iterator[_Event]:
    rng = random.Random(f"{plan.seed}/camera/{camera.name}")
    scene = camera.scene
    topic = camera.resolved_topic
    period_us = 1e6 / camera.fps
    end_us = _us(min(camera.stop_s if camera.stop_s is not None else math.inf, plan.duration_s))
    jitter_us = camera.jitter_ms * 1000
    drop = (_us(camera.drop[0]), _us(camera.drop[1])) if camera.drop else None
    resize_us = _us(camera.resize_at_s) if camera.resize_at_s is not None else None
    corrupt_us = _us(camera.corrupt_at_s) if camera.corrupt_at_s is not None else None
    offset_ns = round(camera.clock_offset_ms * 1e6)
    sequence = 0
    for index in range(math.ceil((end_us - _us(camera.start_s)) / period_us) + 1):
        nominal_us = _us(camera.start_s) + round(index * period_us)
        if nominal_us >= end_us:
            break
        # Draw for every frame, dropped or not, so the jitter of one frame never depends on
        # which others were dropped.
        t_us = max(nominal_us + round(rng.uniform(-jitter_us, jitter_us)), 0)
        if drop is not None and drop[0] <= t_us < drop[1]:
            continue
        doubled = resize_us is not None and t_us >= resize_us
        width, height = (
            (camera.width * 2, camera.height * 2) if doubled else (camera.width, camera.height)
        )
        data, pixel_format, step = _encode_pixels(
            camera.encoding, render_clock(t_us, width, height, scene=scene), camera.quality
        )
        if corrupt_us is not None and t_us >= corrupt_us:
            corrupt_us = None
            data = _corrupt(data, step, rng)
        true_ns = plan.t0_ns + t_us * 1000
        frame = _Frame(true_ns + offset_ns, camera.name, data, width, height, pixel_format, step)
        yield true_ns + plan.log_latency_ns, order, sequence, topic, serialise(frame)
        sequence += 1


def _corrupt(data: bytes, step: int, rng: random.Random) -> bytes:
    """Raw pixels lose their last row (the size no longer matches); compressed frames become
    noise that starts with a zero byte, which no image format does."""
    if step:
        return data[:-step]
    return b"\x00" + rng.randbytes(len(data) - 1)


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


# --- joint streams ------------------------------------------------------------------------


def _joint_events(
    plan: RecordingPlan,
    *,
    topic: str,
    order: int,
    hz: float,
    value: Callable[[int, float], float],
    jitter_ms: float = 0.0,
    start_s: float = 0.0,
    stop_s: float | None = None,
    backwards_at_s: float | None = None,
) -> Iterator[_Event]:
    rng = random.Random(f"{plan.seed}/joints/{topic}")
    encode = serialize_dynamic("sensor_msgs/msg/JointState", JOINT_STATE_MSG)[
        "sensor_msgs/msg/JointState"
    ]
    present = [(i, name) for i, name in enumerate(plan.joints) if name != plan.missing_joint]
    period_ns = 1e9 / hz
    end_ns = round(min(stop_s if stop_s is not None else math.inf, plan.duration_s) * 1e9)
    jitter_ns = jitter_ms * 1e6
    backwards_ns = round(backwards_at_s * 1e9) if backwards_at_s is not None else None
    previous_stamp: int | None = None
    for sequence in range(math.ceil((end_ns - start_s * 1e9) / period_ns) + 1):
        nominal_ns = round(start_s * 1e9 + sequence * period_ns)
        if nominal_ns >= end_ns:
            break
        t_ns = max(nominal_ns + round(rng.uniform(-jitter_ns, jitter_ns)), 0)
        stamp = plan.t0_ns + t_ns
        if backwards_ns is not None and t_ns >= backwards_ns and previous_stamp is not None:
            # The clock stepped back; the joints were still sampled at their true time.
            stamp = previous_stamp - round(period_ns / 2)
            backwards_ns = None
        listed = present
        if plan.names_in_messages and plan.shuffle_joint_order:
            listed = rng.sample(present, len(present))
        t_s = t_ns / 1e9
        for a, b in plan.still:
            if a <= t_s < b:
                t_s = a
                break
        message = {
            "header": {"stamp": _stamp(stamp), "frame_id": ""},
            "name": [name for _, name in listed] if plan.names_in_messages else [],
            "position": [value(i, t_s) for i, _ in listed],
            "velocity": [],
            "effort": [],
        }
        yield (
            plan.t0_ns + t_ns + plan.log_latency_ns,
            order,
            sequence,
            topic,
            bytes(encode(message)),
        )
        previous_stamp = stamp


# --- writing ------------------------------------------------------------------------------

_COMPRESSIONS = {
    "zstd": CompressionType.ZSTD,
    "lz4": CompressionType.LZ4,
    "none": CompressionType.NONE,
}


def _check_plan(plan: RecordingPlan) -> None:
    """Refuse a plan that cannot be written as asked, saying which field to change."""
    problems: list[str] = []
    if plan.duration_s <= 0:
        problems.append("duration_s must be positive")
    topics = [c.resolved_topic for c in plan.cameras]
    topics += [t for t in (plan.state_topic, plan.action_topic) if t is not None]
    if len(set(topics)) != len(topics):
        problems.append(f"topics must be distinct: {topics}")
    if len({c.name for c in plan.cameras}) != len(plan.cameras):
        problems.append("camera names must be distinct")
    for camera in plan.cameras:
        where = f"camera {camera.name!r}"
        if camera.encoding not in ENCODINGS:
            problems.append(f"{where}: encoding {camera.encoding!r} is not one of {ENCODINGS}")
        if camera.fps <= 0:
            problems.append(f"{where}: fps must be positive")
        # Rounding to whole µs moves each frame by up to 1 µs: keep them strictly increasing.
        elif camera.jitter_ms * 2000 >= 1e6 / camera.fps - 2:
            problems.append(f"{where}: jitter_ms must be under half the frame period")
        if camera.drop is not None and not camera.drop[0] < camera.drop[1]:
            problems.append(f"{where}: drop (a, b) needs a < b")
        if not 1 <= camera.quality <= 100:
            problems.append(f"{where}: quality must be in 1..100")
        try:
            _check_clock_size(camera.width, camera.height)
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
        if camera.clock_offset_ms < 0 and plan.t0_ns + camera.clock_offset_ms * 1e6 < 0:
            problems.append(f"{where}: clock_offset_ms puts stamps before 1970")
    if plan.duration_s * 1e6 >= 2**32:
        problems.append("duration_s must be under 2**32 µs (71 minutes) for the clock code")
    if not plan.joints or len(set(plan.joints)) != len(plan.joints):
        problems.append("joints must be distinct and not empty")
    if plan.missing_joint is not None and plan.missing_joint not in plan.joints:
        problems.append(f"missing_joint {plan.missing_joint!r} is not one of {plan.joints}")
    if plan.state_hz <= 0 or plan.action_hz <= 0:
        problems.append("state_hz and action_hz must be positive")
    elif plan.state_jitter_ms * 2 >= 1000 / plan.state_hz:
        problems.append("state_jitter_ms must be under half the state period")
    if plan.backwards_at_s is not None and plan.state_topic is None:
        problems.append("backwards_at_s needs a state_topic")
    if plan.compression not in _COMPRESSIONS:
        problems.append(f"compression must be one of {sorted(_COMPRESSIONS)}")
    if plan.chunk_size <= 0:
        problems.append("chunk_size must be positive")
    if plan.split_every_s is not None and plan.split_every_s <= 0:
        problems.append("split_every_s must be positive")
    if plan.truncate_fraction is not None and not 0 < plan.truncate_fraction < 1:
        problems.append("truncate_fraction must be between 0 and 1")
    if plan.log_latency_ns < 0:
        problems.append("log_latency_ns must not be negative")
    if problems:
        raise ValueError("recording plan cannot be written: " + "; ".join(problems))


class _SplitWriter:
    """Write events to one file, or to a new numbered file per ``split_every_s`` of log time,
    each file declaring every schema and channel as rosbag2 does."""

    def __init__(self, path: Path, plan: RecordingPlan, schemas: dict[str, _Schema]) -> None:
        self.path, self.plan, self.schemas = path, plan, schemas
        self.files: list[Path] = []
        self._fh: Any = None
        self._writer: McapWriter | None = None
        self._channels: dict[str, int] = {}
        self._part = -1

    def add(self, log_time: int, sequence: int, topic: str, data: bytes) -> None:
        part = 0
        if self.plan.split_every_s is not None:
            part = (log_time - self.plan.t0_ns) // round(self.plan.split_every_s * 1e9)
        if self._writer is None or part > self._part:
            self._open()
            self._part = part
        assert self._writer is not None
        self._writer.add_message(
            self._channels[topic],
            log_time=log_time,
            data=data,
            publish_time=log_time,
            sequence=sequence,
        )

    def _open(self) -> None:
        self.close()
        if self.plan.split_every_s is None:
            file = self.path
        else:
            file = self.path / f"{self.path.name}_{len(self.files)}.mcap"
        self._fh = file.open("wb")
        self.files.append(file)
        writer = McapWriter(
            self._fh,
            chunk_size=self.plan.chunk_size,
            compression=_COMPRESSIONS[self.plan.compression],
            index_types=IndexType.ALL,
            enable_data_crcs=True,
        )
        writer.start(profile="ros2", library="fieldcraft-synthetic")
        schema_ids: dict[tuple[str, str, bytes], int] = {}
        self._channels = {}
        for topic, schema in self.schemas.items():
            key = (schema.name, schema.encoding, schema.data)
            if key not in schema_ids:
                schema_ids[key] = writer.register_schema(schema.name, schema.encoding, schema.data)
            self._channels[topic] = writer.register_channel(
                topic, schema.message_encoding, schema_ids[key]
            )
        self._writer = writer

    def close(self) -> None:
        if self._writer is not None:
            self._writer.finish()
            self._fh.close()
            self._writer = None

    def finish(self) -> list[Path]:
        if not self.files:  # nothing to record: still a valid file with its channels
            self._open()
        self.close()
        return self.files


def write_recording(path: Path, plan: RecordingPlan) -> list[Path]:
    """Write the recording ``plan`` describes and return its files.

    ``path`` is the .mcap file, or the folder of split files when ``split_every_s`` is set
    (created if need be; files ``<folder name>_0.mcap``, ``_1``...). Raises ValueError, naming
    the fields to change, when the plan is inconsistent.
    """
    _check_plan(plan)
    path = Path(path)
    schemas: dict[str, _Schema] = {}
    streams: list[Iterator[_Event]] = []
    for order, camera in enumerate(plan.cameras):
        schema, serialise = _camera_schema(camera.encoding)
        schemas[camera.resolved_topic] = schema
        streams.append(_camera_events(plan, camera, order, serialise))
    joint_schema = _Schema("sensor_msgs/msg/JointState", "ros2msg", JOINT_STATE_MSG.encode(), "cdr")
    order = len(plan.cameras)
    if plan.state_topic is not None:
        schemas[plan.state_topic] = joint_schema
        streams.append(
            _joint_events(
                plan,
                topic=plan.state_topic,
                order=order,
                hz=plan.state_hz,
                value=state_value,
                jitter_ms=plan.state_jitter_ms,
                start_s=plan.state_start_s,
                stop_s=plan.state_stop_s,
                backwards_at_s=plan.backwards_at_s,
            )
        )
    if plan.action_topic is not None:
        schemas[plan.action_topic] = joint_schema
        streams.append(
            _joint_events(
                plan,
                topic=plan.action_topic,
                order=order + 1,
                hz=plan.action_hz,
                value=action_value,
            )
        )
    if plan.split_every_s is not None:
        path.mkdir(parents=True, exist_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    out = _SplitWriter(path, plan, schemas)
    try:
        for log_time, _order, sequence, topic, data in heapq.merge(*streams):
            out.add(log_time, sequence, topic, data)
    except BaseException:
        out.close()
        raise
    files = out.finish()
    if plan.truncate_fraction is not None:
        last = files[-1]
        os.truncate(last, int(last.stat().st_size * plan.truncate_fraction))
    return files
