"""Production ingest at fleet scale: 1,000,000 cycle events through the API against a bare COPY.

In one run: (a) the baseline, one COPY of the 1,000,000 synthetic cycle events (their own
columns: event id, deployment, kind, time, outcome, conditions, duration, policy) into a bare
table without indexes; then, in ``--rounds`` alternations (default 5) over a fifth of the
events each, (a') a bare COPY of the round's events and (b) the same events POSTed as JSON
Lines, 10,000 per batch, to ``/api/production/events/`` in process (Django's test client, a
signed-in manager) for a fresh organization with 5 deployments, after one warm-up batch to a
sixth. Prints each round, the totals, the ratio of (b) to (a) (target <= 3x) and to (a')
(smaller COPYs cost less a row, and alternating shows how much the machine's speed moved
during the run), and p50/p95 per batch; then checks that
SUM(ProductionLog.cycles) equals the number of events and that sending one batch again changes
nothing. The benchmark's organization is removed at the end unless --keep.

Usage: DATABASE_URL=... python bench/production.py [--events 1000000] [--batch 10000]
[--rounds 5] [--keep]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from _util import purge_organizations, setup_django

setup_django()

from django.db import connection, transaction  # noqa: E402

ORG = "bench-production"
TARGET_RATIO = 3.0
DEPLOYMENTS = 5
LIGHTING = ["bright", "dim", "dark"]
FLOOR = ["dry", "wet"]
POLICIES = ["pv-1", "pv-2"]
WARM_UP = f"dep-{DEPLOYMENTS}"


def build() -> tuple[Any, list[str]]:
    from django.contrib.auth import get_user_model

    from accounts.models import Membership, Organization, Role
    from analytics.models import PolicyVersion
    from sites.models import (
        ConditionDimension,
        ConditionValue,
        Deployment,
        Embodiment,
        FailureMode,
        Site,
        Task,
    )

    teardown()
    org = Organization.objects.create(slug=ORG, name="Bench production", kind="operator")
    customer = Organization.objects.create(
        slug=ORG + "-customer", name="Bench customer", kind="customer", operator=org
    )
    user_model = get_user_model()
    user_model.objects.filter(username=ORG).delete()
    user = user_model.objects.create_user(username=ORG, password=None)
    Membership.objects.create(user=user, organization=org, role=Role.MANAGER)
    for i, (slug, values) in enumerate((("lighting", LIGHTING), ("floor", FLOOR))):
        dim = ConditionDimension.objects.create(organization=org, slug=slug, name=slug, order=i)
        for j, v in enumerate(values):
            ConditionValue.objects.create(dimension=dim, slug=v, label=v, order=j)
    emb = Embodiment.objects.create(
        organization=org,
        slug="arm",
        name="Arm",
        morphology="arm",
        end_effector="g",
        control_rate_hz=50,
    )
    task = Task.objects.create(organization=org, slug="pick", name="Pick")
    FailureMode.objects.create(organization=org, code="grasp", name="Grasp")
    for slug in POLICIES:
        PolicyVersion.objects.create(organization=org, slug=slug, name=slug, embodiment=emb)
    slugs = []
    for d in range(DEPLOYMENTS + 1):  # the last one takes the warm-up batch
        site = Site.objects.create(
            organization=org,
            customer=customer,
            slug=f"site-{d}",
            name=f"Site {d}",
            country="NL",
            latitude=52,
            longitude=4,
            timezone=["Europe/Amsterdam", "Asia/Tokyo", "America/Chicago"][d % 3],
        )
        Deployment.objects.create(
            organization=org,
            customer=customer,
            slug=f"dep-{d}",
            name=f"Deployment {d}",
            site=site,
            embodiment=emb,
            task=task,
            cycles_per_day=5000,
            reliability_target=0.99,
        )
        slugs.append(f"dep-{d}")
    return user, slugs[:-1]


def teardown() -> None:
    from sites.models import Deployment

    ids = list(Deployment.objects.filter(organization__slug=ORG).values_list("pk", flat=True))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE sites_productionevent SET failure_record_id = NULL "
            "WHERE deployment_id = ANY(%s)",
            [ids],
        )
        cursor.execute("DELETE FROM sites_productionevent WHERE deployment_id = ANY(%s)", [ids])
    purge_organizations(ORG, ORG + "-customer")


def events(n: int, slugs: list[str]) -> list[dict[str, Any]]:
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=21)
    step = timedelta(days=20) / n
    out = []
    for i in range(n):
        out.append(
            {
                "event_id": f"ev-{i:08d}",
                "deployment": slugs[i % len(slugs)],
                "kind": "cycle",
                "occurred_at": (start + step * i).isoformat(),
                "outcome": "failure" if i % 47 == 0 else "success",
                "conditions": {"lighting": LIGHTING[i % 3], "floor": FLOOR[(i // 3) % 2]},
                "duration_s": round(8 + (i % 17) * 0.25, 2),
                "policy": POLICIES[(i // 1000) % 2],
            }
        )
    return out


def copy_rows(bodies: list[bytes]) -> list[tuple[Any, ...]]:
    """The baseline's rows of these bodies' events, their own columns (built per round: a
    million rows held through the API's turn would make every garbage collection of the
    server walk them)."""
    rows = []
    for body in bodies:
        for line in body.splitlines():
            e = json.loads(line)
            rows.append(
                (
                    e["event_id"],
                    e["deployment"],
                    e["kind"],
                    e["occurred_at"],
                    e["outcome"],
                    json.dumps(e["conditions"]),
                    e["duration_s"],
                    e["policy"],
                )
            )
    return rows


def baseline_copy(rows: list[tuple[Any, ...]]) -> float:
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_production_raw")
        cursor.execute(
            "CREATE TABLE bench_production_raw (event_id text, deployment text, "
            "kind text, occurred_at timestamptz, outcome text, conditions jsonb, "
            "duration_s float8, policy text)"
        )
    started = time.perf_counter()
    with (
        transaction.atomic(),
        connection.cursor() as cursor,
        cursor.copy(
            "COPY bench_production_raw (event_id, deployment, kind, occurred_at, outcome, "
            "conditions, duration_s, policy) FROM STDIN"
        ) as copy,
    ):
        for row in rows:
            copy.write_row(row)
    seconds = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM bench_production_raw")
        assert cursor.fetchone()[0] == len(rows)
        cursor.execute("DROP TABLE bench_production_raw")
    return seconds


def log_state() -> tuple[int, int, int, float]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), coalesce(sum(cycles), 0), coalesce(sum(failures), 0), "
            "coalesce(sum(duration_seconds), 0) FROM sites_productionlog l "
            "JOIN sites_deployment d ON d.id = l.deployment_id "
            "JOIN accounts_organization o ON o.id = d.organization_id WHERE o.slug = %s "
            "AND d.slug <> %s",
            [ORG, WARM_UP],
        )
        rows, cycles, failures, duration = cursor.fetchone()
    return int(rows), int(cycles), int(failures), round(float(duration), 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5, help="alternations of COPY and API")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    from django.conf import settings
    from django.test import Client

    if "testserver" not in settings.ALLOWED_HOSTS and "*" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    user, slugs = build()
    evs = events(args.events, slugs)
    bodies = [
        ("\n".join(json.dumps(e) for e in evs[i : i + args.batch]) + "\n").encode()
        for i in range(0, len(evs), args.batch)
    ]
    del evs
    print(f"{args.events:,} cycle events, {len(bodies)} batches of {args.batch:,}")

    client = Client()
    client.force_login(user)
    # A warm server: the first request of a process imports and caches what every later one
    # uses. One batch to another deployment, outside the timing and the checks.
    warm = [
        dict(e, event_id=f"warm-{i}", deployment=WARM_UP)
        for i, e in enumerate(events(1000, [WARM_UP]))
    ]
    client.post(
        "/api/production/events/",
        data="\n".join(json.dumps(e) for e in warm),
        content_type="application/x-ndjson",
    )
    # The baseline: one bare COPY of all the events.
    rows = copy_rows(bodies)
    gc.collect()
    whole_copy = baseline_copy(rows)
    del rows
    gc.collect()  # what the baseline held is not the server's to sweep
    print(
        f"(a) one bare COPY of all {args.events:,} events into an unindexed table: "
        f"{whole_copy:.2f} s"
    )
    # Then rounds alternate a bare COPY of a round's events with the API, so a change in the
    # machine's speed during the run weighs on both alike (smaller COPYs cost less a row).
    per_round = -(-len(bodies) // args.rounds)
    times: list[float] = []
    copy_seconds = api_seconds = 0.0
    ratios = []
    for r in range(args.rounds):
        chunk = bodies[r * per_round : (r + 1) * per_round]
        if not chunk:
            break
        copied = baseline_copy(copy_rows(chunk))
        gc.collect()  # what the baseline held is not the server's to sweep
        started = time.perf_counter()
        for body in chunk:
            t0 = time.perf_counter()
            response = client.post(
                "/api/production/events/", data=body, content_type="application/x-ndjson"
            )
            times.append(time.perf_counter() - t0)
            if response.status_code != 201:
                raise SystemExit(
                    f"batch refused: {response.status_code} {response.content[:500]!r}"
                )
        posted = time.perf_counter() - started
        ratios.append(posted / copied)
        copy_seconds += copied
        api_seconds += posted
        print(
            f"  round {r + 1}: bare COPY {copied:.2f} s, API {posted:.2f} s, "
            f"ratio {posted / copied:.2f}x"
        )
    times.sort()
    p95 = times[min(len(times) - 1, round(0.95 * len(times)) - 1)]
    ratio = api_seconds / whole_copy
    print(f"(a') bare COPYs of the rounds' events: {copy_seconds:.2f} s")
    print(f"(b) through the API: {api_seconds:.2f} s  ({args.events / api_seconds:,.0f} events/s)")
    print(f"    per batch: p50 {statistics.median(times) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms")
    print(f"ratio API / one COPY of all the events: {ratio:.2f}x (target <= {TARGET_RATIO:.0f}x)")
    print(
        f"ratio API / the rounds' COPYs: {api_seconds / copy_seconds:.2f}x, rounds "
        f"{min(ratios):.2f}x to {max(ratios):.2f}x"
    )

    before = log_state()
    ok = before[1] == args.events
    print(
        f"SUM(ProductionLog.cycles) = {before[1]:,} over {before[0]:,} rows: "
        f"{'equals' if ok else 'DIFFERS FROM'} the events sent"
    )
    again = client.post(
        "/api/production/events/", data=bodies[0], content_type="application/x-ndjson"
    )
    after = log_state()
    same = again.status_code == 200 and after == before
    print(
        f"re-sending batch 1: {again.status_code} {again.json()}; "
        f"log {'unchanged' if same else 'CHANGED'}"
    )
    if not args.keep:
        teardown()
    return 0 if ok and same and ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
