"""Malformed CSV records: both import paths refuse them alike, name the first 20, store nothing.

The direct load (pyarrow) and the staging path (PostgreSQL's COPY) read CSV by different
rules; where they could disagree the direct load gives way to the staging path, and the
staging path checks that COPY read every record it should (labeling/importers/records.py).
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from psycopg import errors as pg_errors

from labeling.importers import direct, sources
from labeling.importers.records import scan
from labeling.models import Dataset, Episode
from tests.labeling.imports import run, snapshot


def both_paths(world, tmp_path, monkeypatch, body: str, mapping: list[str], name: str = "Bad"):
    """Import ``body`` with the direct load on, then off; return both records."""
    path = tmp_path / "m.csv"
    path.write_text(body, encoding="utf-8")
    before = snapshot()
    fast = run(world, path, f"{name} direct", mapping=mapping)
    after_fast = snapshot()
    monkeypatch.setattr(direct, "ENABLED", False)
    slow = run(world, path, f"{name} staged", mapping=mapping)
    monkeypatch.setattr(direct, "ENABLED", True)
    assert after_fast == before
    assert snapshot() == before
    return fast, slow


def texts(record) -> list[str]:
    return [e["text"] for e in record.job.errors]


def test_an_unclosed_quote_in_an_ignored_column_is_refused_alike_on_both_paths(
    world_a, tmp_path, monkeypatch
):
    body = 'key,count,comment\nk1,2,"hello\nk2,3,x\nk3,4,y\n'

    fast, slow = both_paths(world_a, tmp_path, monkeypatch, body, ["key=key", "count=count"])

    assert fast.job.status == slow.job.status == "failed"
    assert (
        texts(fast)
        == texts(slow)
        == [
            "m.csv row 2, column 'comment': a quoted field is never closed (a stray \" character?): "
            'the " on line 2 opens a value that runs to the end of the file; expected a closing " '
            "after it"
        ]
    )
    assert not Dataset.objects.filter(name__startswith="Bad").exists()


def test_a_ragged_csv_lists_its_first_20_problems_and_counts_the_rest_on_both_paths(
    world_a, tmp_path, monkeypatch
):
    lines = []
    for i in range(1, 61):
        if i % 4 == 0:
            lines.append(f"k{i},1,extra")  # 15 rows with a field too many
        elif i % 4 == 2:
            lines.append(f"k{i}")  # 15 with one too few
        else:
            lines.append(f"k{i},1")
    body = "key,count\n" + "\n".join(lines) + "\n"

    fast, slow = both_paths(world_a, tmp_path, monkeypatch, body, ["key=key", "count=count"])

    assert fast.job.status == slow.job.status == "failed"
    assert texts(fast) == texts(slow)
    assert len(texts(slow)) == 20
    assert texts(slow)[:2] == [
        "m.csv row 3: this row has 1 field, fewer than the header's 2",
        "m.csv row 5: this row has 3 fields, more than the header's 2; is a value containing the "
        "delimiter left unquoted?",
    ]
    assert [e["row"] for e in slow.job.errors] == [i + 1 for i in range(1, 61) if i % 2 == 0][:20]
    assert fast.summary["problems_total"] == slow.summary["problems_total"] == 30
    assert slow.job.message.startswith(
        "30 problems (the first 20 are listed, 10 more are not); the first: m.csv row 3"
    )


def test_ragged_rows_across_many_copy_chunks_keep_their_rows_and_lines(
    world_a, tmp_path, monkeypatch
):
    monkeypatch.setattr(sources, "BLOCK_BYTES", 300)
    good = "".join(f'k{i},"two\nlines",{i}\n' for i in range(40))  # rows 2-41, lines 2-81
    body = "key,note,count\n" + good + "bad,1\n" + good.replace("k", "j") + "worse\n"

    fast, slow = both_paths(
        world_a, tmp_path, monkeypatch, body, ["key=key", "note=extra:note", "count=count"]
    )

    assert (
        texts(fast)
        == texts(slow)
        == [
            "m.csv row 42: this row has 2 fields, fewer than the header's 3 (the row starts on line "
            "82 of the file)",
            "m.csv row 83: this row has 1 field, fewer than the header's 3 (the row starts on line "
            "163 of the file)",
        ]
    )


def test_a_quote_inside_a_value_that_swallows_lines_is_refused_on_both_paths(
    world_a, tmp_path, monkeypatch
):
    """pyarrow reads 3 rows here, PostgreSQL 2: k2's line inside k1's comment."""
    body = 'key,count,comment\nk1,2,ab"c\nk2,3,x"\nk3,4,y\n'

    fast, slow = both_paths(world_a, tmp_path, monkeypatch, body, ["key=key", "count=count"])

    assert (
        texts(fast)
        == texts(slow)
        == [
            "m.csv row 2, column 'comment': a \" inside an unquoted value opens a quoted section "
            "that runs on to line 3, so line 3 would be read into this value; quote the whole "
            'value and double its " ("") or remove the "'
        ]
    )


def test_a_line_holding_only_backslash_dot_is_refused_not_taken_for_the_end(
    world_a, tmp_path, monkeypatch
):
    """PostgreSQL's COPY ends its data at such a line: the rows after it would be lost."""
    body = "key\nk1\n\\.\nk2\nk3\n"

    fast, slow = both_paths(world_a, tmp_path, monkeypatch, body, ["key=key"])

    assert fast.job.status == slow.job.status == "failed"
    assert texts(fast) == texts(slow)
    assert texts(slow)[0].startswith(
        "m.csv row 3: a line holding only \\. ends the data to PostgreSQL up to version 17"
    )


