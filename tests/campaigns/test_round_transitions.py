import pytest

from accounts.models import AuditEvent
from campaigns.models import CollectionRound
from campaigns.services import RoundTransitionRefused, round_transition

FORWARD = ["draft", "planned", "scheduled", "collecting", "labelling", "evaluated", "closed"]


def test_round_walks_the_whole_loop_forward(world_a):
    round = world_a.round

    for status in FORWARD[1:]:
        round_transition(round=round, to_status=status, actor=world_a.manager)

    round.refresh_from_db()
    assert round.status == "closed"
    assert AuditEvent.objects.filter(verb="round.status", object_id=str(round.pk)).count() == 6


@pytest.mark.parametrize(
    ("from_status", "to_status"),
    [
        ("draft", "scheduled"),
        ("draft", "collecting"),
        ("planned", "collecting"),
        ("collecting", "planned"),
        ("labelling", "collecting"),
        ("evaluated", "draft"),
        ("closed", "draft"),
        ("closed", "evaluated"),
        ("draft", "draft"),
    ],
)
def test_forbidden_moves_are_refused_and_change_nothing(world_a, from_status, to_status):
    CollectionRound.objects.filter(pk=world_a.round.pk).update(status=from_status)
    round = CollectionRound.objects.get(pk=world_a.round.pk)

    with pytest.raises(RoundTransitionRefused, match=f"cannot move to {to_status}"):
        round_transition(round=round, to_status=to_status)

    assert CollectionRound.objects.get(pk=round.pk).status == from_status


@pytest.mark.parametrize(
    ("from_status", "to_status"), [("planned", "draft"), ("scheduled", "planned")]
)
def test_stepping_back_is_allowed_before_collection_starts(world_a, from_status, to_status):
    CollectionRound.objects.filter(pk=world_a.round.pk).update(status=from_status)
    round = CollectionRound.objects.get(pk=world_a.round.pk)

    round_transition(round=round, to_status=to_status)

    assert CollectionRound.objects.get(pk=round.pk).status == to_status


def test_a_stale_round_object_cannot_move_a_round_that_changed_meanwhile(world_a):
    stale = CollectionRound.objects.get(pk=world_a.round.pk)
    round_transition(round=CollectionRound.objects.get(pk=world_a.round.pk), to_status="planned")

    with pytest.raises(RoundTransitionRefused, match="changed meanwhile"):
        round_transition(round=stale, to_status="planned")


def test_unknown_status_is_refused(world_a):
    with pytest.raises(RoundTransitionRefused, match="not a round status"):
        round_transition(round=world_a.round, to_status="finished")


def test_database_rejects_a_status_outside_the_set(world_a):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        CollectionRound.objects.filter(pk=world_a.round.pk).update(status="bogus")


def test_transition_api_moves_and_refuses_with_409(world_a, client_for):
    client = client_for(world_a.manager)
    url = f"/api/rounds/{world_a.round.pk}/transition/"

    ok = client.post(url, {"to_status": "planned"}, content_type="application/json")
    refused = client.post(url, {"to_status": "closed"}, content_type="application/json")

    assert ok.status_code == 200
    assert ok.json()["status"] == "planned"
    assert refused.status_code == 409
    assert "cannot move to closed" in refused.json()["detail"]


def test_round_status_cannot_be_written_through_the_update_endpoint(world_a, client_for):
    client = client_for(world_a.manager)

    response = client.patch(
        f"/api/rounds/{world_a.round.pk}/", {"status": "closed"}, content_type="application/json"
    )

    assert response.status_code == 200
    assert CollectionRound.objects.get(pk=world_a.round.pk).status == "draft"
