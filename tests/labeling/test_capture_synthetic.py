"""Synthetic recordings: the clock code survives what datasets do to frames, and a written
recording holds exactly the streams, stamps and values its plan says."""

from __future__ import annotations

import contextlib
import io
from collections import defaultdict
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcap.records import Schema
from mcap_ros2.decoder import DecoderFactory
from PIL import Image

from labeling.capture import CaptureMessage, CaptureReadError, Recording
from labeling.capture import synthetic as syn
from labeling.capture.decode import joint_decoder_for, stamp_reader_for
from labeling.capture.images import ImageDecodeError, image_decoder_for

T0 = syn.T0_NS
LATENCY = 2_000_000


def read_all(files: list[Path]) -> tuple[Recording, list[CaptureMessage]]:
    recording = Recording(files)
    return recording, list(recording.messages())


def by_topic(messages: list[CaptureMessage]) -> dict[str, list[CaptureMessage]]:
    topics: dict[str, list[CaptureMessage]] = defaultdict(list)
    for message in messages:
        topics[message.topic].append(message)
    return topics


def stamps(messages: list[CaptureMessage]) -> list[int]:
    read = stamp_reader_for(messages[0].channel)
    assert read is not None
    return [read(m.data) for m in messages]  # type: ignore[misc]


def clock_times(messages: list[CaptureMessage]) -> list[int]:
    decode = image_decoder_for(messages[0].channel)
    return [syn.read_clock(decode(m.data)) for m in messages]


def joint_positions(message: CaptureMessage) -> tuple[list[str], list[float]]:
    schema = Schema(
        id=1,
        name=message.schema_name,
        encoding=message.schema_encoding,
        data=message.channel.schema_data,
    )
    decoded = DecoderFactory().decoder_for("cdr", schema)(message.data)  # type: ignore[misc]
    return list(decoded.name), list(decoded.position)


def nominal_us(index: int, fps: float, start_s: float = 0.0) -> int:
    return round(start_s * 1e6) + round(index * 1e6 / fps)


def only_cameras(*cameras: syn.CameraPlan, **plan: object) -> syn.RecordingPlan:
    return syn.RecordingPlan(
        cameras=list(cameras),
        state_topic=None,
        action_topic=None,
        **plan,  # type: ignore[arg-type]
    )


# --- the clock code -----------------------------------------------------------------------


@pytest.mark.parametrize("size", [(64, 48), (96, 64), (640, 480), (1280, 720), (40, 30)])
def test_clock_reads_back_exactly(size: tuple[int, int]):
    for t_us in (0, 1, 33_333, 2**31, 2**32 - 1):
        assert syn.read_clock(syn.render_clock(t_us, *size)) == t_us


@settings(max_examples=60, deadline=None)
@given(
    t_us=st.integers(0, 2**32 - 1),
    width=st.integers(40, 400),
    height=st.integers(30, 300),
    scene=st.integers(0, 2**32),
)
def test_clock_reads_back_any_time_at_any_size(t_us: int, width: int, height: int, scene: int):
    image = syn.render_clock(t_us, width, height, scene=scene)

    assert image.shape == (height, width, 3) and image.dtype == np.uint8
    assert syn.read_clock(image) == t_us


def test_clock_reads_grey_and_rgba_images():
    image = syn.render_clock(987_654, 96, 64)
    grey = np.asarray(Image.fromarray(image).convert("L"))
    rgba = np.asarray(Image.fromarray(image).convert("RGBA"))

    assert syn.read_clock(grey) == syn.read_clock(rgba) == 987_654


def test_clock_code_is_grey_and_the_picture_around_it_is_coloured_moving_and_per_scene():
    first = syn.render_clock(0, 640, 480, scene=1).astype(int)
    later = syn.render_clock(500_000, 640, 480, scene=1).astype(int)
    other = syn.render_clock(0, 640, 480, scene=2).astype(int)
    box = first[60:420, 32:608]
    border = first[:60]

    assert (box[:, :, 0] == box[:, :, 1]).all() and (box[:, :, 1] == box[:, :, 2]).all()
    assert set(np.unique(box)) == {0, 255}
    assert np.abs(border[:, :, 0] - border[:, :, 2]).mean() > 10  # coloured
    assert border.std() > 20  # not flat
    assert np.abs(later[:60] - border).mean() > 5  # moves
    assert np.abs(other[:60] - border).mean() > 20  # differs per scene


