"""Response renderers that cannot fail on text a request smuggled in.

A lone UTF-16 surrogate cannot be encoded as UTF-8. The parsers refuse one in a body, but a
query string decoded under an exotic request charset (utf-7) can still carry one into an
error message that echoes it; rendering must not turn that into a server error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import renderers
from rest_framework.exceptions import ErrorDetail

from accounts.parsers import without_lone_surrogates


def _scrubbed(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings and keys replaced by U+FFFD."""
    if isinstance(value, ErrorDetail):
        return ErrorDetail(without_lone_surrogates(str(value)), code=value.code)
    if isinstance(value, str):
        return without_lone_surrogates(value)
    if isinstance(value, Mapping):
        return {_scrubbed(k): _scrubbed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrubbed(v) for v in value]
    return value


class JSONRenderer(renderers.JSONRenderer):
    """DRF's JSON renderer; data holding lone surrogates is rendered with U+FFFD in their place."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return super().render(_scrubbed(data), accepted_media_type, renderer_context)


class BrowsableAPIRenderer(renderers.BrowsableAPIRenderer):
    """DRF's browsable API page, with lone surrogates replaced so the page can be encoded."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> Any:
        page = super().render(data, accepted_media_type, renderer_context)
        return without_lone_surrogates(page) if isinstance(page, str) else page
