"""Benchmark: import a 1,000,000-row manifest, against a bare COPY of the same file.

Run: ``DATABASE_URL=postgres://... .venv/bin/python bench/import_inventory.py [ROWS] [ROUNDS]``

Generates a CSV shaped like a real episode manifest (key, episode count, frames — some with
thousands separators —, duration, outcome, storage URI, recording time, site, task and eight
condition columns written with messy case and stray spaces), then, in the same run:

* *bare COPY* — the file streamed with ``COPY ... FROM STDIN (FORMAT csv)`` into a new
  unindexed table of text columns (a plain table, and an UNLOGGED one like our staging);
* *import* — ``import_inventory`` through the service and its job into a new dataset: the
  direct load (pyarrow types each block and writes it in PostgreSQL's binary COPY format
  while the server stores the previous one in the episode table, with its indexes) in one
  transaction;
* *re-import* — the same file again (every row unchanged): the staging path's upsert.

The bare COPY and the import alternate for ROUNDS rounds (default 3; the dataset is emptied
between them), after the generated file is flushed to disk, so a noisy moment on the machine
shows as one odd round rather than a wrong ratio. Prints every round, the median ratio
import / bare COPY, and the process's peak RSS. Target: ratio ≤ 3, peak RSS < 500 MB. Works in a dedicated organization ``bench-import`` whose rows it
deletes afterwards, with the organization itself.
"""

from __future__ import annotations

import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.db import connection, transaction  # noqa: E402

from accounts.models import Job, Organization  # noqa: E402
from labeling.management.commands.import_inventory import format_summary  # noqa: E402
from labeling.models import Dataset, Episode, InventoryImport  # noqa: E402
from labeling.services import inventory_import_run, inventory_import_start  # noqa: E402
from sites.models import ConditionDimension, ConditionValue, Site, Task  # noqa: E402

ORG_SLUG = "bench-import"
SEED = 20250611
DIMENSIONS: list[tuple[str, list[str]]] = [
    ("lighting", ["bright LED", "dim sodium", "daylight glare", "flicker"]),
    ("clutter", ["tidy", "moderate", "dense"]),
    ("camera pose", ["nominal", "low mount", "high mount", "offset 15deg"]),
    ("object wear", ["new", "scuffed", "worn"]),
    ("packaging", ["cardboard", "shrink wrap", "polybag"]),
    ("human activity", ["none", "occasional", "busy aisle"]),
    ("floor", ["dry concrete", "epoxy", "wet floor"]),
    ("region", ["NL", "DE", "US-IL", "JP"]),
]
SITES = [f"site-{i:02d}" for i in range(12)]
TASKS = ["pick totes", "place totes", "depalletise", "pick single items"]


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def messy(value: str, rng: random.Random) -> str:
    """The same value as people type it: other case, stray spaces, - for space."""
    r = rng.random()
    if r < 0.6:
        return value
    if r < 0.75:
        return value.upper()
    if r < 0.85:
        return f"  {value.lower()} "
    if r < 0.95:
        return value.replace(" ", "-")
    return value.title()


def generate(path: Path, rows: int) -> None:
    rng = random.Random(SEED)
    header = [
        "episode_key",
        "episodes",
        "frames",
        "duration_s",
        "outcome",
        "storage_uri",
        "recorded_at",
        "site",
        "task",
        *[name.replace(" ", "_") for name, _ in DIMENSIONS],
    ]
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write(",".join(header) + "\n")
        lines = []
        for i in range(1, rows + 1):
            frames = rng.randint(90, 3000)
            frames_text = f'"{frames:,}"' if frames >= 1000 and rng.random() < 0.1 else str(frames)
            conditions = [messy(rng.choice(values), rng) for _, values in DIMENSIONS]
            lines.append(
                ",".join(
                    [
                        f"ep-{i:07d}",
                        "1",
                        frames_text,
                        f"{frames / 30:.2f}",
                        "success" if rng.random() < 0.9 else "failure",
                        f"s3://fieldcraft-bench/raw/ep-{i:07d}.mcap",
                        f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
                        messy(rng.choice(SITES), rng),
                        rng.choice(TASKS),
                        *[c if "," not in c else f'"{c}"' for c in conditions],
                    ]
                )
            )
            if len(lines) == 10_000:
                fh.write("\n".join(lines) + "\n")
                lines.clear()
        if lines:
            fh.write("\n".join(lines) + "\n")


