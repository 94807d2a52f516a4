"""Inputs and outputs of the scheduler (plain data, Django-free)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time
from types import MappingProxyType


@dataclass(frozen=True)
class AccessWindow:
    """A weekly access window in the site's local time (weekday 0 = Monday).

    Raises ValueError unless ``0 <= weekday <= 6`` and ``start < end`` (same day).
    """

    weekday: int
    start: time
    end: time

    def __post_init__(self) -> None:
        if not 0 <= self.weekday <= 6:
            raise ValueError(f"weekday must be 0 (Monday) to 6, got {self.weekday}")
        if not self.start < self.end:
            raise ValueError(f"window must start before it ends, got {self.start}-{self.end}")


def _no_minutes_used() -> Mapping[date, int]:
    return MappingProxyType({})


@dataclass(frozen=True)
class ScheduleSite:
    """Where tasks happen: position, IANA time zone, weekly windows, closed dates, capacity.

    ``minutes_per_day`` is the most work minutes, across all teams, the site takes on one
    local date (``None``: unlimited); ``minutes_used`` the work minutes other rounds already
    hold there per local date (stored as a read-only copy; left out of the hash).

    Raises ValueError if ``minutes_per_day`` or a ``minutes_used`` value is negative.
    """

    key: str
    lat: float
    lon: float
    tz: str
    windows: tuple[AccessWindow, ...]
    closed_dates: frozenset[date] = frozenset()
    minutes_per_day: int | None = None
    minutes_used: Mapping[date, int] = field(default_factory=_no_minutes_used, hash=False)

    def __post_init__(self) -> None:
        if self.minutes_per_day is not None and self.minutes_per_day < 0:
            raise ValueError(
                f"site {self.key!r}: minutes_per_day must be >= 0, got {self.minutes_per_day}"
            )
        if any(m < 0 for m in self.minutes_used.values()):
            raise ValueError(f"site {self.key!r}: minutes_used must be >= 0 on every date")
        # A frozen site must not change when the caller's dict does.
        object.__setattr__(self, "minutes_used", MappingProxyType(dict(self.minutes_used)))

    def minutes_left(self, day: date) -> int | None:
        """Return the work minutes the site still takes on a local date (None: unlimited)."""
        if self.minutes_per_day is None:
            return None
        return max(self.minutes_per_day - self.minutes_used.get(day, 0), 0)


@dataclass(frozen=True)
class Team:
    """A field team. ``max_travel_hours_per_day`` defaults to ``hours_per_day``."""

    key: str
    home_lat: float
    home_lon: float
    hours_per_day: float
    embodiments: frozenset[int]
    unavailable_dates: frozenset[date] = frozenset()
    speed_kmh: float = 60.0
    max_travel_hours_per_day: float | None = None

    @property
    def travel_cap_hours(self) -> float:
        """Return the most hours this team travels in one day."""
        cap = self.hours_per_day
        if self.max_travel_hours_per_day is not None:
            cap = min(cap, self.max_travel_hours_per_day)
        return cap


@dataclass(frozen=True)
class LockedPlacement:
    """A visit fixed by a manager: team key, site-local date and start time."""

    team: str
    date: date
    start: time


@dataclass(frozen=True)
class Task:
    """A collection task: site index, embodiment id, hours needed including setup."""

    key: str
    site: int
    embodiment: int
    hours: float
    priority: float = 0.0
    due: date | None = None
    locked: LockedPlacement | None = None


@dataclass(frozen=True)
class Placement:
    """One day-visit of a task. Travel is what the team travels right before it.

    ``travel_days`` whole days (the dates just before ``date``) are spent travelling when
    the trip does not fit in the visit's day; otherwise the travel is on ``date`` itself,
    ending at ``utc_start``.
    """

    task: str
    team: str
    site: int
    date: date
    local_start: datetime
    local_end: datetime
    utc_start: datetime
    utc_end: datetime
    hours: float
    travel_hours: float
    travel_km: float
    travel_days: int
    locked: bool = False


@dataclass(frozen=True)
class TeamTotals:
    """What a schedule asks of one team."""

    team: str
    work_hours: float
    travel_hours: float
    travel_km: float
    travel_days: int
    visits: int
    days_worked: int


@dataclass(frozen=True)
class UnscheduledTask:
    """Hours of a task the schedule could not place, and why."""

    task: str
    hours: float
    reason: str


@dataclass(frozen=True)
class ScheduleResult:
    """Placements in time order per team, per-team totals and what did not fit."""

    placements: list[Placement]
    team_totals: list[TeamTotals]
    unscheduled: list[UnscheduledTask]
    solve_seconds: float = 0.0
