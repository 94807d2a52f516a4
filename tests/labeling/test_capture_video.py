"""Episode videos for LeRobot v3.0: exact timestamps through encode, concatenate and lookup.

Frames carry their identity in two flat gray bands (episode in the top band, frame index in the
bottom one), spaced far enough apart that crf-30 compression cannot confuse them.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from labeling.capture.video import (
    CODECS,
    ImageStats,
    VideoEncoder,
    VideoError,
    concatenate_videos,
    decode_video,
    frame_at,
    video_info,
)

WIDTH, HEIGHT = 64, 48
EPISODE_STEP, FRAME_STEP = 6, 18


def banded(episode: int, frame: int, *, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    rgb = np.empty((height, width, 3), dtype=np.uint8)
    rgb[: height // 2] = 10 + EPISODE_STEP * episode
    rgb[height // 2 :] = 10 + FRAME_STEP * frame
    return rgb


def read_bands(rgb: np.ndarray) -> tuple[int, int]:
    half = rgb.shape[0] // 2
    # Band interiors only: the edge between bands is where compression smears.
    top = float(rgb[2 : half - 2].mean())
    bottom = float(rgb[half + 2 : -2].mean())
    return round((top - 10) / EPISODE_STEP), round((bottom - 10) / FRAME_STEP)


def encode_episode(path: Path, episode: int, frames: int, fps: float, codec: str) -> Path:
    with VideoEncoder(path, width=WIDTH, height=HEIGHT, fps=fps, codec=codec) as encoder:
        for k in range(frames):
            encoder.write(banded(episode, k))
    return path


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_encoded_frames_decode_in_order_at_exactly_k_over_fps(tmp_path, codec):
    fps = 30000 / 1001
    path = tmp_path / "episode.mp4"

    with VideoEncoder(path, width=WIDTH, height=HEIGHT, fps=fps, codec=codec) as encoder:
        for k in range(12):
            encoder.write(banded(0, k))
            assert not path.exists()
        assert encoder.frames == 12
    info = encoder.close()
    decoded = list(decode_video(path))

    assert info.frames == 12
    assert (info.codec, info.width, info.height, info.pix_fmt) == (CODECS[codec], 64, 48, "yuv420p")
    assert video_info(path) == info
    assert len(decoded) == 12
    for k, (pts, rgb) in enumerate(decoded):
        assert abs(pts - k / fps) < 1e-9
        assert rgb.shape == (HEIGHT, WIDTH, 3)
        assert rgb.dtype == np.uint8
        assert read_bands(rgb) == (0, k)
    assert not [p for p in tmp_path.iterdir() if p.name != "episode.mp4"]


def test_lerobot_info_has_lerobot_keys_and_values(tmp_path):
    path = encode_episode(tmp_path / "episode.mp4", 0, 3, 30, "libsvtav1")

    info = video_info(path).lerobot_info()

    assert info == {
        "video.height": 48,
        "video.width": 64,
        "video.codec": "av1",
        "video.pix_fmt": "yuv420p",
        "video.is_depth_map": False,
        "video.fps": 30,
        "video.channels": 3,
        "has_audio": False,
    }
    assert isinstance(info["video.fps"], int)


@pytest.mark.parametrize(
    ("codec", "fps"),
    [("libsvtav1", 30), ("libsvtav1", 29.97), ("libx264", 30000 / 1001), ("libx264", 15)],
)
def test_forty_concatenated_episodes_are_found_by_lerobots_lookup(tmp_path, codec, fps):
    lengths = [7 + (episode * 5) % 7 for episode in range(40)]
    inputs = [
        encode_episode(tmp_path / f"episode_{episode:03d}.mp4", episode, length, fps, codec)
        for episode, length in enumerate(lengths)
    ]
    output = tmp_path / "chunk-000" / "file-000.mp4"

    ranges = concatenate_videos(inputs, output)

    info = video_info(output)
    assert info.frames == sum(lengths)
    assert len(ranges) == 40
    offset = 0
    for episode, ((from_ts, to_ts), length) in enumerate(zip(ranges, lengths, strict=True)):
        assert abs(from_ts - offset / fps) < 1e-12
        assert abs(to_ts - (offset + length) / fps) < 1e-12
        for i in range(length):
            query = from_ts + i / fps
            # torchcodec's lookup: frame index round(ts * fps), then the pts tolerance check.
            assert round(query * info.fps) == offset + i
            assert read_bands(frame_at(output, query, tolerance_s=1e-4)) == (episode, i)
        offset += length
    assert [b for a, b in zip(ranges, ranges[1:], strict=False) if a[1] != b[0]] == []
    for k, (pts, _) in enumerate(decode_video(output)):
        assert abs(pts - k / fps) < 1e-9


def test_concatenating_onto_the_existing_chunk_file_replaces_it(tmp_path):
    chunk = encode_episode(tmp_path / "file-000.mp4", 0, 9, 30, "libsvtav1")
    episode = encode_episode(tmp_path / "episode_001.mp4", 1, 7, 30, "libsvtav1")

    ranges = concatenate_videos([chunk, episode], chunk)

    assert ranges == [(0.0, 9 / 30), (9 / 30, 16 / 30)]
    assert video_info(chunk).frames == 16
    assert read_bands(frame_at(chunk, ranges[1][0] + 6 / 30)) == (1, 6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episode_001.mp4", "file-000.mp4"]


def test_concatenating_a_video_of_another_size_names_it(tmp_path):
    first = encode_episode(tmp_path / "a.mp4", 0, 3, 30, "libsvtav1")
    other = tmp_path / "b.mp4"
    with VideoEncoder(other, width=32, height=48, fps=30) as encoder:
        for _ in range(3):
            encoder.write(np.zeros((48, 32, 3), dtype=np.uint8))
    output = tmp_path / "out.mp4"

    with pytest.raises(VideoError, match=r"b\.mp4: width 32 differs from 64"):
        concatenate_videos([first, other], output)

    assert not output.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4", "b.mp4"]


def test_concatenating_videos_of_another_codec_or_fps_names_the_file(tmp_path):
    first = encode_episode(tmp_path / "a.mp4", 0, 3, 30, "libsvtav1")
    h264 = encode_episode(tmp_path / "h264.mp4", 0, 3, 30, "libx264")
    slow = encode_episode(tmp_path / "slow.mp4", 0, 3, 15, "libsvtav1")

    with pytest.raises(VideoError, match=r"h264\.mp4: codec h264 differs from av1"):
        concatenate_videos([first, h264], tmp_path / "out.mp4")
    with pytest.raises(VideoError, match=r"slow\.mp4: fps 15 differs from 30"):
        concatenate_videos([first, slow], tmp_path / "out.mp4")


def test_concatenating_x264_videos_encoded_at_another_crf_is_refused(tmp_path):
    # x264 keeps its parameter sets in the file header; remuxing would decode the second wrong.
    first = encode_episode(tmp_path / "a.mp4", 0, 3, 30, "libx264")
    other = tmp_path / "b.mp4"
    with VideoEncoder(other, width=WIDTH, height=HEIGHT, fps=30, codec="libx264", crf=18) as enc:
        enc.write(banded(0, 0))

    with pytest.raises(VideoError, match=r"b\.mp4: h264 parameters differ"):
        concatenate_videos([first, other], tmp_path / "out.mp4")


def write_with_pts(path: Path, presentation: tuple[int, ...]) -> Path:
    """Encode with plain PyAV, frame i presented at presentation[i]/30 s."""
    time_base = Fraction(1, 30)
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.codec_context.time_base = time_base
        for i, pts in enumerate(presentation):
            frame = av.VideoFrame.from_ndarray(banded(0, i), format="rgb24")
            frame.pts, frame.time_base = pts, time_base
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


def test_concatenating_a_variable_frame_rate_video_is_refused(tmp_path):
    path = write_with_pts(tmp_path / "vfr.mp4", (0, 1, 3))

    with pytest.raises(VideoError, match=r"vfr\.mp4: .*not constant frame rate"):
        concatenate_videos([path], tmp_path / "out.mp4")


def test_concatenating_a_video_that_starts_late_moves_its_frames_onto_k_over_fps(tmp_path):
    late = write_with_pts(tmp_path / "late.mp4", (2, 3, 4))
    assert abs(next(decode_video(late))[0] - 2 / 30) > 1e-4  # the muxer's edit list is off-grid

    ranges = concatenate_videos([late, late], tmp_path / "out.mp4")

    assert ranges == [(0.0, 0.1), (0.1, 0.2)]
    decoded = list(decode_video(tmp_path / "out.mp4"))
    assert [round(pts * 30, 9) for pts, _ in decoded] == [0, 1, 2, 3, 4, 5]
    assert [read_bands(rgb)[1] for _, rgb in decoded] == [0, 1, 2, 0, 1, 2]


def test_concatenating_nothing_or_an_unreadable_file_raises(tmp_path):
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video")

    with pytest.raises(VideoError, match="no input videos"):
        concatenate_videos([], tmp_path / "out.mp4")
    with pytest.raises(VideoError, match=r"junk\.mp4: cannot open video"):
        concatenate_videos([junk], tmp_path / "out.mp4")
    with pytest.raises(VideoError, match=r"junk\.mp4"):
        video_info(junk)
    assert not (tmp_path / "out.mp4").exists()


def test_frame_at_outside_tolerance_says_the_nearest_frame(tmp_path):
    path = encode_episode(tmp_path / "episode.mp4", 0, 5, 30, "libsvtav1")

    with pytest.raises(VideoError, match=r"nearest is at 0\.066667 s"):
        frame_at(path, 2 / 30 + 2e-4)
    with pytest.raises(VideoError, match=r"nearest is at 0\.133333 s"):
        frame_at(path, 1.0)
    assert read_bands(frame_at(path, 2 / 30 + 5e-5)) == (0, 2)


def record_until_unplugged(path: Path) -> None:
    with VideoEncoder(path, width=WIDTH, height=HEIGHT, fps=30) as encoder:
        encoder.write(banded(0, 0))
        encoder.write(banded(0, 1))
        raise RuntimeError("camera unplugged")


def test_encoder_failing_mid_way_leaves_no_file(tmp_path):
    path = tmp_path / "episode.mp4"

    with pytest.raises(RuntimeError, match="camera unplugged"):
        record_until_unplugged(path)

    assert list(tmp_path.iterdir()) == []


def test_abort_keeps_an_existing_file_and_removes_the_partial_one(tmp_path):
    path = encode_episode(tmp_path / "episode.mp4", 0, 3, 30, "libsvtav1")
    before = path.read_bytes()
    encoder = VideoEncoder(path, width=WIDTH, height=HEIGHT, fps=30)
    encoder.write(banded(1, 0))

    encoder.abort()

    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]
    with pytest.raises(VideoError, match="closed"):
        encoder.write(banded(1, 1))


@pytest.mark.parametrize(
    "frame",
    [
        np.zeros((48, 32, 3), dtype=np.uint8),
        np.zeros((HEIGHT, WIDTH), dtype=np.uint8),
        np.zeros((HEIGHT, WIDTH, 3), dtype=np.float32),
    ],
    ids=["wrong-size", "gray", "float"],
)
def test_wrong_frame_raises_video_error_naming_the_file(tmp_path, frame):
    path = tmp_path / "episode.mp4"

    with VideoEncoder(path, width=WIDTH, height=HEIGHT, fps=30) as encoder:
        encoder.write(banded(0, 0))
        with pytest.raises(VideoError, match=r"episode\.mp4: frame 1 is .* expected \(48, 64, 3\)"):
            encoder.write(frame)
        encoder.write(banded(0, 1))

    assert encoder.close().frames == 2


def test_strided_views_are_encoded_as_their_pixels(tmp_path):
    big = np.zeros((HEIGHT, WIDTH * 2, 3), dtype=np.uint8)
    big[:, ::2] = banded(0, 3)
    path = tmp_path / "episode.mp4"

    with VideoEncoder(path, width=WIDTH, height=HEIGHT, fps=30) as encoder:
        encoder.write(big[:, ::2])
        encoder.write(banded(0, 4)[:, :, :])

    assert [read_bands(rgb) for _, rgb in decode_video(path)] == [(0, 3), (0, 4)]


def test_odd_sizes_round_trip_with_svtav1_and_are_refused_for_x264(tmp_path):
    path = tmp_path / "odd.mp4"

    with VideoEncoder(path, width=65, height=49, fps=30) as encoder:
        encoder.write(banded(2, 5, width=65, height=49))
    with pytest.raises(VideoError, match=r"x264\.mp4: libx264 cannot encode 65x49"):
        VideoEncoder(tmp_path / "x264.mp4", width=65, height=49, fps=30, codec="libx264")

    ((_, rgb),) = decode_video(path)
    assert rgb.shape == (49, 65, 3)
    assert read_bands(rgb) == (2, 5)


def test_closing_an_empty_encoder_raises_and_leaves_nothing(tmp_path):
    encoder = VideoEncoder(tmp_path / "episode.mp4", width=WIDTH, height=HEIGHT, fps=30)

    with pytest.raises(VideoError, match="no frames"):
        encoder.close()

    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"codec": "libvpx"}, "libvpx"),
        ({"pix_fmt": "yuv444p"}, "cannot encode 'yuv444p'"),
        ({"fps": 0}, "fps must be positive"),
        ({"fps": float("nan")}, "not a finite number"),
        ({"crf": 99}, "cannot start libsvtav1 encoder"),
    ],
)
def test_bad_encoder_settings_raise_video_error_naming_the_file(tmp_path, kwargs, message):
    settings_ = {"width": WIDTH, "height": HEIGHT, "fps": 30, **kwargs}

    with pytest.raises(VideoError, match=message) as raised:
        VideoEncoder(tmp_path / "episode.mp4", **settings_)

    assert "episode.mp4" in str(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_image_stats_of_two_flat_frames_checked_by_hand():
    stats = ImageStats()
    stats.add(np.broadcast_to(np.array([10, 20, 30], dtype=np.uint8), (4, 6, 3)))
    stats.add(np.broadcast_to(np.array([30, 40, 250], dtype=np.uint8), (4, 6, 3)))

    result = stats.result()

    assert list(result) == ["min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"]
    assert result["count"] == [2]
    assert np.array(result["mean"]).shape == (3, 1, 1)
    np.testing.assert_allclose(np.ravel(result["min"]), np.array([10, 20, 30]) / 255)
    np.testing.assert_allclose(np.ravel(result["max"]), np.array([30, 40, 250]) / 255)
    np.testing.assert_allclose(np.ravel(result["mean"]), np.array([20, 30, 140]) / 255)
    np.testing.assert_allclose(np.ravel(result["std"]), np.array([10, 10, 110]) / 255)
    np.testing.assert_allclose(np.ravel(result["q01"]), np.array([10, 20, 30]) / 255)
    np.testing.assert_allclose(np.ravel(result["q50"]), np.array([10, 20, 30]) / 255)
    np.testing.assert_allclose(np.ravel(result["q99"]), np.array([30, 40, 250]) / 255)


def test_image_stats_stride_large_frames_like_lerobot_and_count_every_frame():
    frame = np.zeros((480, 640, 3), dtype=np.uint8)
    frame[::4, ::4] = 200  # exactly the pixels LeRobot's stride-4 downsample keeps
    stats = ImageStats(sample_every=2)

    for _ in range(5):
        stats.add(frame)
    stats.add(np.zeros_like(frame))  # sixth frame: not sampled
    result = stats.result()

    assert result["count"] == [6]
    assert np.ravel(result["mean"]).tolist() == [200 / 255] * 3
    assert np.ravel(result["min"]).tolist() == [200 / 255] * 3


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        np.uint8,
        st.tuples(st.integers(1, 3), st.integers(1, 12), st.integers(1, 12), st.just(3)),
    )
)
def test_image_stats_equal_numpy_over_all_pixels(frames):
    stats = ImageStats()
    for frame in frames:
        stats.add(frame)

    result = {key: np.ravel(value) for key, value in stats.result().items()}

    pixels = frames.reshape(-1, 3).astype(np.float64)
    np.testing.assert_allclose(result["mean"], pixels.mean(axis=0) / 255, atol=1e-12)
    np.testing.assert_allclose(result["std"], pixels.std(axis=0) / 255, atol=1e-9)
    np.testing.assert_allclose(result["min"], pixels.min(axis=0) / 255)
    np.testing.assert_allclose(result["max"], pixels.max(axis=0) / 255)
    for key, q in (("q01", 0.01), ("q50", 0.5), ("q99", 0.99)):
        expected = np.quantile(pixels, q, axis=0, method="inverted_cdf") / 255
        np.testing.assert_allclose(result[key], expected)
    assert all(0 <= v <= 1 for key, vs in result.items() if key != "count" for v in vs)
    assert result["count"].tolist() == [len(frames)]


class _StuckFlush:
    """PyAV's stream as a hung SVT-AV1 leaves it: frames go in, the final flush never ends."""

    def __init__(self, stream: object) -> None:
        self._stream = stream
        self.release = __import__("threading").Event()

    def encode(self, frame: object) -> object:
        if frame is None:
            self.release.wait(30)
        return self._stream.encode(frame)  # type: ignore[attr-defined]


