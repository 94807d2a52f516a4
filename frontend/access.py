"""The role table of every route, read from the declarations next to the views.

Pages declare ``roles`` (``frontend.views.base.MemberView``), viewsets ``read_roles`` /
``write_roles`` / ``action_roles`` (``accounts.permissions``). A handful of routes are open
by design and say so here (``PUBLIC``), or carry their credential in the URL
(``public_by_token``). :func:`route_table` lists who may use each route and method; the role
matrix test checks each against what the route really serves, and ``manage.py role_matrix``
prints it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver

from accounts.permissions import MEMBERS, declared_roles

ANONYMOUS = "anonymous"
EVERYONE = frozenset({*MEMBERS, ANONYMOUS})
SKIP_PREFIXES = ("admin/", "static/", "media/")
PARAM = re.compile(r"<(?:(?P<conv>[^>:]+):)?(?P<name>[^>]+)>")
# Open by design: signing in and out, the health probe, the API's schema and its docs.
PUBLIC = frozenset({"login", "logout", "healthz", "api-schema", "api-docs", "home"})


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
            allowed = set(getattr(self.callback.cls, "http_method_names", actions))
            return {m.upper() for m in actions if m in allowed}
        view_class = getattr(self.callback, "view_class", None)
        if view_class is not None:
            return {m.upper() for m in view_class.http_method_names if hasattr(view_class, m)} - {
                "OPTIONS",
                "HEAD",
            }
        return {"GET"}

    @property
    def public_by_token(self) -> bool:
        """A capability URL: the token in the path is the credential (e.g. a calendar feed)."""
        return bool(getattr(self.callback, "public_by_token", False))

    def model(self) -> Any:
        """The model an object parameter of the route names (``base_queryset`` of a viewset,
        ``scoped_model`` of a page); LookupError when it names none."""
        if getattr(self.callback, "scoped_model", None) is not None:
            return self.callback.scoped_model
        cls = getattr(self.callback, "cls", None) or getattr(self.callback, "view_class", None)
        if cls is not None and getattr(cls, "base_queryset", None) is not None:
            return cls.base_queryset.model
        if cls is not None and getattr(cls, "scoped_model", None) is not None:
            return cls.scoped_model
        raise LookupError(f"route {self.pattern!r} has object parameters but names no model")

    def roles(self, method: str) -> frozenset[str]:
        """Who may use this route with ``method``: roles, plus ``anonymous`` where it is open.

        Raises LookupError for a route that declares nothing, so none can slip through.
        """
        if self.public_by_token or self.name in PUBLIC:
            return EVERYONE
        actions = getattr(self.callback, "actions", None)
        view_class = getattr(self.callback, "cls", None)
        if view_class is not None:  # DRF
            view = view_class(**getattr(self.callback, "initkwargs", {}))
            action = actions.get(method.lower()) if actions else None
            view.action = action
            return declared_roles(view, action=action, method=method)
        page = getattr(self.callback, "view_class", None)
        if page is not None and hasattr(page, "roles"):
            return MEMBERS if page.roles is None else frozenset(page.roles)
        raise LookupError(f"route {self.pattern!r} declares no roles")


def all_routes() -> list[Route]:
    """Every URL route of the project but the admin's and static files'."""
    routes: list[Route] = []

    def walk(patterns: list[Any], prefix: str, namespace: str) -> None:
        for p in patterns:
            text = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                inner = f"{namespace}{p.namespace}:" if p.namespace else namespace
                walk(p.url_patterns, text, inner)
            elif isinstance(p, URLPattern):
                name = f"{namespace}{p.name}" if p.name else None
                routes.append(Route(text.lstrip("^").rstrip("$"), p.callback, name))

    walk(get_resolver().url_patterns, "", "")
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


def route_table() -> list[tuple[str, str, frozenset[str]]]:
    """(pattern, method, roles allowed) for every route and method, in URL order."""
    return [
        (route.pattern, method, route.roles(method))
        for route in all_routes()
        for method in sorted(route.methods)
    ]
