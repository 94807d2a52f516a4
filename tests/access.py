"""Enumerate every URL route so access tests cover each one, including routes added later.

The routes and their declared roles come from ``frontend.access``. A route with an object
parameter must tell the test which model the parameter names: DRF viewsets through
``base_queryset``, page views through ``scoped_model``. A route that does neither makes
``concrete_url`` raise, so it cannot slip past the access matrix.

A parameter that is no attribute of the object (an episode's camera) is filled by
``OTHER_PARAMS``, which first gives the object what the route serves, so the owner's request
can succeed and the other organization's 404 means something.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from frontend.access import PARAM, Route, all_routes

__all__ = ["Route", "all_routes", "concrete_url"]


def _recorded_camera(episode: Any) -> str:
    """Record and convert the world's episode with its front camera; name that video."""
    from tests.labeling.player_support import FRONT, record_episode

    record_episode(episode)
    return FRONT


OTHER_PARAMS: dict[str, Callable[[Any], str]] = {"camera": _recorded_camera}


def concrete_url(route: Route, objects: dict[type, Any]) -> str:
    """Fill the route's parameters with the given world's objects."""
    url = route.pattern
    if route.params:
        model = route.model()
        obj = objects.get(model)
        if obj is None:
            raise LookupError(f"the test world has no {model.__name__} for {route.pattern!r}")
        for name in route.params:
            if name in OTHER_PARAMS:
                url = PARAM.sub(OTHER_PARAMS[name](obj), url, count=1)
                continue
            attribute = {
                "token": "calendar_token" if hasattr(obj, "calendar_token") else "token"
            }.get(name, name)
            value = getattr(obj, attribute, None)
            if value is None:
                value = obj.pk
            url = PARAM.sub(str(value), url, count=1)
    return "/" + url
