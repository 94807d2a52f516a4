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
    assert revoked.status_code == 404


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
