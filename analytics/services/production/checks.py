"""Checking a decoded batch and turning it into ledger rows.

The checks do what the declaration of :class:`~.decode.Event` cannot: the fields each kind
of event needs, the time (ISO-8601 with an offset, not too far ahead), the site-local day it
counts on, its condition set, and ids sent twice in one batch. Two ways give the same rows:
:func:`column_chunks`, a chunk of well-formed new events at a time (the usual batch, written
while it is built), and :func:`check_batch`, event by event, which names what is wrong. The
distinct names a batch uses (deployments, condition sets, failure modes, policies) are
resolved before, once each (:mod:`.references`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from operator import attrgetter
from typing import Any, cast
from zoneinfo import ZoneInfo

import numpy as np

from analytics.services.production.decode import (
    EXPECTED,
    FIRST_YEAR,
    LAST_YEAR,
    Batch,
    Event,
    nul_message,
    parse_time,
)
from analytics.services.production.errors import FUTURE_TOLERANCE, IngestError

# A ledger row: what an event counts as. Two events are the same event when these agree.
ROW = (
    "deployment_id",
    "event_id",
    "kind",
    "occurred_at",
    "day",
    "condition_set_id",
    "policy",
    "failed",
    "duration_seconds",
    "failure_mode_id",
    "intervened_by",
    "note",
    "recording",
)
CYCLE_COLUMNS = 9  # a cycle's row ends with its duration; the rest are an intervention's
CYCLE_REST = (None, "", "", "")  # what a cycle's row holds in an intervention's columns

_QUARTER_HOUR = 900  # seconds
_QUARTER_OFFSET = 2**24  # quarter hours since 1970 plus this are positive and below 2**32 for
# every year an event may fall in (1900 to 2099), so a key packs (deployment, quarter hour)


@dataclass
class Checked:
    """A batch as rows: new events, and the retractions and corrections it asks for."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # the line of each row
    ops: list[str] = field(default_factory=list)  # "" (new), "retract" or "correct", per row
    repeats: int = 0  # identical copies of an event within the batch, dropped


@dataclass
class Resolved:
    """The batch's names, resolved: deployment slug -> (id, zone), and so on."""

    deployments: dict[str, tuple[int, ZoneInfo]]
    condition_sets: dict[bytes, int]  # the conditions' JSON text as sent -> condition set id
    failure_modes: dict[str, int]


