"""The direct load against the staging path, and the episode references both must keep.

The direct load (labeling/importers/direct.py) types manifests with pyarrow and COPYs them
straight into the episode table; the staging path is the reference. The same messy input
must store the same episodes either way, and anything the direct load is unsure of must end
in the staging path's diagnostics.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.db import connection
from django.db.models import ProtectedError

from accounts.services import JobCancelled, JobContext
from labeling.importers import direct
from labeling.importers.errors import ImportFailed
from labeling.importers.writes import lock_references
from labeling.models import Dataset, Episode
from tests.labeling.imports import run

FIELDS = (
    "key",
    "episode_count",
    "frames",
    "duration_s",
    "outcome",
    "storage_uri",
    "recorded_at",
    "sync_status",
    "label_status",
    "provenance",
    "validated",
    "features",
    "extra",
    "site__slug",
    "task__name",
    "embodiment__slug",
    "condition_set__value_ids",
)

MESSY = (
    "Episode ID,Episodes,Frames,FPS,Duration,Result,URI,Recorded,Site,Task,Lighting,Robot\n"
    'a1,1,"1,200",30,,success,s3://x/a1, 2024-06-30T14:05:00Z ,site-{tag},Pick {tag},DIM,emb-{tag}\n'
    'a2,"2,000",90,30,3.5,FAILED,,2024-07-01,SITE-{tag},pick {tag}, bright ,\n'
    "a3,3,  ,,N/A,,  ,null,,New task,-,emb-{tag}\n"
    "a4,+4,12.0,25,1 234.5,ok,s3://x/a4,,site-{tag},Pick {tag},Dim,\n"
    "a5,5,1_000,,,unknown,,2024-06-30 09:00,,,bright,\n"
)
MAPPING = [
    "Episode ID=key",
    "Episodes=count",
    "Frames=frames",
    "FPS=fps",
    "Duration=duration_s",
    "Result=outcome",
    "URI=storage_uri",
    "Recorded=recorded_at",
    "Site=site",
    "Task=task",
    "Lighting=condition:lighting",
    "Robot=embodiment",
]


def stored(name: str) -> list[tuple]:
    dataset = Dataset.objects.get(name=name)
    return list(Episode.objects.filter(dataset=dataset).order_by("key").values_list(*FIELDS))


def test_both_paths_store_the_same_episodes_for_a_messy_manifest(world_a, tmp_path, monkeypatch):
    path = tmp_path / "m.csv"
    path.write_text(MESSY.format(tag="qzalpha"), encoding="utf-8")

    fast = run(world_a, path, "Direct", mapping=MAPPING)
    monkeypatch.setattr(direct, "ENABLED", False)
    slow = run(world_a, path, "Staged", mapping=MAPPING)

    assert fast.job.status == slow.job.status == "succeeded", (fast.job.errors, slow.job.errors)
    assert fast.summary["path"] == {"direct": True, "why": None}
    assert slow.summary["path"]["direct"] is False
    assert stored("Direct") == stored("Staged")
    rows = {r[0]: r for r in stored("Direct")}
    assert rows["a2"][1:4] == (2000, 90, 3.5)  # thousands separator; duration as given
    assert rows["a1"][3] == 40.0  # no duration: frames / fps
    assert rows["a4"][1:4] == (4, 12, 1234.5)
    assert rows["a3"][13] is None and rows["a3"][14] == "New task"  # created, as staging does
    assert fast.summary["created"] == {"tasks": ["New task"]}  # the second found it made
    for key in ("episodes", "frames", "inserted", "conditions", "sites"):
        assert fast.summary[key] == slow.summary[key], key


def test_both_paths_agree_on_parquet_with_typed_columns(world_a, tmp_path, monkeypatch):
    path = tmp_path / "m.parquet"
    pq.write_table(
        pa.table(
            {
                "key": ["p1", "p2", "p3"],
                "count": pa.array([1, 2, None], pa.int64()),
                "frames": pa.array([100, None, 3000], pa.int64()),
                "duration": pa.array([1.5, None, 0.1], pa.float64()),
                "lighting": ["dim", None, "Bright"],
            }
        ),
        path,
    )
    mapping = ["key=key", "frames=frames", "duration=duration_s", "lighting=condition:lighting"]
    fast = run(world_a, path, "Direct", mapping=mapping)
    monkeypatch.setattr(direct, "ENABLED", False)
    run(world_a, path, "Staged", mapping=mapping)
    assert fast.summary["path"]["direct"] is True
    assert stored("Direct") == stored("Staged")


DATES = (
    "2024-06-30",
    "2024-06-30 09:00",
    "2024-06-30T09:00:05",
    "2024-06-30T09:00:05.5",
    "2024-06-30 09:00:05.123456",
    "2024-06-30T23:30:00Z",
    "2024-06-30T23:30:00+05:30",
    "2024-06-30T23:30:00-0330",
    "2024-06-30 01:00:00.25+14",
    "1999-12-31T23:59:59.999999-12:00",
    "2024-02-29",
)


def test_both_paths_read_dates_and_times_alike(world_a, tmp_path, monkeypatch):
    """The direct load parses ISO dates itself (binary COPY); PostgreSQL's cast is the reference."""
    path = tmp_path / "dates.csv"
    path.write_text(
        "key,recorded\n" + "".join(f"d{i:02d},{d}\n" for i, d in enumerate(DATES)) + "dx,\n",
        encoding="utf-8",
    )
    fast = run(world_a, path, "Direct", mapping=["key=key", "recorded=recorded_at"])
    monkeypatch.setattr(direct, "ENABLED", False)
    run(world_a, path, "Staged", mapping=["key=key", "recorded=recorded_at"])
    assert fast.summary["path"] == {"direct": True, "why": None}
    assert stored("Direct") == stored("Staged")
    at = {r[0]: r[6] for r in stored("Direct")}
    assert at["d06"].isoformat() == "2024-06-30T18:00:00+00:00"
    assert at["d08"].isoformat() == "2024-06-29T11:00:00.250000+00:00"
    assert at["dx"] is None


