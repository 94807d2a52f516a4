"""Records refused one by one: a real NUL character in a value, or a task of another team.

A refusal names its reason (and the field), holds up nothing else in the batch, and leaves
nothing in the database. Text that merely spells a NUL ("%00", "\\u0000") is stored as text.
"""

from __future__ import annotations

import json
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import F

from campaigns.field.services import task_seen_token
from campaigns.models import CollectionTask, FieldRecord, FieldTeam
from labeling.models import Episode
from tests.campaigns.field_support import field_setup, record

RECORDS = "/api/field/records/"
TASKS = "/api/field/tasks/"
PHOTOS = "/api/field/photos/"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a5dd5bb40000000049454e44ae426082"
)


def post(client, body):
    return client.post(RECORDS, data=json.dumps(body), content_type="application/json")


@pytest.fixture
def setup(world_a):
    return field_setup(world_a)


@pytest.fixture
def rhine(setup):
    """Another team of the same organization, with a task of its own."""
    team = FieldTeam.objects.create(
        organization=setup.world.operator,
        slug="rhine",
        name="Team Rhine",
        home_base="x",
        home_latitude=0,
        home_longitude=0,
    )
    task = CollectionTask.objects.create(
        round=setup.task.round,
        site=setup.task.site,
        embodiment=setup.task.embodiment,
        team=team,
        scheduled_date=setup.task.scheduled_date,
        status="published",
    )
    return task


def test_text_that_spells_a_nul_is_stored_as_text(setup, client_for):
    text = "see valve %00, then the \\u0000 marker"
    body = record(setup.task, "note", text=text)

    response = post(client_for(setup.world.field), [body])

    assert response.status_code == 200
    assert response.json()["results"][0]["status"] == 201
    assert FieldRecord.objects.get(uuid=body["uuid"]).payload["text"] == text


def test_a_record_with_a_real_nul_is_refused_alone_and_the_rest_of_the_batch_is_stored(
    setup, client_for
):
    good_note = record(setup.task, "note", text="Dock door 3 open")
    bad_note = record(setup.task, "note", text="valve\x00 seven")
    capture = record(setup.task, target=setup.bright.pk, outcome="success")

    response = post(client_for(setup.world.field), [good_note, bad_note, capture])

    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 400, 201]
    refused = results[1]
    assert refused["uuid"] == bad_note["uuid"]
    assert refused["field"] == "payload.text"
    assert refused["detail"].startswith("payload.text contains a NUL character (U+0000)")
    assert "\x00" not in refused["detail"]
    stored = set(FieldRecord.objects.values_list("uuid", flat=True))
    assert {str(u) for u in stored} == {good_note["uuid"], capture["uuid"]}
    assert Episode.objects.filter(key=capture["uuid"]).exists()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"text": "ok", "extra": {"deep": ["fine", "b\x00d"]}}, "payload.extra.deep[1]"),
        ({"text": "ok", "odd\x00key": 1}, 'payload["odd\\u0000key"] (a key)'),
    ],
    ids=["nested value", "key"],
)
def test_a_nul_anywhere_in_the_payload_is_refused_naming_where(setup, client_for, payload, field):
    body = {**record(setup.task, "note"), "payload": payload}

    response = post(client_for(setup.world.field), body)

    assert response.status_code == 400
    assert response.json()["field"] == field
    assert not FieldRecord.objects.exists()


def test_a_nul_in_the_kind_is_refused_for_that_record(setup, client_for):
    body = {**record(setup.task, "note", text="x"), "kind": "no\x00te"}

    response = post(client_for(setup.world.field), [body])

    result = response.json()["results"][0]
    assert result["status"] == 400
    assert result["detail"].startswith("kind:")


def test_a_nul_in_a_photo_caption_is_refused_for_that_photo(setup, client_for, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    fields = {
        "uuid": str(uuid.uuid4()),
        "task": setup.task.pk,
        "task_version_seen": 1,
        "client_created_at": "2026-11-29T10:00:00Z",
        "caption": "rig\x00",
        "file": SimpleUploadedFile("a.png", PNG, "image/png"),
    }

    response = client_for(setup.world.field).post(PHOTOS, fields)

    assert response.status_code == 400
    assert response.json()["field"] == "payload.caption"
    assert not FieldRecord.objects.exists()


def test_a_field_member_cannot_record_into_another_teams_task(setup, rhine, client_for):
    ours = record(setup.task, "note", text="ours")
    theirs = record(rhine, target=None, outcome="success")

    response = post(client_for(setup.world.field), [ours, theirs])

    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 403]
    assert "is with team Team Rhine, not with a team you belong to" in results[1]["detail"]
    assert "This record was not stored" in results[1]["detail"]
    assert not FieldRecord.objects.filter(task=rhine).exists()
    assert not Episode.objects.filter(key=theirs["uuid"]).exists()


def test_a_single_record_into_another_teams_task_is_answered_403_with_its_outcome(
    setup, rhine, client_for
):
    body = record(rhine, "start")

    response = post(client_for(setup.world.field), body)

    assert response.status_code == 403
    assert response.json()["uuid"] == body["uuid"]
    assert response.json()["status"] == 403
    rhine.refresh_from_db()
    assert rhine.status == "published"


@pytest.mark.parametrize("seen", ["", "forged", "own-task"])
def test_an_old_version_or_a_token_for_something_else_does_not_open_another_teams_task(
    setup, rhine, client_for, seen
):
    tokens = {
        "": "",
        "forged": f"{rhine.pk}:{setup.task.team_id}:not-a-signature",
        "own-task": task_seen_token(task_id=setup.task.pk, team_id=setup.task.team_id),
    }
    body = {**record(rhine, "note", text="x", version=0), "task_seen": tokens[seen]}

    response = post(client_for(setup.world.field), body)

    assert response.status_code == 403
    assert not FieldRecord.objects.exists()


def test_the_sync_token_keeps_a_record_made_before_the_task_went_to_another_team(
    setup, rhine, client_for
):
    client = client_for(setup.world.field)
    synced = client.get(TASKS).json()["tasks"][0]
    CollectionTask.objects.filter(pk=setup.task.pk).update(
        team=rhine.team, version=F("version") + 1
    )
    body = {
        **record(setup.task, target=setup.dim.pk, outcome="success", version=synced["version"]),
        "task_seen": synced["seen"],
    }

    response = post(client, body)

    assert response.status_code == 201
    assert response.json()["record"]["stale_reason"] == "reassigned"
    assert Episode.objects.filter(key=body["uuid"]).exists()


def test_a_manager_may_record_into_any_task_of_the_organization(setup, rhine, client_for):
    body = {**record(rhine, "note", text="checked the rig"), "task_seen": ""}

    response = post(client_for(setup.world.manager), body)

    assert response.status_code == 201
    assert response.json()["record"]["stale_reason"] == ""


def test_another_organizations_task_is_still_a_404_not_a_403(setup, world_b, client_for):
    response = post(
        client_for(setup.world.field), record(world_b.collection_task, "note", text="x")
    )

    assert response.status_code == 404
