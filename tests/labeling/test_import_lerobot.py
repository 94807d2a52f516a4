"""LeRobot imports: the three layouts, info-only datasets, embodiments, conditions, bad input."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from labeling.importers.lerobot_features import image_size
from labeling.models import Dataset, Episode
from labeling.services import inventory_import_start
from sites.models import ActionDimension, Embodiment, Task
from tests.labeling.imports import run, snapshot

DATA = Path(__file__).resolve().parents[1] / "data" / "lerobot"
REALDATA = Path(__file__).resolve().parents[2].parent / "shared" / "realdata" / "lerobot"
V30 = DATA / "v3.0_record-test"
G1 = DATA / "v2.1_G1-policy-train"
REACHY = DATA / "v2.0_reachy2"
ROBOCOIN = DATA / "v2.1_RoboCOIN"


def episodes_of(record):
    return Episode.objects.filter(dataset__slug=record.summary["dataset"]["slug"])


def totals(record):
    qs = episodes_of(record)
    return sum(e.episode_count for e in qs), sum(e.frames for e in qs)


def copy_of(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    shutil.copytree(source, target)
    for f in target.rglob("*"):
        f.chmod(0o644 if f.is_file() else 0o755)
    return target


def test_v30_dataset_imports_its_four_episodes_and_1492_frames(world_a):
    record = run(world_a, V30)

    assert record.job.status == "succeeded", record.job.message
    assert totals(record) == (4, 1492)
    assert episodes_of(record).count() == 4
    dataset = Dataset.objects.get(pk=record.summary["dataset"]["id"])
    assert dataset.format_version == "LeRobot v3.0"
    assert dataset.fps == 30
    assert dataset.metadata["robot_type"] == "so101_follower"


def test_v30_episode_durations_follow_length_over_fps(world_a):
    record = run(world_a, V30)

    first = episodes_of(record).get(key="0")
    assert first.frames == 373
    assert first.duration_s == pytest.approx(373 / 30)
    assert first.storage_uri == "data/chunk-000/file-000.parquet"


def test_v30_creates_an_embodiment_from_robot_type_with_ranges_from_stats(world_a):
    record = run(world_a, V30)

    embodiment = Embodiment.objects.get(organization=world_a.operator, robot_type="so101_follower")
    dims = list(embodiment.action_dimensions.order_by("order"))
    assert [d.name for d in dims][:2] == ["shoulder_pan.pos", "shoulder_lift.pos"]
    assert len(dims) == 6
    assert all(d.max_value > d.min_value for d in dims)
    assert (dims[0].min_value, dims[0].max_value) != (-1.0, 1.0)  # from meta/stats.json
    cams = {c.name: (c.width, c.height, c.fps) for c in embodiment.cameras.all()}
    assert cams == {"front": (640, 480, 30.0), "top": (640, 480, 30.0)}
    assert episodes_of(record).filter(embodiment=embodiment).count() == 4
    assert record.summary["created"]["embodiment"] == embodiment.slug


def test_v30_task_strings_become_tasks(world_a):
    record = run(world_a, V30)

    task = Task.objects.get(
        organization=world_a.operator, name="Pick the orange cube and place it in the box"
    )
    assert episodes_of(record).filter(task=task).count() == 4


def test_v21_g1_imports_100_episodes_and_35965_frames(world_a):
    record = run(world_a, G1)

    assert record.job.status == "succeeded", record.job.message
    assert totals(record) == (100, 35965)
    assert record.summary["format_version"] == "LeRobot v2.1"
    embodiment = Embodiment.objects.get(robot_type="Unitree_G1_Inspire")
    # The G1 feature names are a list inside a list; they are flattened.
    assert embodiment.action_dimensions.count() == 26
    assert embodiment.action_dimensions.order_by("order").first().name == "kLeftShoulderPitch"
    assert "unknown" in embodiment.description  # no statistics copied: placeholder ranges
    assert set(embodiment.cameras.values_list("name", flat=True)) == {"cam_high"}


def test_info_only_v20_dataset_imports_as_one_row_standing_for_its_totals(world_a):
    info = json.loads((REACHY / "meta/info.json").read_text())

    record = run(world_a, REACHY)

    assert record.job.status == "succeeded", record.job.message
    row = episodes_of(record).get()
    assert row.key == "all"
    assert (row.episode_count, row.frames) == (info["total_episodes"], info["total_frames"])
    assert row.duration_s == pytest.approx(info["total_frames"] / info["fps"])
    assert any("no episode metadata" in w for w in record.summary["warnings"])
    assert record.summary["info_only"] is True


def test_info_only_v20_channel_first_camera_and_unnamed_joints(world_a):
    run(world_a, REACHY)

    embodiment = Embodiment.objects.get(robot_type="reachy2")
    camera = embodiment.cameras.get()
    assert (camera.name, camera.width, camera.height) == ("image", 960, 720)
    names = list(embodiment.action_dimensions.order_by("order").values_list("name", flat=True))
    assert names[:2] == ["action_0", "action_1"]
    assert len(names) == 19


def test_info_only_v21_dataset_without_robot_type_has_no_embodiment_and_says_so(world_a):
    info = json.loads((ROBOCOIN / "meta/info.json").read_text())

    record = run(world_a, ROBOCOIN)

    assert totals(record) == (info["total_episodes"], info["total_frames"])
    assert episodes_of(record).get().embodiment is None
    warnings = " ".join(record.summary["warnings"])
    assert "no robot_type" in warnings
    assert "30 dimensions but 28 names" in warnings


def test_reimporting_the_same_dataset_updates_instead_of_duplicating(world_a):
    run(world_a, G1, name="G1")
    before = snapshot()

    again = run(world_a, G1, name="G1")

    assert snapshot() == before
    assert again.summary["inserted"] == 0
    assert again.summary["unchanged"] == 100


def test_reimport_with_a_changed_length_updates_that_episode(world_a, tmp_path):
    ds = copy_of(G1, tmp_path)
    run(world_a, ds, name="G1")
    lines = (ds / "meta/episodes.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["length"] = 500
    lines[0] = json.dumps(first)
    (ds / "meta/episodes.jsonl").write_text("\n".join(lines) + "\n")

    again = run(world_a, ds, name="G1")

    assert (again.summary["inserted"], again.summary["updated"]) == (0, 1)
    assert Episode.objects.get(dataset__slug="g1", key="0").frames == 500


def test_full_metadata_replaces_an_earlier_info_only_row(world_a, tmp_path):
    ds = copy_of(G1, tmp_path)
    episodes = (ds / "meta/episodes.jsonl").read_bytes()
    (ds / "meta/episodes.jsonl").unlink()
    run(world_a, ds, name="G1")
    (ds / "meta/episodes.jsonl").write_bytes(episodes)

    full = run(world_a, ds, name="G1")

    assert full.summary["removed"] == 1
    assert not Episode.objects.filter(dataset__slug="g1", key="all").exists()
    assert totals(full) == (100, 35965)


def test_set_gives_every_episode_a_condition_value(world_a):
    record = run(world_a, V30, sets=["Lighting=DIM"])

    dim = world_a.values[1]
    assert all(e.condition_set.value_ids == [dim.pk] for e in episodes_of(record))
    lighting = next(c for c in record.summary["conditions"] if c["dimension"] == "Lighting")
    assert lighting["values"] == [{"value": "Dim", "episodes": 4}]


def test_per_episode_field_named_like_a_dimension_wins_over_set(world_a, tmp_path):
    ds = copy_of(G1, tmp_path)
    path = ds / "meta/episodes.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows[:10]:
        row["lighting"] = "bright"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    record = run(world_a, ds, sets=["lighting=dim"])

    bright, dim = world_a.values
    qs = episodes_of(record)
    assert qs.filter(condition_set__value_ids=[bright.pk]).count() == 10
    assert qs.filter(condition_set__value_ids=[dim.pk]).count() == 90


def test_a_given_embodiment_is_compared_not_changed(world_a):
    record = run(world_a, V30, embodiment=world_a.embodiment.slug)

    assert world_a.embodiment.action_dimensions.count() == 2
    assert episodes_of(record).filter(embodiment=world_a.embodiment).count() == 4
    warning = " ".join(record.summary["warnings"])
    assert "do not match embodiment" in warning
    assert "shoulder_pan.pos" in warning


def test_a_zip_of_the_dataset_root_imports(world_a, tmp_path):
    archive = tmp_path / "record-test.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in V30.rglob("*"):
            if f.is_file():
                zf.write(f, f"record-test/{f.relative_to(V30)}")

    record = run(world_a, archive)

    assert record.format == "lerobot"
    assert totals(record) == (4, 1492)


def test_a_tar_gz_of_the_dataset_imports(world_a, tmp_path):
    archive = tmp_path / "g1.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(G1, arcname="g1")

    record = run(world_a, archive)

    assert totals(record) == (100, 35965)


@pytest.mark.parametrize(
    ("shape", "names", "expected"),
    [
        ([3, 720, 960], ["channel", "height", "width"], (960, 720, "channels-first")),
        ([480, 640, 3], ["height", "width", "channel"], (640, 480, "channels-last")),
        ([3, 224, 224], None, (224, 224, "channels-first")),
        ([224, 224, 1], None, (224, 224, "channels-last")),
        ([4, 100, 200], None, (200, 100, "channels-first")),
    ],
)
def test_image_shapes_are_read_channel_first_or_last(shape, names, expected):
    assert image_size(shape, names) == expected


# --- bad input: a clear message, nothing written -------------------------------------------


def failed(world, path, **options):
    before = snapshot()
    record = run(world, path, **options)
    assert record.job.status == "failed", record.job.message
    assert snapshot() == before
    return record


def problem_texts(record):
    return [e["text"] for e in record.job.errors]


def test_a_folder_without_meta_info_json_is_not_a_lerobot_dataset(world_a, tmp_path):
    (tmp_path / "empty-ds" / "data").mkdir(parents=True)

    record = failed(world_a, tmp_path / "empty-ds", format="lerobot")

    assert "no meta/info.json" in record.job.message


def test_a_missing_path_is_refused_before_anything_starts(world_a, tmp_path):
    from labeling.importers.errors import ImportFailed

    with pytest.raises(ImportFailed, match="no such file"):
        inventory_import_start(
            organization=world_a.operator, dataset_name="x", path=tmp_path / "nope", enqueue=False
        )


def test_broken_json_in_episodes_jsonl_names_the_line_and_column(world_a, tmp_path):
    ds = copy_of(G1, tmp_path)
    path = ds / "meta/episodes.jsonl"
    lines = path.read_text().splitlines()
    lines[6] = lines[6].replace(', "length"', ' "length"')
    path.write_text("\n".join(lines) + "\n")

    record = failed(world_a, ds)

    text = problem_texts(record)[0]
    assert text.startswith(
        "meta/episodes.jsonl line 7: invalid JSON (Expecting ',' delimiter, column "
    )


def test_broken_info_json_names_the_line(world_a, tmp_path):
    ds = copy_of(V30, tmp_path)
    (ds / "meta/info.json").write_text(
        '{\n  "codebase_version": "v3.0",\n  "fps": 30\n  "robot_type": "x"\n}'
    )

    record = failed(world_a, ds)

    assert problem_texts(record) == [
        "meta/info.json line 4: invalid JSON (Expecting ',' delimiter, column 3)"
    ]


def test_an_empty_info_json_is_reported(world_a, tmp_path):
    ds = copy_of(V30, tmp_path)
    (ds / "meta/info.json").write_text("")

    record = failed(world_a, ds)

    assert problem_texts(record) == ["meta/info.json: the file is empty"]


def test_a_v30_info_with_v2_episode_files_is_the_wrong_layout(world_a, tmp_path):
    ds = copy_of(G1, tmp_path)
    info = json.loads((ds / "meta/info.json").read_text())
    info["codebase_version"] = "v3.0"
    (ds / "meta/info.json").write_text(json.dumps(info))

    record = failed(world_a, ds)

    assert "the v2.x layout" in record.job.message


def test_an_unsupported_codebase_version_is_named(world_a, tmp_path):
    ds = copy_of(G1, tmp_path)
    info = json.loads((ds / "meta/info.json").read_text())
    info["codebase_version"] = "v1.6"
    (ds / "meta/info.json").write_text(json.dumps(info))

    record = failed(world_a, ds)

    assert "codebase_version 'v1.6' is not a supported layout" in record.job.message


def test_a_truncated_episodes_parquet_is_reported(world_a, tmp_path):
    ds = copy_of(V30, tmp_path)
    path = ds / "meta/episodes/chunk-000/file-000.parquet"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    record = failed(world_a, ds)

    text = problem_texts(record)[0]
    assert text.startswith("meta/episodes/chunk-000/file-000.parquet: not a readable Parquet file")
    assert "truncated" in text


def test_info_json_that_is_not_utf8_gives_the_byte_and_offset(world_a, tmp_path):
    ds = copy_of(V30, tmp_path)
    raw = (ds / "meta/info.json").read_bytes().replace(b'"so101_follower"', b'"so101_f\xe9llower"')
    (ds / "meta/info.json").write_bytes(raw)

    record = failed(world_a, ds)

    offset = raw.index(b"\xe9")
    assert problem_texts(record) == [
        f"meta/info.json: not UTF-8 text (byte 0xe9 at offset {offset}); save it as UTF-8"
    ]


def test_an_episode_without_length_is_reported_with_its_line(world_a, tmp_path):
    ds = copy_of(G1, tmp_path)
    path = ds / "meta/episodes.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[2])
    del row["length"]
    lines[2] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")

    record = failed(world_a, ds)

    assert problem_texts(record) == [
        "meta/episodes.jsonl line 3, column 'length': expected a whole number ≥ 0, got None"
    ]


def test_an_archive_with_a_path_outside_its_root_is_refused(world_a, tmp_path):
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        data = b"{}"
        info = tarfile.TarInfo("../meta/info.json")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))

    record = failed(world_a, archive)

    assert "unsafe path in archive" in record.job.message


def test_a_broken_archive_is_reported(world_a, tmp_path):
    archive = tmp_path / "broken.zip"
    archive.write_bytes(b"PK\x03\x04 not really a zip")

    record = failed(world_a, archive)

    assert "not a readable .zip or .tar.gz archive" in record.job.message


# --- the real datasets (when ../shared/realdata is present) ---------------------------------


REAL = sorted(REALDATA.glob("*/meta/info.json")) if REALDATA.is_dir() else []


@pytest.mark.skipif(not REAL, reason="../shared/realdata/lerobot not present")
@pytest.mark.parametrize("info_path", REAL, ids=lambda p: p.parent.parent.name)
def test_each_real_lerobot_dataset_imports_with_the_totals_its_info_json_gives(world_a, info_path):
    info = json.loads(info_path.read_text())

    record = run(world_a, info_path.parent.parent, name=info_path.parent.parent.name)

    assert record.job.status == "succeeded", record.job.message
    assert totals(record) == (info["total_episodes"], info["total_frames"])


@pytest.mark.skipif(not REAL, reason="../shared/realdata/lerobot not present")
def test_real_g1_action_ranges_come_from_its_episode_statistics(world_a):
    run(world_a, REALDATA / "v2.1_YifanTian07_G1-policy-train")

    dims = ActionDimension.objects.filter(embodiment__robot_type="Unitree_G1_Inspire")
    assert dims.count() == 26
    assert not dims.filter(min_value=-1, max_value=1).exists()
