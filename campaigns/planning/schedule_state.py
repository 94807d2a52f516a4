"""Working state of the scheduler: visits, append points, calendar stretches, the calendar.

Plain data shared by :mod:`scheduling` and :mod:`schedule_locks`; ``Planner`` is the part
of the scheduler that the lock handling uses, so neither module imports the other's
internals. All times are whole minutes since ``Calendar.epoch`` (UTC); ``day`` is an index
into the horizon, the site's local date.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from campaigns.planning.schedule_types import ScheduleSite, Task, Team


@dataclass(frozen=True)
class Visit:
    """One day-visit of a task: site, day, UTC minutes, travel right before it."""

    task: int
    site: int
    day: int
    start: int
    end: int
    travel: int
    km: float
    travel_days: int
    locked: bool = False


@dataclass(frozen=True)
class Where:
    """Append point of a calendar stretch: place, free-from minute, last day and its use."""

    lat: float
    lon: float
    site: int | None
    free_at: int
    day: int
    used: int
    travelled: int


@dataclass
class Stretch:
    """A team's calendar up to its next locked visit (``lock``), or to the horizon's end."""

    team: int
    where: Where
    lock: Visit | None
    visits: list[Visit] = field(default_factory=list)


class Calendar:
    """Site windows per horizon day as UTC minutes since an epoch two days before start."""

    def __init__(self, sites: Sequence[ScheduleSite], start: date, days: int) -> None:
        self.start, self.days = start, days
        self.epoch = datetime.combine(start - timedelta(days=2), time(0), tzinfo=UTC)
        self.zones = [ZoneInfo(s.tz) for s in sites]
        self.windows: list[list[list[tuple[int, int]]]] = []
        for site, zone in zip(sites, self.zones, strict=True):
            per_day = []
            for d in range(days):
                local = start + timedelta(days=d)
                spans = []
                if local not in site.closed_dates:
                    for w in site.windows:
                        if w.weekday == local.weekday():
                            spans.append(
                                (self.minute(local, w.start, zone), self.minute(local, w.end, zone))
                            )
                per_day.append(sorted(spans))
            self.windows.append(per_day)

    def minute(self, day: date, at: time, zone: ZoneInfo) -> int:
        """Return the UTC minute of a local wall-clock time."""
        instant = datetime.combine(day, at, tzinfo=zone).astimezone(UTC)
        return int((instant - self.epoch).total_seconds() // 60)

    def utc(self, minute: int) -> datetime:
        """Return the UTC instant of a minute."""
        return self.epoch + timedelta(minutes=minute)

    def day_of(self, d: date) -> int:
        """Return the horizon index of a date (outside ``range(days)`` when outside it)."""
        return (d - self.start).days


class Planner(Protocol):
    """What lock handling needs of the scheduler: its inputs, progress and placing rules."""

    tasks: Sequence[Task]
    sites: Sequence[ScheduleSite]
    teams: Sequence[Team]
    cal: Calendar
    need: list[int]
    placed: list[int]
    reasons: dict[int, str]
    off: list[set[int]]
    team_index: dict[str, int]
    stretches: list[Stretch]

    def travel(self, team: int, where: Where, site: int) -> tuple[int, float]:
        """Return (minutes, km) from a stretch's append point to a site."""
        ...

    def travel_days(self, team: int, minutes: int, first: int, day: int) -> int | None:
        """Return how many whole travel days before ``day`` a trip needs, if they are free."""
        ...

    def same_day_ok(self, team: int, minutes: int, used: int, travelled: int, work: int) -> bool:
        """Return whether travel and work fit in a team's day after what it already did."""
        ...

    def simulate(self, st: Stretch, task: int) -> tuple[list[Visit], Where]:
        """Return the visits a task would get appended to a stretch, and the new end."""
        ...

    def room(self, site: int, day: int, taken: Mapping[int, int] | None = None) -> int:
        """Return the work minutes a site still takes on a day, less ``taken[day]``."""
        ...

    def book(self, visits: Sequence[Visit]) -> None:
        """Charge committed visits to their sites' daily capacity."""
        ...

    def shortfall_reason(self, task: int) -> str:
        """Say why a task is (partly) unplaced once no stretch takes more of it."""
        ...
