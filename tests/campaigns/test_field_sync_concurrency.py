"""Field batches racing each other on real connections: never a deadlock, never a duplicate.

Tablets resend: a retry can race the original, and two tablets of a team (or one tablet's
outbox replayed in another order after a restore) can carry the same UUIDs in any order.
Every batch must be answered 200 with a stored/replayed status per record, and the database
must hold each UUID once.
"""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from campaigns.models import CollectionTask, FieldRecord
from labeling.models import Episode
from tests.campaigns.field_support import field_setup, record
from tests.factories import build_world

RECORDS = "/api/field/records/"
THREADS = 6


def mixed_records(setup: Any, n: int) -> list[dict[str, Any]]:
    """Captures on both targets, notes, steps done and status moves on two tasks."""
    second = CollectionTask.objects.create(
        round=setup.task.round,
        site=setup.task.site,
        embodiment=setup.task.embodiment,
        team=setup.task.team,
        scheduled_date=setup.task.scheduled_date,
        status="published",
    )
    out = []
    for i in range(n):
        task = setup.task if i % 3 else second
        match i % 6:
            case 0 | 1 | 2:
                out.append(record(task, target=None, outcome="success"))
            case 3:
                out.append(record(task, "note", text=f"note {i}"))
            case 4:
                out.append(record(task, "start"))
            case _:
                out.append(record(task, "blocked", reason="robot_fault"))
    out[1] = record(setup.task, target=setup.bright.pk, outcome="failure")
    out[2] = record(setup.task, "step_done", step=setup.steps[0].pk)
    return out


def race(user: Any, batches: list[list[dict[str, Any]]]) -> list[tuple[int, Any]]:
    """Send every batch from its own thread and connection at the same moment."""
    barrier = threading.Barrier(len(batches))
    answers: list[tuple[int, Any]] = []
    lock = threading.Lock()

    def send(batch: list[dict[str, Any]]) -> None:
        client = Client(raise_request_exception=False)
        client.force_login(user)
        barrier.wait()
        try:
            response = client.post(RECORDS, data=json.dumps(batch), content_type="application/json")
            body = response.json() if response.status_code == 200 else response.content
            with lock:
                answers.append((response.status_code, body))
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def assert_each_uuid_stored_once(answers: list[tuple[int, Any]], records: list[dict[str, Any]]):
    assert [code for code, _ in answers] == [200] * len(answers), answers
    created: dict[str, int] = {}
    for _, body in answers:
        for result in body["results"]:
            assert result["status"] in (200, 201), result
            created[result["uuid"]] = created.get(result["uuid"], 0) + result["created"]
    uuids = {r["uuid"] for r in records}
    assert created == dict.fromkeys(uuids, 1)
    assert FieldRecord.objects.filter(uuid__in=uuids).count() == len(uuids)
    captures = [r for r in records if r["kind"] == "capture"]
    assert Episode.objects.filter(key__in=[r["uuid"] for r in captures]).count() == len(captures)


@pytest.mark.django_db(transaction=True)
def test_parallel_batches_of_the_same_records_in_different_orders_never_deadlock():
    setup = field_setup(build_world("qzorder"))
    records = mixed_records(setup, 40)
    rng = random.Random(15)
    batches = [records, list(reversed(records))]
    while len(batches) < THREADS:
        shuffled = records[:]
        rng.shuffle(shuffled)
        batches.append(shuffled)

    answers = race(setup.world.field, batches)

    assert_each_uuid_stored_once(answers, records)


@pytest.mark.django_db(transaction=True)
def test_parallel_identical_batches_store_each_record_once():
    setup = field_setup(build_world("qzsame"))
    records = mixed_records(setup, 40)

    answers = race(setup.world.field, [records] * THREADS)

    assert_each_uuid_stored_once(answers, records)