def test_a_flush_that_never_ends_is_a_hung_encoder_not_a_hung_caller(tmp_path, monkeypatch):
    import labeling.capture.video as video

    monkeypatch.setattr(video, "FLUSH_TIMEOUT_S", 0.2)
    encoder = VideoEncoder(tmp_path / "out.mp4", width=WIDTH, height=HEIGHT, fps=10)
    encoder.write(banded(0, 0))
    stuck = _StuckFlush(encoder._stream)
    encoder._stream = stuck  # type: ignore[assignment]

    with pytest.raises(video.VideoHung, match="did not finish flushing within 0 s"):
        encoder.close()
    encoder.abort()  # a hung encoder's context is left alone: no second wait on it
    stuck.release.set()

    assert not (tmp_path / "out.mp4").exists()
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("codec", ["libsvtav1", "libx264"])
def test_an_encoder_leaves_every_thread_under_the_ordinary_scheduler(tmp_path, codec):
    # SVT-AV1 run as root (as here and in a container) made its threads and the caller
    # SCHED_FIFO at top priority; an encoding worker then starved everything else.
    import os

    def real_time() -> list[int]:
        found = []
        for tid in os.listdir("/proc/self/task"):
            try:
                policy = os.sched_getscheduler(int(tid))
            except ProcessLookupError:
                continue  # a thread that ended after it was listed runs under nothing
            if policy in (os.SCHED_FIFO, os.SCHED_RR):
                found.append(int(tid))
        return found

    from tests.browser import fair_scheduling

    fair_scheduling()  # another test's direct use of PyAV may have left it real-time
    before = real_time()
    encoder = VideoEncoder(tmp_path / "a.mp4", width=64, height=64, fps=10, codec=codec)
    during = real_time()
    encoder.write(np.zeros((64, 64, 3), np.uint8))
    encoder.close()

    assert before == during == []
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
