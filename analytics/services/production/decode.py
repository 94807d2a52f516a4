"""Decoding a batch of JSON events into typed events, and naming what is wrong when it fails.

The shape of an event is one declaration, :class:`Event`, which msgspec enforces in C while it
decodes (types, lengths, the allowed words, a duration that is not negative). The usual batch
decodes in one call; only a batch that fails is decoded again line by line, each field on its
own, to name every line and field that is wrong with the words of :data:`EXPECTED`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Raw, Struct

from accounts.parsers import first_lone_surrogate, first_string_where
from analytics.services.production.errors import MAX_ERRORS, IngestError, ProductionInvalid

MAX_DURATION = 1e9
"""The longest duration taken, in seconds."""

FIRST_YEAR, LAST_YEAR = 1900, 2099
"""The years an event's time may fall in."""

_NO_CONDITIONS = Raw(b"null")


class Event(Struct, frozen=True, gc=False):
    """One production event as sent (see :mod:`analytics.services.production`).

    Not tracked by Python's garbage collector (``gc=False``): its fields are strings,
    numbers and raw JSON, which cannot form cycles, and a batch of 10,000 tracked events
    would set off collections that walk the whole heap.
    """

    event_id: Annotated[str, Meta(min_length=1, max_length=100)]
    deployment: Annotated[str, Meta(min_length=1, max_length=64)]
    op: Literal["retract", "correct"] | None = None
    kind: Literal["cycle", "intervention"] | None = None
    occurred_at: str | None = None
    outcome: Literal["success", "failure"] | None = None
    # Kept as its JSON text: a batch's events share a few condition sets, each checked once.
    conditions: Raw = _NO_CONDITIONS
    duration_s: Annotated[float, Meta(ge=0, le=MAX_DURATION)] | None = None
    policy: Annotated[str, Meta(min_length=1, max_length=64)] | None = None
    failure_mode: Annotated[str, Meta(min_length=1, max_length=100)] | None = None
    intervened_by: Literal["harness", "person"] | None = None
    note: str | None = None
    recording: Annotated[str, Meta(min_length=1, max_length=500)] | None = None


TIME_EXPECTED = "expected an ISO-8601 time with a UTC offset, e.g. 2026-11-30T14:05:00+01:00"

EXPECTED: dict[str, str] = {
    "event_id": "expected the event's id: a string of 1 to 100 characters",
    "deployment": "expected a deployment's slug (a string)",
    "op": 'expected "retract" or "correct" (or no op for a new event)',
    "kind": 'expected "cycle" or "intervention"',
    "occurred_at": TIME_EXPECTED,
    "outcome": 'expected "success" or "failure"',
    "conditions": 'expected an object of {"<dimension slug>": "<value slug>"} strings, at least '
    "one (the cell the event counts in)",
    "duration_s": "expected a number of seconds, not negative and at most 10^9",
    "policy": "expected a policy version's slug (a string)",
    "failure_mode": "expected a failure mode's code (a string)",
    "intervened_by": 'expected "harness" or "person"',
    "note": "expected text",
    "recording": "expected a recording's URI or upload id: a string of at most 500 characters",
}
_REQUIRED = ("event_id", "deployment")
_FIELDS = frozenset(f.name for f in msgspec.structs.fields(Event))
_FIELD_TYPES = {f.name: f.type for f in msgspec.structs.fields(Event) if f.name != "conditions"}

_batch_decoder = msgspec.json.Decoder(list[Event])
_event_decoder = msgspec.json.Decoder(Event)
_value_decoder = msgspec.json.Decoder()


@dataclass
class Batch:
    """The decoded events of a batch and the line each came from."""

    events: list[Event]
    lines: Sequence[int]
    # The texts hold an escaped NUL (\u0000) somewhere: look for it field by field.
    maybe_nul: bool = False
    _conditions: list[bytes] | None = None

    def condition_texts(self) -> list[bytes]:
        """Each event's conditions as the JSON text it was sent as (b"null" when absent)."""
        if self._conditions is None:
            self._conditions = [bytes(event.conditions) for event in self.events]
        return self._conditions


def decode_body(body: bytes, first_line: int = 1) -> Batch:
    """The events of a JSON Lines body, one per line (blank lines are skipped).

    Raises ProductionInvalid naming each wrong line and field.
    """
    end = len(body)
    while end and body[end - 1] in b" \t\r\n":
        end -= 1
    if not end:
        return Batch([], [])
    try:
        events = _event_decoder.decode_lines(memoryview(body)[:end])  # no copy of the body
    except (msgspec.DecodeError, msgspec.ValidationError):
        return decode_lines(jsonl_lines(body, first_line))
    # JSON strings hold no raw line ends, so an event per line end and one more is an event
    # per line; anything else (a blank line, two values on a line) is numbered line by line.
    if len(events) != body.count(b"\n", 0, end) + 1:
        return decode_lines(jsonl_lines(body, first_line))
    return Batch(events, range(first_line, first_line + len(events)), _may_hold_nul(body, end))


def _may_hold_nul(text: bytes, end: int | None = None) -> bool:
    """Whether JSON text (up to ``end``) may hold an escaped NUL (a backslash is rare, and
    found fast)."""
    return text.find(b"\\", 0, end) >= 0 and text.find(b"\\u0000", 0, end) >= 0