def test_doubled_quotes_and_values_spanning_lines_store_alike_on_both_paths(
    world_a, tmp_path, monkeypatch
):
    body = '"Episode\nkey",count,note\nk1,1,"say ""hi"""\nk2,2,"two\nlines"\nk3,"3",\n'
    mapping = ["Episode key=key", "count=count"]
    path = tmp_path / "m.csv"
    path.write_text(body, encoding="utf-8")

    fast = run(world_a, path, "Direct", mapping=mapping)
    monkeypatch.setattr(direct, "ENABLED", False)
    slow = run(world_a, path, "Staged", mapping=mapping)

    assert fast.job.status == slow.job.status == "succeeded", (fast.job.errors, slow.job.errors)
    stored = [
        sorted(Episode.objects.filter(dataset__name=n).values_list("key", "episode_count"))
        for n in ("Direct", "Staged")
    ]
    assert stored[0] == stored[1] == [("k1", 1), ("k2", 2), ("k3", 3)]
    # A quote inside a value: the staging path reads it (pyarrow could read it otherwise).
    assert fast.summary["path"]["direct"] is False
    assert "quote" in fast.summary["path"]["why"]


def test_a_quoted_header_spanning_lines_loads_directly(world_a, tmp_path):
    path = tmp_path / "m.csv"
    path.write_text('"Episode\nkey",count\nk1,1\nk2,2\n', encoding="utf-8")

    record = run(world_a, path, "Direct", mapping=["Episode key=key", "count=count"])

    assert record.job.status == "succeeded", record.job.errors
    assert record.summary["path"] == {"direct": True, "why": None}
    assert record.summary["episodes"] == 3


# --- the scanner against PostgreSQL's COPY --------------------------------------------------


def copy_rows(text: bytes, ncols: int) -> int | None:
    """Rows PostgreSQL's COPY stores from ``text`` (no header), or None when it refuses it."""
    columns = ", ".join(f"c{i} text" for i in range(ncols))
    try:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(f"CREATE TEMP TABLE scan_check ({columns}) ON COMMIT DROP")
            with cur.cursor.copy("COPY scan_check FROM STDIN (FORMAT csv)") as copy:
                copy.write(text)
            cur.execute("SELECT count(*) FROM scan_check")
            count = cur.fetchone()[0]
            raise _Rollback(count)
    except _Rollback as done:
        return done.count
    except pg_errors.DataError:
        return None


def copy_table(text: bytes, ncols: int) -> list[tuple[str, ...]] | None:
    """The rows PostgreSQL's COPY reads from ``text`` (with a header), NULL as ''."""
    columns = ", ".join(f"c{i} text" for i in range(ncols))
    names = ", ".join(f"c{i}" for i in range(ncols))
    try:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(f"CREATE TEMP TABLE scan_check (n serial, {columns}) ON COMMIT DROP")
            with cur.cursor.copy(
                f"COPY scan_check ({names}) FROM STDIN (FORMAT csv, HEADER true)"
            ) as copy:
                copy.write(text)
            cur.execute(f"SELECT {names} FROM scan_check ORDER BY n")
            rows = [tuple(v or "" for v in r) for r in cur.fetchall()]
            raise _Rollback(0, rows)
    except _Rollback as done:
        return done.rows
    except pg_errors.DataError:
        return None


class _Rollback(Exception):
    def __init__(self, count: int, rows: list[tuple[str, ...]] | None = None) -> None:
        self.count = count
        self.rows = rows


@pytest.mark.django_db
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    lines=st.lists(
        st.text(alphabet='a,"\\. ', max_size=8),
        min_size=1,
        max_size=6,
    ),
    ncols=st.integers(min_value=1, max_value=3),
)
def test_text_the_scanner_passes_is_copied_whole_and_text_copy_refuses_it_flags(lines, ncols):
    text = ("\n".join(lines) + "\n").encode()
    if not text.strip():
        return  # blank files never reach COPY

    found = scan(
        [text],
        ncols=ncols,
        delimiter=",",
        file_label="m.csv",
        header=False,
        row_offset=0,
    )
    stored = copy_rows(text, ncols)

    if not found.problems:
        assert stored == found.records, (text, found)
    if stored is None:
        assert found.problems, text


@pytest.mark.django_db
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@example(lines=["\\\r", ""], ncols=1)  # "\r\n" after "\n": COPY refuses the mix
@given(
    lines=st.lists(st.text(alphabet='a,"\\.\r ', max_size=8), min_size=1, max_size=6),
    ncols=st.integers(min_value=1, max_value=3),
)
def test_whatever_the_direct_load_reads_postgresql_reads_the_same(tmp_path_factory, lines, ncols):
    """The direct load either reads a file exactly as COPY does, or gives way (NotDirect)."""
    header = ",".join(f"h{i}" for i in range(ncols))
    text = (header + "\n" + "\n".join(lines)).encode()
    path = tmp_path_factory.mktemp("csv") / "m.csv"
    path.write_bytes(text)

    try:
        read = [
            row
            for batch, _position in direct.file_batches(path, ncols=ncols, delimiter=",")
            for row in zip(*(c.to_pylist() for c in batch.columns), strict=True)
        ]
    except direct.NotDirect:
        return
    stored = copy_table(text if text.endswith(b"\n") else text + b"\n", ncols)

    assert stored is not None, text
    assert read == stored, text