@pytest.mark.parametrize("size", [(64, 48), (640, 480), (1280, 720)])
@pytest.mark.parametrize("quality", [50, 75])
def test_clock_survives_jpeg(size: tuple[int, int], quality: int):
    for t_us in (12_345, 2**32 - 7):
        buffer = io.BytesIO()
        Image.fromarray(syn.render_clock(t_us, *size, scene=t_us)).save(
            buffer, "JPEG", quality=quality
        )

        assert syn.read_clock(np.asarray(Image.open(buffer))) == t_us


def test_clock_survives_png():
    buffer = io.BytesIO()
    image = syn.render_clock(42, 64, 48)
    Image.fromarray(image).save(buffer, "PNG")

    np.testing.assert_array_equal(np.asarray(Image.open(buffer)), image)


def video_round_trip(frames: list[np.ndarray], codec: str, options: dict[str, str]) -> list:
    height, width = frames[0].shape[:2]
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream(codec, rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = Fraction(1, 30)
        stream.options = options
        for image in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())
    buffer.seek(0)
    with av.open(buffer) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


@pytest.mark.parametrize(
    ("codec", "options", "size"),
    [
        ("libsvtav1", {"crf": "30"}, (64, 48)),
        ("libsvtav1", {"crf": "30"}, (640, 480)),
        ("libsvtav1", {"crf": "30", "g": "2"}, (64, 48)),  # as LeRobot encodes
        ("libx264", {"crf": "30"}, (64, 48)),
        ("libx264", {"crf": "30"}, (640, 480)),
    ],
    ids=["av1-64x48", "av1-640x480", "av1-g2-64x48", "h264-64x48", "h264-640x480"],
)
def test_clock_survives_video_coding(codec: str, options: dict[str, str], size: tuple[int, int]):
    times = [1_000_000 + round(i * 1e6 / 30) for i in range(30)]
    frames = [syn.render_clock(t, *size, scene=7) for t in times]

    decoded = video_round_trip(frames, codec, options)

    assert [syn.read_clock(image) for image in decoded] == times


@pytest.mark.parametrize(
    ("size", "resized"),
    [
        ((640, 480), (320, 240)),
        ((640, 480), (224, 224)),  # aspect ratio changed
        ((640, 480), (64, 48)),
        ((96, 64), (1280, 720)),
        ((1280, 720), (427, 240)),
        ((64, 48), (48, 36)),
    ],
)
@pytest.mark.parametrize(
    "resample", [Image.Resampling.BILINEAR, Image.Resampling.BICUBIC, Image.Resampling.BOX]
)
def test_clock_survives_resizing(
    size: tuple[int, int], resized: tuple[int, int], resample: Image.Resampling
):
    image = syn.render_clock(3_141_592_653, *size, scene=3)

    smaller = np.asarray(Image.fromarray(image).resize(resized, resample))

    assert syn.read_clock(smaller) == 3_141_592_653


def flip_cell(image: np.ndarray, row: int, col: int) -> np.ndarray:
    """Invert one cell of a 110x60 clock image (the cells are 9x7.5 pixels there)."""
    out = image.copy()
    x0 = round(110 * (0.05 + 0.9 * (col + 0.5) / 11))
    y0 = round(60 * (0.125 + 0.75 * (row + 0.5) / 6))
    out[y0 + 1 : y0 + 6, x0 + 1 : x0 + 8] = 255 - out[y0 + 1 : y0 + 6, x0 + 1 : x0 + 8]
    return out


def test_a_misread_cell_raises_rather_than_giving_a_wrong_time():
    image = syn.render_clock(0xDEADBEEF, 110, 60)
    data_cells = [(r, c) for r in range(syn.CLOCK_ROWS) for c in range(1, syn.CLOCK_COLS - 1)]

    for row, col in data_cells:
        with pytest.raises(ValueError, match="unreadable: checksum"):
            syn.read_clock(flip_cell(image, row, col))
    with pytest.raises(ValueError, match="unreadable: the fixed pattern"):
        syn.read_clock(flip_cell(image, 2, 0))


