"""Production events through POST /api/production/events/: counted once, at the right grain,
and a bad batch is refused whole, naming line and field."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test import Client
from hypothesis import example, given
from hypothesis import strategies as st

from labeling.models import Episode
from sites.models import (
    ConditionValue,
    FailureRecord,
    ProductionEvent,
    ProductionLog,
)
from tests.concurrency import at_once
from tests.factories import build_world

URL = "/api/production/events/"
NOW = datetime.now(UTC).replace(microsecond=0)


def cycle(world: Any, n: int, **extra: Any) -> dict[str, Any]:
    event = {
        "event_id": f"c{n}",
        "deployment": world.deployment.slug,
        "kind": "cycle",
        "occurred_at": (NOW - timedelta(hours=30) + timedelta(minutes=n)).isoformat(),
        "outcome": "failure" if n % 5 == 0 else "success",
        "conditions": {"lighting": "dim" if n % 2 else "bright"},
        "duration_s": 10.0 + n % 3,
    }
    event.update(extra)
    return event


def intervention(world: Any, n: int, **extra: Any) -> dict[str, Any]:
    event = {
        "event_id": f"i{n}",
        "deployment": world.deployment.slug,
        "kind": "intervention",
        "occurred_at": (NOW - timedelta(hours=2, minutes=n)).isoformat(),
        "failure_mode": "grasp",
        "conditions": {"lighting": "dim"},
        "intervened_by": "harness",
        "note": "dropped the tote",
        "recording": "s3://fleet/rec-1.mcap",
        "policy": world.policy.slug,
    }
    event.update(extra)
    return event


def post(client: Client, events: list[Any], query: str = "") -> Any:
    body = "\n".join(e if isinstance(e, str) else json.dumps(e) for e in events) + "\n"
    return client.post(URL + query, data=body, content_type="application/x-ndjson")


def log_rows(deployment: Any) -> set[tuple[Any, ...]]:
    return set(
        ProductionLog.objects.filter(deployment=deployment).values_list(
            "condition_set_id",
            "day",
            "policy",
            "cycles",
            "failures",
            "duration_seconds",
            "timed_cycles",
        )
    )


def ledger_group_by(deployment: Any) -> set[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT condition_set_id, day, policy, count(*), count(*) FILTER (WHERE failed), "
            "coalesce(sum(duration_seconds), 0), count(duration_seconds) "
            "FROM sites_productionevent WHERE deployment_id = %s AND kind = 'cycle' "
            "AND NOT retracted GROUP BY 1, 2, 3",
            [deployment.pk],
        )
        return set(cursor.fetchall())


def nothing_stored(world: Any) -> bool:
    return (
        not ProductionEvent.objects.filter(deployment=world.deployment).exists()
        and not ProductionLog.objects.filter(deployment=world.deployment).exists()
        and FailureRecord.objects.filter(deployment=world.deployment).count() == 1
    )


@pytest.fixture
def manager(world_a, client_for):
    return client_for(world_a.manager)


def test_cycles_are_counted_per_day_condition_set_and_policy(world_a, manager):
    events = [cycle(world_a, n, policy=world_a.policy.slug) for n in range(10)]

    response = post(manager, events)

    assert response.status_code == 201, response.content
    assert response.json() == {
        "cycles": 10,
        "interventions": 0,
        "duplicates": 0,
        "retracted": 0,
        "corrected": 0,
        "created_values": [],
    }
    logs = ProductionLog.objects.filter(deployment=world_a.deployment)
    assert sum(log.cycles for log in logs) == 10
    assert sum(log.failures for log in logs) == 2
    assert {log.policy for log in logs} == {world_a.policy.slug}
    assert log_rows(world_a.deployment) == ledger_group_by(world_a.deployment)


def test_replaying_a_batch_answers_duplicates_and_changes_nothing(world_a, manager):
    events = [cycle(world_a, n) for n in range(6)] + [intervention(world_a, 1)]
    first = post(manager, events)
    before = log_rows(world_a.deployment)

    again = post(manager, list(reversed(events)))

    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json()["duplicates"] == 7
    assert again.json()["cycles"] == again.json()["interventions"] == 0
    assert log_rows(world_a.deployment) == before
    assert (
        FailureRecord.objects.filter(deployment=world_a.deployment, external_id="i1").count() == 1
    )


def test_same_id_with_another_body_is_409_and_nothing_of_the_batch_is_stored(world_a, manager):
    post(manager, [cycle(world_a, 1)])
    before = log_rows(world_a.deployment)

    response = post(manager, [cycle(world_a, 2), cycle(world_a, 1, outcome="failure")])

    assert response.status_code == 409
    assert response.json()["event_ids"] == ["c1"]
    assert log_rows(world_a.deployment) == before
    assert not ProductionEvent.objects.filter(event_id="c2").exists()


def test_one_id_twice_in_a_batch_with_different_bodies_names_the_line(world_a, manager):
    response = post(manager, [cycle(world_a, 1), cycle(world_a, 1, outcome="failure")])

    assert response.status_code == 400
    assert response.json()["errors"][0]["line"] == 2
    assert response.json()["errors"][0]["field"] == "event_id"
    assert nothing_stored(world_a)


def test_interventions_become_failure_records_linked_from_the_ledger(world_a, manager):
    response = post(manager, [intervention(world_a, 1), intervention(world_a, 2)])

    assert response.status_code == 201
    assert response.json()["interventions"] == 2
    record = FailureRecord.objects.get(deployment=world_a.deployment, external_id="i1")
    assert record.intervened_by == "harness"
    assert record.intervention is True
    assert record.failure_mode == world_a.failure_mode
    assert record.recording_ref == "s3://fleet/rec-1.mcap"
    assert record.notes == "dropped the tote"
    assert record.policy == world_a.policy.slug
    assert record.created_by == world_a.manager
    assert ProductionEvent.objects.get(event_id="i1").failure_record == record
    # A recording at a URI: the intervention is listed in the production dataset at once.
    episode = Episode.objects.get(failure_record=record)
    assert episode.storage_uri == "s3://fleet/rec-1.mcap"
    assert episode.dataset.deployment_id == world_a.deployment.pk


def test_day_counts_equal_the_ledger_after_retractions_and_corrections(world_a, manager):
    post(manager, [cycle(world_a, n) for n in range(20)] + [intervention(world_a, 1)])
    post(manager, [cycle(world_a, n) for n in range(15, 30)])

    response = post(
        manager,
        [
            {"event_id": "c3", "deployment": world_a.deployment.slug, "op": "retract"},
            {"event_id": "i1", "deployment": world_a.deployment.slug, "op": "retract"},
            cycle(world_a, 4, op="correct", outcome="failure", duration_s=99.0),
            cycle(world_a, 6, op="correct", conditions={"lighting": "dim"}, policy="pol-qzalpha"),
            cycle(world_a, 40, op="correct"),
        ],
    )
    retract_again = post(
        manager, [{"event_id": "c3", "deployment": world_a.deployment.slug, "op": "retract"}]
    )

    assert response.status_code == 201, response.content
    assert response.json() | {"created_values": []} == {
        "cycles": 1,
        "interventions": 0,
        "duplicates": 0,
        "retracted": 2,
        "corrected": 2,
        "created_values": [],
    }
    assert retract_again.json()["duplicates"] == 1
    assert log_rows(world_a.deployment) == ledger_group_by(world_a.deployment)
    assert sum(log.cycles for log in ProductionLog.objects.all()) == 30
    assert not FailureRecord.objects.filter(external_id="i1").exists()


def test_late_and_out_of_order_events_are_accepted(world_a, manager):
    late_at = NOW - timedelta(days=400)
    late = cycle(world_a, 1, occurred_at=late_at.isoformat())
    events = [cycle(world_a, 3), late, cycle(world_a, 2)]

    response = post(manager, events)

    assert response.status_code == 201
    # A cycle counts on its site's local day, which near midnight is not the UTC one.
    local_day = late_at.astimezone(ZoneInfo(world_a.site.timezone)).date()
    assert ProductionLog.objects.filter(day=local_day).exists()


def test_an_event_counts_on_the_sites_local_day(world_a, manager):
    world_a.site.timezone = "Asia/Tokyo"
    world_a.site.save()

    post(manager, [cycle(world_a, 1, occurred_at="2026-03-01T23:30:00+00:00")])

    assert ProductionLog.objects.get(deployment=world_a.deployment).day.isoformat() == "2026-03-02"
    assert ProductionEvent.objects.get().day.isoformat() == "2026-03-02"


def test_a_json_array_and_an_events_object_are_accepted(world_a, manager):
    as_array = manager.post(URL, data=[cycle(world_a, 1)], content_type="application/json")
    as_object = manager.post(
        URL, data={"events": [cycle(world_a, 2)]}, content_type="application/json"
    )

    assert (as_array.status_code, as_object.status_code) == (201, 201)
    assert ProductionEvent.objects.count() == 2


def test_a_malformed_line_is_named_by_its_line_number(world_a, manager):
    response = post(
        manager, [cycle(world_a, 1), '{"event_id": "x", "deployment": ', cycle(world_a, 2)]
    )

    assert response.status_code == 400
    assert [e["line"] for e in response.json()["errors"]] == [2]
    assert "not valid JSON" in response.json()["errors"][0]["message"]
    assert nothing_stored(world_a)


def test_unknown_condition_values_are_listed_once_each_with_their_count(world_a, manager):
    events = [cycle(world_a, n, conditions={"lighting": "foggy"}) for n in range(37)]
    events += [cycle(world_a, 50, conditions={"lighting": "dim", "floor": "wet"})]

    response = post(manager, events)

    errors = response.json()["errors"]
    assert response.status_code == 400
    assert [(e["line"], e["field"]) for e in errors] == [
        (1, "conditions.lighting"),
        (38, "conditions.floor"),
    ]
    assert "unknown value 'foggy' (37 events" in errors[0]["message"]
    assert "known: bright, dim" in errors[0]["message"]
    assert nothing_stored(world_a)


def test_create_values_creates_the_unknown_value(world_a, manager):
    events = [cycle(world_a, n, conditions={"lighting": "foggy"}) for n in range(3)]

    response = post(manager, events, query="?create_values=true")

    assert response.status_code == 201, response.content
    assert response.json()["created_values"] == ["lighting: foggy"]
    value = ConditionValue.objects.get(dimension=world_a.dimension, slug="foggy")
    assert ProductionLog.objects.get().condition_set.value_ids == [value.pk]


def test_unknown_failure_mode_and_policy_are_errors(world_a, manager):
    events = [intervention(world_a, 1, failure_mode="tipped"), cycle(world_a, 2, policy="v9")]

    response = post(manager, events)

    fields = {(e["line"], e["field"]) for e in response.json()["errors"]}
    assert response.status_code == 400
    assert fields == {(1, "failure_mode"), (2, "policy")}
    assert nothing_stored(world_a)


def test_another_organizations_deployment_is_404_and_nothing_is_stored(world_a, world_b, manager):
    events = [cycle(world_a, 1), cycle(world_b, 2)]

    response = post(manager, events)

    assert response.status_code == 404
    assert response.json()["deployments"] == [world_b.deployment.slug]
    assert not ProductionEvent.objects.exists()


@pytest.mark.parametrize(
    ("event", "field", "words"),
    [
        ({"occurred_at": (NOW + timedelta(hours=1)).isoformat()}, "occurred_at", "future"),
        ({"occurred_at": "2026-02-30T10:00:00+00:00"}, "occurred_at", "ISO-8601"),
        ({"occurred_at": "2026-02-03T10:00:00"}, "occurred_at", "UTC offset"),
        ({"duration_s": -3}, "duration_s", "negative"),
        ({"outcome": "meh"}, "outcome", "success"),
        ({"kind": "nap"}, "kind", "cycle"),
        ({"conditions": {"lighting": "bright\u0000"}}, "conditions.lighting", "NUL"),
    ],
)
def test_a_bad_event_is_refused_naming_line_and_field(world_a, manager, event, field, words):
    events = [cycle(world_a, 1), cycle(world_a, 2, **event)]

    response = post(manager, events)

    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [(e["line"], e["field"]) for e in errors] == [(2, field)], errors
    assert words in errors[0]["message"]
    assert nothing_stored(world_a)


def test_a_nul_byte_in_a_json_body_names_the_event_and_field(world_a, manager):
    events = [cycle(world_a, 1), intervention(world_a, 2, note="a\u0000b")]

    response = manager.post(URL, data=events, content_type="application/json")

    assert response.status_code == 400
    assert [(e["line"], e["field"]) for e in response.json()["errors"]] == [(2, "note")]
    assert nothing_stored(world_a)


def test_a_retraction_of_an_unknown_id_is_an_error(world_a, manager):
    response = post(
        manager, [{"event_id": "zz", "deployment": world_a.deployment.slug, "op": "retract"}]
    )

    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "event_id"


def test_more_than_ten_thousand_events_is_413_with_the_limit(world_a, manager):
    line = json.dumps(cycle(world_a, 1))

    response = manager.post(URL, data=(line + "\n") * 10_001, content_type="application/x-ndjson")

    assert response.status_code == 413
    assert response.json()["limit"] == 10_000
    assert nothing_stored(world_a)


def test_only_managers_may_send_events(world_a, client_for):
    response = post(client_for(world_a.field), [cycle(world_a, 1)])

    assert response.status_code == 403
    assert nothing_stored(world_a)


@pytest.mark.django_db(transaction=True)
def test_concurrent_identical_batches_are_counted_once():
    world = build_world("qzrace")
    events = [cycle(world, n) for n in range(300)] + [intervention(world, n) for n in range(5)]

    def send() -> tuple[int, Any]:
        client = Client(raise_request_exception=False)
        client.force_login(world.manager)
        response = post(client, events)
        return response.status_code, response.json()

    answers = at_once(send)

    assert sorted(code for code, _ in answers) == [200, 201], answers
    assert sum(body["cycles"] for _, body in answers) == 300
    assert sum(body["duplicates"] for _, body in answers) == 305
    assert (
        sum(log.cycles for log in ProductionLog.objects.filter(deployment=world.deployment)) == 300
    )
    assert (
        FailureRecord.objects.filter(deployment=world.deployment).exclude(external_id="").count()
        == 5
    )
    assert log_rows(world.deployment) == ledger_group_by(world.deployment)


def test_a_replay_is_the_same_event_however_it_is_spelled(world_a, manager):
    first = cycle(world_a, 1)
    at = datetime.fromisoformat(first["occurred_at"]).astimezone(timezone(timedelta(hours=9)))
    respelled = {
        **dict(reversed(list(first.items()))),
        "occurred_at": at.isoformat(),  # the same instant at another offset
        "firmware": "4.2.1",  # a field Fieldcraft does not keep
    }
    post(manager, [first, intervention(world_a, 1)])

    again = post(manager, [respelled, intervention(world_a, 1, extra="ignored")])
    changed = post(manager, [cycle(world_a, 1, duration_s=99.0)])

    assert again.status_code == 200, again.content
    assert again.json()["duplicates"] == 2
    assert changed.status_code == 409
    assert changed.json()["event_ids"] == ["c1"]


def test_the_column_way_and_the_event_way_give_the_same_rows(world_a, monkeypatch):
    from analytics.services.production import checks
    from analytics.services.production.decode import decode_values
    from analytics.services.production.errors import IngestResult
    from analytics.services.production.references import references_resolve

    monkeypatch.setattr(checks, "CHUNK", 7)  # several chunks, one of them mixed
    events = [cycle(world_a, n) for n in range(40)] + [intervention(world_a, n) for n in range(3)]
    events[7]["policy"] = world_a.policy.slug
    events[9].pop("duration_s")
    events[12], events[41] = events[41], events[12]
    batch = decode_values(events)
    errors: list[Any] = []
    resolved = references_resolve(batch, world_a.operator, None, False, errors, IngestResult())

    chunks = list(checks.column_chunks(batch, resolved))
    by_events = checks.check_batch(batch, resolved, errors)

    assert errors == []
    assert len(chunks) == 7
    by_columns = [row for cycles, others in chunks for row in (*cycles, *others)]
    assert sorted(by_columns, key=repr) == sorted(by_events.rows, key=repr)
    assert len(by_columns) == 43
    assert {row[2] for cycles, _o in chunks for row in cycles} == {"cycle"}


def test_an_event_needing_a_closer_look_after_chunks_went_to_the_ledger_stores_nothing(
    world_a, manager, monkeypatch
):
    from analytics.services.production import checks

    monkeypatch.setattr(checks, "CHUNK", 10)
    events = [cycle(world_a, n) for n in range(25)]
    events[22].pop("outcome")  # in the third chunk, after two went to the ledger

    response = post(manager, events)

    assert response.status_code == 400, response.content
    assert response.json()["errors"] == [
        {"line": 23, "field": "outcome", "message": 'expected "success" or "failure"'}
    ]
    assert nothing_stored(world_a)


def test_an_id_stored_before_in_a_later_chunk_is_a_duplicate_and_the_rest_is_new(
    world_a, manager, monkeypatch
):
    from analytics.services.production import checks

    monkeypatch.setattr(checks, "CHUNK", 10)
    events = [cycle(world_a, n) for n in range(25)]
    assert post(manager, [events[21], intervention(world_a, 1)]).status_code == 201

    response = post(manager, [*events, intervention(world_a, 1), intervention(world_a, 2)])

    assert response.status_code == 201, response.content
    assert response.json()["cycles"] == 24
    assert response.json()["interventions"] == 1
    assert response.json()["duplicates"] == 2
    assert log_rows(world_a.deployment) == ledger_group_by(world_a.deployment)
    assert sum(row[3] for row in log_rows(world_a.deployment)) == 25


@given(
    seconds=st.lists(
        st.integers(-2_208_988_800, 4_102_444_799), min_size=1, max_size=50
    ),  # 1900 to 2099
    zones=st.lists(
        st.sampled_from(
            ["Europe/Amsterdam", "Asia/Kathmandu", "America/St_Johns", "Pacific/Chatham", "UTC"]
        ),
        min_size=1,
        max_size=3,
    ),
)
@example(seconds=[-1429564501], zones=["America/St_Johns"])  # -3:30:52 until 1935
def test_local_days_a_column_at_a_time_are_each_instants_own(seconds, zones):
    from zoneinfo import ZoneInfo

    from analytics.services.production.checks import _LocalDays

    deployments = {f"d{i}": (i + 1, ZoneInfo(zone)) for i, zone in enumerate(zones)}
    ids = [1 + i % len(zones) for i in range(len(seconds))]
    ats = [
        datetime.fromtimestamp(s, UTC).astimezone(timezone(timedelta(hours=(s % 7) - 3)))
        for s in seconds
    ]
    expected = [
        at.astimezone(deployments[f"d{d - 1}"][1]).date() for d, at in zip(ids, ats, strict=True)
    ]

    assert _LocalDays(deployments).days(ids, ats) == expected
    days = _LocalDays(deployments)
    assert [days.day(d, at) for d, at in zip(ids, ats, strict=True)] == expected


def test_a_quarter_hour_holding_a_local_midnight_gives_each_instant_its_own_day():
    """Amsterdam kept its mean time, +0:19:32 in winter, until 1937: its midnight of 15 January
    1930 was at 23:40:28 UTC, inside the UTC quarter hour 23:30-23:45, whose instants fall on
    two days."""
    from zoneinfo import ZoneInfo

    from analytics.services.production.checks import _LocalDays

    amsterdam = ZoneInfo("Europe/Amsterdam")
    before = datetime(1930, 1, 14, 23, 35, tzinfo=UTC)  # 23:54:32 local, 14 January
    after = datetime(1930, 1, 14, 23, 44, tzinfo=UTC)  # 00:03:32 local, 15 January
    later = datetime(1930, 1, 15, 12, 0, tzinfo=UTC)
    ats = [before, after, later, before]
    expected = [at.astimezone(amsterdam).date() for at in ats]
    assert [d.day for d in expected] == [14, 15, 15, 14]

    assert _LocalDays({"ams": (7, amsterdam)}).days([7] * 4, ats) == expected
    days = _LocalDays({"ams": (7, amsterdam)})
    assert [days.day(7, at) for at in ats] == expected


def test_the_garbage_collector_is_back_on_after_a_batch_stored_or_refused(world_a, manager):
    import gc

    stored = post(manager, [cycle(world_a, 1)])
    refused = post(manager, [cycle(world_a, 2, outcome="maybe")])

    assert stored.status_code == 201
    assert refused.status_code == 400
    assert gc.isenabled()


def test_a_batch_that_keeps_losing_races_is_a_503_and_stores_nothing(world_a, manager, monkeypatch):
    from analytics.services.production import writes

    post(manager, [cycle(world_a, 1)])
    before = log_rows(world_a.deployment)
    # No attempt left for the careful way: what a batch meets when other batches keep
    # storing its events while it is classified.
    monkeypatch.setattr(writes, "_ATTEMPTS", 0)

    response = post(manager, [cycle(world_a, 1), cycle(world_a, 2)])

    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "1"
    assert "send the batch again" in response.json()["detail"]
    assert log_rows(world_a.deployment) == before
    assert not ProductionEvent.objects.filter(event_id="c2").exists()
