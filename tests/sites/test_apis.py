"""Embodiments, sites and deployments through the API: nested writes go through the sites
services, children are updated in place by name, every write is audited, and a camera or
action dimension that stored work still names cannot be removed."""

from __future__ import annotations

import pytest

from accounts.models import AuditEvent, Job, Role
from accounts.permissions import declared_roles
from labeling.models import DatasetExport
from sites.apis import DeploymentViewSet, EmbodimentViewSet, SiteViewSet
from sites.models import AccessWindow, ActionDimension, Camera, ConditionShare, Embodiment, Site

JSON = "application/json"


def embodiment_payload(**extra):
    return {
        "slug": "emb-new",
        "name": "Arm New",
        "morphology": "fixed arm",
        "end_effector": "parallel gripper",
        "control_rate_hz": 30,
        "action_dimensions": [
            {"order": 0, "name": "j1", "unit": "rad", "min_value": -1, "max_value": 1},
            {"order": 1, "name": "j2", "unit": "rad", "min_value": -2, "max_value": 2},
        ],
        "cameras": [
            {"name": "wrist", "mount": "wrist", "width": 640, "height": 480, "fps": 30},
            {"name": "head", "mount": "head", "width": 1280, "height": 720, "fps": 15},
        ],
        **extra,
    }


def new_embodiment(client):
    response = client.post("/api/embodiments/", embodiment_payload(), content_type=JSON)
    assert response.status_code == 201, response.content
    return Embodiment.objects.get(pk=response.json()["id"])


def events(verb, obj):
    return list(
        AuditEvent.objects.filter(verb=verb, object_type=obj._meta.label, object_id=str(obj.pk))
    )


def rig(embodiment):
    return (
        sorted(embodiment.cameras.values_list("pk", "name", "fps", "topic")),
        sorted(embodiment.action_dimensions.values_list("pk", "name", "order", "max_value")),
    )


# --- embodiments -------------------------------------------------------------------------------


def test_manager_creates_an_embodiment_with_its_rig_and_one_audit_event(world_a, client_for):
    response = client_for(world_a.manager).post(
        "/api/embodiments/", embodiment_payload(), content_type=JSON
    )

    embodiment = Embodiment.objects.get(slug="emb-new")
    assert response.status_code == 201, response.content
    assert embodiment.organization == world_a.operator
    assert sorted(c["name"] for c in response.json()["cameras"]) == ["head", "wrist"]
    assert list(embodiment.action_dimensions.values_list("name", flat=True)) == ["j1", "j2"]
    (event,) = events("embodiment.create", embodiment)
    assert event.actor == world_a.manager
    assert event.changes["cameras"]["added"] == ["wrist", "head"]
    assert event.changes["action_dimensions"]["added"] == ["j1", "j2"]
    assert not AuditEvent.objects.filter(verb="api_create").exists()


def test_an_embodiment_update_changes_kept_children_in_place_and_adds_new_ones(world_a, client_for):
    client = client_for(world_a.manager)
    embodiment = new_embodiment(client)
    wrist = embodiment.cameras.get(name="wrist")
    j1 = embodiment.action_dimensions.get(name="j1")
    payload = embodiment_payload()
    payload["cameras"][0]["topic"] = "/wrist/image"
    payload["cameras"].append(
        {"name": "overhead", "mount": "fixed", "width": 640, "height": 480, "fps": 10}
    )
    payload["action_dimensions"].append(
        {"order": 2, "name": "gripper", "unit": "m", "min_value": 0, "max_value": 0.08}
    )

    response = client.put(f"/api/embodiments/{embodiment.pk}/", payload, content_type=JSON)

    assert response.status_code == 200, response.content
    assert Camera.objects.get(pk=wrist.pk).topic == "/wrist/image"
    assert ActionDimension.objects.get(pk=j1.pk).name == "j1"
    assert sorted(embodiment.cameras.values_list("name", flat=True)) == [
        "head",
        "overhead",
        "wrist",
    ]
    (event,) = events("embodiment.update", embodiment)
    assert event.changes["cameras"] == {"added": ["overhead"], "updated": ["wrist"], "removed": []}
    assert event.changes["action_dimensions"] == {
        "added": ["gripper"],
        "updated": [],
        "removed": [],
    }
    assert not AuditEvent.objects.filter(verb="api_update").exists()


