"""Seeded production history for a test world: cycles and failure records over 35 days.

Two condition sets (bright, dim lighting), two failure modes; with ``shift`` the world's
"grasp" failures under dim light run at four times their rate in the last 7 days.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import numpy as np

from sites.models import FailureMode, FailureRecord, ProductionLog
from sites.services import condition_set_intern

LAST_DAY = date(2026, 11, 30)
DAYS = 35
CYCLES = 1000  # per condition set and day
RATES = {"grasp": 4.0 / 1000, "drop": 2.0 / 1000}


def seed_production(world, *, shift: bool = True, factor: float = 4.0, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    bright, dim = world.values
    sets = {
        "bright": condition_set_intern(organization=world.operator, value_ids=[bright.pk]),
        "dim": condition_set_intern(organization=world.operator, value_ids=[dim.pk]),
    }
    modes = {
        "grasp": world.failure_mode,
        "drop": FailureMode.objects.get_or_create(
            organization=world.operator, code="drop", defaults={"name": "Drop"}
        )[0],
    }
    logs, records = [], []
    for d in range(DAYS):
        day = LAST_DAY - timedelta(days=DAYS - 1 - d)
        policy = world.policy.slug if d >= 14 else ""
        for name, cs in sets.items():
            failures = 0
            for code, rate in RATES.items():
                if shift and code == "grasp" and name == "dim" and d >= DAYS - 7:
                    rate *= factor
                n = int(rng.poisson(rate * CYCLES))
                failures += n
                records += [
                    FailureRecord(
                        organization=world.operator,
                        deployment=world.deployment,
                        failure_mode=modes[code],
                        condition_set=cs,
                        occurred_at=datetime.combine(day, time(11, 0), tzinfo=UTC)
                        + timedelta(minutes=int(rng.integers(0, 120))),
                        policy=policy,
                    )
                    for _ in range(n)
                ]
            logs.append(
                ProductionLog(
                    deployment=world.deployment,
                    condition_set=cs,
                    day=day,
                    policy=policy,
                    cycles=CYCLES,
                    failures=failures,
                )
            )
    ProductionLog.objects.bulk_create(logs)
    FailureRecord.objects.bulk_create(records)
