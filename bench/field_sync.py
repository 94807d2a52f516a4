"""Benchmark: a tablet's batch of new capture records against the replay of the same batch.

Seeds the demo if needed and gives Team Benelux a published task today (as bench/load.py
does), then, in process through Django's test client as the ``field`` user, posts ROUNDS
batches of BATCH new capture records to ``/api/field/records/``, each followed by the same
batch again: a replay is answered from the stored records (the same login, parsing and
lookups, nothing written), so it is the baseline measured in the same run. Prints the median
of each, the median per-pair ratio new / replay and the time per new record. Target: ratio
<= 5. The records it stored are removed afterwards, so the demo programme stays as seeded.

The pass/fail suite checks what the protocol stores under a flaky network
(tests/campaigns/test_field_sync_protocol.py) and prints how long it took; its speed is
measured here.

Usage: DATABASE_URL=... python bench/field_sync.py [--rounds 20] [--batch 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from _util import remove_field_records
from load import prepare

TARGET_RATIO = 5.0


def post(client: Any, batch: list[dict[str, Any]], want: int) -> float:
    started = time.perf_counter()
    response = client.post(
        "/api/field/records/", json.dumps(batch), content_type="application/json"
    )
    seconds = time.perf_counter() - started
    statuses = (
        {r["status"] for r in response.json()["results"]} if response.status_code == 200 else set()
    )
    if statuses != {want}:
        raise SystemExit(
            f"POST /api/field/records/: {response.status_code} {statuses}, expected {want}"
        )
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args()
    ctx = prepare()  # sets Django up
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    if "testserver" not in settings.ALLOWED_HOSTS and "*" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    client = Client()
    client.force_login(get_user_model().objects.get(username="field"))
    stored: list[str] = []

    def batch() -> list[dict[str, Any]]:
        return [
            {
                "uuid": str(uuid.uuid4()),
                "kind": "capture",
                "task": ctx["task"],
                "payload": {"outcome": "success", "target": ctx["target"]},
                "client_created_at": datetime.now(UTC).isoformat(),
                "task_version_seen": ctx["version"],
            }
            for _ in range(args.batch)
        ]

    pairs = []
    try:
        warm = batch()
        stored += [r["uuid"] for r in warm]
        post(client, warm, 201)
        for _ in range(args.rounds):
            records = batch()
            stored += [r["uuid"] for r in records]
            new = post(client, records, 201)
            pairs.append((new, post(client, records, 200)))
    finally:
        remove_field_records(stored)
    ratio = statistics.median(n / r for n, r in pairs)
    new_median = statistics.median(n for n, _ in pairs)

    print(
        f"{args.rounds} batches of {args.batch} new capture records: median "
        f"{new_median * 1000:.1f} ms ({new_median / args.batch * 1000:.1f} ms a record); "
        f"their replays: median {statistics.median(r for _, r in pairs) * 1000:.1f} ms"
    )
    print(
        f"ratio new batch / its replay (median of pairs): {ratio:.2f}x (target <= {TARGET_RATIO:g})"
    )
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