def test_a_camera_no_stored_work_names_is_removed_when_left_out(world_a, client_for):
    client = client_for(world_a.manager)
    embodiment = new_embodiment(client)
    payload = embodiment_payload(name="Arm New v2")
    payload["cameras"] = payload["cameras"][:1]

    response = client.put(f"/api/embodiments/{embodiment.pk}/", payload, content_type=JSON)

    assert response.status_code == 200, response.content
    assert list(embodiment.cameras.values_list("name", flat=True)) == ["wrist"]
    (event,) = events("embodiment.update", embodiment)
    assert event.changes["cameras"]["removed"] == ["head"]
    assert event.changes["fields"]["name"] == ["Arm New", "Arm New v2"]


def test_a_patch_without_children_leaves_the_rig_alone(world_a, client_for):
    before = rig(world_a.embodiment)

    response = client_for(world_a.manager).patch(
        f"/api/embodiments/{world_a.embodiment.pk}/", {"name": "Arm renamed"}, content_type=JSON
    )

    assert response.status_code == 200, response.content
    assert rig(world_a.embodiment) == before
    assert Embodiment.objects.get(pk=world_a.embodiment.pk).name == "Arm renamed"


def test_removing_a_camera_a_recording_names_is_a_409_that_changes_nothing(world_a, client_for):
    embodiment = world_a.embodiment  # the world's recording was captured with it
    before = rig(embodiment)

    response = client_for(world_a.manager).patch(
        f"/api/embodiments/{embodiment.pk}/",
        {"name": "Arm renamed", "cameras": []},
        content_type=JSON,
    )

    assert response.status_code == 409, response.content
    detail = response.json()["detail"]
    assert "'front'" in detail and "1 recording" in detail and embodiment.name in detail
    assert rig(embodiment) == before
    assert Embodiment.objects.get(pk=embodiment.pk).name == embodiment.name
    assert events("embodiment.update", embodiment) == []


def test_removing_an_action_dimension_a_lerobot_export_names_is_a_409(world_a, client_for):
    client = client_for(world_a.manager)
    embodiment = new_embodiment(client)
    world_a.dataset.embodiment = embodiment
    world_a.dataset.save()
    DatasetExport.objects.create(
        organization=world_a.operator,
        dataset=world_a.dataset,
        format="lerobot-v3",
        job=Job.objects.create(organization=world_a.operator, kind="export", title="Export"),
    )
    before = rig(embodiment)
    payload = embodiment_payload()
    payload["action_dimensions"] = payload["action_dimensions"][1:]

    response = client.put(f"/api/embodiments/{embodiment.pk}/", payload, content_type=JSON)

    assert response.status_code == 409, response.content
    assert "action dimension 'j1'" in response.json()["detail"]
    assert "1 LeRobot export" in response.json()["detail"]
    assert rig(embodiment) == before


def test_changing_a_camera_that_a_recording_names_is_allowed(world_a, client_for):
    camera = world_a.embodiment.cameras.get(name="front")

    response = client_for(world_a.manager).patch(
        f"/api/embodiments/{world_a.embodiment.pk}/",
        {
            "cameras": [
                {
                    "name": "front",
                    "mount": "head",
                    "width": 640,
                    "height": 480,
                    "fps": 30,
                    "clock_offset_ms": 12.5,
                }
            ]
        },
        content_type=JSON,
    )

    assert response.status_code == 200, response.content
    assert Camera.objects.get(pk=camera.pk).clock_offset_ms == 12.5


def test_two_cameras_of_one_name_are_a_400_naming_the_list(world_a, client_for):
    payload = embodiment_payload()
    payload["cameras"][1]["name"] = "wrist"

    response = client_for(world_a.manager).post("/api/embodiments/", payload, content_type=JSON)

    assert response.status_code == 400
    assert "'wrist'" in str(response.json()["cameras"])
    assert not Embodiment.objects.filter(slug="emb-new").exists()


