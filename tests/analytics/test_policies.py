"""Policy versions registered on the evaluations page go through policy_version_save:
training data scoped to the organization, audited, and nothing stored from a bad form."""

from __future__ import annotations

from accounts.models import AuditEvent
from analytics.models import PolicyVersion


def policy_form(world, **extra):
    return {
        "action": "policy",
        "slug": "pi-new",
        "name": "Pi new",
        "embodiment": world.embodiment.pk,
        "released_on": "2027-01-31",
        "datasets": [world.dataset.pk],
        "rounds": [world.round.pk],
        **extra,
    }


def test_manager_registers_a_policy_version_with_its_training_data_and_an_audit_event(
    world_a, client_for
):
    response = client_for(world_a.manager).post("/planner/evaluations/", policy_form(world_a))

    policy = PolicyVersion.objects.get(organization=world_a.operator, slug="pi-new")
    assert response.status_code == 302
    assert list(policy.trained_on_datasets.all()) == [world_a.dataset]
    assert list(policy.trained_on_rounds.all()) == [world_a.round]
    event = AuditEvent.objects.get(verb="policy_version.create", object_id=str(policy.pk))
    assert event.actor == world_a.manager
    assert event.changes["trained_on_rounds"] == [world_a.round.pk]
    assert event.changes["fields"]["released_on"] == "2027-01-31"


def test_saving_a_registered_slug_again_changes_it_and_is_audited_as_an_update(world_a, client_for):
    client = client_for(world_a.manager)
    client.post("/planner/evaluations/", policy_form(world_a))

    client.post("/planner/evaluations/", policy_form(world_a, name="Pi renamed", rounds=[]))

    policy = PolicyVersion.objects.get(organization=world_a.operator, slug="pi-new")
    assert policy.name == "Pi renamed"
    assert policy.trained_on_rounds.count() == 0
    assert AuditEvent.objects.filter(
        verb="policy_version.update", object_id=str(policy.pk)
    ).exists()


def test_another_organizations_datasets_are_not_linked_to_a_policy(world_a, world_b, client_for):
    client_for(world_a.manager).post(
        "/planner/evaluations/",
        policy_form(world_a, datasets=[world_a.dataset.pk, world_b.dataset.pk]),
    )

    policy = PolicyVersion.objects.get(organization=world_a.operator, slug="pi-new")
    assert list(policy.trained_on_datasets.all()) == [world_a.dataset]


def test_a_bad_round_choice_stores_no_policy_version(world_a, client_for):
    response = client_for(world_a.manager).post(
        "/planner/evaluations/", policy_form(world_a, rounds=["abc"]), follow=True
    )

    assert [str(m) for m in response.context["messages"]] == [
        "Trained on rounds: 'abc' is not one of the choices."
    ]
    assert not PolicyVersion.objects.filter(slug="pi-new").exists()
    assert not AuditEvent.objects.filter(verb__startswith="policy_version.").exists()
