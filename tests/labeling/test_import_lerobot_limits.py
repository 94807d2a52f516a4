"""LeRobot metadata is read streaming and capped: a small archive may unpack to gigabytes."""

from __future__ import annotations

import shutil
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from labeling.importers import lerobot, sources
from labeling.importers.errors import ImportFailed
from tests.labeling.imports import run, snapshot

G1 = Path(__file__).resolve().parents[1] / "data" / "lerobot" / "v2.1_G1-policy-train"
MB = 1024**2


def copy_of(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    shutil.copytree(source, target)
    for f in target.rglob("*"):
        f.chmod(0o644 if f.is_file() else 0o755)
    return target


def write_spaces(out, total: int, *, newline_every: int | None = None) -> None:
    """Write ``total`` bytes of spaces (a newline every ``newline_every``) without holding them."""
    block = b" " * (MB - 1) + b"\n" if newline_every else b" " * MB
    if newline_every:
        line = b" " * (newline_every - 1) + b"\n"
        block = line * (MB // newline_every)
    written = 0
    while written < total:
        out.write(block[: total - written])
        written += len(block)


def zip_bomb(tmp_path: Path, *, spaces: int) -> Path:
    """G1's metadata in a zip, with ``spaces`` bytes of spaces in front of its episodes.jsonl."""
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in ("info.json", "tasks.jsonl"):
            zf.write(G1 / "meta" / name, f"g1/meta/{name}")
        with zf.open("g1/meta/episodes.jsonl", "w", force_zip64=True) as out:
            write_spaces(out, spaces)
            out.write((G1 / "meta/episodes.jsonl").read_bytes())
    return archive


def test_a_zip_bomb_in_episodes_jsonl_is_refused_naming_the_member_and_the_cap(
    world_a, tmp_path, monkeypatch
):
    monkeypatch.setattr(sources, "MAX_JSONL_BYTES", 8 * MB)
    archive = zip_bomb(tmp_path, spaces=40 * MB)
    assert archive.stat().st_size < MB
    before = snapshot()

    tracemalloc.start()
    try:
        record = run(world_a, archive, "Bomb")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert record.job.status == "failed"
    text = record.job.errors[0]["text"]
    assert "bomb.zip" in text
    assert "'g1/meta/episodes.jsonl'" in text
    assert "8 MB" in text
    assert snapshot() == before
    assert peak < 8 * MB, f"peak {peak:,} bytes"


def test_an_unpacked_episodes_jsonl_over_the_cap_is_refused_while_streaming(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "MAX_JSONL_BYTES", 8 * MB)
    ds = copy_of(G1, tmp_path)
    path = ds / "meta/episodes.jsonl"
    episodes = path.read_bytes()
    with path.open("wb") as out:
        out.write(episodes)
        write_spaces(out, 20 * MB, newline_every=1000)

    tracemalloc.start()
    try:
        with pytest.raises(ImportFailed) as failure:
            lerobot.load(ds)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert str(failure.value) == (
        "meta/episodes.jsonl: is larger than 8 MB, the most a JSON Lines file in meta/ may hold"
    )
    assert peak < 4 * MB, f"peak {peak:,} bytes"


def test_runs_of_whitespace_in_episodes_jsonl_are_streamed_and_the_dataset_imports(
    world_a, tmp_path, monkeypatch
):
    """Blank lines and a 20 MB line of spaces: read in blocks, well under a 1 MB line cap."""
    monkeypatch.setattr(sources, "MAX_JSON_BYTES", MB)
    ds = copy_of(G1, tmp_path)
    path = ds / "meta/episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    with path.open("wb") as out:
        out.write(b"".join(lines[:50]))
        write_spaces(out, 10 * MB, newline_every=100)
        write_spaces(out, 20 * MB)
        out.write(b"\n")
        out.write(b"".join(lines[50:]))

    tracemalloc.start()
    try:
        dataset = lerobot.load(ds)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    record = run(world_a, ds, "Spaced")

    assert len(dataset.episodes) == 100
    assert peak < 4 * MB, f"peak {peak:,} bytes"
    assert record.job.status == "succeeded", record.job.errors
    assert record.summary["episodes"] == 100


def test_a_broken_line_after_a_whitespace_run_is_named_by_its_line_number(tmp_path):
    ds = copy_of(G1, tmp_path)
    path = ds / "meta/episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:3]) + b"\n" * 1000 + b"   {broken\n" + b"".join(lines[3:]))

    with pytest.raises(ImportFailed) as failure:
        lerobot.load(ds)

    assert str(failure.value).startswith("meta/episodes.jsonl line 1004: invalid JSON")


def test_a_json_line_over_the_line_cap_is_refused_with_its_line(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "MAX_JSON_BYTES", MB)
    ds = copy_of(G1, tmp_path)
    path = ds / "meta/episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    long = b'{"episode_index": 999, "length": 1, "note": "' + b"x" * (2 * MB) + b'"}\n'
    path.write_bytes(b"".join(lines[:5]) + long + b"".join(lines[5:]))

    with pytest.raises(ImportFailed) as failure:
        lerobot.load(ds)

    assert str(failure.value) == (
        "meta/episodes.jsonl line 6: the line is longer than 1 MB, the most one JSON Lines "
        "record may hold"
    )


def test_an_info_json_over_the_document_cap_is_refused_without_reading_it_whole(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(sources, "MAX_JSON_BYTES", MB)
    ds = copy_of(G1, tmp_path)
    info = ds / "meta/info.json"
    with info.open("ab") as out:
        write_spaces(out, 30 * MB)

    tracemalloc.start()
    try:
        with pytest.raises(ImportFailed) as failure:
            lerobot.load(ds)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert str(failure.value) == (
        "meta/info.json: is larger than 1 MB, the most a JSON document in meta/ may hold"
    )
    assert peak < 3 * MB, f"peak {peak:,} bytes"


def test_a_tar_member_that_unpacks_past_its_cap_is_refused(world_a, tmp_path, monkeypatch):
    import tarfile

    monkeypatch.setattr(sources, "MAX_JSON_BYTES", MB)
    big = tmp_path / "info.json"
    with big.open("wb") as out:
        out.write((G1 / "meta/info.json").read_bytes())
        write_spaces(out, 3 * MB)
    archive = tmp_path / "g1.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(big, arcname="g1/meta/info.json")

    record = run(world_a, archive, "Tar")

    assert record.job.status == "failed"
    assert record.job.errors[0]["text"] == (
        "g1.tar.gz: the member 'g1/meta/info.json' unpacks to more than 1 MB, the most a JSON "
        "document in a dataset's meta/ may hold"
    )