@pytest.mark.parametrize(
    "image",
    [
        np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8),
        np.random.default_rng(1).integers(0, 256, (48, 64, 3), dtype=np.uint8),
        np.full((64, 96, 3), 255, np.uint8),
        np.zeros((64, 96, 3), np.uint8),
        np.full((64, 96), 128, np.uint8),
        (np.random.default_rng(2).integers(0, 2, (16, 24)) * 255)
        .astype(np.uint8)
        .repeat(4, 0)
        .repeat(4, 1),
        np.zeros((10, 10, 3), np.uint8),
        np.zeros((64, 96, 2), np.uint8),
    ],
    ids=["noise", "small-noise", "white", "black", "grey", "random-cells", "tiny", "two-channels"],
)
def test_images_without_a_clock_are_unreadable(image: np.ndarray):
    with pytest.raises(ValueError, match="unreadable"):
        syn.read_clock(image)


def test_a_shifted_clock_reads_right_or_not_at_all():
    image = syn.render_clock(2_718_281, 96, 64)
    read = []
    for dx in range(-6, 7, 2):
        for dy in range(-4, 5, 2):
            with contextlib.suppress(ValueError):
                read.append(syn.read_clock(np.roll(image, (dy, dx), axis=(0, 1))))

    assert set(read) == {2_718_281}


@pytest.mark.parametrize(
    ("t_us", "width", "height", "problem"),
    [(-1, 96, 64, "outside"), (2**32, 96, 64, "outside"), (0, 20, 64, "too small")],
)
def test_render_clock_refuses_what_it_cannot_draw(t_us: int, width: int, height: int, problem: str):
    with pytest.raises(ValueError, match=problem):
        syn.render_clock(t_us, width, height)


# --- joint values -------------------------------------------------------------------------


@given(joint=st.integers(0, 10), t_s=st.floats(0, 4000))
def test_joint_values_invert_to_their_time(joint: int, t_s: float):
    state, action = syn.state_value(joint, t_s), syn.action_value(joint, t_s)

    assert syn.state_time(joint, state) == pytest.approx(t_s, abs=1e-9)
    assert syn.action_time(joint, action) == pytest.approx(t_s, abs=1e-9)
    assert state > 0 > action
    assert syn.state_value(joint, t_s + 1e-3) > state
    assert syn.action_value(joint, t_s + 1e-3) < action


def test_joint_values_by_hand():
    assert syn.state_value(0, 0.0) == pytest.approx(0.1)
    assert syn.state_value(3, 2.0) == pytest.approx(0.5)
    assert syn.action_value(1, 1.0) == pytest.approx(-0.25)


# --- recordings ---------------------------------------------------------------------------


def test_default_recording_has_the_planned_topics_counts_stamps_and_schemas(tmp_path: Path):
    files = syn.write_recording(tmp_path / "rec.mcap", syn.RecordingPlan())

    recording, messages = read_all(files)
    topics = by_topic(messages)

    assert files == [tmp_path / "rec.mcap"]
    assert {t: len(m) for t, m in topics.items()} == {
        "/camera/front/image_raw/compressed": 90,
        "/camera/wrist/image_raw/compressed": 90,
        "/joint_states": 150,
        "/joint_commands": 150,
    }
    front = topics["/camera/front/image_raw/compressed"]
    assert stamps(front) == [T0 + nominal_us(i, 30) * 1000 for i in range(90)]
    assert [m.log_time_ns for m in front] == [s + LATENCY for s in stamps(front)]
    assert clock_times(front) == [nominal_us(i, 30) for i in range(90)]
    assert stamps(topics["/joint_states"]) == [T0 + i * 20_000_000 for i in range(150)]
    assert [m.log_time_ns for m in messages] == sorted(m.log_time_ns for m in messages)
    channels = {c.topic: c for c in recording.channels}
    image, joints = channels["/camera/wrist/image_raw/compressed"], channels["/joint_states"]
    assert (image.schema_name, image.schema_encoding, image.message_encoding) == (
        "sensor_msgs/msg/CompressedImage",
        "ros2msg",
        "cdr",
    )
    assert joints.schema_name == "sensor_msgs/msg/JointState"
    for channel in (image, joints):
        assert b"MSG: std_msgs/Header" in channel.schema_data
        assert b"MSG: builtin_interfaces/Time" in channel.schema_data
    info = recording.files[0]
    assert info.complete and info.has_summary and info.indexed_message_count == 480
    assert info.compressions == {"zstd"}


def test_two_cameras_show_different_pictures_at_the_same_time(tmp_path: Path):
    files = syn.write_recording(tmp_path / "rec.mcap", syn.RecordingPlan(duration_s=0.1))

    topics = by_topic(read_all(files)[1])
    front, wrist = (
        image_decoder_for(ms[0].channel)(ms[0].data).astype(int)
        for t, ms in sorted(topics.items())
        if "camera" in t
    )

    assert np.abs(front[:8] - wrist[:8]).mean() > 10


