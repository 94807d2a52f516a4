"""The condition and failure taxonomies, and policy versions, are written by audited services:
condition values are matched by slug, a value stored work uses cannot be removed (and the
refusal changes nothing), and links stay inside the organization."""

from __future__ import annotations

import pytest

from accounts.models import AuditEvent
from analytics.services.policies import policy_version_create, policy_version_update
from sites.models import ConditionDimension, ConditionValue, FailureMode
from sites.services import (
    DuplicateChild,
    LinkRefused,
    ValueInUse,
    condition_dimension_create,
    condition_dimension_update,
    deployment_update,
    failure_mode_create,
    failure_mode_update,
)

FLOOR = [
    {"slug": "concrete", "label": "Concrete", "order": 0},
    {"slug": "tiles", "label": "Tiles", "order": 1},
]


def events(verb, obj):
    return list(
        AuditEvent.objects.filter(verb=verb, object_type=obj._meta.label, object_id=str(obj.pk))
    )


def values_of(dimension):
    return list(dimension.values.order_by("slug").values_list("pk", "slug", "label"))


def floor(world):
    return condition_dimension_create(
        organization=world.operator,
        actor=world.manager,
        fields={"slug": "floor", "name": "Floor", "kind": "categorical"},
        values=FLOOR,
    )


def test_a_dimension_is_created_with_its_values_and_one_audit_event(world_a):
    dimension = floor(world_a)

    assert dimension.organization == world_a.operator
    assert [v[1] for v in values_of(dimension)] == ["concrete", "tiles"]
    (event,) = events("condition_dimension.create", dimension)
    assert event.actor == world_a.manager
    assert event.changes["values"]["added"] == ["concrete", "tiles"]
    assert event.changes["fields"]["name"] == "Floor"


def test_an_update_changes_kept_values_in_place_adds_new_and_removes_unused(world_a):
    dimension = floor(world_a)
    concrete = dimension.values.get(slug="concrete")

    condition_dimension_update(
        dimension=dimension,
        actor=world_a.manager,
        fields={"name": "Floor surface"},
        values=[
            {"slug": "concrete", "label": "Bare concrete", "order": 0},
            {"slug": "epoxy", "label": "Epoxy", "order": 2},
        ],
    )

    dimension.refresh_from_db()
    assert dimension.name == "Floor surface"
    assert values_of(dimension) == [
        (concrete.pk, "concrete", "Bare concrete"),
        (dimension.values.get(slug="epoxy").pk, "epoxy", "Epoxy"),
    ]
    (event,) = events("condition_dimension.update", dimension)
    assert event.changes["values"] == {
        "added": ["epoxy"],
        "updated": ["concrete"],
        "removed": ["tiles"],
    }
    assert event.changes["fields"] == {"name": ["Floor", "Floor surface"]}


def test_removing_a_value_that_episodes_use_is_refused_naming_it_and_its_users(world_a):
    dimension = world_a.dimension  # 'dim' is in the world's condition set, episode and labels
    before = values_of(dimension)

    with pytest.raises(ValueInUse) as refused:
        condition_dimension_update(
            dimension=dimension,
            actor=world_a.manager,
            fields={"name": "Light"},
            values=[{"slug": "bright", "label": "Very bright"}],
        )

    message = str(refused.value)
    assert "condition value 'dim'" in message
    assert "1 condition set" in message and "1 episode" in message
    assert refused.value.field == "values"
    assert values_of(dimension) == before
    assert ConditionDimension.objects.get(pk=dimension.pk).name == "Lighting"
    assert events("condition_dimension.update", dimension) == []


def test_removing_a_value_a_site_presents_is_refused(world_a):
    world_a.site.presents.set([world_a.values[0]])
    dimension = world_a.dimension

    with pytest.raises(ValueInUse, match=r"'bright' is used by 1 site"):
        condition_dimension_update(
            dimension=dimension,
            actor=world_a.manager,
            fields={},
            values=[{"slug": "dim", "label": "Dim"}],
        )

    assert ConditionValue.objects.filter(dimension=dimension, slug="bright").exists()


def test_keep_unlisted_adds_and_updates_but_removes_nothing(world_a):
    dimension = floor(world_a)

    condition_dimension_update(
        dimension=dimension,
        actor=world_a.manager,
        fields={},
        values=[{"slug": "epoxy", "label": "Epoxy"}],
        keep_unlisted=True,
    )

    assert [v[1] for v in values_of(dimension)] == ["concrete", "epoxy", "tiles"]


def test_two_values_of_one_slug_are_refused_and_nothing_is_stored(world_a):
    with pytest.raises(DuplicateChild) as refused:
        condition_dimension_create(
            organization=world_a.operator,
            actor=world_a.manager,
            fields={"slug": "floor", "name": "Floor"},
            values=[FLOOR[0], {**FLOOR[1], "slug": "concrete"}],
        )

    assert refused.value.field == "values"


