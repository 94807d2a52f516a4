"""Request body parsers that refuse what would otherwise fail later as a server error.

DRF's own parsers hand on JSON nested thousands of levels deep (``json`` then raises
RecursionError, a 500), lone UTF-16 surrogates (``"\\ud800"`` decodes to a string that cannot
be encoded again, so the error that echoes it fails to render) and numbers too large for a
float (``1e999`` becomes infinity, which JSON cannot carry back). These parsers answer each
with a 400 that says what is wrong and where.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.http import QueryDict
from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils.json import strict_constant

MAX_JSON_DEPTH = 64

# A complete JSON string literal; possessive, so an unterminated one costs linear time.
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")
_INNERMOST_PAIR = re.compile(r"\[\]|\{\}")
# A surrogate code point, or the JSON escape of one (a valid pair of escapes decodes to one
# character; only the decoded data can tell a pair from a lone half).
_SURROGATE_HINT = re.compile(r"[\ud800-\udfff]|\\u[dD][89abcdefABCDEF]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def json_too_deep(text: str, *, limit: int = MAX_JSON_DEPTH) -> bool:
    """Return whether JSON ``text`` nests arrays and objects more than ``limit`` levels deep.

    Works on the text, without recursion and before any parsing: strings are removed, then
    each pass removes the innermost ``[]`` and ``{}`` pairs, at most ``limit`` passes. Text
    whose brackets do not pair up is not JSON at all; it is left to the parser to say where.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    for _ in range(limit):
        if not brackets:
            return False
        inner = _INNERMOST_PAIR.sub("", brackets)
        if inner == brackets:
            return False
        brackets = inner
    return bool(brackets)


def _join(path: str, key: Any) -> str:
    name = str(key)
    if name.isidentifier():
        return f"{path}.{name}" if path else name
    # json.dumps escapes NUL, quotes and surrogates: the location stays printable and loggable.
    return f"{path}[{json.dumps(name)}]"


def first_string_where(value: Any, bad: Callable[[str], bool], path: str = "") -> str | None:
    """Return where decoded JSON-like data holds a string (or dict key) that ``bad`` flags.

    Walks strings, mapping keys and values, lists and tuples, without recursion (nesting depth
    costs no stack). The answer reads like ``payload.text``, ``[3].payload["a b"]``, or
    ``payload.tags (a key)`` when a key itself is flagged.
    """
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if bad(item):
                return where or "the value"
        elif isinstance(item, Mapping):
            children = []
            for key, child in item.items():
                at = _join(where, key)
                if isinstance(key, str) and bad(key):
                    return f"{at} (a key)"
                children.append((at, child))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(f"{where}[{i}]", child) for i, child in enumerate(item)]))
    return None


def first_lone_surrogate(value: Any, path: str = "") -> str | None:
    """Return where decoded data holds a lone surrogate, or None (see first_string_where)."""
    return first_string_where(value, lambda text: bool(_SURROGATE.search(text)), path)


def lone_surrogate_refusal(where: str) -> str:
    """The sentence that refuses input holding a lone surrogate at ``where``."""
    return (
        f"{where} holds a lone UTF-16 surrogate (such as \\ud800), which is not a character; "
        "send the text as valid Unicode."
    )


def without_lone_surrogates(text: str) -> str:
    """Replace lone surrogates with U+FFFD so that ``text`` can be encoded as UTF-8."""
    return _SURROGATE.sub("\ufffd", text)


def _pairs_with_surrogate(pairs: Iterable[tuple[str, list[Any]]]) -> str | None:
    for name, values in pairs:
        if _SURROGATE.search(name) or any(
            isinstance(v, str) and _SURROGATE.search(v) for v in values
        ):
            return json.dumps(name)
    return None


def query_refusal(query: QueryDict) -> str | None:
    """The refusal of a query string holding a lone surrogate (reachable through a request
    charset such as utf-7), or None when it holds none."""
    name = _pairs_with_surrogate(query.lists())
    return lone_surrogate_refusal(f"The query parameter {name}") if name else None


class _NumberTooLarge(ValueError):
    pass


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _NumberTooLarge(f"the number {text[:40]} is too large for a float")
    return number


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, plus: at most 64 levels of nesting, no lone surrogates, finite numbers."""

    max_depth = MAX_JSON_DEPTH

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = parsers.get_encoding(parser_context or {})  # type: ignore[attr-defined]
        raw = stream.read()
        try:
            text = raw.decode(encoding) if isinstance(raw, bytes) else raw
        except (UnicodeDecodeError, LookupError) as exc:
            raise ParseError(f"JSON parse error - the body is not {encoding} text ({exc})") from exc
        if json_too_deep(text, limit=self.max_depth):
            raise ParseError(
                f"JSON parse error - the body nests arrays or objects more than "
                f"{self.max_depth} levels deep; send flatter data."
            )
        try:
            data = json.loads(
                text,
                parse_constant=strict_constant if self.strict else None,
                parse_float=_finite_float,
            )
        except RecursionError as exc:  # brackets that do not pair up, very deep
            raise ParseError(
                "JSON parse error - the body is not valid JSON (its brackets do not match)."
            ) from exc
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
        if _SURROGATE_HINT.search(text):
            where = first_lone_surrogate(data)
            if where is not None:
                raise ParseError(lone_surrogate_refusal(f"The JSON body at {where}"))
        return data


class FormParser(parsers.FormParser):
    """DRF's form parser, refusing names and values that hold lone surrogates."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        data = super().parse(stream, media_type, parser_context)
        name = _pairs_with_surrogate(data.lists())
        if name:
            raise ParseError(lone_surrogate_refusal(f"The form field {name}"))
        return data


class MultiPartParser(parsers.MultiPartParser):
    """DRF's multipart parser, refusing field names, values and file names with lone surrogates."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        name = _pairs_with_surrogate(parsed.data.lists())
        if name is None:
            name = _pairs_with_surrogate(
                (field, [getattr(f, "name", "") for f in files])
                for field, files in parsed.files.lists()
            )
        if name:
            raise ParseError(lone_surrogate_refusal(f"The form field {name}"))
        return parsed
