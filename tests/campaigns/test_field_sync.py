"""Field records through the API: stored once, replays answered, conflicts refused, staleness kept."""

from __future__ import annotations

import json
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import F

from accounts.models import AuditEvent
from campaigns.field.services import RecordConflict, field_record_submit
from campaigns.models import CollectionTask, FieldRecord, FieldTeam
from labeling.models import Episode
from tests.campaigns.field_support import field_setup, record
from tests.concurrency import at_once

RECORDS = "/api/field/records/"
TASKS = "/api/field/tasks/"
PHOTOS = "/api/field/photos/"

# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a5dd5bb40000000049454e44ae426082"
)


def post(client, body):
    return client.post(RECORDS, data=json.dumps(body), content_type="application/json")


@pytest.fixture
def setup(world_a):
    return field_setup(world_a)


def test_a_capture_creates_one_unvalidated_episode_in_the_rounds_dataset(setup, client_for):
    client = client_for(setup.world.field)
    body = record(
        setup.task, target=setup.dim.pk, outcome="failure", failure_mode=setup.world.failure_mode.pk
    )

    response = post(client, body)

    assert response.status_code == 201
    episode = Episode.objects.get(key=body["uuid"])
    assert episode.dataset_id == setup.world.round.dataset_id
    assert episode.provenance == Episode.Provenance.CAPTURED
    assert episode.validated is False
    assert episode.outcome == "failure"
    assert episode.failure_mode_id == setup.world.failure_mode.pk
    assert episode.condition_set_id == setup.dim.condition_set_id
    assert episode.site_id == setup.task.site_id
    assert episode.embodiment_id == setup.task.embodiment_id
    assert episode.task_id == setup.world.campaign.task_id
    result = response.json()["record"]["result"]
    assert result["episode"] == episode.pk
    assert result["captured"] == {"success": 0, "failure": 1}


def test_a_replay_gets_the_original_answer_and_changes_nothing(setup, client_for):
    client = client_for(setup.world.field)
    body = record(setup.task, target=setup.bright.pk, outcome="success")
    first = post(client, body)
    post(client, record(setup.task, target=setup.bright.pk, outcome="success"))

    replay = post(client, body)

    assert first.status_code == 201
    assert replay.status_code == 200
    assert replay.json()["record"]["result"] == first.json()["record"]["result"]
    assert replay.json()["created"] is False
    assert Episode.objects.filter(key=body["uuid"]).count() == 1
    assert FieldRecord.objects.count() == 2


def test_the_same_uuid_with_other_content_is_refused_with_409(setup, client_for):
    client = client_for(setup.world.field)
    body = record(setup.task, target=setup.bright.pk, outcome="success")
    post(client, body)
    changed = {**body, "payload": {**body["payload"], "outcome": "failure"}}

    response = post(client, changed)

    assert response.status_code == 409
    data = response.json()
    assert data["conflict"]["stored_sha256"] != data["conflict"]["submitted_sha256"]
    assert data["conflict"]["stored"]["payload"]["outcome"] == "success"
    assert Episode.objects.get(key=body["uuid"]).outcome == "success"


def test_a_batch_answers_each_record_with_its_own_status(setup, world_b, client_for):
    client = client_for(setup.world.field)
    stored = record(setup.task, "note", text="Forklift traffic at 10:00")
    post(client, stored)
    batch = [
        record(setup.task, target=setup.bright.pk, outcome="success"),
        stored,
        {**stored, "payload": {"text": "something else"}},
        record(setup.task, "blocked", reason="volcano"),
        record(world_b.collection_task, "note", text="not ours"),
        {"kind": "note"},
    ]

    response = post(client, batch)

    assert response.status_code == 200
    statuses = [r["status"] for r in response.json()["results"]]
    assert statuses == [201, 200, 409, 400, 404, 400]
    assert not FieldRecord.objects.filter(task=world_b.collection_task).exists()


def test_uuids_are_scoped_to_the_organization(setup, world_b, client_for):
    body = record(setup.task, "note", text="a")
    other = {**record(world_b.collection_task, "note", text="b"), "uuid": body["uuid"]}

    mine = post(client_for(setup.world.field), body)
    theirs = post(client_for(world_b.field), other)

    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert FieldRecord.objects.filter(uuid=body["uuid"]).count() == 2


