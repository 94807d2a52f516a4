"""Security headers the whole app shares."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

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


class RejectNullBytesMiddleware:
    """Refuse text input that carries NUL characters with a 400 naming the problem.

    PostgreSQL text and jsonb cannot store NUL, so such input would otherwise fail deep in a
    query. Binary uploads (octet-stream, multipart files) are not inspected.
    """

    TEXT_TYPES = ("application/json", "application/x-www-form-urlencoded", "text/")

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        from django.http import JsonResponse

        query = request.META.get("QUERY_STRING", "")
        bad = "%00" in query or "\x00" in query or "%00" in request.path or "\x00" in request.path
        content_type = request.META.get("CONTENT_TYPE", "")
        if not bad and content_type.startswith(self.TEXT_TYPES):
            length = int(request.META.get("CONTENT_LENGTH") or 0)
            if 0 < length <= 10 * 1024 * 1024:
                body = request.body
                bad = b"\x00" in body or b"\\u0000" in body or b"%00" in body
        if bad:
            return JsonResponse(
                {"detail": "Input contains NUL characters, which are not allowed."}, status=400
            )
        return self.get_response(request)