def ensure_world() -> Organization:
    org, _ = Organization.objects.get_or_create(
        slug=ORG_SLUG, defaults={"name": "Bench import", "kind": Organization.Kind.OPERATOR}
    )
    for order, (name, values) in enumerate(DIMENSIONS):
        dim, _ = ConditionDimension.objects.get_or_create(
            organization=org, slug=name.replace(" ", "-"), defaults={"name": name, "order": order}
        )
        for v_order, label in enumerate(values):
            ConditionValue.objects.get_or_create(
                dimension=dim,
                slug=label.lower().replace(" ", "-"),
                defaults={"label": label, "order": v_order},
            )
    for slug in SITES:
        Site.objects.get_or_create(
            organization=org,
            slug=slug,
            defaults={
                "name": slug.replace("-", " ").title(),
                "country": "NL",
                "latitude": 52.0,
                "longitude": 4.5,
                "timezone": "Europe/Amsterdam",
            },
        )
    for name in TASKS:
        Task.objects.get_or_create(
            organization=org, slug=name.replace(" ", "-"), defaults={"name": name}
        )
    return org


def bare_copy(path: Path, ncols: int, *, unlogged: bool) -> float:
    kind = "UNLOGGED " if unlogged else ""
    cols = ", ".join(f"c{i} text" for i in range(ncols))
    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS bench_bare_copy")
        cur.execute(f"CREATE {kind}TABLE bench_bare_copy ({cols})")
        started = time.perf_counter()
        with (
            cur.copy("COPY bench_bare_copy FROM STDIN (FORMAT csv, HEADER true)") as cp,
            path.open("rb") as fh,
        ):
            while block := fh.read(8 * 1024 * 1024):
                cp.write(block)
        elapsed = time.perf_counter() - started
        cur.execute("DROP TABLE bench_bare_copy")
    return elapsed


def run_import(org: Organization, path: Path) -> tuple[float, dict]:
    record = inventory_import_start(
        organization=org,
        dataset_name="Bench manifest",
        path=path,
        mapping=[
            "episode_key=key",
            "episodes=count",
            "frames=frames",
            "duration_s=duration_s",
            "outcome=outcome",
            "storage_uri=storage_uri",
            "recorded_at=recorded_at",
            "site=site",
            "task=task",
            *[f"{name.replace(' ', '_')}={name}" for name, _ in DIMENSIONS],
        ],
        enqueue=False,
    )
    started = time.perf_counter()
    inventory_import_run(job_id=str(record.job_id))
    elapsed = time.perf_counter() - started
    record.refresh_from_db()
    job = Job.objects.get(pk=record.job_id)
    if job.status != Job.Status.SUCCEEDED:
        raise SystemExit(f"import {job.status}: {job.message}\n{job.errors}")
    return elapsed, record.summary


EPISODE_COLUMNS = (
    "organization_id, dataset_id, key, episode_count, frames, duration_s, outcome, storage_uri, "
    "provenance, sync_status, label_status, validated, features, extra, recorded_at, created_at, "
    "updated_at, site_id, embodiment_id, task_id, condition_set_id"
)


