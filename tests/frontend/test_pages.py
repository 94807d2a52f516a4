"""The three surfaces: each role lands on its home with real data, and lists stay flat in queries."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from campaigns.models import CollectionTask
from tests.access import all_routes
from tests.factories import EmbodimentFactory, SiteFactory


@pytest.mark.parametrize(
    ("role", "home", "expected_text"),
    [
        ("manager", "/planner/", "Campaign QZALPHA"),
        ("field", "/field/", "Warehouse QZALPHA"),
        ("annotator", "/label/", "Label queue"),
        ("viewer", "/dashboard/", "Deployment QZALPHA"),
    ],
)
def test_each_role_lands_on_its_own_home(world_a, client_for, role, home, expected_text):
    from django.utils import timezone

    # The field home lists today's and upcoming tasks: the world's task is today's.
    CollectionTask.objects.filter(round=world_a.round).update(scheduled_date=timezone.localdate())
    client = client_for(getattr(world_a, role))

    response = client.get("/", follow=True)

    assert response.redirect_chain[-1][0] == home
    assert response.status_code == 200
    assert expected_text in response.content.decode()


def test_field_member_sees_only_their_teams_tasks(world_a, client_for):
    from campaigns.models import FieldTeam

    other_team = FieldTeam.objects.create(
        organization=world_a.operator,
        slug="other",
        name="Other team",
        home_base="x",
        home_latitude=0,
        home_longitude=0,
    )
    other_site = SiteFactory(organization=world_a.operator, name="Secret Depot QZ")
    CollectionTask.objects.create(
        round=world_a.round,
        site=other_site,
        embodiment=world_a.embodiment,
        team=other_team,
        scheduled_date=world_a.collection_task.scheduled_date,
        status="published",
    )

    visible = CollectionTask.objects.visible_to(world_a.field)

    assert list(visible) == [world_a.collection_task]
    assert CollectionTask.objects.visible_to(world_a.manager).count() == 2


def test_viewer_cannot_open_planner_pages(world_a, client_for):
    response = client_for(world_a.viewer).get("/planner/")

    assert response.status_code == 403


def test_viewer_dashboard_shows_reliability_now_vs_target(world_a, client_for):
    response = client_for(world_a.viewer).get("/dashboard/")

    body = response.content.decode()
    assert response.status_code == 200
    assert "Customer QZALPHA" in body
    assert "97.0%" in body  # 97 of 100 evaluation trials succeeded
    assert "99.90%" in body  # the target


def test_manager_cannot_open_another_customers_dashboard_by_slug(world_a, world_b, client_for):
    response = client_for(world_a.manager).get(f"/dashboard/{world_b.customer.slug}/")

    assert response.status_code == 404


def _grow(world, n: int) -> None:
    """Add n more of each listed kind of object to a world."""
    from datetime import date

    from campaigns.models import Campaign
    from campaigns.services import round_create
    from sites.models import ActionDimension, Deployment

    for i in range(n):
        emb = EmbodimentFactory(organization=world.operator)
        ActionDimension.objects.create(
            embodiment=emb, name="j", unit="rad", min_value=0, max_value=1
        )
        site = SiteFactory(organization=world.operator, customer=world.customer)
        dep = Deployment.objects.create(
            organization=world.operator,
            customer=world.customer,
            slug=f"grow-{i}",
            name=f"Grow {i}",
            site=site,
            embodiment=emb,
            task=world.task,
            cycles_per_day=100,
            reliability_target=0.99,
        )
        campaign = Campaign.objects.create(
            organization=world.operator,
            customer=world.customer,
            slug=f"grow-{i}",
            name=f"Grow {i}",
            task=world.task,
            reliability_goal=0.99,
            start_date=date(2026, 1, 1),
            end_date=date(2026, 2, 1),
        )
        campaign.deployments.set([dep])
        campaign.embodiments.set([emb])
        round_create(campaign=campaign)


LIST_URLS = [
    "/planner/",
    "/planner/deployments/",
    "/planner/sites/",
    "/planner/embodiments/",
    "/planner/taxonomy/",
    "/dashboard/",
    "/label/",
    "/field/",
    *sorted(
        "/" + r.pattern
        for r in all_routes()
        if r.is_api
        and not r.params
        and r.pattern.endswith("/")
        and "GET" in r.methods
        and r.pattern not in ("api/", "api/schema/", "api/docs/")
    ),
]


@pytest.mark.parametrize("url", LIST_URLS)
def test_list_query_count_does_not_grow_with_rows(world_a, client_for, url):
    client = client_for(world_a.manager)
    client.get(url)  # warm caches (content types, sessions)
    with CaptureQueriesContext(connection) as small:
        assert client.get(url).status_code == 200

    _grow(world_a, 6)
    with CaptureQueriesContext(connection) as large:
        assert client.get(url).status_code == 200

    assert len(large) <= len(small), f"{url}: {len(small)} queries grew to {len(large)}"
