"""Enumerate every URL route so access tests cover each one, including routes added later.

A route with an object parameter must tell the test which model the parameter names:
DRF viewsets through ``base_queryset``, page views through ``scoped_model``. A route that
does neither makes ``concrete_url`` raise, so it cannot slip past the access matrix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver

SKIP_PREFIXES = ("admin/", "static/", "media/")
PARAM = re.compile(r"<(?:(?P<conv>[^>:]+):)?(?P<name>[^>]+)>")


@dataclass(frozen=True)
class Route:
    pattern: str
    callback: Any
    name: str | None

    @property
    def params(self) -> list[str]:
        return [m.group("name") for m in PARAM.finditer(self.pattern)]

    @property
    def is_api(self) -> bool:
        return self.pattern.startswith("api/")

    @property
    def methods(self) -> set[str]:
        actions = getattr(self.callback, "actions", None)
        if actions:
            return {m.upper() for m in actions}
        view_class = getattr(self.callback, "view_class", None)
        if view_class is not None:
            return {m.upper() for m in view_class.http_method_names if hasattr(view_class, m)} - {
                "OPTIONS"
            }
        return {"GET"}

    @property
    def public_by_token(self) -> bool:
        """A capability URL: the token in the path is the credential (e.g. a calendar feed)."""
        return bool(getattr(self.callback, "public_by_token", False))

    def model(self) -> Any:
        if getattr(self.callback, "scoped_model", None) is not None:
            return self.callback.scoped_model
        cls = getattr(self.callback, "cls", None) or getattr(self.callback, "view_class", None)
        if cls is not None and getattr(cls, "base_queryset", None) is not None:
            return cls.base_queryset.model
        if cls is not None and getattr(cls, "scoped_model", None) is not None:
            return cls.scoped_model
        raise LookupError(f"route {self.pattern!r} has object parameters but names no model")


def all_routes() -> list[Route]:
    routes: list[Route] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for p in patterns:
            text = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                walk(p.url_patterns, text)
            elif isinstance(p, URLPattern):
                routes.append(Route(text.lstrip("^").rstrip("$"), p.callback, p.name))

    walk(get_resolver().url_patterns, "")
    cleaned = []
    for r in routes:
        pattern = r.pattern.replace("^", "").replace("$", "").replace("\\.", ".")
        if (
            pattern.startswith(SKIP_PREFIXES)
            or "(?P<format>" in pattern
            or "<drf_format_suffix" in pattern
        ):
            continue
        if "(?P<" in pattern:
            pattern = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"<\1>", pattern)
        cleaned.append(Route(pattern, r.callback, r.name))
    return cleaned


def concrete_url(route: Route, objects: dict[type, Any]) -> str:
    """Fill the route's parameters with the given world's objects."""
    url = route.pattern
    if route.params:
        model = route.model()
        obj = objects.get(model)
        if obj is None:
            raise LookupError(f"the test world has no {model.__name__} for {route.pattern!r}")
        for name in route.params:
            attribute = {
                "token": "calendar_token" if hasattr(obj, "calendar_token") else "token"
            }.get(name, name)
            value = getattr(obj, attribute, None)
            if value is None:
                value = obj.pk
            url = PARAM.sub(str(value), url, count=1)
    return "/" + url
