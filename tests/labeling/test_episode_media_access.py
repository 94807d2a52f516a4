"""Who may fetch an episode's stored media (/label/episodes/<id>/media/): managers any of
their organization's, annotators those they hold an assignment for, field members those their
own team's tasks captured; anyone else a 404 (a viewer, whose role has no media, a 403)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings

from accounts.models import Role
from campaigns.models import FieldTeam, TaskRecording
from labeling.models import Episode
from tests.campaigns.field_support import field_setup, record
from tests.factories import WORLD_PNG, member


def media_url(episode_id: int) -> str:
    return f"/label/episodes/{episode_id}/media/"


def with_media(episode: Episode, name: str) -> Episode:
    path = Path(settings.MEDIA_ROOT) / "clips" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(WORLD_PNG)
    Episode.objects.filter(pk=episode.pk).update(
        extra={**episode.extra, "media": [f"clips/{name}"]}
    )
    episode.refresh_from_db()
    return episode


@pytest.fixture
def captured(world_a, client_for) -> Episode:
    """An episode the field member's team captured through the tablet's sync API."""
    setup = field_setup(world_a)
    body = record(setup.task, target=setup.bright.pk, outcome="success")
    response = client_for(world_a.field).post(
        "/api/field/records/", data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 201
    return with_media(Episode.objects.get(key=body["uuid"]), "captured.png")


def test_manager_fetches_media_of_any_episode_of_the_organization(world_a, captured, client_for):
    manager = client_for(world_a.manager)

    assert manager.get(media_url(world_a.episode.pk)).status_code == 200
    assert manager.get(media_url(captured.pk)).status_code == 200


def test_manager_of_another_organization_gets_404(world_a, world_b, client_for):
    assert client_for(world_b.manager).get(media_url(world_a.episode.pk)).status_code == 404


def test_annotator_fetches_media_of_an_episode_they_hold_an_assignment_for(world_a, client_for):
    response = client_for(world_a.annotator).get(media_url(world_a.episode.pk))

    assert response.status_code == 200
    assert response["Content-Type"] == "image/png"


def test_annotator_without_an_assignment_for_the_episode_gets_404(world_a, captured, client_for):
    colleague = member(world_a.operator, Role.ANNOTATOR, "annotator-media-qzalpha")

    assert client_for(colleague).get(media_url(world_a.episode.pk)).status_code == 404
    assert client_for(world_a.annotator).get(media_url(captured.pk)).status_code == 404


def test_field_member_fetches_media_of_an_episode_their_team_captured(
    world_a, captured, client_for
):
    response = client_for(world_a.field).get(media_url(captured.pk))

    assert response.status_code == 200


def test_field_member_fetches_media_of_a_recording_uploaded_for_their_teams_task(
    world_a, client_for
):
    episode = with_media(world_a.episode, "recorded.png")
    world_a.recording.episode = episode
    world_a.recording.save(update_fields=["episode"])
    TaskRecording.objects.create(task=world_a.collection_task, recording=world_a.recording)

    assert client_for(world_a.field).get(media_url(episode.pk)).status_code == 200


def test_field_member_gets_404_for_an_episode_no_task_of_their_team_captured(
    world_a, captured, client_for
):
    other = member(world_a.operator, Role.FIELD, "field-other-team-qzalpha")
    team = FieldTeam.objects.create(
        organization=world_a.operator,
        slug="team-other-qzalpha",
        name="Other team",
        home_base="Base",
        home_latitude=51.0,
        home_longitude=4.0,
    )
    team.members.set([other])

    assert client_for(world_a.field).get(media_url(world_a.episode.pk)).status_code == 404
    assert client_for(other).get(media_url(captured.pk)).status_code == 404


def test_field_member_of_another_organization_gets_404(world_a, world_b, captured, client_for):
    assert client_for(world_b.field).get(media_url(captured.pk)).status_code == 404


def test_customer_viewer_is_refused(world_a, client_for):
    assert client_for(world_a.viewer).get(media_url(world_a.episode.pk)).status_code == 403
