"""Security: login throttling, no inline scripts, security headers, audit trail."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_login_locks_out_after_repeated_failures_and_cools_off(settings, client):
    from django.contrib.auth import get_user_model

    from accounts.models import Membership, Organization

    settings.AXES_ENABLED = True
    settings.AXES_FAILURE_LIMIT = 3
    org = Organization.objects.create(slug="o", name="O", kind="operator")
    user = get_user_model().objects.create_user("alice", password="correct-horse")
    Membership.objects.create(user=user, organization=org, role="manager")

    for _ in range(3):
        client.post("/login/", {"username": "alice", "password": "wrong"})
    locked = client.post("/login/", {"username": "alice", "password": "correct-horse"})

    assert locked.status_code == 429
    assert b"Too many sign-in attempts" in locked.content

    from axes.utils import reset

    reset(username="alice")
    again = client.post("/login/", {"username": "alice", "password": "correct-horse"})
    assert again.status_code == 302


def test_templates_carry_no_inline_scripts_or_event_handlers():
    offenders = []
    for template in (ROOT / "frontend" / "templates").rglob("*.html"):
        text = template.read_text()
        for match in re.finditer(r"<script\b([^>]*)>", text):
            attrs = match.group(1)
            if "src=" not in attrs and 'type="application/json"' not in attrs:
                offenders.append(f"{template.name}: inline <script{attrs}>")
        if re.search(r"\son[a-z]+\s*=\s*[\"']", text):
            offenders.append(f"{template.name}: inline event handler")
        if "javascript:" in text:
            offenders.append(f"{template.name}: javascript: URL")

    assert offenders == []


def test_every_page_is_served_with_a_strict_content_security_policy(client, db):
    response = client.get("/login/")

    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp.split("script-src", 1)[1].split(";", 1)[0]
    assert "frame-ancestors 'none'" in csp
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"


def test_round_status_change_is_in_the_audit_trail(world_a):
    from accounts.models import AuditEvent
    from campaigns.services import round_transition

    round_transition(round=world_a.round, to_status="planned", actor=world_a.manager)

    event = AuditEvent.objects.get(verb="round.status", object_id=str(world_a.round.pk))
    assert event.actor == world_a.manager
    assert event.changes == {"status": ["draft", "planned"]}
    assert event.organization == world_a.operator