class _LocalDays:
    """The site-local day of instants, per deployment, worked out once per deployment and UTC
    quarter hour: today's offsets are whole quarter hours, so a quarter hour's instants share
    their local day. Where one does not (a local mean time before a zone's standard time, as
    Amsterdam's +0:19:32 until 1937 or St. John's -3:30:52 until 1935, with its midnight inside
    the quarter hour), the day of its first and of its last second differ, and each instant of
    it is read on its own. One offset change within a quarter hour moves the local time one way
    only, so equal days at both ends hold for every instant between them."""

    def __init__(self, deployments: dict[str, tuple[int, ZoneInfo]]) -> None:
        self._zones = dict(deployments.values())
        self._days: dict[tuple[int, int], date | None] = {}

    def _day(self, deployment_id: int, quarter: int) -> date | None:
        """The local day of every instant of the quarter hour, or None where they differ."""
        key = (deployment_id, quarter)
        if key in self._days:
            return self._days[key]
        zone = self._zones[deployment_id]
        first = datetime.fromtimestamp(quarter * _QUARTER_HOUR, zone).date()
        last = datetime.fromtimestamp((quarter + 1) * _QUARTER_HOUR - 1, zone).date()
        day = self._days[key] = first if first == last else None
        return day

    def day(self, deployment_id: int, at: datetime) -> date:
        day = self._day(deployment_id, int(at.timestamp() // _QUARTER_HOUR))
        return day if day is not None else at.astimezone(self._zones[deployment_id]).date()

    def days(self, deployment_ids: Sequence[int], ats: Sequence[datetime]) -> list[date]:
        """The day of each instant, a column at a time."""
        seconds = np.fromiter(map(datetime.timestamp, ats), np.float64, len(ats))
        quarters = np.floor_divide(seconds, _QUARTER_HOUR).astype(np.int64)
        keys = (np.asarray(deployment_ids, dtype=np.int64) << 32) + (quarters + _QUARTER_OFFSET)
        unique, inverse = np.unique(keys, return_inverse=True)
        days = [
            self._day(int(key >> 32), int(key & 0xFFFFFFFF) - _QUARTER_OFFSET)
            for key in unique.tolist()
        ]
        if None not in days:
            return cast(list[date], list(map(days.__getitem__, inverse.reshape(-1).tolist())))
        # Quarter hours whose instants fall on two days: each of those instants on its own.
        return [
            day
            if (day := days[k]) is not None
            else ats[i].astimezone(self._zones[int(deployment_ids[i])]).date()
            for i, k in enumerate(inverse.reshape(-1).tolist())
        ]


CHUNK = 1_000
"""Events per chunk of the column way: the ledger takes one chunk while the next is built."""


class NeedsCloserLook(Exception):
    """An event the column way does not take as it is (an op, a missing field, a time without
    an offset or out of range, ...): the batch goes event by event."""


_COLUMNS = tuple(
    map(
        attrgetter,
        ("kind", "event_id", "deployment", "occurred_at", "outcome", "duration_s", "policy"),
    )
)
OP = attrgetter("op")
_TZINFO = attrgetter("tzinfo")


Rows = list[tuple[Any, ...]]


def column_chunks(batch: Batch, resolved: Resolved) -> Iterator[tuple[Rows, Rows]]:
    """The ledger rows of a batch of new, well-formed events, a chunk at a time: (cycles,
    interventions), the cycles built a column at a time, the few interventions event by event.

    Raises NeedsCloserLook as soon as a chunk holds an event that needs a closer look; what
    was yielded before is then to be thrown away. Ids sent twice in the batch are left to the
    ledger's key. The rows equal :func:`check_batch`'s.
    """
    if batch.maybe_nul:
        raise NeedsCloserLook
    events, texts = batch.events, batch.condition_texts()
    ids_of = {slug: pk for slug, (pk, _zone) in resolved.deployments.items()}
    days = _LocalDays(resolved.deployments)
    latest = datetime.now(UTC) + FUTURE_TOLERANCE
    for start in range(0, len(events), CHUNK):
        yield _chunk_rows(
            events[start : start + CHUNK],
            texts[start : start + CHUNK],
            resolved,
            ids_of,
            days,
            latest,
        )


def _chunk_rows(
    events: list[Event],
    texts: list[bytes],
    resolved: Resolved,
    ids_of: dict[str, int],
    days: _LocalDays,
    latest: datetime,
) -> tuple[Rows, Rows]:
    if any(map(OP, events)):
        raise NeedsCloserLook
    # A column per field (one getter each: no tuple per event for the collector to track).
    kinds, ids, slugs, times, outcomes, durations, policies = (
        list(map(getter, events)) for getter in _COLUMNS
    )
    others: Rows = []
    if kinds.count("cycle") != len(kinds):
        at = [i for i, kind in enumerate(kinds) if kind != "cycle"]
        for i in at:
            event = events[i]
            if event.kind != "intervention" or event.deployment not in ids_of:
                raise NeedsCloserLook
            deployment_id = ids_of[event.deployment]
            row = _row(  # (line 0: what is wrong is named by the event way)
                event, 0, deployment_id, resolved.condition_sets, resolved.failure_modes, days
            )
            if isinstance(row, list) or row[3] > latest:
                raise NeedsCloserLook
            others.append(row)
        keep = sorted(set(range(len(kinds))).difference(at))
        ids, slugs, times, outcomes, durations, policies, texts = (
            [column[i] for i in keep]
            for column in (ids, slugs, times, outcomes, durations, policies, texts)
        )
        kinds = ["cycle"] * len(keep)
    if not ids:
        return [], others
    try:
        ats = list(map(datetime.fromisoformat, times))
        deployment_ids = list(map(ids_of.__getitem__, slugs))
        set_ids = list(map(resolved.condition_sets.__getitem__, texts))
    except (TypeError, ValueError, KeyError) as exc:  # no time, no offset, an unknown set
        raise NeedsCloserLook from exc
    if None in map(_TZINFO, ats) or None in outcomes:
        raise NeedsCloserLook
    first, last = min(ats), max(ats)
    if first.year < FIRST_YEAR or last.year > LAST_YEAR or last > latest:
        raise NeedsCloserLook
    rows = list(
        zip(
            deployment_ids,
            ids,
            kinds,
            ats,
            days.days(deployment_ids, ats),
            set_ids,
            ["" if policy is None else policy for policy in policies],
            list(map("failure".__eq__, outcomes)),
            durations,
            strict=True,
        )
    )
    return rows, others


def check_batch(batch: Batch, resolved: Resolved, errors: list[IngestError]) -> Checked:
    """Rows for the batch's events, event by event; appends to ``errors`` what is wrong with
    each. (The usual batch never comes here: :func:`column_chunks` builds its rows while the
    ledger takes them, and only a batch it cannot take is checked this way.)"""
    out = Checked()
    deployments = resolved.deployments
    condition_sets = resolved.condition_sets
    modes = resolved.failure_modes
    latest = datetime.now(UTC) + FUTURE_TOLERANCE
    days = _LocalDays(deployments)
    seen: dict[tuple[int, str], int] = {}
    rows, lines, ops = out.rows, out.lines, out.ops
    for event, line in zip(batch.events, batch.lines, strict=True):
        deployment_id = deployments[event.deployment][0]
        op = event.op or ""
        if op == "retract":
            row: tuple[Any, ...] = (deployment_id, event.event_id)
        else:
            row_or_none = _row(event, line, deployment_id, condition_sets, modes, days)
            if isinstance(row_or_none, list):
                errors += row_or_none
                continue
            row = row_or_none
            if row[3] > latest:
                errors.append(_future(line, row[3]))
                continue
        key = (deployment_id, event.event_id)
        first = seen.setdefault(key, len(rows))
        if first != len(rows):
            if rows[first] == row and ops[first] == op:
                out.repeats += 1
            else:
                errors.append(
                    IngestError(
                        line,
                        "event_id",
                        f"{event.event_id!r} is also on line {lines[first]} with a different "
                        "body; send one version of an event per batch",
                    )
                )
            continue
        rows.append(row)
        lines.append(line)
        ops.append(op)
    if batch.maybe_nul:
        errors += _nul_errors(batch)
    return out


def _row(
    event: Event,
    line: int,
    deployment_id: int,
    condition_sets: dict[bytes, int],
    modes: dict[str, int],
    days: _LocalDays,
) -> tuple[Any, ...] | list[IngestError]:
    kind = event.kind
    at = parse_time(event.occurred_at) if event.occurred_at is not None else None
    set_id = condition_sets.get(bytes(event.conditions))
    if at is None or set_id is None:
        return _row_errors(event, line, at, set_id)
    head = (
        deployment_id,
        event.event_id,
        kind,
        at,
        days.day(deployment_id, at),
        set_id,
        event.policy or "",
    )
    if kind == "cycle" and event.outcome is not None:
        return (*head, event.outcome == "failure", event.duration_s)
    if kind == "intervention":
        mode_id = modes.get(event.failure_mode) if event.failure_mode is not None else None
        if mode_id is not None and event.intervened_by:
            note, recording = event.note or "", event.recording or ""
            return (*head, False, None, mode_id, event.intervened_by, note, recording)
    return _row_errors(event, line, at, set_id)


def _row_errors(
    event: Event, line: int, at: datetime | None, set_id: int | None
) -> list[IngestError]:
    """What stops an event from being a row (a missing field, a bad time)."""
    errors = []
    if event.kind is None:
        errors.append(IngestError(line, "kind", EXPECTED["kind"]))
    if at is None:
        errors.append(IngestError(line, "occurred_at", EXPECTED["occurred_at"]))
    if event.kind is not None and set_id is None and bytes(event.conditions) == b"null":
        errors.append(IngestError(line, "conditions", EXPECTED["conditions"]))
    if event.kind == "cycle" and event.outcome is None:
        errors.append(IngestError(line, "outcome", EXPECTED["outcome"]))
    if event.kind == "intervention":
        if event.failure_mode is None:
            errors.append(IngestError(line, "failure_mode", EXPECTED["failure_mode"]))
        if event.intervened_by is None:
            errors.append(IngestError(line, "intervened_by", EXPECTED["intervened_by"]))
    # Unknown condition values and failure modes were named once each by the references.
    return errors


def _future(line: int, at: datetime) -> IngestError:
    minutes = round((at - datetime.now(UTC)).total_seconds() / 60)
    tolerance = int(FUTURE_TOLERANCE.total_seconds() // 60)
    return IngestError(
        line,
        "occurred_at",
        f"is {minutes} minutes in the future (beyond the tolerance of {tolerance} minutes); "
        "check the robot's clock",
    )


_TEXT_FIELDS = (
    "event_id",
    "deployment",
    "occurred_at",
    "policy",
    "failure_mode",
    "note",
    "recording",
)


def _nul_errors(batch: Batch) -> list[IngestError]:
    """The fields holding a NUL character (condition sets are checked when resolved)."""
    errors = []
    for event, line in zip(batch.events, batch.lines, strict=True):
        for name in _TEXT_FIELDS:
            value = getattr(event, name)
            if value is not None and "\x00" in value:
                errors.append(IngestError(line, name, nul_message(name)))
    return errors


def first_lines(batch: Batch, names: Sequence[Any], attribute: str) -> dict[Any, tuple[int, int]]:
    """{name: (events carrying it, first line)} for the given values of an attribute (for
    error messages; it scans the batch, so it is only called when something is wrong)."""
    wanted = set(names)
    out: dict[str, tuple[int, int]] = {}
    for event, line in zip(batch.events, batch.lines, strict=True):
        value = getattr(event, attribute)
        if attribute == "conditions":
            value = bytes(value)
        if value in wanted:
            count, first = out.get(value, (0, line))
            out[value] = (count + 1, first)
    return out
