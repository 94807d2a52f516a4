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
