"""Managers edit the world on the planner's pages (issue 19, point 4): sites, deployments,
embodiments, condition dimensions and failure modes, each through the service the API
calls. Bad input is answered next to the field with nothing stored, a refused edit changes
nothing, other roles get 403, another organization's objects 404, and a form cannot link
another organization's (or customer's) objects."""

from __future__ import annotations

from datetime import date, time

import pytest

from accounts.models import AuditEvent, Organization
from sites.models import (
    ConditionDimension,
    ConditionShare,
    Deployment,
    Embodiment,
    FailureMode,
    Site,
)
from tests.factories import SiteFactory

NEW_URLS = [
    "/planner/sites/new/",
    "/planner/deployments/new/",
    "/planner/embodiments/new/",
    "/planner/taxonomy/dimensions/new/",
    "/planner/taxonomy/failure-modes/new/",
]


def edit_urls(world):
    return [
        f"/planner/sites/{world.site.pk}/edit/",
        f"/planner/deployments/{world.deployment.pk}/edit/",
        f"/planner/embodiments/{world.embodiment.pk}/edit/",
        f"/planner/taxonomy/dimensions/{world.dimension.pk}/edit/",
        f"/planner/taxonomy/failure-modes/{world.failure_mode.pk}/edit/",
    ]


def rows(prefix, *items, initial=0):
    """POST data of a formset: its management form and one numbered row per item."""
    data = {
        f"{prefix}-TOTAL_FORMS": str(len(items)),
        f"{prefix}-INITIAL_FORMS": str(initial),
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }
    for i, item in enumerate(items):
        data.update({f"{prefix}-{i}-{k}": v for k, v in item.items()})
    return data


def as_shown(response):
    """The POST data of the page's form exactly as it was shown (what Save would send)."""
    data = {}

    def add(form):
        for field in form:
            value = field.value()
            if field.widget_type == "nullboolean":
                data[field.html_name] = {True: "true", False: "false"}.get(value, "unknown")
            elif field.widget_type == "checkbox":
                if value:
                    data[field.html_name] = "on"
            elif isinstance(value, list):
                data[field.html_name] = [str(v) for v in value]
            elif isinstance(value, time):
                data[field.html_name] = value.strftime("%H:%M")
            elif value is not None:
                data[field.html_name] = str(value)

    add(response.context["form"])
    for formset in response.context["formsets"].values():
        add(formset.management_form)
        for form in formset.forms:
            add(form)
    return data


def errors_on(response):
    form = response.context["form"]
    found = {name: [str(e) for e in errors] for name, errors in form.errors.items()}
    for prefix, formset in response.context["formsets"].items():
        if formset.non_form_errors():
            found[prefix] = [str(e) for e in formset.non_form_errors()]
        for i, errors in enumerate(formset.errors):
            for name, problems in errors.items():
                found[f"{prefix}-{i}-{name}"] = [str(p) for p in problems]
    return found


# --- sites -------------------------------------------------------------------------------------


def site_data(world, **extra):
    return {
        "name": "Depot New",
        "slug": "depot-new",
        "kind": "deployment",
        "customer": world.customer.pk,
        "country": "nl",
        "latitude": "52.0",
        "longitude": "4.3",
        "timezone": "Europe/Amsterdam",
        "capacity_episodes_per_day": "150",
        "episode_minutes": "2.5",
        "setup_hours": "1",
        "cost_per_hour": "40",
        "presents": [world.values[0].pk],
        **rows(
            "access_windows",
            {"weekday": "0", "start_time": "08:00", "end_time": "16:00"},
            {"weekday": "2", "start_time": "09:00", "end_time": "12:00"},
        ),
        **extra,
    }


def test_manager_adds_a_site_with_windows_and_conditions(world_a, client_for):
    response = client_for(world_a.manager).post("/planner/sites/new/", site_data(world_a))

    site = Site.objects.get(slug="depot-new")
    assert response.status_code == 302
    assert response["Location"] == f"/planner/sites/{site.pk}/"
    assert (site.organization, site.customer, site.country) == (
        world_a.operator,
        world_a.customer,
        "NL",
    )
    assert list(site.access_windows.values_list("weekday", "end_time")) == [
        (0, time(16)),
        (2, time(12)),
    ]
    assert list(site.presents.all()) == [world_a.values[0]]
    assert AuditEvent.objects.filter(verb="site.create", object_id=str(site.pk)).exists()


