"""Authentication that parses no JSON body before permissions are checked."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict
from drf_spectacular import authentication as spectacular_authentication
from rest_framework import authentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request, is_form_media_type


class _CsrfView:
    """The request as Django's CSRF check sees it: ``POST`` is the parsed body only for a
    form body (where a CSRF token field can be); anything else reads as an empty form."""

    def __init__(self, request: Request) -> None:
        object.__setattr__(self, "_api_request", request)

    @property
    def POST(self) -> Any:
        request = self._api_request
        if request.content_type and is_form_media_type(request.content_type):
            return request.POST
        return QueryDict()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api_request._request, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._api_request._request, name, value)


class SessionAuthentication(authentication.SessionAuthentication):
    """DRF's session authentication, whose CSRF check parses form bodies only.

    DRF hands its ``Request`` to Django's CSRF check, whose ``request.POST`` then parses the
    whole body with the API's parsers, JSON included, during authentication and so before
    the permission check: a role that may not write met a body's parse errors instead of
    its 403. A JSON client sends the token in the X-CSRFToken header.
    """

    def enforce_csrf(self, request: Request) -> None:
        def dummy_get_response(request: HttpRequest) -> HttpResponse:  # pragma: no cover
            raise AssertionError("the CSRF check never calls the view")

        view: Any = _CsrfView(request)
        check = authentication.CSRFCheck(dummy_get_response)
        check.process_request(view)
        reason = check.process_view(view, None, (), {})  # type: ignore[arg-type]
        if reason:
            raise PermissionDenied(f"CSRF Failed: {reason}")


class SessionScheme(spectacular_authentication.SessionScheme):
    """The schema's description of this authentication: DRF's session cookie, as before."""

    target_class = "accounts.authentication.SessionAuthentication"
    priority = 0
