"""The capture reader on real rosbag2 MCAP recordings (the rosbag2 project's test bags)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from mcap.reader import make_reader

from labeling.capture import Recording, validate_recording

REALDATA = Path(__file__).resolve().parents[2].parent / "shared" / "realdata"
ROSBAGS = REALDATA / "mcap" / "ros2_rosbag2"
BAG_DIRS = sorted(p.parent for p in ROSBAGS.glob("*/metadata.yaml"))
UNDESCRIBED_BAGS = sorted((ROSBAGS / "rosbag2_cpp_bags").glob("*.mcap"))
ALL_FILES = sorted(ROSBAGS.glob("**/*.mcap"))

pytestmark = pytest.mark.skipif(not ROSBAGS.is_dir(), reason="real MCAP data not present")


def metadata_counts(bag_dir: Path) -> dict[str, int]:
    info = yaml.safe_load((bag_dir / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    return {
        entry["topic_metadata"]["name"]: entry["message_count"]
        for entry in info["topics_with_message_count"]
    }


def independent_counts(path: Path) -> dict[str, int]:
    """Count messages per topic with the mcap package's own indexed reader."""
    with path.open("rb") as fh:
        reader = make_reader(fh)
        summary = reader.get_summary()
        assert summary is not None
        counts = {channel.topic: 0 for channel in summary.channels.values()}
        for _schema, channel, _message in reader.iter_messages():
            counts[channel.topic] += 1
    return counts


def test_real_bags_are_present():
    assert len(BAG_DIRS) >= 6
    assert len(UNDESCRIBED_BAGS) == 2
    assert len(ALL_FILES) >= 15


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_every_real_mcap_file_reads_with_the_counts_the_mcap_package_finds(path):
    expected = independent_counts(path)

    report = validate_recording([path], None)

    assert report.passed
    assert {t.topic: t.count for t in report.topics} == expected


@pytest.mark.parametrize("bag_dir", BAG_DIRS, ids=lambda p: p.name)
def test_every_real_bag_reads_with_the_topic_counts_of_its_metadata(bag_dir):
    expected = metadata_counts(bag_dir)

    report = validate_recording([bag_dir], None)

    assert report.passed
    assert {t.topic: t.count for t in report.topics} == expected
    assert report.message_count == sum(expected.values())
    json.dumps(report.to_dict())


@pytest.mark.parametrize("path", UNDESCRIBED_BAGS, ids=lambda p: p.name)
def test_bags_without_metadata_count_what_the_mcap_package_counts(path):
    expected = independent_counts(path)

    report = validate_recording([path], None)

    assert report.passed
    assert {t.topic: t.count for t in report.topics} == expected


def test_a_recording_split_across_files_reads_as_one_stream_in_log_time_order():
    recording = Recording([ROSBAGS / "wbag"])

    times = [m.log_time_ns for m in recording.messages()]

    assert len(recording.files) == 5
    assert [f.path.name for f in recording.files] == [f"wbag_{i}.mcap" for i in range(5)]
    assert len(times) == sum(metadata_counts(ROSBAGS / "wbag").values())
    assert times == sorted(times)


def test_multiple_files_given_one_by_one_equal_the_directory():
    files = sorted((ROSBAGS / "multiple_files").glob("*.mcap"))

    expected = sum(independent_counts(f)["/chatter"] for f in files)

    by_files = validate_recording(files, None)
    by_directory = validate_recording([ROSBAGS / "multiple_files"], None)

    assert len(by_files.files) == 3
    assert by_files.topic("/chatter").count == by_directory.topic("/chatter").count == expected
    assert by_files.duration_s == pytest.approx(by_directory.duration_s)


@pytest.mark.parametrize(
    ("bag", "empty_topic"),
    [
        (ROSBAGS / "talker", "/parameter_events"),
        (ROSBAGS / "bag_with_topics_and_service_events", "/events/write_split"),
        (ROSBAGS / "rosbag2_cpp_bags" / "only_topics.mcap", "/rosout"),
    ],
    ids=["talker", "service_events", "only_topics"],
)
def test_topics_declared_without_messages_are_listed_with_count_zero(bag, empty_topic):
    report = validate_recording([bag], None)

    topic = report.topic(empty_topic)
    assert topic.count == 0
    assert topic.rate_hz is None
    assert topic.note == "no messages"


def test_nanosecond_scale_bag_reports_no_rate_instead_of_infinity():
    report = validate_recording([ROSBAGS / "wbag"], None)

    assert report.passed
    assert report.duration_s < 1e-5
    for topic in report.topics:
        assert topic.rate_hz is None
        assert topic.note is not None
        assert "rate not meaningful" in topic.note
    assert "NaN" not in json.dumps(report.to_dict())
    assert "Infinity" not in json.dumps(report.to_dict())


def test_nanosecond_scale_bag_fails_rate_checks_with_a_reason_instead_of_crashing():
    from labeling.capture import CaptureSpec

    spec = CaptureSpec.from_embodiment(
        {"slug": "odd", "control_rate_hz": 50, "cameras": [], "action_dimensions": []}
    )

    report = validate_recording([ROSBAGS / "wbag"], spec)

    assert not report.passed
    assert report.check("joint_stream").passed is False
    assert "FAILED" in report.to_text()


def test_real_bag_with_two_topics_reports_rates_and_gaps():
    report = validate_recording([ROSBAGS / "talker"], None)

    topic = report.topic("/topic")
    assert topic.count == 10
    assert topic.schema_name == "std_msgs/msg/String"
    assert topic.message_encoding == "cdr"
    assert topic.rate_hz == pytest.approx(2.0, rel=0.05)
    assert topic.longest_gap_ms is not None
    assert topic.mean_interval_ms is not None
    assert topic.longest_gap_ms >= topic.mean_interval_ms
    assert Counter(f.compression[0] for f in report.files) == {"zstd": 1}