def test_manager_edits_a_site_keeping_its_window_in_place(world_a, client_for):
    client = client_for(world_a.manager)
    url = f"/planner/sites/{world_a.site.pk}/edit/"
    monday = world_a.site.access_windows.get()
    data = as_shown(client.get(url))
    data.update({"name": "Warehouse renamed", "access_windows-0-end_time": "18:00"})

    response = client.post(url, data)

    assert response.status_code == 302, errors_on(response)
    world_a.site.refresh_from_db()
    assert world_a.site.name == "Warehouse renamed"
    assert list(world_a.site.access_windows.values_list("pk", "end_time")) == [
        (monday.pk, time(18))
    ]
    (event,) = AuditEvent.objects.filter(verb="site.update", object_id=str(world_a.site.pk))
    assert event.changes["fields"] == {"name": ["Warehouse QZALPHA", "Warehouse renamed"]}


def test_bad_site_input_is_shown_next_to_each_field_and_nothing_is_stored(world_a, client_for):
    data = site_data(world_a, timezone="Mars/Olympus", latitude="95")
    data["access_windows-1-end_time"] = "08:30"

    response = client_for(world_a.manager).post("/planner/sites/new/", data)

    errors = errors_on(response)
    assert response.status_code == 200
    assert "Unknown IANA time zone 'Mars/Olympus'." in errors["timezone"]
    assert errors["latitude"] == ["Ensure this value is less than or equal to 90."]
    assert errors["access_windows-1-end_time"] == ["Must be after the start (09:00)."]
    body = response.content.decode()
    assert 'id="id_latitude-error"' in body and "Must be after the start (09:00)." in body
    assert not Site.objects.filter(slug="depot-new").exists()
    assert not AuditEvent.objects.filter(verb="site.create").exists()


def test_a_taken_slug_is_shown_on_the_slug_field(world_a, client_for):
    response = client_for(world_a.manager).post(
        "/planner/sites/new/", site_data(world_a, slug=world_a.site.slug)
    )

    assert response.status_code == 200
    assert errors_on(response)["slug"] == ["A site with this slug already exists."]
    assert Site.objects.filter(organization=world_a.operator).count() == 1


def test_a_site_cannot_be_given_to_a_customer_its_deployments_do_not_serve(world_a, client_for):
    other = Organization.objects.create(
        slug="brightline", name="Brightline", kind="customer", operator=world_a.operator
    )
    client = client_for(world_a.manager)
    url = f"/planner/sites/{world_a.site.pk}/edit/"
    data = {**as_shown(client.get(url)), "customer": str(other.pk), "name": "Moved"}

    response = client.post(url, data)

    assert response.status_code == 200
    assert "serves customer Customer QZALPHA" in errors_on(response)["customer"][0]
    world_a.site.refresh_from_db()
    assert (world_a.site.customer, world_a.site.name) == (world_a.customer, "Warehouse QZALPHA")


# --- deployments -------------------------------------------------------------------------------


def deployment_data(world, **extra):
    bright, dim = world.values
    return {
        "name": "Deployment New",
        "slug": "dep-new",
        "customer": world.customer.pk,
        "site": world.site.pk,
        "embodiment": world.embodiment.pk,
        "task": world.task.pk,
        "cycles_per_day": "500",
        "reliability_target": "0.99",
        "started_on": "2027-01-04",
        "active": "on",
        f"share_{bright.pk}": "0.75",
        f"share_{dim.pk}": "0.25",
        **extra,
    }


def test_manager_adds_a_deployment_with_its_condition_profile(world_a, client_for):
    response = client_for(world_a.manager).post(
        "/planner/deployments/new/", deployment_data(world_a)
    )

    deployment = Deployment.objects.get(slug="dep-new")
    assert response.status_code == 302
    assert (deployment.site, deployment.started_on) == (world_a.site, date(2027, 1, 4))
    assert dict(deployment.condition_profile.values_list("value", "share")) == {
        world_a.values[0].pk: 0.75,
        world_a.values[1].pk: 0.25,
    }
    assert AuditEvent.objects.filter(verb="deployment.create").count() == 1