@pytest.mark.parametrize("encoding", ["rgb8", "foxglove-jpeg", "foxglove-raw-json"])
def test_other_encodings_go_on_their_own_topics_and_schemas(tmp_path: Path, encoding: str):
    camera = syn.CameraPlan("side", encoding=encoding)
    files = syn.write_recording(tmp_path / "rec.mcap", only_cameras(camera, duration_s=0.2))

    recording, messages = read_all(files)
    (channel,) = recording.channels

    expected = {
        "rgb8": ("/camera/side/image_raw", "sensor_msgs/msg/Image", "ros2msg", "cdr"),
        "foxglove-jpeg": (
            "/camera/side/image_raw/compressed",
            "foxglove.CompressedImage",
            "protobuf",
            "protobuf",
        ),
        "foxglove-raw-json": (
            "/camera/side/image_raw",
            "foxglove.RawImage",
            "jsonschema",
            "json",
        ),
    }[encoding]
    assert (
        channel.topic,
        channel.schema_name,
        channel.schema_encoding,
        channel.message_encoding,
    ) == expected
    assert stamps(messages) == [T0 + nominal_us(i, 30) * 1000 for i in range(6)]


def test_camera_clock_offset_and_jitter_show_in_stamps_but_not_in_pixels(tmp_path: Path):
    camera = syn.CameraPlan("front", clock_offset_ms=40.0, jitter_ms=5.0)
    files = syn.write_recording(tmp_path / "rec.mcap", only_cameras(camera, duration_s=2.0))

    messages = read_all(files)[1]
    true_us = clock_times(messages)
    deviations = [t - nominal_us(i, 30) for i, t in enumerate(true_us)]

    assert len(messages) == 60
    assert stamps(messages) == [T0 + t * 1000 + 40_000_000 for t in true_us]
    assert [m.log_time_ns for m in messages] == [T0 + t * 1000 + LATENCY for t in true_us]
    assert all(b > a for a, b in zip(true_us, true_us[1:], strict=False))
    assert max(abs(d) for d in deviations) <= 5000
    assert max(abs(d) for d in deviations) > 2500  # the jitter is there


def test_camera_drop_late_start_and_early_stop(tmp_path: Path):
    plan = only_cameras(
        syn.CameraPlan("gappy", fps=10.0, drop=(0.95, 1.55)),
        syn.CameraPlan("late", fps=10.0, start_s=0.5),
        syn.CameraPlan("early", fps=10.0, stop_s=1.0),
        duration_s=2.0,
    )

    topics = by_topic(read_all(syn.write_recording(tmp_path / "rec.mcap", plan))[1])
    seen = {t.split("/")[2]: clock_times(ms) for t, ms in topics.items()}

    assert seen["gappy"] == [i * 100_000 for i in range(20) if not 9.5 <= i < 15.5]
    assert seen["late"] == [500_000 + i * 100_000 for i in range(15)]
    assert seen["early"] == [i * 100_000 for i in range(10)]


@pytest.mark.parametrize("encoding", ["jpeg", "bgr8", "foxglove-raw"])
def test_resize_doubles_frames_and_corruption_hits_exactly_one_frame(tmp_path: Path, encoding: str):
    camera = syn.CameraPlan(
        "front", encoding=encoding, fps=10.0, resize_at_s=0.5, corrupt_at_s=0.75
    )
    files = syn.write_recording(tmp_path / "rec.mcap", only_cameras(camera, duration_s=1.0))

    messages = read_all(files)[1]
    decode = image_decoder_for(messages[0].channel)
    shapes, failed = [], []
    for index, message in enumerate(messages):
        try:
            shapes.append(decode(message.data).shape)
        except ImageDecodeError:
            failed.append(index)

    assert failed == [8]  # 0.8 s: the first frame at or after 0.75 s
    assert shapes == [(64, 96, 3)] * 5 + [(128, 192, 3)] * 4