def test_a_record_for_a_cancelled_task_is_kept_stale_and_never_reopens_it(setup, client_for):
    client = client_for(setup.world.field)
    seen = setup.task.version
    CollectionTask.objects.filter(pk=setup.task.pk).update(
        status=CollectionTask.Status.CANCELLED, version=F("version") + 1
    )

    capture = post(client, record(setup.task, version=seen, target=setup.dim.pk, outcome="success"))
    start = post(client, record(setup.task, "start", version=seen))

    assert capture.status_code == 201
    assert capture.json()["record"]["stale_reason"] == "cancelled"
    assert Episode.objects.filter(key=capture.json()["uuid"]).exists()
    assert start.json()["record"]["result"]["applied"] is False
    setup.task.refresh_from_db()
    assert setup.task.status == CollectionTask.Status.CANCELLED


def test_a_record_for_a_task_given_to_another_team_is_kept_stale(setup, client_for):
    other = FieldTeam.objects.create(
        organization=setup.world.operator,
        slug="other",
        name="Other",
        home_base="x",
        home_latitude=0,
        home_longitude=0,
    )
    seen = setup.task.version
    CollectionTask.objects.filter(pk=setup.task.pk).update(team=other, version=F("version") + 1)

    response = post(client_for(setup.world.field), record(setup.task, "finish", version=seen))

    assert response.status_code == 201
    assert response.json()["record"]["stale_reason"] == "reassigned"
    assert response.json()["record"]["result"]["applied"] is False
    setup.task.refresh_from_db()
    assert setup.task.status == CollectionTask.Status.PUBLISHED


def test_a_record_made_before_the_managers_change_is_flagged_but_counts(setup, client_for):
    seen = setup.task.version
    CollectionTask.objects.filter(pk=setup.task.pk).update(version=F("version") + 1)

    response = post(
        client_for(setup.world.field),
        record(setup.task, version=seen, target=setup.bright.pk, outcome="success"),
    )

    assert response.json()["record"]["stale_reason"] == "changed"
    sync = client_for(setup.world.field).get(TASKS).json()
    task = next(t for t in sync["tasks"] if t["id"] == setup.task.pk)
    assert task["stale_records"] == 1
    assert (
        next(t for t in task["targets"] if t["id"] == setup.bright.pk)["captured"]["success"] == 1
    )


def test_start_blocked_unblocked_finish_move_the_task_and_are_audited(setup, client_for):
    client = client_for(setup.world.field)

    statuses = []
    for kind, payload in [
        ("start", {}),
        ("blocked", {"reason": "robot_fault", "detail": "gripper jammed"}),
        ("unblocked", {}),
        ("finish", {}),
    ]:
        post(client, record(setup.task, kind, **payload))
        setup.task.refresh_from_db()
        statuses.append((setup.task.status, setup.task.blocked_reason))

    assert statuses == [
        ("in_progress", ""),
        ("blocked", "Robot fault: gripper jammed"),
        ("in_progress", ""),
        ("done", ""),
    ]
    assert AuditEvent.objects.filter(verb__startswith="task.field_").count() == 4
    assert setup.task.version == 1  # field moves are not manager changes


def test_the_sync_payload_has_the_teams_tasks_with_steps_targets_and_counts(setup, client_for):
    client = client_for(setup.world.field)
    post(client, record(setup.task, target=setup.dim.pk, outcome="success"))
    post(client, record(setup.task, target=setup.dim.pk, outcome="failure"))
    post(client, record(setup.task, "step_done", step=setup.steps[0].pk))
    post(client, record(setup.task, "note", text="Lights took 10 minutes to dim"))
    post(client, record(setup.task, target=None, outcome="unknown", calibration=True))

    data = client.get(TASKS).json()

    assert [t["id"] for t in data["tasks"]] == [setup.task.pk]
    task = data["tasks"][0]
    assert task["site"]["name"] == "Warehouse QZALPHA"
    assert task["version"] == setup.task.version
    dim = next(t for t in task["targets"] if t["id"] == setup.dim.pk)
    assert dim["captured"] == {"success": 1, "failure": 1, "unknown": 0}
    assert dim["episodes_planned"] == 3
    assert dim["setup"][0]["instruction"] == "Switch off the aisle lights."
    assert [s["done"] for s in task["steps"]] == [True, False, False, False, False]
    assert task["calibration"][0]["status"] == "awaiting"
    assert task["notes"][0]["text"] == "Lights took 10 minutes to dim"
    assert data["failure_modes"][0]["code"] == "grasp"
    assert {b["code"] for b in data["block_reasons"]} >= {"site_closed", "robot_fault"}


