"""Property-based API testing with schemathesis against /api/schema/ (bounded examples).

Every operation of the schema gets generated requests as a manager of one organization: no
response may be a server error, and every documented response must match its schema.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance


def _schema() -> schemathesis.BaseSchema:
    from config.wsgi import application

    # The schema view needs no database, so it can be loaded when the module is collected.
    return schemathesis.openapi.from_wsgi("/api/schema/", application)


schema = _schema()


@pytest.fixture(autouse=True)
def _keep_test_connection():
    """Keep Django's test transaction open across WSGI calls, as its test client does."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_operation_errors_or_breaks_its_schema(case, world_a, settings):
    token, _ = Token.objects.get_or_create(user=world_a.manager)

    case.call_and_validate(
        headers={"Authorization": f"Token {token.key}"},
        checks=[not_a_server_error, response_schema_conformance],
    )


# ------------------------------------------------------------------ hostile input, every role
#
# Beside the generated examples above: for every operation of the schema and every role of
# the world (manager, field, annotator, viewer), a handful of bodies and query strings that
# once broke the server (issue 15): JSON nested 5,000 deep, lone surrogates, integers and
# floats too large for the database or for JSON, NUL inside decoded text, and ids that do
# not fit. A direct loop over the operations with Django's test client, signed in by session
# with CSRF enforced as a browser is (that path once parsed the body before permissions).

ROLES = ("manager", "field", "annotator", "viewer")
DEPTH = 5_000
HUGE = 10**30


def _operations() -> list[tuple[str, str, dict]]:
    from drf_spectacular.generators import SchemaGenerator

    spec = SchemaGenerator().get_schema(request=None, public=True)
    components = spec["components"]["schemas"]
    operations = []
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            content = (operation.get("requestBody") or {}).get("content", {})
            body_schema = next(iter(content.values()), {}).get("schema", {})
            ref = body_schema.get("$ref", "")
            properties = components.get(ref.rsplit("/", 1)[-1], body_schema).get("properties", {})
            query = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
            operations.append(
                (method.upper(), path, {"properties": properties, "query": query, "body": content})
            )
    return operations


def _hostile_bodies(properties: dict) -> dict[str, str]:
    """JSON texts (as sent on the wire) keyed by what each tries."""
    names = list(properties) or ["name"]

    def each(value: str) -> str:
        return "{" + ", ".join(f'"{name}": {value}' for name in names) + "}"

    deep = "[" * DEPTH + "]" * DEPTH
    return {
        "deep array": deep,
        "deep field": "{" + f'"{names[0]}": {deep}' + "}",
        "deep objects": '{"a": ' * DEPTH + "1" + "}" * DEPTH,
        "lone surrogate": each('"\\ud800"'),
        "lone surrogate in a list": each('["\\udfff"]'),
        "lone surrogate key": '{"\\ud800": 1}',
        "huge integer": each(str(HUGE)),
        "huge integer in a list": each(f"[{HUGE}]"),
        "huge float": each("1e999"),
        "NUL in text": each('"a\\u0000b"'),
    }


def _concrete(path: str, world) -> str:
    from django.urls import resolve

    if "{id}" not in path:
        return path
    view = resolve(path.replace("{id}", "1")).func.cls
    objects = {type(v): v for v in world.objects().values()}
    return path.replace("{id}", str(objects[view.base_queryset.model].pk))


def _browser_client(user):
    from django.middleware.csrf import _get_new_csrf_string
    from django.test import Client

    client = Client(enforce_csrf_checks=True, raise_request_exception=False)
    client.force_login(user)
    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    return client, {"HTTP_X_CSRFTOKEN": token}


def _hostile_requests(client, csrf, method: str, path: str, url: str, spec: dict):
    """Send the hostile variants that fit the operation; yield (what, response).

    The first variant of each kind that the role is refused (403) ends that kind: refused
    before the body or query is read, the others would be refused the same way.
    """
    from urllib.parse import quote

    utf7_surrogate = quote("\ud800".encode("utf-7"))  # "%2B2AA-": decodes to a lone surrogate
    if spec["body"]:
        for what, text in _hostile_bodies(spec["properties"]).items():
            response = client.generic(method, url, text, content_type="application/json", **csrf)
            yield what, response
            if response.status_code == 403:
                break
        else:
            if "application/x-www-form-urlencoded" in spec["body"]:
                name = next(iter(spec["properties"]), "name")
                yield (
                    "form field with a lone surrogate (utf-7)",
                    client.generic(
                        method,
                        url,
                        f"{name}={utf7_surrogate}",
                        content_type="application/x-www-form-urlencoded; charset=utf-7",
                        **csrf,
                    ),
                )
    elif method != "GET":
        yield "no body", client.generic(method, url, "", **csrf)
    if method != "GET":
        return
    for what, value in (
        ("lone surrogate (utf-7)", utf7_surrogate),
        ("huge integer", str(HUGE)),
        ("lookup in a value", "a__range=x"),
    ):
        query = "&".join(f"{p}={value}" for p in spec["query"]) or f"q={value}"
        # The request charset decodes the query string too: utf-7 lets it carry a surrogate.
        response = client.get(f"{url}?{query}", CONTENT_TYPE="text/plain; charset=utf-7")
        yield f"query: {what}", response
        if response.status_code == 403:
            return
    if "{id}" in path:
        for bad_id in (str(HUGE), "abc", "-1"):
            yield f"id {bad_id[:8]}", client.get(path.replace("{id}", bad_id))


@pytest.mark.slow
@pytest.mark.server_errors_expected  # collected and reported below, all of them at once
def test_hostile_bodies_and_queries_meet_no_server_error_for_any_role(world_a):
    # Deletes last, and the manager (who may do most) last on each operation, so that what
    # one request changes hides as little as possible from the others.
    operations = sorted(_operations(), key=lambda op: op[0] == "DELETE")
    clients = {role: _browser_client(getattr(world_a, role)) for role in reversed(ROLES)}
    failures = []

    for method, path, spec in operations:
        url = _concrete(path, world_a)
        for role, (client, csrf) in clients.items():
            for what, response in _hostile_requests(client, csrf, method, path, url, spec):
                if response.status_code >= 500:
                    failures.append(f"{role} {method} {url} ({what}): {response.status_code}")

    assert failures == []
