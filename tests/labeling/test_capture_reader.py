"""Reading synthetic MCAP recordings: formats, multi-file merging and damaged files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from mcap.reader import make_reader

from labeling.capture import CaptureReadError, Recording, read_messages, validate_recording
from tests.labeling import mcap_fixtures as fx

VARIANTS = [
    fx.write_good,
    fx.write_zstd,
    fx.write_lz4,
    fx.write_uncompressed,
    fx.write_unchunked,
    fx.write_without_summary,
    fx.write_json_joints,
]


def mcap_package_messages(path: Path) -> list[tuple[str, int, bytes]]:
    """Read with the mcap package's own reader, as an independent reference."""
    with path.open("rb") as fh:
        return [(c.topic, m.log_time, m.data) for _s, c, m in make_reader(fh).iter_messages()]


@pytest.mark.parametrize("write", VARIANTS, ids=lambda f: f.__name__)
def test_every_file_variant_yields_the_messages_the_mcap_package_reads(tmp_path, write):
    path = write(tmp_path / "rec.mcap")
    expected = mcap_package_messages(path)

    messages = list(read_messages([path]))

    assert [(m.topic, m.log_time_ns, m.data) for m in messages] == expected
    assert Counter(m.topic for m in messages) == {fx.CAMERA_TOPIC: 120, fx.JOINT_TOPIC: 201}


def test_messages_carry_schema_and_encodings(tmp_path):
    path = fx.write_good(tmp_path / "rec.mcap")

    first_camera = next(m for m in read_messages([path]) if m.topic == fx.CAMERA_TOPIC)

    assert first_camera.schema_name == "sensor_msgs/msg/CompressedImage"
    assert first_camera.schema_encoding == "ros2msg"
    assert first_camera.message_encoding == "cdr"
    assert first_camera.publish_time_ns == first_camera.log_time_ns == fx.T0 + fx.LATENCY_NS


@pytest.mark.parametrize(
    ("write", "compression", "chunks", "has_summary"),
    [
        (fx.write_zstd, ["zstd"], True, True),
        (fx.write_lz4, ["lz4"], True, True),
        (fx.write_uncompressed, ["none"], True, True),
        (fx.write_unchunked, [], False, True),
        (fx.write_without_summary, ["zstd"], True, False),
    ],
    ids=["zstd", "lz4", "uncompressed", "unchunked", "no_summary"],
)
def test_file_report_describes_layout(tmp_path, write, compression, chunks, has_summary):
    path = write(tmp_path / "rec.mcap")

    report = validate_recording([path], None)

    (info,) = report.files
    assert info.compression == compression
    assert (info.chunks > 1) is chunks
    assert info.has_summary is has_summary
    assert info.messages == 321
    assert report.passed


def test_split_recording_reads_as_one_stream_ordered_by_log_time(tmp_path):
    whole = fx.write_good(tmp_path / "whole.mcap")
    parts = fx.write_split(tmp_path / "split", parts=3)

    merged = list(read_messages(list(reversed(parts))))

    times = [m.log_time_ns for m in merged]
    assert times == sorted(times)
    assert [(m.topic, m.log_time_ns, m.data) for m in merged] == mcap_package_messages(whole)


def test_directory_is_read_as_its_mcap_files_in_natural_order(tmp_path):
    fx.write_split(tmp_path, parts=3)
    for name in ("split_10.mcap", "split_9.mcap"):
        (tmp_path / name).write_bytes((tmp_path / "split_0.mcap").read_bytes())

    recording = Recording([tmp_path])

    names = [info.path.name for info in recording.files]
    assert names[-2:] == ["split_9.mcap", "split_10.mcap"]


def test_truncated_file_raises_an_error_naming_the_file_and_offset(tmp_path):
    path = fx.write_truncated(tmp_path / "wbag_3.mcap")

    with pytest.raises(CaptureReadError) as caught:
        validate_recording([path], None)

    message = str(caught.value)
    assert message.startswith("wbag_3.mcap: truncated after ")
    assert "incomplete" in message
    assert "messages were readable before it" in message
    assert caught.value.path == path
    assert caught.value.offset is not None


