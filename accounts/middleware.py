"""Security headers the whole app shares, and the refusal of input holding NUL characters."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.http.request import RawPostDataException

from accounts.parsers import first_string_where

# No inline scripts anywhere: every script is a static file served by the app. Styles may be
# inline because plotly.js and htmx set element styles at run time.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self'",
        "connect-src 'self'",
        "worker-src 'self'",
        "manifest-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "object-src 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.setdefault("Permissions-Policy", "geolocation=(), microphone=(), camera=(self)")
        return response


def first_nul(value: Any, path: str = "") -> str | None:
    """Return where decoded JSON-like data holds a NUL character (U+0000), or None.

    The text ``%00`` or ``\\u0000`` inside a string is ordinary text and is not a NUL.
    """
    return first_string_where(value, lambda text: "\x00" in text, path)


def nul_refusal(where: str) -> str:
    """The sentence that refuses input holding a NUL character at ``where``."""
    return (
        f"{where} contains a NUL character (U+0000), which cannot be stored; "
        "remove it and send again."
    )


class RejectNullBytesMiddleware:
    """Refuse input whose decoded values carry NUL characters with a 400 naming where.

    PostgreSQL text and jsonb cannot store NUL, so such input would otherwise fail deep in a
    query. Only decoded values count: the path, the query string's names and values, a form
    body's names and values, a JSON body's strings and keys, a text body's characters. The
    text ``%00`` or ``\\u0000`` inside a value (a note saying "see valve %00") is ordinary text.
    Binary uploads (octet-stream, multipart files) are not inspected.

    A view that checks NUL itself, item by item, says so with ``nul_checked_by_view = True``
    (on the function or its class): its body is passed through, so that the field record
    batch can refuse the one record holding a NUL and store the others. Its path and query
    string are still checked here.
    """

    FORM_TYPE = "application/x-www-form-urlencoded"
    INSPECT_MAX_BYTES = 10 * 1024 * 1024
    PLAIN_CHARSETS = frozenset({"utf-8", "utf8", "us-ascii", "ascii", "iso-8859-1", "latin-1"})

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = self._in_url(request)
        if where:
            return self._refuse(where)
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: Any,
        view_kwargs: Any,
    ) -> HttpResponse | None:
        owners = (
            view_func,
            getattr(view_func, "cls", None),
            getattr(view_func, "view_class", None),
        )
        if any(getattr(owner, "nul_checked_by_view", False) for owner in owners):
            return None
        where = self._in_body(request)
        return self._refuse(where) if where else None

    def _refuse(self, where: str) -> HttpResponse:
        return JsonResponse({"detail": nul_refusal(where)}, status=400)

    def _in_url(self, request: HttpRequest) -> str | None:
        if "\x00" in request.path:  # the handler has percent-decoded it already
            return "The URL path"
        # Decoded with the request's charset, as views will see it.
        return self._in_pairs(request.GET.lists(), "query parameter")

    @staticmethod
    def _in_pairs(pairs: Iterable[tuple[str, list[str]]], what: str) -> str | None:
        for name, values in pairs:
            if "\x00" in name or any("\x00" in v for v in values):
                return f"The {what} {json.dumps(name)}"
        return None

    def _in_body(self, request: HttpRequest) -> str | None:
        content_type = (request.content_type or "").lower()
        is_json = content_type == "application/json" or content_type.endswith("+json")
        is_form = content_type == self.FORM_TYPE
        if not (is_json or is_form or content_type.startswith("text/")):
            return None
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if not 0 < length <= self.INSPECT_MAX_BYTES:
            return None
        try:
            body = request.body
        except RawPostDataException:  # already read as a stream by an earlier layer
            return None
        declared = (request.content_params or {}).get("charset")
        if (declared or "utf-8").lower().replace("_", "-") in self.PLAIN_CHARSETS:
            # In these encodings a NUL can only arrive as a zero byte or its escape; checking
            # for those first spares nearly every request a second parse of its body.
            escape = b"\\u0000" if is_json else b"%00" if is_form else b"\x00"
            if b"\x00" not in body and escape not in body:
                return None
        try:
            if is_json:
                # Decoded as the parser will (the declared charset, else UTF-8/16/32 as JSON
                # detects it), and leniently: raw control characters in strings count too.
                source = body.decode(declared) if declared else body
                return self._in_json(json.loads(source, strict=False))
            charset = declared or request.encoding or "utf-8"
            if is_form:
                return self._in_pairs(QueryDict(body, encoding=charset).lists(), "form field")
            return "The request body" if "\x00" in body.decode(charset, errors="replace") else None
        except (LookupError, UnicodeDecodeError, ValueError, RecursionError):
            # Not decodable as declared: the view's parser refuses it; a zero byte is a NUL
            # in any ASCII-compatible encoding all the same.
            return "The request body" if b"\x00" in body else None

    @staticmethod
    def _in_json(data: Any) -> str | None:
        where = first_nul(data)
        return f"The JSON body at {where}" if where else None
