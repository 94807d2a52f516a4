"""Security: login throttling, no inline scripts, security headers, audit trail."""

from __future__ import annotations

import json
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


def _through_nul_check(request, view=None):
    """Run a request through RejectNullBytesMiddleware as Django does: call, then process_view."""
    from django.http import HttpResponse

    from accounts.middleware import RejectNullBytesMiddleware

    def plain_view(request):
        return HttpResponse("reached the view")

    target = view or plain_view
    middleware = RejectNullBytesMiddleware(
        lambda r: middleware.process_view(r, target, (), {}) or target(r)
    )
    return middleware(request)


SPELLED_NUL = "see valve %00, then the \\u0000 marker"


@pytest.mark.parametrize(
    "make",
    [
        lambda rf: rf.post("/x/", {"text": SPELLED_NUL}, content_type="application/json"),
        lambda rf: rf.post("/x/", [[{"note": SPELLED_NUL}]], content_type="application/json"),
        lambda rf: rf.post("/x/", {"note": SPELLED_NUL}),  # multipart: not inspected anyway
        lambda rf: rf.post(
            "/x/", "note=see+valve+%2500", content_type="application/x-www-form-urlencoded"
        ),
        lambda rf: rf.get("/x/", {"q": "%00"}),
        lambda rf: rf.get("/x%2500/"),
        lambda rf: rf.post("/x/", SPELLED_NUL, content_type="text/plain"),
    ],
    ids=["json", "nested json", "multipart", "form", "query", "path", "text"],
)
def test_text_that_only_spells_a_nul_reaches_the_view(rf, make):
    response = _through_nul_check(make(rf))

    assert response.status_code == 200
    assert response.content == b"reached the view"


@pytest.mark.parametrize(
    ("make", "where"),
    [
        (
            lambda rf: rf.post(
                "/x/", [{"payload": {"text": "a\x00"}}], content_type="application/json"
            ),
            "The JSON body at [0].payload.text",
        ),
        (
            lambda rf: rf.post("/x/", {"a\x00": 1}, content_type="application/json"),
            'The JSON body at ["a\\u0000"] (a key)',
        ),
        (
            lambda rf: rf.post(
                "/x/", b'{"text": "raw \x00 byte"}', content_type="application/json"
            ),
            "The JSON body at text",
        ),
        (
            lambda rf: rf.post("/x/", b"not json \x00", content_type="application/json"),
            "The request body",
        ),
        (
            lambda rf: rf.post(
                "/x/", "note=a%00b", content_type="application/x-www-form-urlencoded"
            ),
            'The form field "note"',
        ),
        (
            lambda rf: rf.post(
                "/x/",
                "note=%2BAAA-",
                content_type="application/x-www-form-urlencoded; charset=utf-7",
            ),
            'The form field "note"',
        ),
        (  # the factory encodes the body as declared: the NUL travels as "+AAA-"
            lambda rf: rf.post(
                "/x/", '{"t": "\x00"}', content_type="application/json; charset=utf-7"
            ),
            "The JSON body at t",
        ),
        (lambda rf: rf.get("/x/", {"q": "a\x00b"}), 'The query parameter "q"'),
        (lambda rf: rf.get("/x%00y/"), "The URL path"),
        (lambda rf: rf.post("/x/", "a\x00b", content_type="text/plain"), "The request body"),
    ],
    ids=[
        "json value",
        "json key",
        "raw json byte",
        "broken json",
        "form",
        "utf-7 form",
        "utf-7 json",
        "query",
        "path",
        "text",
    ],
)
def test_a_real_nul_is_refused_with_400_saying_where(rf, make, where):
    response = _through_nul_check(make(rf))

    assert response.status_code == 400
    detail = json.loads(response.content)["detail"]
    assert detail == f"{where} contains a NUL character (U+0000), which cannot be stored; " + (
        "remove it and send again."
    )


def test_a_view_that_checks_nul_per_item_gets_the_body_but_not_a_nul_query(rf):
    from django.http import HttpResponse

    def batch_view(request):
        return HttpResponse(request.body)

    batch_view.nul_checked_by_view = True  # type: ignore[attr-defined]
    body = [{"text": "fine"}, {"text": "bad\x00"}]

    passed = _through_nul_check(
        rf.post("/x/", body, content_type="application/json"), view=batch_view
    )
    refused = _through_nul_check(rf.get("/x/", {"q": "\x00"}), view=batch_view)

    assert passed.status_code == 200
    assert json.loads(passed.content) == body
    assert refused.status_code == 400


def test_the_field_batch_route_passes_a_nul_through_to_per_record_refusal(client_for, world_a):
    good = {
        "uuid": "0b7d2d5e-1b39-4d1a-9d38-6a3c1d1f7a01",
        "kind": "note",
        "task": world_a.collection_task.pk,
        "payload": {"text": "see valve %00"},
        "client_created_at": "2026-11-29T08:00:00Z",
        "task_version_seen": 1,
    }
    bad = {**good, "uuid": "0b7d2d5e-1b39-4d1a-9d38-6a3c1d1f7a02", "payload": {"text": "v\x00"}}

    response = client_for(world_a.field).post(
        "/api/field/records/", data=json.dumps([good, bad]), content_type="application/json"
    )
    elsewhere = client_for(world_a.manager).post(
        "/api/teams/", data=json.dumps({"name": "a\x00"}), content_type="application/json"
    )

    assert response.status_code == 200
    assert [r["status"] for r in response.json()["results"]] == [201, 400]
    assert elsewhere.status_code == 400
    assert "NUL" in elsewhere.json()["detail"]
