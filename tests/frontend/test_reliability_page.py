"""The reliability page of a deployment, through its URL."""

from __future__ import annotations

import json
import re

import pytest

from accounts.models import Role
from tests.analytics.production_support import seed_production
from tests.factories import member


def url_of(world):
    return f"/planner/deployments/{world.deployment.pk}/reliability/"


def figures(body: str) -> dict[str, dict]:
    return {
        m.group(1): json.loads(m.group(2))
        for m in re.finditer(
            r'<script id="([^"]+)" type="application/json">(.*?)</script>', body, re.S
        )
    }


def test_manager_sees_series_breakdowns_and_a_flag_for_an_injected_shift(world_a, client_for):
    seed_production(world_a, shift=True)

    response = client_for(world_a.manager).get(url_of(world_a))

    assert response.status_code == 200
    body = response.content.decode()
    shifts = body[body.index('id="shifts"') : body.index("</section>", body.index('id="shifts"'))]
    assert "Grasp failure rose from" in shifts
    assert "under dim lighting since" in shifts
    assert "at most a 5% chance of any false flag" in shifts
    plots = figures(body)
    timeline = plots["reliability-timeline"]
    assert len(timeline["data"][1]["x"]) == 35
    assert timeline["data"][0]["fill"] == "toself"  # the interval band
    assert {t["name"] for t in plots["reliability-modes"]["data"]} == {"Grasp failure", "Drop"}
    assert any(k.startswith("condition-") for k in plots)
    assert "reliability-policies" in plots
    assert "dim lighting" in body and "bright lighting" in body
    assert "Policy qzalpha" in body and "policy not reported" in body


def test_stationary_production_shows_no_flag(world_a, client_for):
    seed_production(world_a, shift=False)

    response = client_for(world_a.manager).get(url_of(world_a))

    body = response.content.decode()
    assert response.status_code == 200
    assert "No shift: no rate rose" in body
    assert "rose from" not in body


def test_a_deployment_without_production_says_so(world_a, client_for):
    response = client_for(world_a.manager).get(url_of(world_a))

    assert response.status_code == 200
    assert "No production logged for this deployment yet" in response.content.decode()


def test_manager_of_other_org_gets_404(world_a, world_b, client_for):
    seed_production(world_a)

    response = client_for(world_b.manager).get(url_of(world_a))

    assert response.status_code == 404


def test_customer_viewer_sees_own_deployment_and_not_anothers(world_a, world_b, client_for):
    seed_production(world_a)

    own = client_for(world_a.viewer).get(url_of(world_a))
    other = client_for(world_b.viewer).get(url_of(world_a))

    assert own.status_code == 200
    assert "Grasp failure rose from" in own.content.decode()
    assert other.status_code == 404


@pytest.mark.parametrize("role", [Role.FIELD, Role.ANNOTATOR])
def test_field_and_annotator_roles_are_refused(world_a, client_for, role):
    user = member(world_a.operator, role, f"{role}-rel")

    response = client_for(user).get(url_of(world_a))

    assert response.status_code == 403


def test_the_deployment_page_and_the_viewers_dashboard_link_to_it(world_a, client_for):
    detail = client_for(world_a.manager).get(f"/planner/deployments/{world_a.deployment.pk}/")
    dashboard = client_for(world_a.viewer).get(f"/dashboard/{world_a.customer.slug}/")

    assert url_of(world_a) in detail.content.decode()
    assert url_of(world_a) in dashboard.content.decode()


def test_query_count_does_not_grow_with_days_or_records(world_a, client_for):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sites.models import FailureRecord

    client = client_for(world_a.manager)
    seed_production(world_a, shift=False)
    with CaptureQueriesContext(connection) as small:
        first = client.get(url_of(world_a))
    # Twice the failure records, on the same days and cells.
    existing = list(FailureRecord.objects.filter(deployment=world_a.deployment))
    for record in existing:
        record.pk = None
    FailureRecord.objects.bulk_create(existing)
    records = FailureRecord.objects.filter(deployment=world_a.deployment).count()
    with CaptureQueriesContext(connection) as large:
        second = client.get(url_of(world_a))

    assert first.status_code == second.status_code == 200
    assert records == 2 * len(existing) > 0
    assert len(large.captured_queries) == len(small.captured_queries) <= 10