def floor(dataset_id: int) -> float:
    """INSERT the imported episodes again (new keys, already typed); rolled back.

    What any importer must pay to put these rows into the episode table with its indexes,
    whatever it does before.
    """
    copy_cols = EPISODE_COLUMNS.replace(" key,", " key || '~floor',")
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the FK checks run in the statement
        started = time.perf_counter()
        cur.execute(
            f"INSERT INTO labeling_episode ({EPISODE_COLUMNS}) "
            f"SELECT {copy_cols} FROM labeling_episode WHERE dataset_id = %s",
            [dataset_id],
        )
        elapsed = time.perf_counter() - started
        transaction.set_rollback(True)
    return elapsed


def cleanup(org: Organization) -> None:
    with connection.cursor() as cur:
        cur.execute("DELETE FROM labeling_episode WHERE organization_id = %s", [org.pk])
    InventoryImport.objects.filter(organization=org).delete()
    Job.objects.filter(organization=org).delete()
    Dataset.objects.filter(organization=org).delete()
    with connection.cursor() as cur:
        # The deleted rows (and the floor's rolled-back ones) would bloat the shared table.
        cur.execute("VACUUM (ANALYZE) labeling_episode")


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    org = ensure_world()
    cleanup(org)
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        path = Path(tmp) / "manifest.csv"
        started = time.perf_counter()
        generate(path, rows)
        os.sync()  # the file's pages are written out before anything is timed
        size_mb = path.stat().st_size / 1024**2
        print(
            f"generated {rows:,} rows, {size_mb:.0f} MB in {time.perf_counter() - started:.1f} s"
            f"   peak RSS so far {peak_mb():.0f} MB"
        )
        ncols = 9 + len(DIMENSIONS)
        measured: list[tuple[float, float, dict]] = []
        try:
            for round_no in range(rounds):
                if round_no:
                    cleanup(org)
                copy_seconds = bare_copy(path, ncols, unlogged=False)
                first, summary = run_import(org, path)
                measured.append((copy_seconds, first, summary))
                print(
                    f"round {round_no + 1}: bare COPY {copy_seconds:5.2f} s, import {first:5.2f} s,"
                    f" ratio {first / copy_seconds:4.2f}   phases {summary.get('phases')}"
                    f"   peak RSS so far {peak_mb():.0f} MB",
                    flush=True,
                )
            copy_unlogged = bare_copy(path, ncols, unlogged=True)
            again, again_summary = run_import(org, path)
            print(f"re-import: {again:5.2f} s   peak RSS so far {peak_mb():.0f} MB", flush=True)
            total = Episode.objects.filter(organization=org).count()
            floor_seconds = floor(summary["dataset"]["id"])
        finally:
            cleanup(org)
            org.delete()  # a second operator would change the command's default organization
    print()
    print(format_summary(summary))
    print()
    copy_logged = statistics.median(m[0] for m in measured)
    first = statistics.median(m[1] for m in measured)
    ratios = sorted(m[1] / m[0] for m in measured)
    print(f"bare COPY, plain table        {copy_logged:7.2f} s   (median of {rounds})")
    print(f"bare COPY, UNLOGGED table     {copy_unlogged:7.2f} s")
    print(f"import (new episodes)         {first:7.2f} s   (median of {rounds})")
    print(f"re-import (all unchanged)     {again:7.2f} s   phases {again_summary.get('phases')}")
    print(f"floor: INSERT typed rows      {floor_seconds:7.2f} s   (episode table and its indexes)")
    print(f"episode rows after re-import  {total:,}")
    print(
        f"ratio import / bare COPY      {statistics.median(ratios):7.2f}   (target ≤ 3; median of"
        f" {rounds} rounds, range {ratios[0]:.2f}–{ratios[-1]:.2f})"
    )
    print(f"ratio import / UNLOGGED COPY  {first / copy_unlogged:7.2f}")
    print(f"ratio re-import / bare COPY   {again / copy_logged:7.2f}")
    print(f"ratio floor / bare COPY       {floor_seconds / copy_logged:7.2f}")
    print(f"ratio import / floor          {first / floor_seconds:7.2f}")
    print(f"peak RSS                      {peak_mb():7.0f} MB   (target < 500 MB)")


if __name__ == "__main__":
    main()