def test_state_and_action_values_invert_to_their_sample_times(tmp_path: Path):
    plan = syn.RecordingPlan(cameras=[], duration_s=1.0, state_jitter_ms=3.0, seed=5)
    files = syn.write_recording(tmp_path / "rec.mcap", plan)

    topics = by_topic(read_all(files)[1])
    orders = set()
    for topic, invert in (("/joint_states", syn.state_time), ("/joint_commands", syn.action_time)):
        messages = topics[topic]
        decode, reason = joint_decoder_for(messages[0].channel)
        assert decode is not None, reason
        for message, stamp in zip(messages, stamps(messages), strict=True):
            values = decode(message.data)
            assert sorted(values) == sorted(syn.JOINTS)
            for name, value in values.items():
                t_s = invert(syn.JOINTS.index(name), value)
                assert abs(t_s - (stamp - T0) / 1e9) < 1e-6
            orders.add(tuple(values))
    state_stamps = stamps(topics["/joint_states"])
    deviations = [s - T0 - i * 20_000_000 for i, s in enumerate(state_stamps)]

    assert len(topics["/joint_states"]) == len(topics["/joint_commands"]) == 50
    assert len(orders) > 5  # shuffled per message
    assert 1_500_000 < max(abs(d) for d in deviations) <= 3_000_000
    assert stamps(topics["/joint_commands"]) == [T0 + i * 20_000_000 for i in range(50)]


def test_joint_states_without_names_keep_the_plan_order_and_a_missing_joint_never_appears(
    tmp_path: Path,
):
    plan = syn.RecordingPlan(
        cameras=[], duration_s=0.2, names_in_messages=False, missing_joint="elbow_flex"
    )
    named = replace(plan, names_in_messages=True)
    unnamed_files = syn.write_recording(tmp_path / "a.mcap", plan)
    named_files = syn.write_recording(tmp_path / "b.mcap", named)

    unnamed = by_topic(read_all(unnamed_files)[1])["/joint_states"]
    names_seen = {
        n
        for m in by_topic(read_all(named_files)[1])["/joint_commands"]
        for n in joint_positions(m)[0]
    }

    assert names_seen == {"shoulder_pan", "wrist_roll", "gripper"}
    for message, stamp in zip(unnamed, stamps(unnamed), strict=True):
        names, positions = joint_positions(message)
        t_s = (stamp - T0) / 1e9
        assert names == []
        assert positions == pytest.approx([syn.state_value(j, t_s) for j in (0, 2, 3)], abs=1e-12)


def test_state_stream_can_start_late_stop_early_and_step_back_once(tmp_path: Path):
    plan = syn.RecordingPlan(
        cameras=[],
        action_topic=None,
        duration_s=2.0,
        state_start_s=0.5,
        state_stop_s=1.5,
        backwards_at_s=1.0,
    )

    messages = read_all(syn.write_recording(tmp_path / "rec.mcap", plan))[1]
    state_stamps = stamps(messages)
    back = [i for i in range(1, len(state_stamps)) if state_stamps[i] < state_stamps[i - 1]]
    decode, _ = joint_decoder_for(messages[0].channel)
    assert decode is not None
    stepped = messages[back[0]]

    assert len(messages) == 50
    assert state_stamps[0] == T0 + 500_000_000
    assert back == [25]  # the message at 1.0 s
    assert state_stamps[25] == state_stamps[24] - 10_000_000
    # Its log time and its values still say when the joints were really sampled.
    assert stepped.log_time_ns == T0 + 1_000_000_000 + LATENCY
    values = decode(stepped.data)
    assert syn.state_time(0, values["shoulder_pan"]) == pytest.approx(1.0, abs=1e-6)


def test_split_recording_is_a_rosbag2_style_folder_read_back_as_one(tmp_path: Path):
    plan = syn.RecordingPlan(duration_s=2.0, split_every_s=0.5)
    whole = read_all(
        syn.write_recording(tmp_path / "whole.mcap", replace(plan, split_every_s=None))
    )

    files = syn.write_recording(tmp_path / "bag", plan)
    recording, messages = read_all([tmp_path / "bag"])

    assert [f.name for f in files] == [f"bag_{i}.mcap" for i in range(4)]
    assert recording.paths == files
    assert [(m.topic, m.log_time_ns, m.data) for m in messages] == [
        (m.topic, m.log_time_ns, m.data) for m in whole[1]
    ]
    for index, info in enumerate(recording.files):
        first = next(m for m in messages if m.log_time_ns >= T0 + index * 500_000_000)
        assert info.complete
        assert first.log_time_ns < T0 + (index + 1) * 500_000_000
    for part in files:  # each file declares every stream, as rosbag2 does
        alone = Recording([part])
        list(alone.messages())
        assert len(alone.channels) == 4