def test_manager_edits_a_deployment_and_its_profile(world_a, client_for):
    client = client_for(world_a.manager)
    url = f"/planner/deployments/{world_a.deployment.pk}/edit/"
    bright, dim = world_a.values
    data = {
        **as_shown(client.get(url)),
        "cycles_per_day": "1200",
        f"share_{bright.pk}": "",
        f"share_{dim.pk}": "1",
    }

    response = client.post(url, data)

    assert response.status_code == 302, errors_on(response)
    world_a.deployment.refresh_from_db()
    assert world_a.deployment.cycles_per_day == 1200
    assert list(
        ConditionShare.objects.filter(deployment=world_a.deployment).values_list("value", "share")
    ) == [(dim.pk, 1.0)]


def test_a_profile_that_does_not_sum_to_one_is_shown_and_changes_nothing(world_a, client_for):
    client = client_for(world_a.manager)
    url = f"/planner/deployments/{world_a.deployment.pk}/edit/"
    data = {
        **as_shown(client.get(url)),
        "cycles_per_day": "1200",
        f"share_{world_a.values[0].pk}": "0.5",
    }

    response = client.post(url, data)

    assert response.status_code == 200
    assert errors_on(response)["condition_profile"] == [
        "each dimension's shares must sum to 1: Lighting sums to 0.500"
    ]
    assert 'id="id_condition_profile-error"' in response.content.decode()
    world_a.deployment.refresh_from_db()
    assert world_a.deployment.cycles_per_day == 1000
    assert not AuditEvent.objects.filter(verb="deployment.update").exists()


@pytest.mark.parametrize("field", ["site", "embodiment", "task", "customer"])
def test_another_organizations_object_cannot_be_linked_to_a_deployment(
    field, world_a, world_b, client_for
):
    foreign = {
        "site": world_b.site.pk,
        "embodiment": world_b.embodiment.pk,
        "task": world_b.task.pk,
        "customer": world_b.customer.pk,
    }[field]
    client = client_for(world_a.manager)

    created = client.post("/planner/deployments/new/", deployment_data(world_a, **{field: foreign}))
    url = f"/planner/deployments/{world_a.deployment.pk}/edit/"
    edited = client.post(url, {**as_shown(client.get(url)), field: str(foreign)})

    for response in (created, edited):
        assert response.status_code == 200
        assert "Select a valid choice" in errors_on(response)[field][0]
    assert not Deployment.objects.filter(slug="dep-new").exists()
    world_a.deployment.refresh_from_db()
    assert (
        world_a.deployment.site_id,
        world_a.deployment.embodiment_id,
        world_a.deployment.task_id,
        world_a.deployment.customer_id,
    ) == (world_a.site.pk, world_a.embodiment.pk, world_a.task.pk, world_a.customer.pk)
    assert "qzbravo" not in created.content.decode().lower()


def test_another_customers_site_cannot_be_linked_to_a_deployment(world_a, client_for):
    other = Organization.objects.create(
        slug="brightline", name="Brightline", kind="customer", operator=world_a.operator
    )
    site = SiteFactory(organization=world_a.operator, customer=other, slug="bl", name="BL DC")

    response = client_for(world_a.manager).post(
        "/planner/deployments/new/", deployment_data(world_a, site=site.pk)
    )

    assert response.status_code == 200
    assert errors_on(response)["site"] == [
        "The site 'BL DC' belongs to customer Brightline, not Customer QZALPHA: a deployment "
        "links objects of one customer only."
    ]
    assert not Deployment.objects.filter(slug="dep-new").exists()


# --- embodiments -------------------------------------------------------------------------------


def embodiment_data(**extra):
    return {
        "name": "Arm New",
        "slug": "arm-new",
        "morphology": "fixed arm",
        "end_effector": "parallel gripper",
        "control_rate_hz": "30",
        "calibration_threshold": "0.8",
        "state_topic": "/arm/joint_states",
        "action_topic": "/arm/command",
        "action_source": "stream",
        "gap_policy": "split",
        **rows(
            "action_dimensions",
            {"order": "0", "name": "j1", "unit": "rad", "min_value": "-1", "max_value": "1"},
        ),
        **rows(
            "cameras",
            {
                "name": "wrist",
                "mount": "wrist",
                "width": "640",
                "height": "480",
                "fps": "30",
                "topic": "/wrist/image",
                "clock_offset_ms": "0",
            },
            {
                "name": "head",
                "mount": "head",
                "width": "1280",
                "height": "720",
                "fps": "15",
                "topic": "",
                "clock_offset_ms": "0",
            },
        ),
        **extra,
    }