def test_a_failure_mode_is_created_and_updated_with_audit_events(world_a):
    parent = world_a.failure_mode

    mode = failure_mode_create(
        organization=world_a.operator,
        actor=world_a.manager,
        fields={"code": "grasp.slip", "name": "Slip", "parent": parent, "severity": 6},
    )
    failure_mode_update(failure_mode=mode, actor=world_a.manager, fields={"severity": 8})

    mode.refresh_from_db()
    assert (mode.parent, mode.severity) == (parent, 8)
    (created,) = events("failure_mode.create", mode)
    assert created.changes["fields"]["parent"] == parent.pk
    (updated,) = events("failure_mode.update", mode)
    assert updated.changes == {"fields": {"severity": [6, 8]}}


def test_a_failure_mode_under_its_own_branch_is_refused(world_a):
    parent = world_a.failure_mode
    child = failure_mode_create(
        organization=world_a.operator,
        actor=world_a.manager,
        fields={"code": "grasp.slip", "name": "Slip", "parent": parent},
    )

    with pytest.raises(LinkRefused) as refused:
        failure_mode_update(failure_mode=parent, actor=world_a.manager, fields={"parent": child})

    assert refused.value.field == "parent"
    assert FailureMode.objects.get(pk=parent.pk).parent is None


def test_another_organizations_parent_or_site_is_refused(world_a, world_b):
    with pytest.raises(LinkRefused):
        failure_mode_create(
            organization=world_a.operator,
            actor=world_a.manager,
            fields={"code": "x", "name": "X", "parent": world_b.failure_mode},
        )
    with pytest.raises(LinkRefused) as refused:
        deployment_update(
            deployment=world_a.deployment, actor=world_a.manager, fields={"site": world_b.site}
        )

    assert refused.value.field == "site"
    world_a.deployment.refresh_from_db()
    assert world_a.deployment.site == world_a.site
    assert not FailureMode.objects.filter(code="x").exists()


def test_policy_versions_are_written_by_audited_services(world_a, world_b):
    policy = policy_version_create(
        organization=world_a.operator,
        actor=world_a.manager,
        fields={"slug": "pi-1", "name": "Pi 1", "embodiment": world_a.embodiment},
        datasets=[world_a.dataset],
    )
    policy_version_update(policy=policy, actor=world_a.manager, fields={"name": "Pi one"})

    with pytest.raises(LinkRefused):
        policy_version_update(
            policy=policy, actor=world_a.manager, fields={}, rounds=[world_b.round]
        )

    policy.refresh_from_db()
    assert policy.name == "Pi one"
    assert list(policy.trained_on_datasets.all()) == [world_a.dataset]
    assert policy.trained_on_rounds.count() == 0
    assert events("policy_version.create", policy)[0].changes["trained_on_datasets"] == [
        world_a.dataset.pk
    ]
    assert events("policy_version.update", policy)[0].changes == {
        "fields": {"name": ["Pi 1", "Pi one"]}
    }


# --- the API writes through the same services ----------------------------------------------

JSON = "application/json"


def test_the_dimension_api_writes_through_the_service_and_keeps_unlisted_values(
    world_a, client_for
):
    client = client_for(world_a.manager)

    created = client.post(
        "/api/condition-dimensions/",
        {"slug": "floor", "name": "Floor", "values": FLOOR},
        content_type=JSON,
    )
    dimension = ConditionDimension.objects.get(pk=created.json()["id"])
    updated = client.patch(
        f"/api/condition-dimensions/{dimension.pk}/",
        {"values": [{"slug": "tiles", "label": "Ceramic tiles"}]},
        content_type=JSON,
    )

    assert (created.status_code, updated.status_code) == (201, 200)
    assert [v[1:] for v in values_of(dimension)] == [
        ("concrete", "Concrete"),
        ("tiles", "Ceramic tiles"),
    ]
    assert len(events("condition_dimension.create", dimension)) == 1
    assert events("condition_dimension.update", dimension)[0].changes["values"]["updated"] == [
        "tiles"
    ]
    assert not AuditEvent.objects.filter(verb__startswith="api_").exists()


def test_the_failure_mode_api_refuses_a_loop_with_a_400_on_parent(world_a, client_for):
    mode = world_a.failure_mode

    response = client_for(world_a.manager).patch(
        f"/api/failure-modes/{mode.pk}/", {"parent": mode.pk}, content_type=JSON
    )

    assert response.status_code == 400
    assert "cannot be its own parent" in str(response.json()["parent"])
    assert events("failure_mode.update", mode) == []


def test_the_policy_version_api_writes_through_the_service(world_a, client_for):
    client = client_for(world_a.manager)

    response = client.post(
        "/api/policy-versions/",
        {
            "slug": "pi-api",
            "name": "Pi API",
            "embodiment": world_a.embodiment.pk,
            "trained_on_rounds": [world_a.round.pk],
        },
        content_type=JSON,
    )

    assert response.status_code == 201, response.content
    policy = world_a.policy.__class__.objects.get(pk=response.json()["id"])
    (event,) = events("policy_version.create", policy)
    assert event.changes["trained_on_rounds"] == [world_a.round.pk]
    assert not AuditEvent.objects.filter(verb="api_create").exists()
