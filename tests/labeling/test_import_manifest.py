"""Tabular manifests: mappings, messy numbers, rows standing for many episodes, bad input."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from accounts.services import JobContext
from labeling.importers import direct, sources
from labeling.models import Dataset, Episode
from labeling.services import inventory_import_start
from sites.models import ConditionValue
from tests.labeling.imports import run, snapshot

DATA = Path(__file__).resolve().parents[1] / "data" / "tabular"
OXE = DATA / "oxe_overview_subset.tsv"
DIRTY = DATA / "combined_info.csv"


def failed(world, path, **options):
    before = snapshot()
    record = run(world, path, **options)
    assert record.job.status == "failed", record.job.message
    assert snapshot() == before
    return record


def texts(record):
    return [e["text"] for e in record.job.errors]


def episodes(name="Manifest"):
    return Episode.objects.filter(dataset__name=name)


def write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


# --- the Open X-Embodiment overview sheet ------------------------------------------------------


def test_oxe_sheet_imports_through_a_mapping_with_its_thousands_separators_parsed(world_a):
    record = run(world_a, OXE, name="OXE", mapping=["Dataset=key", "# Episodes=count"])

    assert record.job.status == "succeeded", record.job.message
    assert episodes("OXE").count() == 71
    assert episodes("OXE").get(key="RT-1 Robot Action").episode_count == 73499


def test_oxe_episode_total_equals_the_sheets_numbers_summed_independently(world_a):
    with OXE.open(newline="", encoding="utf-8") as fh:
        expected = sum(
            int(r["# Episodes"].replace(",", "")) for r in csv.DictReader(fh, delimiter="\t")
        )

    record = run(world_a, OXE, name="OXE", mapping=["Dataset=key", "# Episodes=count"])

    assert sum(e.episode_count for e in episodes("OXE")) == expected
    assert record.summary["episodes"] == expected
    assert record.summary["rows"] == 71


def test_oxe_morphology_column_can_feed_a_condition_dimension_with_created_values(world_a):
    from sites.models import ConditionDimension

    ConditionDimension.objects.create(
        organization=world_a.operator, slug="morphology", name="Morphology"
    )

    record = run(
        world_a,
        OXE,
        name="OXE",
        mapping=["Dataset=key", "# Episodes=count", "Robot Morphology=morphology"],
        create_values=True,
    )

    assert record.job.status == "succeeded", record.job.message
    assert "Single Arm" in record.summary["created"]["condition_values"]
    morph = next(c for c in record.summary["conditions"] if c["dimension"] == "Morphology")
    assert (
        sum(v["episodes"] for v in morph["values"]) + morph["not_recorded"]
        == record.summary["episodes"]
    )


def test_oxe_text_in_a_number_column_is_a_per_row_problem(world_a):
    record = failed(
        world_a, OXE, mapping=["Dataset=key", "# Episodes=count", "Control Frequency=fps"]
    )

    assert texts(record)[0].startswith(
        "oxe_overview_subset.tsv row 39, column 'Control Frequency': expected frames per second"
    )
    assert len(texts(record)) == 2


# --- the dirty dataset list ----------------------------------------------------------------


def test_dirty_list_fails_with_per_row_problems_and_writes_nothing(world_a):
    record = failed(world_a, DIRTY, mapping=["name=key", "episodes=count", "control_frequency=fps"])

    problems = texts(record)
    assert len(problems) == 20  # the first 20 of more
    assert record.summary["problems_total"] > 20
    assert (
        "combined_info.csv row 16, column 'episodes': expected a whole number of episodes, got '=64*9'"
        in problems
    )
    assert "combined_info.csv row 4, column 'name': the key is blank" in problems
    assert all(
        e["file"] == "combined_info.csv" and e["row"] and e["column"] for e in record.job.errors
    )


def test_dirty_list_header_with_a_huge_column_name_still_maps(world_a):
    record = failed(world_a, DIRTY, mapping=["name=key", "episodes=count"])

    # The long header column is just another column; the problems are the rows' counts.
    assert "no episode count (got 'null')" in texts(record)[0]


# --- messy cells -------------------------------------------------------------------------------


def test_numbers_with_separators_blanks_and_stray_spaces_are_normalised(world_a, tmp_path):
    path = write(
        tmp_path,
        "m.csv",
        "key,episodes,frames,duration\n"
        'a,"1,234", 12 ,1.5\n'
        "b, 7 ,N/A,\n"
        "c,2,null,-\n"
        'd,"3 000",1_000,  2.25  \n',
    )

    record = run(
        world_a, path, mapping=["key=key", "episodes=count", "frames=frames", "duration=duration_s"]
    )

    assert record.job.status == "succeeded", record.job.message
    rows = {e.key: (e.episode_count, e.frames, e.duration_s) for e in episodes()}
    assert rows == {
        "a": (1234, 12, 1.5),
        "b": (7, 0, 0.0),
        "c": (2, 0, 0.0),
        "d": (3000, 1000, 2.25),
    }


def test_a_row_may_stand_for_one_episode_or_for_many(world_a, tmp_path):
    many = write(tmp_path, "many.csv", "key,count\nx,10\ny,5\n")
    one = write(tmp_path, "one.csv", "key,frames\np,100\nq,200\n")

    run(world_a, many, name="Many")
    run(world_a, one, name="One")

    assert sorted(e.episode_count for e in episodes("Many")) == [5, 10]
    assert [e.episode_count for e in episodes("One")] == [1, 1]


def test_condition_values_match_whatever_their_case_and_spacing(world_a, tmp_path):
    path = write(tmp_path, "c.csv", "key,Lighting\na,  DIM \nb,dim\nc,Bright\nd,\n")

    record = run(world_a, path)

    bright, dim = world_a.values
    by_key = {e.key: e.condition_set.value_ids if e.condition_set else None for e in episodes()}
    assert by_key == {"a": [dim.pk], "b": [dim.pk], "c": [bright.pk], "d": None}
    assert record.summary["mapping"] == {"key": "key", "Lighting": "condition:Lighting"}


def test_unknown_condition_values_are_listed_with_their_counts(world_a, tmp_path):
    path = write(tmp_path, "c.csv", "key,lighting\na,dim\nb,Fluorescent\nc,fluorescent\nd,strobe\n")

    record = failed(world_a, path)

    problems = texts(record)
    assert (
        problems[0] == "c.csv column 'lighting': 2 unknown Lighting values: 'Fluorescent', 'strobe'"
    )
    assert problems[1].startswith(
        "c.csv row 3, column 'lighting': unknown Lighting value 'Fluorescent' (2 rows); known: bright, dim"
    )
    assert "--create-values" in problems[1]


def test_create_values_adds_the_unknown_values_and_imports(world_a, tmp_path):
    path = write(tmp_path, "c.csv", "key,lighting\na,dim\nb,Fluorescent\nc,fluorescent\n")

    record = run(world_a, path, create_values=True)

    assert record.job.status == "succeeded", record.job.message
    created = ConditionValue.objects.get(dimension=world_a.dimension, slug="fluorescent")
    assert created.label == "Fluorescent"
    assert episodes().filter(condition_set__value_ids=[created.pk]).count() == 2


def test_set_fills_a_dimension_the_rows_leave_blank(world_a, tmp_path):
    path = write(tmp_path, "c.csv", "key,lighting\na,bright\nb,\n")

    run(world_a, path, sets=["lighting=dim"])

    bright, dim = world_a.values
    by_key = {e.key: e.condition_set.value_ids for e in episodes()}
    assert by_key == {"a": [bright.pk], "b": [dim.pk]}


def test_site_embodiment_task_and_outcome_columns_resolve(world_a, tmp_path):
    path = write(
        tmp_path,
        "m.csv",
        "key,site,robot,task,outcome,uri,recorded\n"
        f"a,{world_a.site.name.upper()},{world_a.embodiment.slug},Stack boxes,SUCCESS,s3://b/a.mcap,2025-06-30T14:05:00Z\n"
        f"b,{world_a.site.slug},,stack boxes,failed,,2025-07-01\n",
    )

    record = run(
        world_a,
        path,
        mapping=[
            "key=key",
            "site=site",
            "robot=embodiment",
            "task=task",
            "outcome=outcome",
            "uri=storage_uri",
            "recorded=recorded_at",
        ],
    )

    assert record.job.status == "succeeded", record.job.message
    a, b = episodes().order_by("key")
    assert (a.site, b.site) == (world_a.site, world_a.site)
    assert a.embodiment == world_a.embodiment
    assert b.embodiment is None
    assert a.task == b.task
    assert a.task.name == "Stack boxes"
    assert (a.outcome, b.outcome) == ("success", "failure")
    assert a.storage_uri == "s3://b/a.mcap"
    assert a.recorded_at.isoformat() == "2025-06-30T14:05:00+00:00"


def test_unknown_sites_are_a_problem_not_created(world_a, tmp_path):
    path = write(tmp_path, "m.csv", "key,site\na,Atlantis\n")

    record = failed(world_a, path)

    assert "unknown site 'Atlantis' (1 row)" in texts(record)[0]


def test_features_and_extras_land_in_their_json(world_a, tmp_path):
    path = write(tmp_path, "m.csv", 'key,lux,note\na,"1,200",left bay\nb,,\n')

    run(world_a, path, mapping=["key=key", "lux=feature:light_lux", "note=extra:note"])

    a, b = episodes().order_by("key")
    assert (a.features, a.extra) == ({"light_lux": 1200.0}, {"note": "left bay"})
    assert (b.features, b.extra) == ({}, {})


def test_an_impossible_date_is_reported_with_its_row(world_a, tmp_path):
    path = write(tmp_path, "m.csv", "key,recorded_at\na,2024-02-28\nb,2024-02-30\n")

    record = failed(world_a, path)

    assert texts(record) == [
        "m.csv row 3, column 'recorded_at': expected a date such as 2024-06-30 or "
        "2024-06-30T14:05:00Z, got '2024-02-30'"
    ]


def test_a_date_with_words_after_it_is_reported_with_its_row(world_a, tmp_path):
    path = write(tmp_path, "m.csv", "key,recorded_at\na,2024-06-30 lunchtime\n")

    record = failed(world_a, path)

    assert texts(record)[0].startswith("m.csv row 2, column 'recorded_at': expected a date")


# --- keys and re-imports -------------------------------------------------------------------------


def test_reimporting_the_same_manifest_updates_instead_of_duplicating(world_a, tmp_path):
    path = write(tmp_path, "m.csv", "key,count,frames\na,1,10\nb,2,20\n")
    run(world_a, path)
    path.write_text("key,count,frames\na,1,10\nb,3,20\nc,1,5\n")

    again = run(world_a, path)

    assert (again.summary["inserted"], again.summary["updated"], again.summary["unchanged"]) == (
        1,
        1,
        1,
    )
    assert {e.key: e.episode_count for e in episodes()} == {"a": 1, "b": 3, "c": 1}


def test_without_a_key_column_the_row_number_is_the_key(world_a, tmp_path):
    path = write(tmp_path, "m.csv", "count,frames\n4,10\n5,20\n")
    run(world_a, path)

    again = run(world_a, path)

    assert sorted(episodes().values_list("key", flat=True)) == ["row-2", "row-3"]
    assert again.summary["unchanged"] == 2


def test_a_key_on_two_rows_is_reported_with_both_rows(world_a, tmp_path):
    path = write(tmp_path, "m.csv", "key,count\na,1\nb,1\na,2\n")

    record = failed(world_a, path)

    assert texts(record) == [
        "m.csv row 4, column 'key': the key 'a' repeats row 2; keys must be unique within a dataset"
    ]


def test_a_duplicate_key_in_a_reimport_is_reported_too(world_a, tmp_path):
    path = write(tmp_path, "m.csv", "key,count\na,1\n")
    run(world_a, path)
    path.write_text("key,count\na,1\na,2\n")

    record = failed(world_a, path)

    assert "repeats row 2" in texts(record)[0]


# --- other formats -----------------------------------------------------------------------------


def test_parquet_manifests_import_with_typed_columns(world_a, tmp_path):
    path = tmp_path / "m.parquet"
    pq.write_table(
        pa.table(
            {
                "key": ["a", "b"],
                "episodes": [3, 1],
                "frames": [100.0, None],
                "lighting": ["dim", None],
            }
        ),
        path,
    )

    record = run(
        world_a, path, mapping=["key=key", "episodes=count", "frames=frames", "lighting=lighting"]
    )

    assert record.job.status == "succeeded", record.job.message
    assert record.format == "parquet"
    assert {e.key: (e.episode_count, e.frames) for e in episodes()} == {"a": (3, 100), "b": (1, 0)}


def test_the_format_is_detected_from_content_when_the_name_says_nothing(world_a, tmp_path):
    tsv = write(tmp_path, "manifest.txt", "key\tcount\na\t1\n")
    parquet = tmp_path / "manifest.bin"
    pq.write_table(pa.table({"key": ["z"]}), parquet)

    first = run(world_a, tsv, name="T")
    second = run(world_a, parquet, name="P")

    assert (first.format, second.format) == ("tsv", "parquet")
    assert first.job.status == second.job.status == "succeeded"


def test_a_manifest_streams_in_chunks_with_quoted_newlines_across_boundaries(
    world_a, tmp_path, monkeypatch
):
    rows = "".join(f'k{i},"line one\nline two {i}",{i % 7 + 1}\n' for i in range(400))
    path = write(tmp_path, "m.csv", "key,note,count\n" + rows)
    monkeypatch.setattr(sources, "BLOCK_BYTES", 257)

    record = run(world_a, path, mapping=["key=key", "note=extra:note", "count=count"])

    assert record.job.status == "succeeded", record.job.message
    assert episodes().count() == 400
    assert episodes().get(key="k399").extra == {"note": "line one\nline two 399"}


def test_windows_line_endings_and_a_byte_order_mark_are_fine(world_a, tmp_path):
    path = tmp_path / "w.csv"
    path.write_bytes(b'\xef\xbb\xbfkey,count\r\na,1\r\nb,"2,000"\r\n\r\n')

    record = run(world_a, path)

    assert record.job.status == "succeeded", record.job.message
    assert {e.key: e.episode_count for e in episodes()} == {"a": 1, "b": 2000}


# --- bad input -----------------------------------------------------------------------------


def test_an_empty_file_is_reported(world_a, tmp_path):
    record = failed(world_a, write(tmp_path, "e.csv", ""))

    assert texts(record) == ["e.csv: the file is empty"]


def test_a_header_without_rows_is_reported(world_a, tmp_path):
    record = failed(world_a, write(tmp_path, "h.csv", "key,count\n"))

    assert texts(record) == ["h.csv: the file has a header but no rows"]


def test_latin1_text_is_reported_with_the_byte_and_its_offset(world_a, tmp_path):
    text = "key,lighting\nCafé,dim\n"
    path = write(tmp_path, "l.csv", text, encoding="latin-1")

    record = failed(world_a, path)

    offset = text.encode("latin-1").index(b"\xe9")
    assert texts(record) == [
        f"l.csv: not UTF-8 text (byte 0xe9 at offset {offset}); save it as UTF-8"
    ]


def test_latin1_far_into_a_file_is_found_while_streaming(world_a, tmp_path, monkeypatch):
    text = "key,count\n" + "".join(f"k{i},1\n" for i in range(500)) + "Caf\xe9,1\n"
    path = write(tmp_path, "l.csv", text, encoding="latin-1")
    monkeypatch.setattr(sources, "BLOCK_BYTES", 100)

    record = failed(world_a, path)

    offset = text.encode("latin-1").index(b"\xe9")
    assert texts(record) == [
        f"l.csv: not UTF-8 text (byte 0xe9 at offset {offset}); save it as UTF-8"
    ]


def test_utf16_text_is_reported(world_a, tmp_path):
    record = failed(world_a, write(tmp_path, "u.csv", "\ufeffkey,count\na,1\n", encoding="utf-16"))

    assert texts(record) == ["u.csv: UTF-16 text, not UTF-8; save it as UTF-8"]


def test_binary_bytes_in_a_text_file_are_reported(world_a, tmp_path):
    path = tmp_path / "n.csv"
    path.write_bytes(b"key,count\na,1\nb\x00,2\n")

    record = failed(world_a, path)

    assert texts(record) == [
        "n.csv: contains a NUL byte at offset 15: UTF-16 or binary data, not UTF-8 text; "
        "save it as UTF-8"
    ]


def test_a_truncated_parquet_file_is_reported(world_a, tmp_path):
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"key": [f"k{i}" for i in range(1000)]}), path)
    path.write_bytes(path.read_bytes()[:-200])

    record = failed(world_a, path)

    assert texts(record)[0].startswith("m.parquet: not a readable Parquet file")


def test_a_row_with_an_extra_field_is_reported_with_its_spreadsheet_row(world_a, tmp_path):
    path = write(tmp_path, "r.csv", 'key,note,count\na,"two\nlines",1\nb,x,2,oops\n')

    record = failed(world_a, path, mapping=["key=key", "count=count"])

    assert texts(record) == [
        "r.csv row 3: this row has 4 fields, more than the header's 3; is a value containing "
        "the delimiter left unquoted? (the row starts on line 4 of the file)"
    ]


def test_a_blank_line_inside_the_file_is_reported_as_an_empty_row(world_a, tmp_path):
    record = failed(world_a, write(tmp_path, "b.csv", "key,count\na,1\n\nb,2\n"))

    assert texts(record) == ["b.csv row 3: the row is empty; remove it"]


def test_a_row_with_a_missing_field_is_reported(world_a, tmp_path):
    record = failed(world_a, write(tmp_path, "r.csv", "key,count\na,1\nb\n"))

    assert texts(record) == ["r.csv row 3: this row has 1 field, fewer than the header's 2"]


def test_an_unclosed_quote_is_reported(world_a, tmp_path):
    record = failed(world_a, write(tmp_path, "q.csv", 'key,count\na,1\n"b,2\nc,3\n'))

    assert "a quoted field is never closed" in texts(record)[0]


def test_mapping_an_unknown_column_lists_the_columns(world_a, tmp_path):
    record = failed(
        world_a, write(tmp_path, "m.csv", "key,count\na,1\n"), mapping=["Episodes=count"]
    )

    assert texts(record) == [
        "m.csv: --map Episodes=…: no column 'Episodes'; the columns are: 'key', 'count'"
    ]


def test_mapping_to_an_unknown_target_names_the_choices(world_a, tmp_path):
    record = failed(world_a, write(tmp_path, "m.csv", "key,count\na,1\n"), mapping=["count=amount"])

    assert "unknown target 'amount'" in texts(record)[0]
    assert "lighting" in texts(record)[0]


def test_a_manifest_that_maps_nothing_says_how_to_map(world_a, tmp_path):
    record = failed(world_a, write(tmp_path, "m.csv", "a,b\n1,2\n"))

    assert "no column is mapped" in texts(record)[0]


def test_a_malformed_map_argument_is_refused_at_once(world_a, tmp_path):
    from labeling.importers.errors import ImportFailed

    with pytest.raises(ImportFailed, match="is not of the form A=B"):
        inventory_import_start(
            organization=world_a.operator,
            dataset_name="x",
            path=write(tmp_path, "m.csv", "key\na\n"),
            mapping=["key"],
            enqueue=False,
        )


def test_importing_into_a_captured_dataset_is_refused(world_a, tmp_path):
    Dataset.objects.create(
        organization=world_a.operator, slug="round-1", name="Round 1", source="captured"
    )

    record = failed(world_a, write(tmp_path, "m.csv", "key\na\n"), name="Round 1")

    assert "holds captured in a collection round episodes" in record.job.message


# --- cancellation --------------------------------------------------------------------------


def test_cancelling_during_staging_writes_nothing_and_ends_cancelled(
    world_a, tmp_path, monkeypatch
):
    from accounts.models import Job

    path = write(tmp_path, "m.csv", "key,count\n" + "".join(f"k{i},1\n" for i in range(300)))
    monkeypatch.setattr(direct, "ENABLED", False)
    monkeypatch.setattr(sources, "BLOCK_BYTES", 200)
    original = JobContext.progress
    calls = []

    def progress(self, done, total=None, message=None, *, force=False):
        calls.append(done)
        if len(calls) == 3:  # a person presses Cancel while the rows are being staged
            Job.objects.filter(pk=self.job.pk).update(cancel_requested=True)
        return original(self, done, total, message, force=True)

    monkeypatch.setattr(JobContext, "progress", progress)
    before = snapshot()

    record = run(world_a, path)

    assert record.job.status == "cancelled"
    assert snapshot() == before
    assert max(calls) < 300  # it stopped before staging finished
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'import_staging%%'")
        assert cur.fetchone()[0] == 0


def test_a_cancel_seen_just_before_writing_leaves_nothing(world_a, tmp_path, monkeypatch):
    monkeypatch.setattr(JobContext, "cancel_requested", lambda self: True)
    before = snapshot()

    record = run(
        world_a, write(tmp_path, "m.csv", "key,lighting\na,dim\nb,brand new\n"), create_values=True
    )

    assert record.job.status == "cancelled"
    assert snapshot() == before


def test_scratch_tables_left_by_a_dead_worker_are_swept_by_the_next_import(world_a, tmp_path):
    from accounts.models import Job

    dead = Job.objects.create(organization=world_a.operator, kind="import", status="failed")
    alive = Job.objects.create(organization=world_a.operator, kind="import", status="running")
    with connection.cursor() as cur:
        for job in (dead, alive):
            cur.execute(f"CREATE UNLOGGED TABLE import_staging_{job.pk.hex} (c0 text)")

    run(world_a, write(tmp_path, "m.csv", "key\na\n"))

    with connection.cursor() as cur:
        cur.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'import_staging%%'")
        left = {r[0] for r in cur.fetchall()}
    assert left == {f"import_staging_{alive.pk.hex}"}


def test_a_long_phase_extends_the_jobs_lease_so_the_reaper_leaves_it_alone(
    world_a, tmp_path, monkeypatch
):
    from datetime import timedelta

    from django.utils import timezone

    from accounts.models import Job

    seen = []
    original = JobContext.extend_lease

    def spy(self, seconds):
        original(self, seconds)
        seen.append(Job.objects.get(pk=self.job.pk).heartbeat_at)

    monkeypatch.setattr(JobContext, "extend_lease", spy)

    run(world_a, write(tmp_path, "m.csv", "key\na\n"))  # direct load: one long phase
    assert len(seen) == 1
    monkeypatch.setattr(direct, "ENABLED", False)
    run(world_a, write(tmp_path, "m.csv", "key\na\n"), name="Staged")  # staging: two
    assert len(seen) == 3
    assert all(at > timezone.now() + timedelta(seconds=30) for at in seen)


# --- the command ----------------------------------------------------------------------------


def test_command_prints_the_summary_with_counts_per_condition_value(world_a, tmp_path, capsys):
    path = write(
        tmp_path, "m.csv", "key,count,frames,lighting\na,3,300,dim\nb,2,200,bright\nc,1,100,dim\n"
    )

    call_command(
        "import_inventory", str(path), "--dataset", "Cmd", "--organization", world_a.operator.slug
    )

    out = capsys.readouterr().out
    assert "6 episodes, 600 frames in 3 rows" in out
    assert "Lighting: Bright 2, Dim 4" in out


def test_command_exits_nonzero_with_the_problems(world_a, tmp_path):
    path = write(tmp_path, "m.csv", "key,count\na,lots\n")

    with pytest.raises(CommandError) as exc:
        call_command(
            "import_inventory",
            str(path),
            "--dataset",
            "Cmd",
            "--organization",
            world_a.operator.slug,
        )

    assert "m.csv row 2, column 'count': expected a whole number of episodes, got 'lots'" in str(
        exc.value
    )
    assert exc.value.returncode == 1


def test_command_accepts_map_set_and_create_values(world_a, tmp_path, capsys):
    path = write(tmp_path, "m.csv", 'Dataset,# Episodes,Light\nA,"1,000",neon\n')

    call_command(
        "import_inventory",
        str(path),
        "--dataset",
        "Cmd",
        "--organization",
        world_a.operator.slug,
        "--map",
        "Dataset=key",
        "--map",
        "# Episodes=count",
        "--map",
        "Light=lighting",
        "--create-values",
        "--site",
        world_a.site.slug,
    )

    assert "1,000 episodes" in capsys.readouterr().out
    episode = episodes("Cmd").get()
    assert episode.site == world_a.site
    assert ConditionValue.objects.filter(dimension=world_a.dimension, label="neon").exists()


def test_command_needs_an_organization_when_there_are_several(world_a, world_b, tmp_path):
    path = write(tmp_path, "m.csv", "key\na\n")

    with pytest.raises(CommandError, match="Give --organization"):
        call_command("import_inventory", str(path), "--dataset", "Cmd")


def test_command_reports_a_missing_file(world_a, tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        call_command(
            "import_inventory",
            str(tmp_path / "nope.csv"),
            "--dataset",
            "Cmd",
            "--organization",
            world_a.operator.slug,
        )