def test_truncated_file_still_yields_its_readable_messages_before_failing(tmp_path):
    path = fx.write_truncated(tmp_path / "rec.mcap", keep_fraction=0.7)
    messages = read_messages([path])

    first = next(messages)

    assert first.topic in (fx.CAMERA_TOPIC, fx.JOINT_TOPIC)
    with pytest.raises(CaptureReadError, match="truncated"):
        list(messages)


@pytest.mark.parametrize("write", [fx.write_zstd, fx.write_unchunked], ids=["zstd", "unchunked"])
def test_cutting_a_file_anywhere_gives_a_read_error_never_a_crash(tmp_path, write):
    data = write(tmp_path / "whole.mcap").read_bytes()
    path = tmp_path / "cut.mcap"

    for keep in [*range(1, len(data), 89), len(data) - 1]:
        path.write_bytes(data[:keep])
        with pytest.raises(CaptureReadError) as caught:
            validate_recording([path], None)
        assert str(caught.value).startswith("cut.mcap: ")
        assert "truncated" in str(caught.value)


def test_file_ending_after_a_complete_record_says_the_recorder_did_not_close_it(tmp_path):
    path = fx.write_without_summary(tmp_path / "rec.mcap")
    footer_and_data_end = (9 + 20 + 8) + (9 + 4)
    path.write_bytes(path.read_bytes()[:-footer_and_data_end])

    with pytest.raises(CaptureReadError, match="no footer: the recorder did not close the file"):
        validate_recording([path], None)


@pytest.mark.parametrize("write", [fx.write_zstd, fx.write_lz4, fx.write_unchunked])
def test_flipping_any_byte_never_crashes_and_corrupt_data_is_reported(tmp_path, write):
    data = bytearray(write(tmp_path / "whole.mcap").read_bytes())
    path = tmp_path / "flipped.mcap"
    errors: list[str] = []

    for position in range(0, len(data), 37):
        flipped = bytearray(data)
        flipped[position] ^= 0xFF
        path.write_bytes(bytes(flipped))
        try:
            validate_recording([path], None)
        except CaptureReadError as exc:
            errors.append(str(exc))

    assert errors
    assert all(error.startswith("flipped.mcap: ") for error in errors)


def test_corrupt_chunk_is_reported_with_its_offset(tmp_path):
    path = fx.write_uncompressed(tmp_path / "rec.mcap")
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x55
    path.write_bytes(bytes(data))

    with pytest.raises(CaptureReadError, match=r"rec\.mcap: corrupt: .*offset [\d,]+"):
        validate_recording([path], None)


def test_empty_file_is_a_clear_error(tmp_path):
    path = tmp_path / "empty.mcap"
    path.write_bytes(b"")

    with pytest.raises(CaptureReadError, match=r"^empty\.mcap: empty file \(0 bytes\)$"):
        Recording([path])


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"just some text, not a recording\n", "not an MCAP file (starts with"),
        (b"#ROSBAG V2.0\n" + bytes(64), "not an MCAP file: a ROS 1 bag"),
        (b"SQLite format 3\x00" + bytes(64), "not an MCAP file: a rosbag2 SQLite (.db3) file"),
        (b"\x89MCA", "truncated after 4 bytes (inside the magic)"),
    ],
    ids=["text", "ros1", "sqlite", "short"],
)
def test_non_mcap_file_is_a_clear_error(tmp_path, content, expected):
    path = tmp_path / "episode.mcap"
    path.write_bytes(content)

    with pytest.raises(CaptureReadError) as caught:
        validate_recording([path], None)

    assert str(caught.value).startswith("episode.mcap: ")
    assert expected in str(caught.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CaptureReadError, match=r"^nowhere\.mcap: file not found$"):
        validate_recording([tmp_path / "nowhere.mcap"], None)


def test_directory_without_recordings_is_a_clear_error(tmp_path):
    with pytest.raises(CaptureReadError, match=r"directory holds no \.mcap file"):
        validate_recording([tmp_path], None)