def test_manager_adds_an_embodiment_with_its_rig_and_stream_mapping(world_a, client_for):
    response = client_for(world_a.manager).post("/planner/embodiments/new/", embodiment_data())

    embodiment = Embodiment.objects.get(slug="arm-new")
    assert response.status_code == 302
    assert (embodiment.state_topic, embodiment.action_topic) == (
        "/arm/joint_states",
        "/arm/command",
    )
    assert sorted(embodiment.cameras.values_list("name", "topic")) == [
        ("head", ""),
        ("wrist", "/wrist/image"),
    ]
    assert list(embodiment.action_dimensions.values_list("name", flat=True)) == ["j1"]
    (event,) = AuditEvent.objects.filter(verb="embodiment.create")
    assert event.changes["cameras"]["added"] == ["wrist", "head"]


def test_two_cameras_of_one_name_are_shown_on_the_camera_list(world_a, client_for):
    data = embodiment_data()
    data["cameras-1-name"] = "wrist"

    response = client_for(world_a.manager).post("/planner/embodiments/new/", data)

    assert response.status_code == 200
    assert errors_on(response)["cameras"] == ["Please correct the duplicate data for name."]
    assert not Embodiment.objects.filter(slug="arm-new").exists()


def test_an_empty_action_range_is_shown_on_its_row(world_a, client_for):
    data = embodiment_data()
    data["action_dimensions-0-max_value"] = "-2"

    response = client_for(world_a.manager).post("/planner/embodiments/new/", data)

    assert errors_on(response)["action_dimensions-0-max_value"] == [
        "Must be above the minimum (-1)."
    ]
    assert not Embodiment.objects.filter(slug="arm-new").exists()


def test_removing_a_camera_a_recording_names_is_refused_and_changes_nothing(world_a, client_for):
    client = client_for(world_a.manager)
    url = f"/planner/embodiments/{world_a.embodiment.pk}/edit/"
    cameras = sorted(world_a.embodiment.cameras.values_list("pk", "name"))
    data = {**as_shown(client.get(url)), "name": "Arm renamed", "cameras-0-DELETE": "on"}

    response = client.post(url, data)

    assert response.status_code == 200
    (problem,) = errors_on(response)["cameras"]
    assert "Cannot remove camera 'front'" in problem and "1 recording" in problem
    assert sorted(world_a.embodiment.cameras.values_list("pk", "name")) == cameras
    assert Embodiment.objects.get(pk=world_a.embodiment.pk).name == "Arm QZALPHA"
    assert not AuditEvent.objects.filter(verb="embodiment.update").exists()


def test_manager_edits_an_embodiment_adding_a_camera(world_a, client_for):
    client = client_for(world_a.manager)
    url = f"/planner/embodiments/{world_a.embodiment.pk}/edit/"
    data = as_shown(client.get(url))
    extra = int(data["cameras-TOTAL_FORMS"]) - 1  # the blank row the page offers
    data.update(
        {
            f"cameras-{extra}-name": "wrist",
            f"cameras-{extra}-mount": "wrist",
            f"cameras-{extra}-width": "640",
            f"cameras-{extra}-height": "480",
            f"cameras-{extra}-fps": "30",
            f"cameras-{extra}-clock_offset_ms": "0",
        }
    )

    response = client.post(url, data)

    assert response.status_code == 302, errors_on(response)
    assert sorted(world_a.embodiment.cameras.values_list("name", flat=True)) == ["front", "wrist"]
    (event,) = AuditEvent.objects.filter(verb="embodiment.update")
    assert event.changes["cameras"] == {"added": ["wrist"], "updated": [], "removed": []}


# --- taxonomies --------------------------------------------------------------------------------


def test_manager_adds_a_condition_dimension_with_values(world_a, client_for):
    data = {
        "name": "Floor",
        "slug": "floor",
        "kind": "categorical",
        "order": "1",
        **rows(
            "values",
            {"slug": "concrete", "label": "Concrete", "order": "0", "stageable": "unknown"},
            {"slug": "tiles", "label": "Tiles", "order": "1", "stageable": "false"},
        ),
    }

    response = client_for(world_a.manager).post("/planner/taxonomy/dimensions/new/", data)

    dimension = ConditionDimension.objects.get(organization=world_a.operator, slug="floor")
    assert response.status_code == 302
    assert list(dimension.values.values_list("slug", "stageable")) == [
        ("concrete", None),
        ("tiles", False),
    ]
    assert AuditEvent.objects.filter(verb="condition_dimension.create").count() == 1