def test_parquet_nanosecond_timestamps_load_directly_and_alike(world_a, tmp_path, monkeypatch):
    """pandas writes timestamp[ns]; as text that is 9 fractional digits, 3 of them zeros."""
    import datetime as dt

    at = [dt.datetime(2024, 6, 30, 9, 0, 5, 123456), dt.datetime(2024, 7, 1), None]
    path = tmp_path / "ns.parquet"
    pq.write_table(
        pa.table(
            {
                "key": ["n1", "n2", "n3"],
                "naive": pa.array(at, pa.timestamp("ns")),
                "aware": pa.array(at, pa.timestamp("ns", tz="UTC")),
            }
        ),
        path,
    )
    for column in ("naive", "aware"):
        mapping = ["key=key", f"{column}=recorded_at"]
        fast = run(world_a, path, f"Direct {column}", mapping=mapping)
        monkeypatch.setattr(direct, "ENABLED", False)
        run(world_a, path, f"Staged {column}", mapping=mapping)
        monkeypatch.setattr(direct, "ENABLED", True)
        assert fast.summary["path"] == {"direct": True, "why": None}, column
        assert stored(f"Direct {column}") == stored(f"Staged {column}")
        first = stored(f"Direct {column}")[0][6]
        assert first.isoformat() == "2024-06-30T09:00:05.123456+00:00"


def test_a_date_outside_the_direct_loads_forms_goes_to_postgresql(world_a, tmp_path):
    path = tmp_path / "odd.csv"
    path.write_text("key,recorded\na,2024-06-30 09:00:00.1234567\nb,2024-06-30\n")
    result = run(world_a, path, "Odd dates", mapping=["key=key", "recorded=recorded_at"])
    assert result.job.status == "succeeded", result.job.errors
    assert result.summary["path"]["direct"] is False
    assert "ISO 8601" in result.summary["path"]["why"]
    at = {r[0]: r[6] for r in stored("Odd dates")}
    assert at["a"].isoformat() == "2024-06-30T09:00:00.123457+00:00"  # rounded, as PostgreSQL


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("key,count\na,1\nb,two\n", "row 3, column 'count': expected a whole number"),
        ("key,count\na,1\na,2\n", "the key 'a' repeats row 2"),  # duplicates: both rows
        ("key,lighting\na,dim\nb,foggy\n", "unknown Lighting value 'foggy'"),
        ("key,recorded\na,2024-02-30\n", "row 2"),
        ("key,count\na,1\n\nb,1\n", "row 3"),  # an empty line in the middle
    ],
)
def test_input_the_direct_load_refuses_gets_the_staging_paths_diagnostics(
    world_a, tmp_path, body, expected
):
    path = tmp_path / "m.csv"
    path.write_text(body, encoding="utf-8")
    mapping = ["key=key"] + [
        m
        for m in ("count=count", "lighting=condition:lighting", "recorded=recorded_at")
        if m.split("=")[0] in body.splitlines()[0].split(",")
    ]
    before = Episode.objects.count()

    record = run(world_a, path, "Bad", mapping=mapping)

    assert record.job.status == "failed"
    assert any(expected in e["text"] for e in record.job.errors), record.job.errors
    assert Episode.objects.count() == before
    assert not Dataset.objects.filter(name="Bad").exists()


