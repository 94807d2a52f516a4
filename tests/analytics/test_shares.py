"""Share links to a customer's dashboard: created and revoked through the sharing services
(audited), and a revoked link says so on a page of its own that shows nothing it shared."""

from __future__ import annotations

from accounts.models import AuditEvent
from analytics.models import DashboardShare


def test_creating_a_share_link_records_who_made_it_and_for_how_long(world_a, client_for):
    response = client_for(world_a.manager).post(
        f"/dashboard/{world_a.customer.slug}/share/", {"days": "7", "label": "board"}
    )

    share = DashboardShare.objects.get(customer=world_a.customer, label="board")
    assert response.status_code == 302
    assert share.created_by == world_a.manager
    assert 6.9 < (share.expires_at - share.created_at).total_seconds() / 86400 < 7.1
    event = AuditEvent.objects.get(verb="share.create", object_id=str(share.pk))
    assert (event.actor, event.changes) == (world_a.manager, {"days": 7, "label": "board"})


def test_revoking_twice_keeps_the_first_revocation_and_audits_each(world_a, client_for):
    manager = client_for(world_a.manager)
    url = f"/dashboard/shares/{world_a.share.pk}/revoke/"

    manager.post(url)
    first = DashboardShare.objects.get(pk=world_a.share.pk).revoked_at
    manager.post(url)

    assert first is not None
    assert DashboardShare.objects.get(pk=world_a.share.pk).revoked_at == first
    assert (
        AuditEvent.objects.filter(verb="share.revoke", object_id=str(world_a.share.pk)).count() == 2
    )


def test_a_revoked_share_link_says_it_was_revoked_and_shows_nothing_it_shared(world_a, client_for):
    client_for(world_a.manager).post(f"/dashboard/shares/{world_a.share.pk}/revoke/")

    response = client_for(None).get(f"/share/{world_a.share.token}/")

    body = response.content.decode()
    assert response.status_code == 410
    assert "This share link was revoked" in body
    assert 'class="topbar"' in body and "app.css" in body  # the app's layout
    for secret in (world_a.customer.name, world_a.deployment.name, world_a.site.name, "QZALPHA"):
        assert secret not in body


def test_an_unknown_share_token_is_still_a_plain_404(world_a, client_for):
    response = client_for(None).get("/share/" + "n" * 43 + "/")

    assert response.status_code == 404
    assert "revoked" not in response.content.decode()