def test_truncated_recording_fails_to_read_after_some_messages(tmp_path: Path):
    plan = syn.RecordingPlan(duration_s=1.0, truncate_fraction=0.5, chunk_size=16 * 1024)
    complete = syn.write_recording(tmp_path / "whole.mcap", replace(plan, truncate_fraction=None))

    files = syn.write_recording(tmp_path / "rec.mcap", plan)
    read = []
    with pytest.raises(CaptureReadError, match="truncated"):
        read.extend(Recording(files).messages())

    assert files[0].stat().st_size == complete[0].stat().st_size // 2
    assert 0 < len(read) < 160


@pytest.mark.parametrize("compression", ["lz4", "none"])
def test_compression_is_as_planned(tmp_path: Path, compression: str):
    plan = syn.RecordingPlan(duration_s=0.3, compression=compression)

    recording, messages = read_all(syn.write_recording(tmp_path / "rec.mcap", plan))

    assert len(messages) == 48
    assert recording.files[0].compressions == {compression}


def test_the_same_plan_writes_the_same_bytes_and_another_seed_does_not(tmp_path: Path):
    plan = syn.RecordingPlan(
        duration_s=0.5, cameras=[syn.CameraPlan("front", jitter_ms=4.0)], state_jitter_ms=2.0
    )

    first = syn.write_recording(tmp_path / "a.mcap", plan)[0].read_bytes()
    again = syn.write_recording(tmp_path / "b.mcap", plan)[0].read_bytes()
    other = syn.write_recording(tmp_path / "c.mcap", replace(plan, seed=1))[0].read_bytes()

    assert first == again
    assert first != other


@pytest.mark.parametrize(
    ("plan", "problem"),
    [
        (syn.RecordingPlan(duration_s=0), "duration_s"),
        (syn.RecordingPlan(cameras=[syn.CameraPlan("a"), syn.CameraPlan("a")]), "distinct"),
        (syn.RecordingPlan(cameras=[syn.CameraPlan(encoding="webm")]), "encoding 'webm'"),
        (syn.RecordingPlan(cameras=[syn.CameraPlan(jitter_ms=20)]), "jitter_ms"),
        (syn.RecordingPlan(cameras=[syn.CameraPlan(width=16)]), "too small"),
        (syn.RecordingPlan(missing_joint="knee"), "missing_joint 'knee'"),
        (syn.RecordingPlan(compression="gzip"), "compression"),
        (syn.RecordingPlan(truncate_fraction=1.5), "truncate_fraction"),
        (syn.RecordingPlan(state_topic=None, backwards_at_s=1.0), "backwards_at_s"),
        (syn.RecordingPlan(action_topic="/joint_states"), "topics must be distinct"),
    ],
)
def test_plans_that_cannot_be_written_are_refused_naming_the_field(
    tmp_path: Path, plan: syn.RecordingPlan, problem: str
):
    with pytest.raises(ValueError, match=problem):
        syn.write_recording(tmp_path / "rec.mcap", plan)

    assert not (tmp_path / "rec.mcap").exists()


def test_a_recording_with_no_streams_is_still_a_valid_file(tmp_path: Path):
    plan = syn.RecordingPlan(cameras=[], state_topic=None, action_topic=None)

    recording, messages = read_all(syn.write_recording(tmp_path / "rec.mcap", plan))

    assert messages == [] and recording.files[0].complete


def test_messages_are_generated_lazily_in_log_time_order(tmp_path: Path, monkeypatch):
    # Memory must not grow with duration: frames are rendered only as the writer needs them.
    rendered: list[int] = []
    real_render = syn.render_clock

    def spy(t_us: int, width: int, height: int, *, scene: int = 0) -> np.ndarray:
        rendered.append(t_us)
        return real_render(t_us, width, height, scene=scene)

    written: list[int] = []
    frames_written = 0
    real_add = syn._SplitWriter.add

    def add(self, log_time: int, sequence: int, topic: str, data: bytes) -> None:
        nonlocal frames_written
        written.append(log_time)
        frames_written += topic.startswith("/camera/")
        # At most one frame per camera rendered ahead of what was written.
        assert len(rendered) <= frames_written + 2
        real_add(self, log_time, sequence, topic, data)

    monkeypatch.setattr(syn, "render_clock", spy)
    monkeypatch.setattr(syn._SplitWriter, "add", add)
    syn.write_recording(tmp_path / "rec.mcap", syn.RecordingPlan(duration_s=1.0))

    assert written == sorted(written)
    assert len(rendered) == 60