def test_a_trailing_blank_line_still_imports(world_a, tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("key,count\na,1\nb,2\n\n\n", encoding="utf-8")
    record = run(world_a, path, "Trailing", mapping=["key=key", "count=count"])
    assert record.job.status == "succeeded"
    assert record.summary["episodes"] == 3


def test_a_cancel_during_the_direct_load_leaves_nothing(world_a, tmp_path, monkeypatch):
    monkeypatch.setattr(JobContext, "cancel_requested", lambda self: True)
    path = tmp_path / "m.csv"
    path.write_text("key,lighting\na,dim\nb,brand new\n", encoding="utf-8")
    before = Episode.objects.count()

    record = run(world_a, path, "Cancelled", create_values=True)

    assert record.job.status == "cancelled"
    assert Episode.objects.count() == before
    assert not Dataset.objects.filter(name="Cancelled").exists()


def test_a_re_import_goes_through_the_staging_paths_upsert(world_a, tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("key,count\na,1\nb,2\n", encoding="utf-8")
    first = run(world_a, path, "Twice")
    path.write_text("key,count\na,1\nb,5\nc,1\n", encoding="utf-8")
    second = run(world_a, path, "Twice")
    assert first.summary["path"]["direct"] is True
    assert second.summary["path"]["direct"] is False
    assert (second.summary["inserted"], second.summary["updated"]) == (1, 1)
    assert Episode.objects.filter(dataset__name="Twice").count() == 3


# --- the references the episode table keeps without per-row foreign keys ------------------


def test_the_orm_still_protects_and_cascades_episode_references(world_a):
    episode = Episode.objects.filter(organization=world_a.operator).first()
    assert episode is not None
    Episode.objects.filter(pk=episode.pk).update(site=world_a.site)
    episode.refresh_from_db()
    with pytest.raises(ProtectedError):
        episode.site.delete()
    dataset = episode.dataset
    dataset.delete()
    assert not Episode.objects.filter(pk=episode.pk).exists()


def test_an_import_refuses_references_deleted_under_it(world_a):
    task = world_a.task
    with connection.cursor() as cur:
        cur.execute("SELECT max(id) + 1000 FROM sites_task")
        gone = cur.fetchone()[0]
    lock_references(tasks=[task.pk])  # present: fine
    with pytest.raises(ImportFailed, match="were deleted while importing"):
        lock_references(tasks=[task.pk, gone])


def test_cancel_inside_the_load_raises_job_cancelled(world_a, tmp_path):
    class Reporter:
        def progress(self, *args, **kwargs):
            pass

        def cancel_requested(self):
            return True

        def extend_lease(self, seconds):
            pass

    path = tmp_path / "m.csv"
    path.write_text("key\na\n", encoding="utf-8")

    class Source:
        columns = []
        file_label = "m.csv"
        line_label = "row"
        row_offset = 1
        total_rows = None
        total_bytes = 0

        @staticmethod
        def batches():
            return direct.file_batches(path, ncols=1, delimiter=",")

    from django.db import transaction

    dataset = Dataset.objects.create(organization=world_a.operator, slug="c", name="c")
    with pytest.raises(JobCancelled), transaction.atomic():
        direct.load(
            source=Source,
            organization_id=world_a.operator.pk,
            dataset_id=dataset.pk,
            default_site=None,
            default_embodiment=None,
            set_ids={},
            default_fps=None,
            create_values_asked=False,
            lookup=None,
            reporter=Reporter(),
        )


@pytest.mark.django_db
def test_the_binary_copy_encoder_round_trips_every_type_and_null():
    import datetime as dt

    import pyarrow.compute as pc

    from labeling.importers import pgcopy

    times = ["2024-05-01 12:30:15.123456", None, "1999-12-31 23:59:59", "1970-01-01"]
    columns = [
        (pa.array([1, None, -5, 2**40], pa.int64()), "int8"),
        (pa.array([1, 2, None, -(2**31)], pa.int64()), "int4"),
        (pa.array([1.5, None, -0.0, 1e300]), "float8"),
        (pa.array(["a", None, "", 'héllo, wörld\n"x"']), "text"),
        (pc.cast(pa.array(times), pa.timestamp("us")), "timestamptz"),
    ]
    with connection.cursor() as cur:
        cur.execute(
            "CREATE TEMP TABLE binary_copy (a bigint, b int, c float8, d text, e timestamptz)"
        )
        with cur.cursor.copy("COPY binary_copy FROM STDIN (FORMAT binary)") as copy:
            copy.write(pgcopy.SIGNATURE)
            copy.write(pgcopy.encode(columns))
            copy.write(pgcopy.TRAILER)
        cur.execute("SELECT a, b, c, d, e FROM binary_copy")
        rows = cur.fetchall()
    utc = dt.UTC
    assert rows == [
        (1, 1, 1.5, "a", dt.datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=utc)),
        (None, 2, None, None, None),
        (-5, None, -0.0, "", dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=utc)),
        (2**40, -(2**31), 1e300, 'héllo, wörld\n"x"', dt.datetime(1970, 1, 1, tzinfo=utc)),
    ]