def test_removing_a_used_value_is_refused_naming_it_and_changes_nothing(world_a, client_for):
    client = client_for(world_a.manager)
    url = f"/planner/taxonomy/dimensions/{world_a.dimension.pk}/edit/"
    data = as_shown(client.get(url))
    dim_row = next(k for k, v in data.items() if k.endswith("-slug") and v == "dim")
    data.update({"name": "Light", dim_row.replace("-slug", "-DELETE"): "on"})

    response = client.post(url, data)

    assert response.status_code == 200
    (problem,) = errors_on(response)["values"]
    assert "Cannot remove condition value 'dim' from dimension Lighting" in problem
    assert "1 episode" in problem
    assert "Cannot remove condition value" in response.content.decode()
    assert sorted(world_a.dimension.values.values_list("slug", flat=True)) == ["bright", "dim"]
    assert ConditionDimension.objects.get(pk=world_a.dimension.pk).name == "Lighting"
    assert not AuditEvent.objects.filter(verb="condition_dimension.update").exists()


def test_manager_relabels_a_value_in_place(world_a, client_for):
    client = client_for(world_a.manager)
    url = f"/planner/taxonomy/dimensions/{world_a.dimension.pk}/edit/"
    data = as_shown(client.get(url))
    dim_row = next(k for k, v in data.items() if k.endswith("-slug") and v == "dim")
    data[dim_row.replace("-slug", "-label")] = "Dim sodium"

    response = client.post(url, data)

    assert response.status_code == 302, errors_on(response)
    world_a.values[1].refresh_from_db()
    assert world_a.values[1].label == "Dim sodium"


def test_manager_adds_and_edits_a_failure_mode(world_a, client_for):
    client = client_for(world_a.manager)

    added = client.post(
        "/planner/taxonomy/failure-modes/new/",
        {
            "code": "grasp-slip",
            "name": "Slip",
            "parent": world_a.failure_mode.pk,
            "severity": "6",
            "detectability": "3",
        },
    )
    mode = FailureMode.objects.get(code="grasp-slip")
    url = f"/planner/taxonomy/failure-modes/{mode.pk}/edit/"
    edited = client.post(url, {**as_shown(client.get(url)), "severity": "9"})

    assert (added.status_code, edited.status_code) == (302, 302)
    mode.refresh_from_db()
    assert (mode.parent, mode.severity, mode.detectability) == (world_a.failure_mode, 9, 3)
    assert AuditEvent.objects.filter(verb="failure_mode.update", object_id=str(mode.pk)).exists()


def test_a_failure_mode_cannot_sit_under_its_own_child(world_a, client_for):
    child = FailureMode.objects.create(
        organization=world_a.operator, code="grasp.slip", name="Slip", parent=world_a.failure_mode
    )
    client = client_for(world_a.manager)
    url = f"/planner/taxonomy/failure-modes/{world_a.failure_mode.pk}/edit/"

    response = client.post(url, {**as_shown(client.get(url)), "parent": str(child.pk)})

    assert response.status_code == 200
    assert "cannot be its own parent or ancestor" in errors_on(response)["parent"][0]
    assert FailureMode.objects.get(pk=world_a.failure_mode.pk).parent is None


def test_a_failure_mode_under_another_organizations_mode_is_refused(world_a, world_b, client_for):
    response = client_for(world_a.manager).post(
        "/planner/taxonomy/failure-modes/new/",
        {
            "code": "x",
            "name": "X",
            "parent": world_b.failure_mode.pk,
            "severity": "5",
            "detectability": "5",
        },
    )

    assert response.status_code == 200
    assert "Select a valid choice" in errors_on(response)["parent"][0]
    assert not FailureMode.objects.filter(code="x").exists()


# --- access ------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["field", "annotator", "viewer"])
def test_other_roles_get_403_and_change_nothing(role, world_a, client_for):
    client = client_for(getattr(world_a, role))
    audit_before = AuditEvent.objects.count()

    statuses = {
        (url, method): getattr(client, method)(url, {"name": "Taken"}).status_code
        for url in NEW_URLS + edit_urls(world_a)
        for method in ("get", "post")
    }

    assert set(statuses.values()) == {403}
    assert AuditEvent.objects.count() == audit_before
    assert Site.objects.get(pk=world_a.site.pk).name == "Warehouse QZALPHA"


