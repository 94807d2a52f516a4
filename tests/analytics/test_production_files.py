"""Production event files read into the API's events, row by row as a person counts them."""

from __future__ import annotations

import json
from io import StringIO

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.services.production_files import production_file_batches
from labeling.importers.errors import ImportFailed

CSV = (
    "Event_ID, occurred_at ,kind,outcome,Lighting,conditions.clutter,duration_s,failure_mode,"
    "intervened_by\n"
    'c-1,2026-11-30T08:00:00+01:00,cycle,success,dim, dense ,"1,234.5",,\n'
    "\n"
    "c-2,2026-11-30T08:01:00+01:00,,failure,bright,n/a,-,,\n"
    "i-1,2026-11-30T08:02:00+01:00,intervention,,dim,sparse,,grasp-slip,person\n"
)


def test_a_csv_becomes_the_apis_events_with_cleaned_cells_and_its_rows_numbered(tmp_path):
    path = tmp_path / "fleet.csv"
    path.write_text(CSV)

    [(rows, events)] = list(production_file_batches(path, deployment="venlo-dc"))

    assert rows == [2, 4, 5]
    assert events[0] == {
        "event_id": "c-1",
        "occurred_at": "2026-11-30T08:00:00+01:00",
        "kind": "cycle",
        "outcome": "success",
        "duration_s": 1234.5,
        "conditions": {"lighting": "dim", "clutter": "dense"},
        "deployment": "venlo-dc",
    }
    assert events[1] == {
        "event_id": "c-2",
        "occurred_at": "2026-11-30T08:01:00+01:00",
        "kind": "cycle",
        "outcome": "failure",
        "conditions": {"lighting": "bright"},
        "deployment": "venlo-dc",
    }
    assert events[2]["failure_mode"] == "grasp-slip" and events[2]["kind"] == "intervention"


def test_batches_hold_at_most_the_limit_and_keep_every_row(tmp_path):
    path = tmp_path / "many.csv"
    lines = ["event_id,occurred_at,deployment,outcome"]
    lines += [f"e{i},2026-11-30T08:00:00Z,venlo-dc,success" for i in range(25)]
    path.write_text("\n".join(lines) + "\n")

    batches = list(production_file_batches(path, batch=10))

    assert [len(events) for _, events in batches] == [10, 10, 5]
    assert [r for rows, _ in batches for r in rows] == list(range(2, 27))


def test_parquet_and_json_lines_read_the_same_events(tmp_path):
    table = pa.table(
        {
            "event_id": ["c-1"],
            "occurred_at": ["2026-11-30T08:00:00Z"],
            "outcome": ["success"],
            "lighting": ["dim"],
            "duration_s": [12.0],
        }
    )
    pq.write_table(table, tmp_path / "fleet.parquet")
    event = {
        "event_id": "c-1",
        "occurred_at": "2026-11-30T08:00:00Z",
        "kind": "cycle",
        "outcome": "success",
        "conditions": {"lighting": "dim"},
        "duration_s": 12.0,
    }
    (tmp_path / "fleet.jsonl").write_text("\n" + json.dumps(event) + "\n")

    [(p_rows, p_events)] = list(
        production_file_batches(tmp_path / "fleet.parquet", deployment="venlo-dc")
    )
    [(j_rows, j_events)] = list(
        production_file_batches(tmp_path / "fleet.jsonl", deployment="venlo-dc")
    )

    assert p_rows == [1] and j_rows == [2]
    assert p_events == j_events == [{**event, "deployment": "venlo-dc"}]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("a.csv", "event_id,deployment\ne1,x\n", "a.csv row 1: the header has no occurred_at"),
        (
            "b.csv",
            "event_id,occurred_at,duration_s\ne1,2026-11-30T08:00:00Z,slow\n",
            "b.csv row 2, column 'duration_s': expected a number of seconds, got 'slow'",
        ),
        (
            "c.csv",
            "event_id,occurred_at,deployment\ne1,2026-11-30T08:00:00Z,other\n",
            "c.csv row 2, column 'deployment': deployment 'other', but the import is for 'venlo-dc'",
        ),
        ("d.jsonl", '{"event_id": "e1"}\n{broken\n', "d.jsonl line 2: invalid JSON"),
        ("e.csv", "event_id,occurred_at,Lighting,lighting\n", "two columns are both named"),
        ("f.csv", "", "the file is empty"),
    ],
)
def test_an_unreadable_file_names_file_row_and_column(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)

    with pytest.raises(ImportFailed) as failed:
        list(production_file_batches(path, deployment="venlo-dc"))

    assert message in str(failed.value)


