"""Customer dashboards: own data only, share links with expiry and revocation, printable."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from analytics.models import DashboardShare


def test_viewer_dashboard_shows_map_heatmap_and_rounds_of_their_own_customer(
    world_a, world_b, client_for
):
    response = client_for(world_a.viewer).get("/dashboard/")

    body = response.content.decode()
    assert response.status_code == 200
    assert "Deployment QZALPHA" in body and "Campaign QZALPHA" in body
    assert 'id="site-map"' in body
    assert "qzbravo" not in body.lower()


def test_manager_creates_a_share_link_that_works_until_revoked(world_a, client_for):
    manager = client_for(world_a.manager)

    manager.post(f"/dashboard/{world_a.customer.slug}/share/", {"days": "7", "label": "ops review"})
    share = DashboardShare.objects.get(customer=world_a.customer, label="ops review")
    shared = client_for(None).get(f"/share/{share.token}/")
    manager.post(f"/dashboard/shares/{share.pk}/revoke/")
    revoked = client_for(None).get(f"/share/{share.token}/")

    assert shared.status_code == 200
    assert "Deployment QZALPHA" in shared.content.decode()
    assert "Share this dashboard" not in shared.content.decode()
    assert revoked.status_code == 410
    assert "Deployment QZALPHA" not in revoked.content.decode()


def test_expired_share_links_are_404(world_a, client_for):
    share = DashboardShare.objects.create(
        organization=world_a.operator,
        customer=world_a.customer,
        token="t" * 43,
        expires_at=timezone.now() - timedelta(minutes=1),
    )

    assert client_for(None).get(f"/share/{share.token}/").status_code == 404


def test_a_manager_of_another_operator_cannot_share_or_revoke(world_a, world_b, client_for):
    share = DashboardShare.objects.create(
        organization=world_a.operator,
        customer=world_a.customer,
        token="s" * 43,
        expires_at=timezone.now() + timedelta(days=1),
    )
    other = client_for(world_b.manager)

    created = other.post(f"/dashboard/{world_a.customer.slug}/share/", {"days": "7"})
    revoked = other.post(f"/dashboard/shares/{share.pk}/revoke/")

    assert created.status_code == 404
    assert revoked.status_code == 404
    assert DashboardShare.objects.get(pk=share.pk).revoked_at is None
    assert (
        DashboardShare.objects.filter(customer=world_a.customer).count() == 2
    )  # the world's and this one


def test_viewer_cannot_create_share_links(world_a, client_for):
    response = client_for(world_a.viewer).post(
        f"/dashboard/{world_a.customer.slug}/share/", {"days": "7"}
    )

    assert response.status_code == 403


def test_dashboard_has_a_print_stylesheet(client, db):
    from pathlib import Path

    css = (Path(__file__).resolve().parents[2] / "frontend/static/frontend/app.css").read_text()

    assert "@media print" in css


def test_an_edited_deployment_and_site_name_show_on_the_next_render(world_a, client_for):
    from sites.models import Deployment, Site

    viewer = client_for(world_a.viewer)
    before = viewer.get("/dashboard/").content.decode()
    # One through update() (no save(), no auto_now), one through save(): both must show.
    Deployment.objects.filter(pk=world_a.deployment.pk).update(name="Renamed line QZALPHA")
    site = Site.objects.get(pk=world_a.site.pk)
    site.name = "Relocated hall QZALPHA"
    site.save()

    after = viewer.get("/dashboard/").content.decode()

    assert "Deployment QZALPHA" in before and "Warehouse QZALPHA" in before
    assert "<td>Renamed line QZALPHA</td>" in after
    assert "<td>Relocated hall QZALPHA</td>" in after  # the table; the map's JSON too:
    assert "Relocated hall QZALPHA" in after.split('id="site-map"', 1)[1]


def test_edited_campaigns_rounds_targets_and_production_show_on_the_next_render(
    world_a, client_for
):
    from campaigns.models import Campaign, CollectionRound
    from sites.models import Deployment, ProductionLog

    viewer = client_for(world_a.viewer)
    viewer.get("/dashboard/")
    Campaign.objects.filter(pk=world_a.campaign.pk).update(name="Winter push QZALPHA")
    # Customers see published rounds only (tests/frontend/test_published_rounds.py).
    CollectionRound.objects.filter(pk=world_a.round.pk).update(
        status="scheduled",
        plan_summary={"episodes": 4321, "interventions_before": 9.0, "interventions_after": 3.0},
    )
    Deployment.objects.filter(pk=world_a.deployment.pk).update(reliability_target=0.987)
    ProductionLog.objects.create(
        deployment=world_a.deployment,
        condition_set=world_a.episode.condition_set,
        day="2026-10-02",
        cycles=1000,
        failures=250,
    )

    body = viewer.get("/dashboard/").content.decode()

    assert "Winter push QZALPHA" in body
    assert "4,321" in body or "4321" in body
    assert "98.7%" in body
    assert "75.00%" in body or "75.0%" in body  # success now, from the new production log


def test_a_cached_dashboard_of_one_customer_is_not_refreshed_by_another_customers_edit(
    world_a, world_b, client_for, django_assert_max_num_queries
):
    from sites.models import Deployment

    viewer = client_for(world_a.viewer)
    viewer.get("/dashboard/")
    Deployment.objects.filter(pk=world_b.deployment.pk).update(name="Other line QZBRAVO")

    with django_assert_max_num_queries(12):
        body = viewer.get("/dashboard/").content.decode()

    assert "Deployment QZALPHA" in body and "QZBRAVO" not in body