def test_a_manager_of_another_organization_gets_404_and_changes_nothing(
    world_a, world_b, client_for
):
    client = client_for(world_b.manager)
    audit_before = AuditEvent.objects.count()

    statuses = {
        (url, method): getattr(client, method)(url, {"name": "Taken"}).status_code
        for url in edit_urls(world_a)
        for method in ("get", "post")
    }

    assert set(statuses.values()) == {404}
    assert AuditEvent.objects.count() == audit_before
    assert Embodiment.objects.get(pk=world_a.embodiment.pk).name == "Arm QZALPHA"


def test_managers_see_new_and_edit_links(world_a, client_for):
    client = client_for(world_a.manager)

    pages = {
        "/planner/sites/": "/planner/sites/new/",
        f"/planner/sites/{world_a.site.pk}/": f"/planner/sites/{world_a.site.pk}/edit/",
        "/planner/deployments/": "/planner/deployments/new/",
        f"/planner/deployments/{world_a.deployment.pk}/": (
            f"/planner/deployments/{world_a.deployment.pk}/edit/"
        ),
        "/planner/embodiments/": "/planner/embodiments/new/",
        f"/planner/embodiments/{world_a.embodiment.pk}/": (
            f"/planner/embodiments/{world_a.embodiment.pk}/edit/"
        ),
        "/planner/taxonomy/": f"/planner/taxonomy/dimensions/{world_a.dimension.pk}/edit/",
    }

    for page, link in pages.items():
        assert f'href="{link}"' in client.get(page).content.decode(), page
    taxonomy = client.get("/planner/taxonomy/").content.decode()
    for link in (
        "/planner/taxonomy/dimensions/new/",
        "/planner/taxonomy/failure-modes/new/",
        f"/planner/taxonomy/failure-modes/{world_a.failure_mode.pk}/edit/",
    ):
        assert f'href="{link}"' in taxonomy


def test_the_edit_links_are_only_drawn_for_managers(world_a, rf):
    from django.template.loader import render_to_string

    for role, drawn in (("manager", True), ("viewer", False), ("field", False)):
        html = render_to_string(
            "frontend/planner/site_detail.html",
            {"site": world_a.site, "role": role, "windows": [], "presents": [], "deployments": []},
        )
        assert (f"/planner/sites/{world_a.site.pk}/edit/" in html) is drawn, role


# --- review: customers never move, customer members never write -------------------------------


def test_a_deployment_cannot_move_to_another_customer_and_nothing_changes(world_a, client_for):
    other = Organization.objects.create(
        slug="brightline", name="Brightline", kind="customer", operator=world_a.operator
    )
    client = client_for(world_a.manager)
    url = f"/planner/deployments/{world_a.deployment.pk}/edit/"
    data = {**as_shown(client.get(url)), "customer": other.pk, "name": "Moved"}

    response = client.post(url, data)

    assert response.status_code == 200
    (problem,) = errors_on(response)["customer"]
    assert "cannot move to another customer" in problem
    stored = Deployment.objects.get(pk=world_a.deployment.pk)
    assert (stored.customer_id, stored.name) == (world_a.customer.pk, world_a.deployment.name)


def test_a_manager_of_a_customer_organization_cannot_edit_or_import_into_its_deployments(
    world_a, client_for
):
    from django.contrib.auth import get_user_model

    from accounts.models import Membership

    user = get_user_model().objects.create_user(username="customer-manager", password="x")
    Membership.objects.create(user=user, organization=world_a.customer, role="manager")
    client = client_for(user)
    deployment = world_a.deployment

    edit = client.post(f"/planner/deployments/{deployment.pk}/edit/", {"name": "Mine now"})
    production = client.post(f"/planner/deployments/{deployment.pk}/production/", {})

    assert (edit.status_code, production.status_code) == (404, 404)
    assert Deployment.objects.get(pk=deployment.pk).name == deployment.name


def test_a_refused_camera_removal_undoes_the_action_dimension_change_made_before_it(
    world_a, client_for
):
    client = client_for(world_a.manager)
    url = f"/planner/embodiments/{world_a.embodiment.pk}/edit/"
    shown = as_shown(client.get(url))
    units = dict(world_a.embodiment.action_dimensions.values_list("pk", "unit"))
    assert "action_dimensions-0-unit" in shown
    data = {**shown, "action_dimensions-0-unit": "furlong", "cameras-0-DELETE": "on"}

    response = client.post(url, data)

    assert response.status_code == 200 and "cameras" in errors_on(response)
    assert dict(world_a.embodiment.action_dimensions.values_list("pk", "unit")) == units