def test_an_action_dimension_whose_range_is_empty_is_a_400(world_a, client_for):
    payload = embodiment_payload()
    payload["action_dimensions"][0]["max_value"] = -1

    response = client_for(world_a.manager).post("/api/embodiments/", payload, content_type=JSON)

    assert response.status_code == 400
    assert "Must be above min_value" in str(response.json()["action_dimensions"])


# --- sites -------------------------------------------------------------------------------------


def site_payload(world, **extra):
    return {
        "slug": "site-new",
        "name": "Depot New",
        "kind": "deployment",
        "customer": world.customer.slug,
        "country": "NL",
        "latitude": 52.0,
        "longitude": 4.3,
        "timezone": "Europe/Amsterdam",
        "access_windows": [
            {"weekday": 0, "start_time": "08:00", "end_time": "16:00"},
            {"weekday": 2, "start_time": "09:00", "end_time": "12:00"},
        ],
        "presents": [world.values[0].pk],
        **extra,
    }


def test_manager_creates_a_site_with_windows_and_conditions_and_one_audit_event(
    world_a, client_for
):
    response = client_for(world_a.manager).post(
        "/api/sites/", site_payload(world_a), content_type=JSON
    )

    site = Site.objects.get(slug="site-new")
    assert response.status_code == 201, response.content
    assert site.access_windows.count() == 2
    assert list(site.presents.all()) == [world_a.values[0]]
    (event,) = events("site.create", site)
    assert event.changes["presents"] == [world_a.values[0].pk]
    assert event.changes["access_windows"]["added"] == ["0 08:00:00", "2 09:00:00"]


def test_a_site_update_keeps_matching_windows_in_place(world_a, client_for):
    client = client_for(world_a.manager)
    site_id = client.post("/api/sites/", site_payload(world_a), content_type=JSON).json()["id"]
    monday = AccessWindow.objects.get(site_id=site_id, weekday=0)
    payload = site_payload(world_a, name="Depot Renamed", presents=[world_a.values[1].pk])
    payload["access_windows"] = [{"weekday": 0, "start_time": "08:00", "end_time": "18:00"}]

    response = client.put(f"/api/sites/{site_id}/", payload, content_type=JSON)

    site = Site.objects.get(pk=site_id)
    assert response.status_code == 200, response.content
    assert list(site.access_windows.values_list("pk", "end_time__hour")) == [(monday.pk, 18)]
    assert list(site.presents.all()) == [world_a.values[1]]
    (event,) = events("site.update", site)
    assert event.changes["fields"] == {"name": ["Depot New", "Depot Renamed"]}
    assert event.changes["access_windows"] == {
        "added": [],
        "updated": ["0 08:00:00"],
        "removed": ["2 09:00:00"],
    }


def test_two_windows_starting_together_are_a_400_that_stores_nothing(world_a, client_for):
    payload = site_payload(world_a)
    payload["access_windows"][1] = {"weekday": 0, "start_time": "08:00", "end_time": "10:00"}

    response = client_for(world_a.manager).post("/api/sites/", payload, content_type=JSON)

    assert response.status_code == 400
    assert "access_windows" in response.json()
    assert not Site.objects.filter(slug="site-new").exists()


# --- deployments -------------------------------------------------------------------------------


def deployment_payload(world, **extra):
    return {
        "slug": "dep-new",
        "name": "Deployment New",
        "customer": world.customer.slug,
        "site": world.site.pk,
        "embodiment": world.embodiment.pk,
        "task": world.task.pk,
        "cycles_per_day": 500,
        "reliability_target": 0.99,
        "condition_profile": [
            {"value": world.values[0].pk, "share": 0.75},
            {"value": world.values[1].pk, "share": 0.25},
        ],
        **extra,
    }


