"""Every route × every method × every role: each serves exactly the roles it declares.

The declarations live next to the views (``roles`` on pages; ``read_roles``, ``write_roles``
and ``action_roles`` on viewsets) and ``frontend.access`` reads them into one table, the
same one ``manage.py role_matrix`` prints. A role the table allows must never meet a 401 or
403 (a 404 is fine: the queryset may scope the object away from it); a role it does not
allow must be refused before anything is read or written. Routes come from the URL
resolver, so a new route is covered the moment it is added, and one that declares nothing
fails here.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command

from accounts.models import AuditEvent, Role
from frontend.access import ANONYMOUS, PUBLIC, all_routes
from tests.access import concrete_url

ROUTES = all_routes()
ROLES = [Role.FIELD, Role.ANNOTATOR, Role.VIEWER, ANONYMOUS, Role.MANAGER]


def objects_of(world):
    from accounts.models import Organization

    objects = {type(v): v for v in world.objects().values()}
    objects[Organization] = world.customer
    return objects


def user_of(world, role):
    return {
        Role.MANAGER: world.manager,
        Role.FIELD: world.field,
        Role.ANNOTATOR: world.annotator,
        Role.VIEWER: world.viewer,
        ANONYMOUS: None,
    }[role]


def send(client, method, route, url):
    if method == "GET":
        return client.get(url)
    if route.is_api:
        return getattr(client, method.lower())(url, {}, content_type="application/json")
    return getattr(client, method.lower())(url, {})


def test_every_route_declares_its_roles():
    undeclared = []
    for route in ROUTES:
        for method in route.methods:
            try:
                route.roles(method)
            except LookupError as exc:
                undeclared.append(str(exc))

    assert undeclared == []


@pytest.mark.parametrize(
    "route", [r for r in ROUTES if r.name not in PUBLIC], ids=lambda r: r.pattern or "/"
)
def test_each_route_serves_exactly_the_roles_it_declares(route, world_a, client_for):
    url = concrete_url(route, objects_of(world_a))
    wrong = []

    for method in sorted(route.methods, key=lambda m: m == "DELETE"):
        allowed = route.roles(method)
        for role in ROLES:
            audit_before = AuditEvent.objects.count()
            response = send(client_for(user_of(world_a, role)), method, route, url)
            code = response.status_code
            if code >= 500:
                wrong.append(f"{method} {url} as {role}: {code}")
            elif role in allowed:
                if code in (401, 403) or (role == ANONYMOUS and code == 302):
                    wrong.append(f"{method} {url} as {role}: declared allowed, got {code}")
            else:
                refused = (401, 403) if route.is_api else (403,)
                if role == ANONYMOUS and not route.is_api:
                    refused = (302,)
                if code not in refused:
                    wrong.append(f"{method} {url} as {role}: declared refused, got {code}")
                elif AuditEvent.objects.count() != audit_before:
                    wrong.append(f"{method} {url} as {role}: refused but wrote an audit event")

    assert wrong == []


def test_the_role_matrix_command_prints_every_route(capsys):
    call_command("role_matrix")

    out = capsys.readouterr().out
    assert "GET /api/exports/<pk>/download/" in out
    line = next(li for li in out.splitlines() if li.startswith("GET /api/exports/<pk>/download/"))
    assert line.split()[2:] == ["yes", "-", "-", "-", "-"]
