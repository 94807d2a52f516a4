"""Errors and results of a production ingest, and its limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

MAX_EVENTS = 10_000
FUTURE_TOLERANCE = timedelta(minutes=10)
MAX_ERRORS = 200
SHOWN_KNOWN = 12


@dataclass(frozen=True)
class IngestError:
    line: int | None
    field: str
    message: str


@dataclass
class IngestResult:
    cycles: int = 0
    interventions: int = 0
    duplicates: int = 0
    retracted: int = 0
    corrected: int = 0
    created_values: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.cycles or self.interventions or self.retracted or self.corrected)

    def add(self, other: IngestResult) -> None:
        """Count ``other`` in too (batches of one import, attempts of one batch)."""
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.created_values.extend(other.created_values)

    def as_dict(self) -> dict[str, Any]:
        """What the API answers and an import job keeps as its result."""
        return {name: getattr(self, name) for name in (*_COUNTS, "created_values")}


_COUNTS = ("cycles", "interventions", "duplicates", "retracted", "corrected")


class ProductionInvalid(ValueError):
    """The batch has errors (each with line, field and message); nothing was stored."""

    def __init__(self, errors: list[IngestError]) -> None:
        super().__init__(f"{len(errors)} error(s); first: {errors[0].message if errors else ''}")
        self.errors = errors


class ProductionConflict(Exception):
    """Event ids already stored with another body (send ``"op": "correct"`` to replace)."""

    def __init__(self, event_ids: list[str]) -> None:
        super().__init__(
            f"{len(event_ids)} event id(s) were already received with a different body; "
            'nothing was stored. Send them with "op": "correct" to replace the earlier body.'
        )
        self.event_ids = event_ids


class ProductionBusy(Exception):
    """Other batches kept storing the same events while this one was classified; nothing of
    this batch was stored. Sending it again is safe (replays change nothing)."""

    def __init__(self, attempts: int) -> None:
        super().__init__(
            f"other batches stored some of these events while this one was checked, "
            f"{attempts} times in a row; nothing was stored: send the batch again"
        )


class DeploymentNotFound(LookupError):
    """A deployment slug the caller's organization does not have; nothing was stored."""

    def __init__(self, slugs: list[str]) -> None:
        super().__init__("No such deployment: " + ", ".join(repr(s) for s in slugs[:20]))
        self.slugs = slugs


class BatchTooLarge(ValueError):
    def __init__(self, count: int) -> None:
        super().__init__(f"{count} events in one batch; send at most {MAX_EVENTS:,}.")
        self.count = count