def test_manager_creates_a_deployment_with_its_profile_and_one_audit_event(world_a, client_for):
    response = client_for(world_a.manager).post(
        "/api/deployments/", deployment_payload(world_a), content_type=JSON
    )

    assert response.status_code == 201, response.content
    deployment_id = response.json()["id"]
    shares = dict(
        ConditionShare.objects.filter(deployment_id=deployment_id).values_list("value", "share")
    )
    assert shares == {world_a.values[0].pk: 0.75, world_a.values[1].pk: 0.25}
    (event,) = AuditEvent.objects.filter(verb="deployment.create", object_id=str(deployment_id))
    assert event.changes["fields"]["site"] == world_a.site.pk


def test_a_deployment_update_records_what_changed(world_a, client_for):
    response = client_for(world_a.manager).patch(
        f"/api/deployments/{world_a.deployment.pk}/",
        {
            "cycles_per_day": 1200,
            "condition_profile": [{"value": world_a.values[0].pk, "share": 1.0}],
        },
        content_type=JSON,
    )

    assert response.status_code == 200, response.content
    world_a.deployment.refresh_from_db()
    assert world_a.deployment.cycles_per_day == 1200
    (event,) = events("deployment.update", world_a.deployment)
    assert event.changes["fields"] == {"cycles_per_day": [1000, 1200]}
    assert event.changes["condition_profile"] == {str(world_a.values[0].pk): 1.0}


def test_a_profile_that_does_not_sum_to_one_is_a_400_that_changes_nothing(world_a, client_for):
    response = client_for(world_a.manager).patch(
        f"/api/deployments/{world_a.deployment.pk}/",
        {
            "cycles_per_day": 1200,
            "condition_profile": [{"value": world_a.values[0].pk, "share": 0.5}],
        },
        content_type=JSON,
    )

    assert response.status_code == 400
    assert "sums to 0.500" in str(response.json()["condition_profile"])
    world_a.deployment.refresh_from_db()
    assert world_a.deployment.cycles_per_day == 1000
    assert events("deployment.update", world_a.deployment) == []


# --- scoping and roles -------------------------------------------------------------------------


def objects_of(world):
    return [
        (f"/api/embodiments/{world.embodiment.pk}/", Embodiment, world.embodiment),
        (f"/api/sites/{world.site.pk}/", Site, world.site),
        (f"/api/deployments/{world.deployment.pk}/", type(world.deployment), world.deployment),
    ]


@pytest.mark.parametrize("index", range(3))
def test_a_manager_of_another_organization_gets_404_and_changes_nothing(
    index, world_a, world_b, client_for
):
    url, model, obj = objects_of(world_a)[index]

    read = client_for(world_b.manager).get(url)
    write = client_for(world_b.manager).patch(url, {"name": "Taken"}, content_type=JSON)

    assert (read.status_code, write.status_code) == (404, 404)
    assert model.objects.get(pk=obj.pk).name == obj.name
    assert events(f"{model._meta.model_name}.update", obj) == []


VIEWSETS = [EmbodimentViewSet, SiteViewSet, DeploymentViewSet]


@pytest.mark.parametrize("role", [Role.MANAGER, Role.FIELD, Role.ANNOTATOR, Role.VIEWER])
@pytest.mark.parametrize("index", range(3))
def test_each_role_may_update_exactly_as_the_viewset_declares(index, role, world_a, client_for):
    url, model, obj = objects_of(world_a)[index]
    user = {
        Role.MANAGER: world_a.manager,
        Role.FIELD: world_a.field,
        Role.ANNOTATOR: world_a.annotator,
        Role.VIEWER: world_a.viewer,
    }[role]
    allowed = role in declared_roles(VIEWSETS[index](), action="partial_update", method="PATCH")

    response = client_for(user).patch(url, {"name": "Renamed"}, content_type=JSON)

    renamed = model.objects.get(pk=obj.pk).name == "Renamed"
    if allowed:
        assert (response.status_code, renamed) == (200, True)
    else:
        assert (response.status_code, renamed) == (403, False)
        assert not AuditEvent.objects.filter(
            object_type=obj._meta.label, object_id=str(obj.pk)
        ).exists()


def test_only_managers_are_declared_to_write_the_world_model():
    for viewset in VIEWSETS:
        for action, method in (("create", "POST"), ("partial_update", "PATCH")):
            assert declared_roles(viewset(), action=action, method=method) == {Role.MANAGER}