def jsonl_lines(body: bytes, first_line: int = 1) -> list[tuple[int, bytes]]:
    """Split a JSON Lines body into (line number, text), leaving blank lines out."""
    return [(n, line) for n, line in enumerate(body.split(b"\n"), start=first_line) if line.strip()]


def decode_lines(lines: Sequence[tuple[int, str | bytes]]) -> Batch:
    """The events of JSON texts given with their line numbers (one event each)."""
    texts = [text.encode() if isinstance(text, str) else text for _n, text in lines]
    numbers = [n for n, _t in lines]
    if not texts:
        return Batch([], [])
    try:
        joined = b"[" + b",".join(texts) + b"]"
        return Batch(_batch_decoder.decode(joined), numbers, _may_hold_nul(joined))
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    events: list[Event] = []
    errors: list[IngestError] = []
    for n, raw in zip(numbers, texts, strict=True):
        event = _decode_line(n, raw, errors)
        if event is not None:
            events.append(event)
        if len(errors) >= MAX_ERRORS:
            break
    if errors:
        raise ProductionInvalid(errors[:MAX_ERRORS])
    # Each line is an event on its own, yet together they did not decode: a line holding
    # more than one JSON value, say. Nothing to name but that.
    raise ProductionInvalid(
        [IngestError(None, "", "the lines are not one JSON event each; send one per line")]
    )


def decode_json_body(content: bytes) -> Batch | None:
    """The events of a JSON body that is an array of valid events, or None (then the caller
    parses it as plain JSON and gives the events to :func:`decode_values`)."""
    try:
        events = _batch_decoder.decode(content)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return Batch(events, range(1, len(events) + 1), _may_hold_nul(content))


def decode_values(values: Sequence[Any], first_line: int = 1) -> Batch:
    """The events of already parsed JSON values (element ``i`` is "line" ``first_line + i``)."""
    return decode_lines(
        [(first_line + i, json.dumps(value).encode()) for i, value in enumerate(values)]
    )


def _decode_line(n: int, raw: bytes, errors: list[IngestError]) -> Event | None:
    """Decode one line, appending an error for each thing wrong with it (the slow path)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        errors.append(IngestError(n, "", f"is not UTF-8 text ({exc.reason} at byte {exc.start})"))
        return None
    try:
        value = _value_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        errors.append(IngestError(n, "", _not_json(text, exc)))
        return None
    except msgspec.ValidationError as exc:  # a number out of range
        errors.append(IngestError(n, "", f"is not valid JSON: {exc}"))
        return None
    if not isinstance(value, dict):
        errors.append(IngestError(n, "", "expected a JSON object (one event)"))
        return None
    # A NUL character matters only where it would be stored: in the fields of an event.
    kept = {name: item for name, item in value.items() if name in _FIELDS}
    where = first_string_where(kept, lambda s: "\x00" in s)
    if where is not None:
        errors.append(IngestError(n, where, nul_message(where)))
        return None
    before = len(errors)
    for name in _REQUIRED:
        if value.get(name) is None:
            errors.append(IngestError(n, name, EXPECTED[name]))
    for name, kind in _FIELD_TYPES.items():
        if name in value and value[name] is not None:
            try:
                msgspec.convert(value[name], kind)
            except msgspec.ValidationError:
                errors.append(IngestError(n, name, _expected(name, value[name])))
    if "conditions" in value and not isinstance(value["conditions"], dict | None):
        errors.append(IngestError(n, "conditions", EXPECTED["conditions"]))
    if len(errors) > before:
        return None
    try:
        return _batch_decoder.decode(b"[" + raw + b"]")[0]
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:  # what the checks missed
        errors.append(IngestError(n, "", f"is not an event: {exc}"))
        return None


def _expected(name: str, value: Any) -> str:
    if name == "duration_s" and isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:
            return "must not be negative"
        return "is implausibly long (over 10^9 seconds)"
    return EXPECTED[name]


def _not_json(text: str, exc: Exception) -> str:
    if "\x00" in text:
        return nul_message("the line")
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as parsed:
        return f"is not valid JSON: {parsed}"
    where = first_lone_surrogate(value)
    if where is not None:
        return f"{where} holds a lone UTF-16 surrogate; send valid Unicode"
    return f"is not valid JSON: {exc}"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def nul_message(where: str) -> str:
    return f"{where} contains a NUL character (U+0000), which cannot be stored; remove it"


def parse_time(text: str) -> datetime | None:
    """An ISO-8601 time with a UTC offset, in years 1900 to 2099, or None."""
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    if at.tzinfo is None or not FIRST_YEAR <= at.year <= LAST_YEAR:
        return None
    return at


def conditions_of(raw: bytes) -> tuple[dict[str, str] | None, list[tuple[str, str]]]:
    """A condition set as sent: its {dimension: value} and the (field, message) wrong with it."""
    try:
        value = _value_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None, [("conditions", EXPECTED["conditions"])]
    if not isinstance(value, dict) or not value:
        return None, [("conditions", EXPECTED["conditions"])]
    problems = []
    for key, item in value.items():
        where = f"conditions.{key}"
        if not isinstance(item, str):
            problems.append((where, "expected a value slug (a string)"))
        elif "\x00" in item or "\x00" in key:
            problems.append((where, nul_message(where)))
    return (None if problems else value), problems
