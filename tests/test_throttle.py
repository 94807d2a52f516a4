"""API throttling: anonymous callers are rate-limited (429 past the rate); members are not."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import override_settings
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

TINY = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"anon": "3/min"}}


@pytest.fixture
def tiny_anon_rate(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Three anonymous requests a minute, from an empty throttle history.

    DRF reads the rates into ``SimpleRateThrottle.THROTTLE_RATES`` when it is imported, so
    override_settings alone does not reach a running throttle: set the class attribute too.
    """
    cache.clear()
    with override_settings(REST_FRAMEWORK=TINY):
        monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", TINY["DEFAULT_THROTTLE_RATES"])
        yield
    cache.clear()


def test_the_anonymous_throttle_is_configured_for_every_api_view():
    assert AnonRateThrottle in APIView.throttle_classes
    assert settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["anon"] == "60/min"


def test_an_anonymous_caller_past_the_rate_gets_429(tiny_anon_rate, client, db):
    codes = [client.get("/api/schema/").status_code for _ in range(4)]

    assert codes == [200, 200, 200, 429]
    refused = client.get("/api/schema/")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0


def test_the_anonymous_rate_is_counted_per_address(tiny_anon_rate, client, db):
    for _ in range(3):
        client.get("/api/schema/", REMOTE_ADDR="10.0.0.1")

    assert client.get("/api/schema/", REMOTE_ADDR="10.0.0.1").status_code == 429
    assert client.get("/api/schema/", REMOTE_ADDR="10.0.0.2").status_code == 200


def test_a_signed_in_member_is_not_throttled(tiny_anon_rate, world_a, client_for):
    manager = client_for(world_a.manager)

    codes = {manager.get("/api/sites/").status_code for _ in range(10)}

    assert codes == {200}


def test_a_made_up_forwarded_for_header_does_not_escape_the_rate(tiny_anon_rate, client, db):
    codes = [
        client.get("/api/schema/", HTTP_X_FORWARDED_FOR=f"203.0.113.{i}").status_code
        for i in range(4)
    ]

    assert codes == [200, 200, 200, 429]
