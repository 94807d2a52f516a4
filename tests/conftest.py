"""Shared fixtures: two operator organizations with a world each, and their members.

Most scoping tests run the same request as a member of ``org_a`` and of ``org_b`` (and as
customer viewers of each): the second organization's objects must be a 404, never a leak.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client
from hypothesis import settings

from tests.browser import fair_scheduling
from tests.factories import World, build_world

fair_scheduling()  # in every worker: see its docstring

# No deadline on property tests: how long an example takes depends on the machine and on what
# else it runs, and timing belongs in bench/, not in a test that passes or fails.
settings.register_profile("fieldcraft", deadline=None)
settings.load_profile("fieldcraft")


@pytest.fixture(autouse=True)
def _ordinary_scheduling() -> Iterator[None]:
    """Whatever a test ran (PyAV with SVT-AV1, say), the next one starts under the ordinary
    scheduler (see :func:`tests.browser.fair_scheduling`)."""
    yield
    fair_scheduling()


@pytest.fixture(autouse=True)
def _eager_celery(settings: Any) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    # The demo's played round attaches two recordings (not twelve) to keep the suite quick.
    settings.FIELDCRAFT = {**settings.FIELDCRAFT, "DEMO_RECORDINGS": 2}
    settings.AXES_ENABLED = False
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _media_in_tmp(settings: Any, tmp_path_factory: Any) -> None:
    """Uploads, exports and recordings a test writes go to a temporary folder."""
    settings.MEDIA_ROOT = tmp_path_factory.mktemp("media")


@pytest.fixture(autouse=True)
def _side_connections_closed() -> Iterator[None]:
    """Work beside the request keeps its threads' connections; close them after each test,
    or the test database could not be dropped at the end."""
    yield
    from accounts.beside import beside_close

    beside_close()


@pytest.fixture(autouse=True)
def _no_server_errors(request: Any) -> Iterator[None]:
    """Fail any test during which the app raised an unhandled exception (a 500), even where
    the response went to a browser, a thread or a live server rather than the test client."""
    from django.core.signals import got_request_exception

    raised: list[str] = []

    def record(sender: Any, request: Any = None, **kwargs: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        path = getattr(request, "path", "?")
        raised.append(f"{getattr(request, 'method', '?')} {path}: {exc!r}")

    got_request_exception.connect(record, weak=False)
    yield
    got_request_exception.disconnect(record)
    if raised and request.node.get_closest_marker("server_errors_expected") is None:
        pytest.fail("the app answered with a server error:\n" + "\n".join(raised))


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
