"""Benchmark: recordings → LeRobot v3.0 dataset, against a bare PyAV encode of the same frames.

Run: ``.venv/bin/python bench/convert.py [EPISODES] [SECONDS] [ROUNDS]`` (default 4 episodes of
8 s, 3 rounds). No database needed.

Generates EPISODES synthetic ROS 2 MCAP recordings (:mod:`labeling.capture.synthetic`): two
cameras at 640x480 and 30 fps (JPEG ``sensor_msgs/msg/CompressedImage``, jittered), joint state
and commands at 50 Hz, zstd chunks. Then, in the same process, alternating for ROUNDS rounds:

* *bare encode* — the same number of frames of the same size, already decoded in memory, fed
  to :class:`labeling.capture.video.VideoEncoder` (AV1, LeRobot's settings), one video per
  camera and episode;
* *conversion* — end to end: read and align each recording, decode the JPEGs, encode, write
  the bundle, and assemble the dataset (data parquet, concatenated videos, metadata, stats)
  with :class:`labeling.exports.lerobot.LeRobotWriter`.

Prints each round, the median ratio conversion / bare encode (target ≤ 1.3), frames per second,
and the peak RSS of a fresh process converting one recording of SECONDS and of 10 × SECONDS
(target < 1 GB, and not growing with the length).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from labeling.capture.convert import convert_recording
from labeling.capture.streams import CameraMapping, StreamMap
from labeling.capture.synthetic import (
    T0_NS,
    CameraPlan,
    RecordingPlan,
    render_clock,
    write_recording,
)
from labeling.capture.video import VideoEncoder
from labeling.exports.lerobot import Layout, LeRobotWriter

WIDTH, HEIGHT, FPS = 640, 480, 30.0
JOINTS = (
    "base_vx",
    "shoulder_pan",
    "shoulder_lift",
    "elbow",
    "wrist_flex",
    "wrist_roll",
    "gripper",
)
CAMERAS = ("head", "wrist")


def plan(seconds: float, seed: int) -> RecordingPlan:
    return RecordingPlan(
        duration_s=seconds,
        t0_ns=T0_NS + seed * 10**12,
        joints=JOINTS,
        cameras=[
            CameraPlan(name, width=WIDTH, height=HEIGHT, fps=FPS, jitter_ms=2.0, quality=85)
            for name in CAMERAS
        ],
        state_hz=50.0,
        action_hz=50.0,
        seed=seed,
    )


STREAMS = StreamMap(
    joints=JOINTS,
    cameras=tuple(CameraMapping(n, fps=FPS, width=WIDTH, height=HEIGHT) for n in CAMERAS),
    fps=FPS,
)


def convert_all(recordings: list[Path], work: Path) -> int:
    """Convert every recording and assemble the dataset; returns the frames per camera."""
    frames = 0
    bundles = []
    for i, recording in enumerate(recordings):
        result = convert_recording([recording], STREAMS, work / f"conv-{i}")
        bundles.extend(b.path for b in result.episodes)
    writer = None
    for bundle in bundles:
        meta = json.loads((bundle / "bundle.json").read_text())
        if writer is None:
            writer = LeRobotWriter(
                work / "dataset",
                Layout(
                    version="v3.0",
                    fps=FPS,
                    robot_type="bench",
                    state_names=list(meta["state_names"]),
                    action_names=list(meta["action_names"]),
                    cameras={k: (c["height"], c["width"]) for k, c in meta["cameras"].items()},
                ),
            )
        writer.add_episode(bundle, task="bench", extra={})
        frames += meta["length"]
    assert writer is not None
    writer.finish()
    return frames


def bare_encode(frames_per_episode: list[int], pool: list, work: Path) -> None:  # type: ignore[type-arg]
    for i, count in enumerate(frames_per_episode):
        for camera in CAMERAS:
            with VideoEncoder(
                work / f"bare-{i}-{camera}.mp4", width=WIDTH, height=HEIGHT, fps=FPS
            ) as encoder:
                for k in range(count):
                    encoder.write(pool[k % len(pool)])


def peak_rss_of_one(seconds: float) -> tuple[float, int]:
    """Peak RSS (MB) of a fresh process converting one recording of ``seconds``, and the
    rows it converted."""
    out = subprocess.run(
        [sys.executable, __file__, "--rss", str(seconds)],
        check=True,
        capture_output=True,
        text=True,
    )
    rss, rows = out.stdout.strip().splitlines()[-1].split()
    return float(rss), int(rows)


def rss_child(seconds: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-convert-rss-") as tmp:
        work = Path(tmp)
        recording = work / "long.mcap"
        write_recording(recording, plan(seconds, seed=99))
        rows = convert_all([recording], work)
        print(f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} {rows}")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--rss":
        rss_child(float(sys.argv[2]))
        return
    episodes = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 8.0
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    with tempfile.TemporaryDirectory(prefix="bench-convert-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        recordings = []
        for i in range(episodes):
            path = root / f"episode-{i}.mcap"
            write_recording(path, plan(seconds, seed=i))
            recordings.append(path)
        size = sum(p.stat().st_size for p in recordings)
        print(
            f"{episodes} recordings × {seconds:g} s, 2 cameras {WIDTH}x{HEIGHT} @ {FPS:g} fps "
            f"(JPEG), joints @ 50 Hz: {size / 1e6:.1f} MB, written in "
            f"{time.perf_counter() - started:.1f} s"
        )
        pool = [render_clock(k * 33_333, WIDTH, HEIGHT, scene=k % 2) for k in range(30)]
        ratios, conversion_times = [], []
        frames_total = 0
        for r in range(rounds):
            work = root / f"round-{r}"
            work.mkdir()
            t0 = time.perf_counter()
            frames = convert_all(recordings, work)
            conversion = time.perf_counter() - t0
            per_episode = [frames // episodes] * episodes
            per_episode[-1] += frames - sum(per_episode)
            t0 = time.perf_counter()
            bare_encode(per_episode, pool, work)
            bare = time.perf_counter() - t0
            shutil.rmtree(work)
            frames_total = frames
            ratios.append(conversion / bare)
            conversion_times.append(conversion)
            print(
                f"  round {r + 1}: conversion {conversion:6.2f} s, bare encode {bare:6.2f} s, "
                f"ratio {conversion / bare:.2f}"
            )
        camera_frames = frames_total * len(CAMERAS)
        median = statistics.median(ratios)
        print(
            f"median ratio conversion / bare encode: {median:.2f} (target ≤ 1.3); "
            f"{frames_total:,} rows × {len(CAMERAS)} cameras = {camera_frames:,} frames, "
            f"{camera_frames / statistics.median(conversion_times):.0f} camera frames/s end to end"
        )
    (short, short_rows), (long, long_rows) = peak_rss_of_one(seconds), peak_rss_of_one(10 * seconds)
    print(
        f"peak RSS converting one recording: {short:.0f} MB ({seconds:g} s, {short_rows:,} rows), "
        f"{long:.0f} MB ({seconds * 10:g} s, {long_rows:,} rows) (target < 1024 MB, flat with "
        "length)"
    )


if __name__ == "__main__":
    os.environ.setdefault("SVT_LOG", "1")
    main()