# --- through the import service and the command (real PostgreSQL) -----------------------


def _fleet_csv(path, world, rows):
    header = "event_id,occurred_at,kind,outcome,lighting,failure_mode,intervened_by\n"
    path.write_text(header + "".join(rows))
    return path


def test_the_command_imports_a_csv_and_a_second_run_counts_nothing_twice(world_a, tmp_path):
    from django.core.management import call_command
    from django.db.models import Sum

    from sites.models import FailureRecord, ProductionLog

    path = _fleet_csv(
        tmp_path / "fleet.csv",
        world_a,
        [
            "c-1,2026-11-30T08:00:00Z,cycle,success,dim,,\n",
            "c-2,2026-11-30T08:01:00Z,cycle,failure,dim,,\n",
            "c-3,2026-11-30T09:00:00Z,cycle,success,bright,,\n",
            "i-1,2026-11-30T08:01:30Z,intervention,,dim,grasp,person\n",
        ],
    )
    out, again = StringIO(), StringIO()
    logs = ProductionLog.objects.filter(deployment=world_a.deployment)
    before = logs.aggregate(n=Sum("cycles"))["n"] or 0

    call_command(
        "import_production", str(path), "--deployment", world_a.deployment.slug, stdout=out
    )
    call_command(
        "import_production", str(path), "--deployment", world_a.deployment.slug, stdout=again
    )

    assert "3 cycles, 1 intervention" in out.getvalue()
    assert "0 cycles, 0 interventions, 4 already received" in again.getvalue()
    assert (logs.aggregate(n=Sum("cycles"))["n"] or 0) - before == 3
    assert (
        FailureRecord.objects.filter(deployment=world_a.deployment, external_id="i-1").count() == 1
    )


def test_an_unknown_value_fails_the_import_naming_row_and_column_and_stores_nothing(
    world_a, tmp_path
):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from sites.models import ProductionEvent

    path = _fleet_csv(
        tmp_path / "fleet.csv",
        world_a,
        [
            "c-1,2026-11-30T08:00:00Z,cycle,success,dim,,\n",
            "c-2,2026-11-30T08:01:00Z,cycle,success,foggy,,\n",
        ],
    )

    with pytest.raises(CommandError) as failed:
        call_command("import_production", str(path), "--deployment", world_a.deployment.slug)

    assert "fleet.csv row 3" in str(failed.value) and "foggy" in str(failed.value)
    assert not ProductionEvent.objects.filter(deployment=world_a.deployment).exists()


def test_a_refused_later_batch_keeps_the_earlier_ones_and_a_fixed_file_completes(world_a, tmp_path):
    from analytics.services.production_files import production_import_file
    from sites.models import ProductionEvent

    rows = [f"c-{i},2026-11-30T08:00:00Z,cycle,success,dim,,\n" for i in range(12)]
    rows[11] = "c-11,2026-11-30T08:00:00Z,cycle,success,foggy,,\n"
    path = _fleet_csv(tmp_path / "fleet.csv", world_a, rows)

    with pytest.raises(ImportFailed) as failed:
        production_import_file(
            organization=world_a.operator,
            path=path,
            actor=None,
            deployment=world_a.deployment.slug,
            batch=10,
        )
    stored = ProductionEvent.objects.filter(deployment=world_a.deployment).count()
    rows[11] = "c-11,2026-11-30T08:00:00Z,cycle,success,dim,,\n"
    _fleet_csv(path, world_a, rows)
    result = production_import_file(
        organization=world_a.operator,
        path=path,
        actor=None,
        deployment=world_a.deployment.slug,
        batch=10,
    )

    assert "the 10 events before row 12 are stored" in str(failed.value)
    assert stored == 10
    assert (result.cycles, result.duplicates) == (2, 10)