def test_one_bad_file_in_a_split_recording_is_named(tmp_path):
    parts = fx.write_split(tmp_path, parts=3)
    parts[1].write_bytes(parts[1].read_bytes()[:-100])

    with pytest.raises(CaptureReadError, match=r"^split_1\.mcap: truncated"):
        validate_recording(parts, None)


def write_unchunked_in_order(path: Path, times_ms: list[int]) -> Path:
    from mcap.writer import Writer

    with path.open("wb") as fh:
        writer = Writer(fh, use_chunking=False)
        writer.start(profile="", library="fieldcraft-tests")
        channel = writer.register_channel("/t", "json", 0)
        for ms in times_ms:
            ns = ms * 1_000_000
            writer.add_message(channel, log_time=ns, publish_time=ns, data=b"{}")
        writer.finish()
    return path


def test_locally_shuffled_messages_come_out_in_log_time_order(tmp_path):
    path = write_unchunked_in_order(tmp_path / "shuffled.mcap", [0, 5, 1, 2, 3, 7, 6])
    recording = Recording([path])

    times = [m.log_time_ns // 1_000_000 for m in recording.messages()]

    assert times == [0, 1, 2, 3, 5, 6, 7]
    assert recording.files[0].out_of_order == 0


def test_message_older_than_one_already_yielded_is_counted_out_of_order(tmp_path):
    path = write_unchunked_in_order(tmp_path / "late.mcap", [10, 11, 20, 21, 5])
    recording = Recording([path])

    times = [m.log_time_ns // 1_000_000 for m in recording.messages()]

    assert sorted(times) == [5, 10, 11, 20, 21]
    assert recording.files[0].out_of_order == 1


def test_reading_twice_gives_the_same_messages_and_counts(tmp_path):
    recording = Recording([fx.write_good(tmp_path / "rec.mcap")])

    first = [m.log_time_ns for m in recording.messages()]
    second = [m.log_time_ns for m in recording.messages()]

    assert first == second
    assert recording.files[0].messages == len(first)


def _set_u32(path: Path, at: int, value: int) -> None:
    data = bytearray(path.read_bytes())
    data[at : at + 4] = value.to_bytes(4, "little")
    path.write_bytes(bytes(data))


def test_a_data_section_crc_mismatch_names_the_file_and_the_bytes_it_covers(tmp_path):
    path = fx.write_uncompressed(tmp_path / "rec.mcap")
    data = path.read_bytes()
    summary_start = int.from_bytes(data[-28:-20], "little")  # the footer's first field
    data_end = summary_start - 9 - 4  # the data end record: opcode, length, its CRC
    stored = int.from_bytes(data[data_end + 9 : data_end + 13], "little")
    _set_u32(path, data_end + 9, stored ^ 0x1)

    with pytest.raises(CaptureReadError) as refused:
        validate_recording([path], None)

    assert str(refused.value).startswith(
        f"rec.mcap: corrupt: data section CRC mismatch over bytes 8-{data_end - 1:,} "
        f"(checked at the data end record at offset {data_end:,}"
    )
    assert refused.value.offset == data_end


def test_a_summary_section_crc_mismatch_names_the_file_and_the_bytes_it_covers(tmp_path):
    path = fx.write_uncompressed(tmp_path / "rec.mcap")
    data = path.read_bytes()
    summary_start = int.from_bytes(data[-28:-20], "little")  # the footer's first field
    footer = len(data) - 8 - 20 - 9  # closing magic, footer body, record header
    stored = int.from_bytes(data[-12:-8], "little")
    _set_u32(path, len(data) - 12, stored ^ 0x1)

    with pytest.raises(CaptureReadError) as refused:
        validate_recording([path], None)

    assert str(refused.value).startswith(
        f"rec.mcap: corrupt: summary section CRC mismatch over bytes {summary_start:,}-"
        f"{len(data) - 8 - 4 - 1:,} (checked at the footer at offset {footer:,}"
    )
    assert refused.value.offset == footer
