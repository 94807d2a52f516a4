"""The LeRobot writer: datasets with frames from episode bundles, read back as LeRobot reads them.

Every frame of every test video encodes its episode and frame number as black/white blocks, so
decoding a frame tells which one the dataset's timestamps led to.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.capture.feature_stats import aggregate_feature_stats, column_stats
from labeling.capture.video import VideoEncoder, frame_at, video_info
from labeling.exports.lerobot import (
    DEFAULT_FEATURES,
    DatasetWriteError,
    Layout,
    LeRobotWriter,
    episodes_schema,
)

REAL_V3 = Path(__file__).resolve().parents[1] / "data" / "lerobot" / "v3.0_record-test"
FPS = 30.0
HEIGHT, WIDTH = 48, 64
BLOCK = 16  # 4 x 3 blocks of 16 px: 12 bits
STATE_NAMES = ["shoulder.pos", "elbow.pos", "gripper.pos"]
ACTION_NAMES = ["shoulder.pos", "elbow.pos", "gripper.pos"]
CAMERAS = {"observation.images.front": (HEIGHT, WIDTH), "observation.images.wrist": (HEIGHT, WIDTH)}
EPISODES = 36
TASKS = ["Pick the cube", "Place the cube"]
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}


# --- bundles ------------------------------------------------------------------------------------


def encode_code(code: int, camera: int) -> np.ndarray:
    """A frame whose 12 blocks are the bits of ``code``; the camera tints it (so stats differ)."""
    image = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    for bit in range(12):
        row, col = divmod(bit, WIDTH // BLOCK)
        on = (code >> bit) & 1
        image[row * BLOCK : (row + 1) * BLOCK, col * BLOCK : (col + 1) * BLOCK] = (
            (230, 220 - 40 * camera, 210) if on else (20 + 10 * camera, 25, 30)
        )
    return image


def decode_code(image: np.ndarray) -> int:
    code = 0
    for bit in range(12):
        row, col = divmod(bit, WIDTH // BLOCK)
        block = image[
            row * BLOCK + 4 : (row + 1) * BLOCK - 4, col * BLOCK + 4 : (col + 1) * BLOCK - 4
        ]
        code |= int(block.mean() > 128) << bit
    return code


def code_of(episode: int, frame: int) -> int:
    return episode * 64 + frame


def length_of(episode: int) -> int:
    return 3 + (episode * 5) % 7  # 3..9 frames, irregular


def vector_stats(values: np.ndarray) -> dict[str, Any]:
    data = values.astype(np.float64)
    out = {
        "min": data.min(axis=0).tolist(),
        "max": data.max(axis=0).tolist(),
        "mean": data.mean(axis=0).tolist(),
        "std": data.std(axis=0).tolist(),
        "count": [len(data)],
    }
    return out | {k: np.quantile(data, q, axis=0).tolist() for k, q in QUANTILES.items()}


def image_stats(frames: np.ndarray) -> dict[str, Any]:
    pixels = frames.reshape(-1, 3).astype(np.float64) / 255.0

    def channel(values: np.ndarray) -> list[list[list[float]]]:
        return [[[float(v)]] for v in values]

    out = {
        "min": channel(pixels.min(axis=0)),
        "max": channel(pixels.max(axis=0)),
        "mean": channel(pixels.mean(axis=0)),
        "std": channel(pixels.std(axis=0)),
        "count": [len(frames)],
    }
    return out | {k: channel(np.quantile(pixels, q, axis=0)) for k, q in QUANTILES.items()}


def state_of(episode: int, length: int) -> np.ndarray:
    k = np.arange(length, dtype=np.float32)[:, None]
    return (episode * 10.0 + k * np.array([0.5, -1.0, 0.25], np.float32)).astype(np.float32)


def make_bundle(
    folder: Path,
    episode: int,
    *,
    length: int | None = None,
    video_frames: int | None = None,
    fps: float = FPS,
    state_names: list[str] = STATE_NAMES,
) -> Path:
    length = length_of(episode) if length is None else length
    (folder / "videos").mkdir(parents=True)
    state = state_of(episode, length)
    action = state + np.float32(0.125)
    frame_index = np.arange(length, dtype=np.int64)
    pq.write_table(
        pa.table(
            {
                "timestamp": pa.array((frame_index / fps).astype(np.float32)),
                "frame_index": pa.array(frame_index),
                "observation.state": pa.FixedSizeListArray.from_arrays(pa.array(state.ravel()), 3),
                "action": pa.FixedSizeListArray.from_arrays(pa.array(action.ravel()), 3),
            }
        ),
        folder / "frames.parquet",
    )
    stats: dict[str, Any] = {
        "observation.state": vector_stats(state),
        "action": vector_stats(action),
    }
    cameras = {}
    for camera, key in enumerate(CAMERAS):
        frames = np.stack([encode_code(code_of(episode, k), camera) for k in range(length)])
        with VideoEncoder(
            folder / "videos" / f"{key}.mp4", width=WIDTH, height=HEIGHT, fps=fps
        ) as encoder:
            for frame in frames[: length if video_frames is None else video_frames]:
                encoder.write(frame)
        cameras[key] = {"width": WIDTH, "height": HEIGHT, "codec": "av1", "pix_fmt": "yuv420p"}
        cameras[key]["fps"] = fps
        stats[key] = image_stats(frames)
    meta = {
        "length": length,
        "fps": fps,
        "state_names": state_names,
        "action_names": ACTION_NAMES,
        "action_convention": "recorded",
        "cameras": cameras,
        "stats": stats,
        "sync": {"verdict": "synced"},
    }
    (folder / "bundle.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("bundles")
    return [make_bundle(root / f"ep-{i:03d}", i) for i in range(EPISODES)]


def layout(version: str = "v3.0", **overrides: Any) -> Layout:
    values: dict[str, Any] = {
        "version": version,
        "fps": FPS,
        "robot_type": "so101_follower",
        "state_names": STATE_NAMES,
        "action_names": ACTION_NAMES,
        "cameras": CAMERAS,
        "extra_episode_columns": {
            "fieldcraft.key": pa.string(),
            "fieldcraft.duration_s": pa.float64(),
        },
        "info_extra": {"fieldcraft": {"dataset": "pick-place"}},
    }
    return Layout(**(values | overrides))


def extra_of(episode: int) -> dict[str, Any]:
    return {"fieldcraft.key": f"ep-{episode}", "fieldcraft.duration_s": length_of(episode) / FPS}


def write(root: Path, bundles: list[Path], spec: Layout) -> Any:
    writer = LeRobotWriter(root, spec)
    for i, bundle in enumerate(bundles):
        assert writer.add_episode(bundle, task=TASKS[i % 2], extra=extra_of(i)) == i
    return writer.finish()


def read_parquets(folder: Path) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in sorted(folder.glob("*/*.parquet"))])


# --- v3.0 ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def v3(bundles: list[Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    root = tmp_path_factory.mktemp("v3") / "dataset"
    # Tiny limits so data, video and episode files rotate, and chunks fill (3 files a chunk).
    spec = layout(chunks_size=3, data_files_size_in_mb=0.006, video_files_size_in_mb=0.006)
    return root, write(root, bundles, spec)


def test_v3_every_row_finds_its_own_video_frame_across_rotated_files(v3: tuple[Path, Any]) -> None:
    root, _ = v3
    episodes = read_parquets(root / "meta" / "episodes").to_pylist()
    data = read_parquets(root / "data")

    video_files = {k: sorted((root / "videos" / k).glob("*/*.mp4")) for k in CAMERAS}
    assert len(list((root / "data").glob("*/*.parquet"))) >= 4
    assert len(list((root / "data").glob("chunk-*"))) >= 2
    assert all(len(files) >= 4 for files in video_files.values())
    assert len({(e["data/chunk_index"], e["data/file_index"]) for e in episodes}) >= 4
    assert (
        len({(e["meta/episodes/chunk_index"], e["meta/episodes/file_index"]) for e in episodes})
        >= 2
    )
    assert [e["episode_index"] for e in episodes] == list(range(EPISODES))
    checked = 0
    for row in data.to_pylist():
        ep = episodes[row["episode_index"]]
        for camera, key in enumerate(CAMERAS):
            path = (
                root
                / "videos"
                / key
                / (
                    f"chunk-{ep[f'videos/{key}/chunk_index']:03d}/file-{ep[f'videos/{key}/file_index']:03d}.mp4"
                )
            )
            ts = ep[f"videos/{key}/from_timestamp"] + row["timestamp"]
            frame = frame_at(path, ts, tolerance_s=1e-4)
            assert decode_code(frame) == code_of(row["episode_index"], row["frame_index"]), (
                f"episode {row['episode_index']} frame {row['frame_index']} camera {camera}"
            )
            checked += 1
    assert checked == 2 * sum(length_of(i) for i in range(EPISODES))


def test_v3_index_is_contiguous_and_episode_rows_point_at_their_frames(
    v3: tuple[Path, Any],
) -> None:
    root, summary = v3
    episodes = read_parquets(root / "meta" / "episodes").to_pylist()
    lengths = [length_of(i) for i in range(EPISODES)]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])

    data = read_parquets(root / "data")
    assert data.column("index").to_pylist() == list(range(sum(lengths)))
    assert summary.frames == sum(lengths) and summary.episodes == EPISODES
    for i, ep in enumerate(episodes):
        assert (ep["length"], ep["dataset_from_index"]) == (lengths[i], starts[i])
        assert ep["dataset_to_index"] == starts[i] + lengths[i]
        assert ep["tasks"] == [TASKS[i % 2]]
        assert (ep["fieldcraft.key"], ep["fieldcraft.duration_s"]) == (
            "ep-" + str(i),
            lengths[i] / FPS,
        )
        path = (
            root
            / f"data/chunk-{ep['data/chunk_index']:03d}/file-{ep['data/file_index']:03d}.parquet"
        )
        rows = pq.read_table(path).to_pylist()
        mine = [r for r in rows if r["episode_index"] == i]
        assert [r["index"] for r in mine] == list(range(starts[i], starts[i] + lengths[i]))
        assert [r["frame_index"] for r in mine] == list(range(lengths[i]))
        assert [r["task_index"] for r in mine] == [i % 2] * lengths[i]
        assert np.allclose([r["observation.state"] for r in mine], state_of(i, lengths[i]))
        assert [r["timestamp"] for r in mine] == pytest.approx(
            np.arange(lengths[i]) / FPS, abs=1e-6
        )
    # Within a video file the episodes follow each other exactly, from integer frame counts.
    for key in CAMERAS:
        previous: dict[tuple[int, int], int] = {}
        for i, ep in enumerate(episodes):
            where = (ep[f"videos/{key}/chunk_index"], ep[f"videos/{key}/file_index"])
            frames_before = previous.get(where, 0)
            assert ep[f"videos/{key}/from_timestamp"] == frames_before / FPS
            assert ep[f"videos/{key}/to_timestamp"] == (frames_before + lengths[i]) / FPS
            previous[where] = frames_before + lengths[i]
        for (chunk, file), frames in previous.items():
            info = video_info(root / f"videos/{key}/chunk-{chunk:03d}/file-{file:03d}.mp4")
            assert info.frames == frames


def test_v3_files_have_one_row_group_per_episode_and_rotate_by_chunk(v3: tuple[Path, Any]) -> None:
    root, summary = v3

    files = sorted((root / "data").glob("*/*.parquet"))
    for path in files:
        meta = pq.ParquetFile(path).metadata
        groups = [pq.ParquetFile(path).read_row_group(g) for g in range(meta.num_row_groups)]
        assert all(len(set(g.column("episode_index").to_pylist())) == 1 for g in groups)
    names = [p.relative_to(root).as_posix() for p in files]
    assert names[:4] == [
        "data/chunk-000/file-000.parquet",
        "data/chunk-000/file-001.parquet",
        "data/chunk-000/file-002.parquet",
        "data/chunk-001/file-000.parquet",
    ]
    schema = pq.read_schema(files[0])
    assert schema.field("observation.state").type == pa.list_(pa.float32(), 3)
    assert schema.field("timestamp").type == pa.float32()
    hf = json.loads(schema.metadata[b"huggingface"])["info"]["features"]
    assert hf["action"] == {
        "feature": {"dtype": "float32", "_type": "Value"},
        "length": 3,
        "_type": "List",
    }
    assert set(summary.files) == {
        p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
    }
    assert not (root / ".staging").exists()


def test_v3_stats_json_matches_numpy_over_all_rows(
    v3: tuple[Path, Any], bundles: list[Path]
) -> None:
    root, _ = v3
    data = read_parquets(root / "data")
    stats = json.loads((root / "meta" / "stats.json").read_text())

    assert set(stats) == {"observation.state", "action", *CAMERAS, *DEFAULT_FEATURES}
    for key in (
        "observation.state",
        "action",
        "timestamp",
        "frame_index",
        "episode_index",
        "index",
    ):
        column = data.column(key).to_pylist()
        values = np.asarray(column, dtype=np.float64).reshape(len(column), -1)
        assert np.allclose(stats[key]["mean"], values.mean(axis=0), rtol=1e-6, atol=1e-9), key
        assert np.allclose(stats[key]["std"], values.std(axis=0), rtol=1e-5, atol=1e-6), key
        assert np.allclose(stats[key]["min"], values.min(axis=0)), key
        assert np.allclose(stats[key]["max"], values.max(axis=0)), key
        assert stats[key]["count"] == [len(values)]
        # Quantiles combine as LeRobot's aggregate_stats does: an envelope of the episodes'.
        assert np.all(np.asarray(stats[key]["q01"]) <= np.asarray(stats[key]["q99"]))
    per_episode = [json.loads((b / "bundle.json").read_text())["stats"] for b in bundles]
    state_q01 = np.min([s["observation.state"]["q01"] for s in per_episode], axis=0)
    assert np.allclose(stats["observation.state"]["q01"], state_q01)
    for camera, key in enumerate(CAMERAS):
        frames = np.stack(
            [
                encode_code(code_of(i, k), camera)
                for i in range(EPISODES)
                for k in range(length_of(i))
            ]
        )
        pixels = frames.reshape(-1, 3) / 255.0
        assert np.asarray(stats[key]["mean"]).shape == (3, 1, 1)
        assert np.allclose(np.ravel(stats[key]["mean"]), pixels.mean(axis=0), atol=1e-9)
        assert np.allclose(np.ravel(stats[key]["std"]), pixels.std(axis=0), atol=1e-9)
        assert np.allclose(np.ravel(stats[key]["max"]), pixels.max(axis=0))


def test_v3_metadata_files_read_back_as_lerobot_expects(v3: tuple[Path, Any]) -> None:
    root, summary = v3

    info = json.loads((root / "meta" / "info.json").read_text())
    tasks = pq.read_table(root / "meta" / "tasks.parquet")
    pandas_meta = json.loads(tasks.schema.metadata[b"pandas"])
    episodes_schema = pq.read_schema(sorted((root / "meta" / "episodes").glob("*/*.parquet"))[0])

    assert pandas_meta["index_columns"] == ["task"]
    assert tasks.to_pylist() == [
        {"task_index": 0, "task": TASKS[0]},
        {"task_index": 1, "task": TASKS[1]},
    ]
    total = sum(length_of(i) for i in range(EPISODES))
    assert {
        k: info[k] for k in ("codebase_version", "total_episodes", "total_frames", "total_tasks")
    } == {
        "codebase_version": "v3.0",
        "total_episodes": EPISODES,
        "total_frames": total,
        "total_tasks": 2,
    }
    assert (info["fps"], info["chunks_size"], info["splits"]) == (30, 3, {"train": f"0:{EPISODES}"})
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert (
        info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    )
    assert info["robot_type"] == "so101_follower"
    assert info["fieldcraft"] == {"dataset": "pick-place"}
    for key, ft in DEFAULT_FEATURES.items():
        assert info["features"][key] == ft
    assert info["features"]["observation.state"] == {
        "dtype": "float32",
        "shape": [3],
        "names": STATE_NAMES,
    }
    front = info["features"]["observation.images.front"]
    assert (front["dtype"], front["shape"], front["names"]) == (
        "video",
        [HEIGHT, WIDTH, 3],
        ["height", "width", "channels"],
    )
    first = video_info(root / "videos/observation.images.front/chunk-000/file-000.mp4")
    assert front["info"] == first.lerobot_info()
    assert list(info)[-1] == "fieldcraft"
    assert summary.files[-1] == "meta/info.json"
    assert episodes_schema.field("stats/observation.images.front/mean").type == pa.list_(
        pa.list_(pa.list_(pa.float64()))
    )
    assert episodes_schema.field("stats/index/count").type == pa.list_(pa.int64())
    assert (
        episodes_schema.field("videos/observation.images.front/from_timestamp").type == pa.float64()
    )


# --- v2.1 ---------------------------------------------------------------------------------------


def test_v21_writes_one_file_per_episode_and_jsonl_metadata(
    bundles: list[Path], tmp_path: Path
) -> None:
    root = tmp_path / "dataset"
    chosen = bundles[:5]

    summary = write(root, chosen, layout("v2.1", chunks_size=2))

    info = json.loads((root / "meta" / "info.json").read_text())
    assert {
        k: info[k] for k in ("codebase_version", "total_episodes", "total_videos", "total_chunks")
    } == {
        "codebase_version": "v2.1",
        "total_episodes": 5,
        "total_videos": 10,
        "total_chunks": 3,
    }
    assert info["data_path"] == "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
    assert info["video_path"] == (
        "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
    )
    assert "data_files_size_in_mb" not in info and info["total_tasks"] == 2
    lines = (root / "meta" / "episodes.jsonl").read_text().splitlines()
    assert json.loads(lines[3]) == {
        "episode_index": 3,
        "tasks": [TASKS[1]],
        "length": length_of(3),
        **extra_of(3),
    }
    stats = [
        json.loads(line)
        for line in (root / "meta" / "episodes_stats.jsonl").read_text().splitlines()
    ]
    assert [s["episode_index"] for s in stats] == list(range(5))
    assert set(stats[0]["stats"]["observation.images.front"]) == {
        "min",
        "max",
        "mean",
        "std",
        "count",
    }
    assert stats[2]["stats"]["frame_index"] == {
        "min": [0],
        "max": [length_of(2) - 1],
        "mean": [(length_of(2) - 1) / 2],
        "std": [float(np.std(np.arange(length_of(2))))],
        "count": [length_of(2)],
    }
    assert stats[4]["stats"]["index"]["min"] == [sum(length_of(i) for i in range(4))]
    assert (root / "meta" / "tasks.jsonl").read_text().splitlines() == [
        json.dumps({"task_index": 0, "task": TASKS[0]}),
        json.dumps({"task_index": 1, "task": TASKS[1]}),
    ]
    assert not (root / "meta" / "stats.json").exists()
    index = 0
    for i in range(5):
        path = root / f"data/chunk-{i // 2:03d}/episode_{i:06d}.parquet"
        table = pq.read_table(path)
        hf = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
        assert hf["observation.state"]["_type"] == "Sequence"
        assert table.column("index").to_pylist() == list(range(index, index + length_of(i)))
        index += length_of(i)
        for key in CAMERAS:
            video = root / f"videos/chunk-{i // 2:03d}/{key}/episode_{i:06d}.mp4"
            for row in table.to_pylist():
                frame = frame_at(video, row["timestamp"], tolerance_s=1e-4)
                assert decode_code(frame) == code_of(i, row["frame_index"])
    assert summary.files[-1] == "meta/info.json"
    assert sorted(summary.files) == sorted(
        p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
    )


# --- bundles that do not fit ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"state_names": ["shoulder.pos", "elbow.pos", "wrist.pos"]}, "observation.state names"),
        ({"video_frames": 4}, "has 4 frames for 6 rows"),
        ({"fps": 15.0}, "fps 15.0 differs"),
    ],
)
def test_mismatched_bundle_raises_naming_it_and_leaves_the_dataset_usable(
    bundles: list[Path], tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    bad = make_bundle(tmp_path / "bad-bundle", 99, length=6, **change)
    writer = LeRobotWriter(tmp_path / "dataset", layout())
    writer.add_episode(bundles[0], task=TASKS[0], extra={})

    with pytest.raises(DatasetWriteError) as caught:
        writer.add_episode(bad, task=TASKS[0], extra={})

    assert str(bad) in str(caught.value) and message in str(caught.value)
    assert writer.add_episode(bundles[1], task=TASKS[0], extra={}) == 1
    summary = writer.finish()
    assert (summary.episodes, summary.frames) == (2, length_of(0) + length_of(1))


def test_unknown_extra_fields_and_empty_tasks_are_refused(
    bundles: list[Path], tmp_path: Path
) -> None:
    writer = LeRobotWriter(tmp_path / "dataset", layout())

    with pytest.raises(DatasetWriteError, match="fieldcraft.colour"):
        writer.add_episode(bundles[0], task="Pick", extra={"fieldcraft.colour": "red"})
    with pytest.raises(DatasetWriteError, match="task"):
        writer.add_episode(bundles[0], task=" ", extra={})
    with pytest.raises(DatasetWriteError, match="no episode"):
        writer.finish()


def test_abort_removes_what_it_wrote_and_only_that(bundles: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    notes = root / "meta" / "fieldcraft" / "left_out.jsonl"
    notes.parent.mkdir(parents=True)
    notes.write_text("{}\n")
    writer = LeRobotWriter(root, layout(data_files_size_in_mb=0.001))
    for i in range(3):
        writer.add_episode(bundles[i], task=TASKS[0], extra={})

    writer.abort()

    assert [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()] == [
        "meta/fieldcraft/left_out.jsonl"
    ]
    with pytest.raises(DatasetWriteError, match="aborted"):
        writer.add_episode(bundles[3], task=TASKS[0], extra={})


def test_leaving_the_with_block_by_an_exception_removes_the_root_it_made(
    bundles: list[Path], tmp_path: Path
) -> None:
    root = tmp_path / "new" / "dataset"

    def give_up() -> None:
        with LeRobotWriter(root, layout("v2.1")) as writer:
            writer.add_episode(bundles[0], task=TASKS[0], extra={})
            raise RuntimeError("the caller gives up")

    with pytest.raises(RuntimeError):
        give_up()

    assert not root.exists()


def test_a_root_holding_a_dataset_is_refused(tmp_path: Path) -> None:
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "info.json").write_text("{}")

    with pytest.raises(DatasetWriteError, match=r"already holds meta/info\.json"):
        LeRobotWriter(tmp_path, layout())


def reencode(bundle: Path, folder: Path, episode: int, *, crf: int) -> Path:
    """A copy of the bundle with its videos in h264 at ``crf``."""
    copy = Path(shutil.copytree(bundle, folder))
    for camera, key in enumerate(CAMERAS):
        path = copy / "videos" / f"{key}.mp4"
        with VideoEncoder(
            path, width=WIDTH, height=HEIGHT, fps=FPS, codec="libx264", crf=crf
        ) as enc:
            for k in range(length_of(episode)):
                enc.write(encode_code(code_of(episode, k), camera))
    return copy


def test_a_video_encoded_with_other_settings_is_refused_before_anything_is_written(
    bundles: list[Path], tmp_path: Path
) -> None:
    first = reencode(bundles[0], tmp_path / "first", 0, crf=23)
    other = reencode(bundles[1], tmp_path / "other-crf", 1, crf=30)
    writer = LeRobotWriter(tmp_path / "dataset", layout(codec="h264"))
    writer.add_episode(first, task=TASKS[0], extra={})

    with pytest.raises(DatasetWriteError, match="other-crf.*other codec parameters"):
        writer.add_episode(other, task=TASKS[0], extra={})
    with pytest.raises(DatasetWriteError, match="is av1, the dataset's codec is h264"):
        writer.add_episode(bundles[1], task=TASKS[0], extra={})

    assert writer.finish().episodes == 1


def test_bundle_removed_after_adding_still_ends_up_in_the_video(
    bundles: list[Path], tmp_path: Path
) -> None:
    copies = [shutil.copytree(b, tmp_path / b.name) for b in bundles[:3]]
    writer = LeRobotWriter(tmp_path / "dataset", layout(version="v3.0"))
    for i, bundle in enumerate(copies):
        writer.add_episode(bundle, task=TASKS[0], extra={})
        shutil.rmtree(bundle)
        assert i == writer._episodes - 1

    writer.finish()

    info = video_info(tmp_path / "dataset/videos/observation.images.front/chunk-000/file-000.mp4")
    assert info.frames == sum(length_of(i) for i in range(3))


# --- statistics ----------------------------------------------------------------------------------


def test_column_stats_of_a_hand_checked_column() -> None:
    stats = column_stats(np.arange(10, dtype=np.int64))

    assert stats["min"].tolist() == [0.0] and stats["max"].tolist() == [9.0]
    assert stats["mean"].tolist() == [4.5]
    assert stats["std"].tolist() == pytest.approx([np.sqrt(8.25)])
    assert stats["count"].tolist() == [10]
    # 5000 bins of 9/5000 over [0, 9]: the median is where the 5th value (4) fills its bin, at
    # the bin's top; q99 is 0.9 of the way into the last bin, which holds 9.
    width = 9 / 5000
    assert stats["q50"][0] == pytest.approx(np.ceil(4 / width) * width, abs=1e-6)
    assert stats["q99"][0] == pytest.approx(9 - 0.1 * width, abs=1e-6)


def test_column_stats_reproduce_lerobot_written_episode_stats() -> None:
    episodes = pq.read_table(REAL_V3 / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    real = json.loads((REAL_V3 / "meta/stats.json").read_text())
    mine: dict[str, list[dict[str, np.ndarray]]] = {k: [] for k in DEFAULT_FEATURES}

    for ep in episodes:
        n = ep["length"]
        columns = {
            "timestamp": np.arange(n) / 30,
            "frame_index": np.arange(n),
            "episode_index": np.full(n, ep["episode_index"]),
            "index": np.arange(ep["dataset_from_index"], ep["dataset_to_index"]),
            "task_index": np.zeros(n, np.int64),
        }
        for key, values in columns.items():
            stats = column_stats(values)
            mine[key].append(stats)
            for stat in ("mean", "std", "count", *QUANTILES):
                assert stats[stat].tolist() == pytest.approx(ep[f"stats/{key}/{stat}"], rel=1e-12)

    for key, stats in mine.items():
        merged = stats[0]
        for s in stats[1:]:
            merged = aggregate_feature_stats([merged, s])
        for stat in ("min", "max", "mean", "std", "count"):
            assert merged[stat].tolist() == pytest.approx(real[key][stat], rel=1e-9), (key, stat)


def test_episodes_schema_is_the_one_lerobot_writes() -> None:
    real = pq.read_schema(REAL_V3 / "meta/episodes/chunk-000/file-000.parquet")
    names = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos"]
    ours = episodes_schema(
        layout(
            state_names=names,
            action_names=names,
            cameras={"observation.images.front": (480, 640), "observation.images.top": (480, 640)},
            extra_episode_columns={},
        )
    )

    assert ours.names == real.names
    # Only difference: LeRobot now promotes integer columns before min/max (compute_stats.py).
    promoted = {
        f"stats/{k}/{s}"
        for k in ("frame_index", "episode_index", "index", "task_index")
        for s in ("min", "max")
    }
    for name in ours.names:
        if name not in promoted:
            assert ours.field(name).type == real.field(name).type, name


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=2, max_size=30),
        min_size=1,
        max_size=6,
    )
)
def test_aggregated_stats_equal_numpy_over_the_concatenation(parts: list[list[float]]) -> None:
    stats = [column_stats(np.asarray(p)) for p in parts]
    merged = stats[0]
    for s in stats[1:]:
        merged = aggregate_feature_stats([merged, s])
    everything = np.concatenate([np.asarray(p) for p in parts])

    assert merged["count"].tolist() == [len(everything)]
    assert merged["mean"][0] == pytest.approx(everything.mean(), abs=1e-6)
    assert merged["std"][0] == pytest.approx(everything.std(), abs=1e-3)
    assert (merged["min"][0], merged["max"][0]) == (everything.min(), everything.max())
    assert merged["q01"][0] == min(s["q01"][0] for s in stats)
    assert merged["q99"][0] == max(s["q99"][0] for s in stats)
