"""Shared fixtures: two operator organizations with a world each, and their members.

Most scoping tests run the same request as a member of ``org_a`` and of ``org_b`` (and as
customer viewers of each): the second organization's objects must be a 404, never a leak.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client

from tests.factories import World, build_world


@pytest.fixture(autouse=True)
def _eager_celery(settings: Any) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.AXES_ENABLED = False
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _media_in_tmp(settings: Any, tmp_path_factory: Any) -> None:
    """Uploads, exports and recordings a test writes go to a temporary folder."""
    settings.MEDIA_ROOT = tmp_path_factory.mktemp("media")


@pytest.fixture(autouse=True)
def _side_connections_closed() -> Iterator[None]:
    """Work beside a gap report keeps its threads' connections; close them after each test,
    or the test database could not be dropped at the end."""
    yield
    from analytics.services.gap_inputs import beside_close

    beside_close()


@pytest.fixture
def world_a(db: None) -> World:
    return build_world("qzalpha")


@pytest.fixture
def world_b(db: None) -> World:
    return build_world("qzbravo")


@pytest.fixture
def client_for() -> Callable[[Any], Client]:
    def make(user: Any) -> Client:
        client = Client()
        if user is not None:
            client.force_login(user)
        return client

    return make