def test_a_calibration_step_shows_the_capture_validation_verdict(setup, client_for):
    client = client_for(setup.world.field)
    body = record(setup.task, target=None, outcome="unknown", calibration=True)
    post(client, body)
    Episode.objects.filter(key=body["uuid"]).update(
        extra={"capture": {"passed": False, "failed_checks": ["calibration_coverage"]}}
    )

    task = client.get(TASKS).json()["tasks"][0]

    assert task["calibration"][0]["status"] == "failed"
    assert "calibration_coverage" in task["calibration"][0]["detail"]


def test_field_members_see_only_their_teams_tasks(setup, client_for):
    other = FieldTeam.objects.create(
        organization=setup.world.operator,
        slug="o",
        name="O",
        home_base="x",
        home_latitude=0,
        home_longitude=0,
    )
    CollectionTask.objects.create(
        round=setup.world.round,
        site=setup.task.site,
        embodiment=setup.task.embodiment,
        team=other,
        scheduled_date=setup.task.scheduled_date,
        status="published",
    )

    data = client_for(setup.world.field).get(TASKS).json()

    assert [t["id"] for t in data["tasks"]] == [setup.task.pk]


def test_the_sync_payload_query_count_does_not_grow_with_tasks(
    setup, client_for, django_assert_max_num_queries
):
    client = client_for(setup.world.field)
    client.get(TASKS)
    for _ in range(5):
        task = CollectionTask.objects.create(
            round=setup.world.round,
            site=setup.task.site,
            embodiment=setup.task.embodiment,
            team=setup.task.team,
            scheduled_date=setup.task.scheduled_date,
            status="published",
        )
        post(client, record(task, target=None, outcome="success"))

    with django_assert_max_num_queries(16):
        response = client.get(TASKS)

    assert len(response.json()["tasks"]) == 6


@pytest.mark.parametrize("role", ["viewer", "annotator"])
def test_viewers_and_annotators_cannot_submit_records(setup, client_for, role):
    response = post(client_for(getattr(setup.world, role)), record(setup.task, "note", text="x"))

    assert response.status_code == 403
    assert not FieldRecord.objects.exists()


def test_a_photo_upload_is_idempotent_and_served_only_inside_the_organization(
    setup, world_b, client_for, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path
    client = client_for(setup.world.field)
    fields = {
        "uuid": str(uuid.uuid4()),
        "task": setup.task.pk,
        "task_version_seen": 1,
        "client_created_at": "2026-11-29T10:00:00Z",
        "caption": "rig",
    }

    first = client.post(PHOTOS, {**fields, "file": SimpleUploadedFile("a.png", PNG, "image/png")})
    again = client.post(PHOTOS, {**fields, "file": SimpleUploadedFile("a.png", PNG, "image/png")})
    other = client.post(
        PHOTOS, {**fields, "file": SimpleUploadedFile("b.png", PNG + b"x", "image/png")}
    )

    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 409)
    url = first.json()["record"]["photo_url"]
    own = client_for(setup.world.manager).get(url)
    assert own.status_code == 200
    assert b"".join(own.streaming_content) == PNG
    assert client_for(world_b.manager).get(url).status_code == 404
    assert client_for(None).get(url).status_code == 302


@pytest.mark.django_db(transaction=True)
def test_simultaneous_arrivals_of_one_uuid_store_one_record_and_one_episode():
    from tests.factories import build_world

    setup = field_setup(build_world("qzrace"))
    body = record(setup.task, target=setup.bright.pk, outcome="success")

    def send():
        try:
            rec, created = field_record_submit(
                user=setup.world.field,
                uuid=body["uuid"],
                kind="capture",
                task_id=setup.task.pk,
                payload=body["payload"],
                client_created_at=body["client_created_at"],
                task_version_seen=1,
            )
            return created, rec.result["episode"]
        except RecordConflict:
            return "conflict", None

    outcomes = at_once(send, 6)

    assert sorted(c for c, _ in outcomes) == [False] * 5 + [True]
    assert len({e for _, e in outcomes}) == 1
    assert Episode.objects.filter(key=body["uuid"]).count() == 1


def test_the_record_list_shows_a_field_member_their_teams_records_only(setup, world_b, client_for):
    post(client_for(setup.world.field), record(setup.task, "note", text="ours"))
    post(client_for(world_b.field), record(world_b.collection_task, "note", text="theirs"))

    mine = client_for(setup.world.field).get(RECORDS).json()["results"]
    managers = client_for(setup.world.manager).get(RECORDS, {"kind": "note"}).json()["results"]

    assert [r["payload"]["text"] for r in mine] == ["ours"]
    assert [r["payload"]["text"] for r in managers] == ["ours"]
