"""Every route × every kind of user: the right status, and never another tenant's data.

Routes are enumerated from the URL resolver (see tests/access.py), so a new page or
endpoint is covered the moment it is added.
"""

from __future__ import annotations

import pytest

from accounts.models import AuditEvent
from tests.access import all_routes, concrete_url

ROUTES = all_routes()
LEAK_MARKER_A = "qzalpha"


def objects_of(world):
    from accounts.models import Organization

    objects = {type(v): v for v in world.objects().values()}
    objects[Organization] = world.customer
    return objects


def route_id(route):
    return route.pattern or "/"


def test_the_route_list_is_not_empty():
    patterns = {r.pattern for r in ROUTES}
    assert "api/sites/<pk>/" in patterns
    assert "planner/campaigns/<int:pk>/" in patterns


@pytest.mark.parametrize(
    "route", [r for r in ROUTES if "GET" in r.methods and not r.public_by_token], ids=route_id
)
def test_each_route_serves_its_own_organization_and_hides_it_from_others(
    route, world_a, world_b, client_for
):
    url = concrete_url(route, objects_of(world_a))
    has_object = bool(route.params)

    own = client_for(world_a.manager).get(url)
    other_manager = client_for(world_b.manager).get(url)
    other_viewer = client_for(world_b.viewer).get(url)
    anonymous = client_for(None).get(url)

    assert own.status_code in (200, 302), f"{url}: manager of the owning org got {own.status_code}"
    if has_object:
        assert other_manager.status_code == 404, (
            f"{url}: manager of another org got {other_manager.status_code}"
        )
        assert other_viewer.status_code in (403, 404), (
            f"{url}: viewer of another org got {other_viewer.status_code}"
        )
    for response in (other_manager, other_viewer):
        body = response.content.decode(errors="replace").lower()
        assert LEAK_MARKER_A not in body, f"{url} leaked another organization's data"
    if url not in ("/login/", "/healthz", "/api/schema/", "/api/docs/", "/"):
        assert anonymous.status_code in (302, 401, 403), (
            f"{url}: anonymous got {anonymous.status_code}"
        )


@pytest.mark.parametrize(
    "route", [r for r in ROUTES if r.is_api and r.params and "GET" in r.methods], ids=route_id
)
def test_customer_viewer_sees_own_customer_objects_read_only(route, world_a, client_for):
    from accounts.models import Organization

    model = route.model()
    url = concrete_url(route, objects_of(world_a))
    qs = model._default_manager.all()
    visible_to_viewer = (
        hasattr(qs, "visible_to")
        and qs.visible_to(world_a.viewer).exists()
        and "viewer" in route.roles("GET")
    )

    response = client_for(world_a.viewer).get(url)

    if visible_to_viewer and model is not Organization:
        assert response.status_code == 200, url
        if "PATCH" in route.methods:
            write = client_for(world_a.viewer).patch(url, {}, content_type="application/json")
            assert write.status_code == 403, f"{url}: a viewer could write"
    else:
        # Not visible to customers: 404, or 403 where the whole endpoint is for other roles.
        assert response.status_code in (403, 404), url


@pytest.mark.parametrize("route", [r for r in ROUTES if r.public_by_token], ids=route_id)
def test_capability_urls_serve_only_their_own_token(route, world_a, world_b, client_for):
    own = client_for(None).get(concrete_url(route, objects_of(world_a)))
    url = concrete_url(route, objects_of(world_a))
    token = next(t for t in (world_a.team.calendar_token, world_a.share.token) if t in url)
    guessed = client_for(world_b.manager).get(url.replace(token, "y" * len(token)))

    assert own.status_code == 200
    assert guessed.status_code == 404
    assert "qzbravo" not in own.content.decode(errors="replace").lower()


UNSAFE = [
    r
    for r in ROUTES
    if r.params and ({"POST", "PUT", "PATCH", "DELETE"} & r.methods) and not r.public_by_token
]


@pytest.mark.parametrize("route", UNSAFE, ids=route_id)
def test_writes_to_another_organizations_objects_are_404(route, world_a, world_b, client_for):
    url = concrete_url(route, objects_of(world_a))
    client = client_for(world_b.manager)
    audit_before = AuditEvent.objects.count()

    statuses = []
    for method in sorted({"POST", "PUT", "PATCH", "DELETE"} & route.methods):
        response = getattr(client, method.lower())(url, {}, content_type="application/json")
        statuses.append((method, response.status_code))

    assert all(code in (404, 405) for _, code in statuses), f"{url}: {statuses}"
    assert AuditEvent.objects.count() == audit_before
