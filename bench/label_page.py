"""Benchmark: the annotator's labelling page against its own 404, in the same run.

Seeds the demo and its label job if needed (``seed_demo``, ``seed_label_demo``), claims the
next episode for ``annotator`` (or resumes the open claim) and requests, in process through
Django's test client, the labelling page ``/label/assignments/<id>/`` and, alternating with it,
the same view for an assignment that does not exist: the same middleware, session, login and
scoped lookup, with nothing to show. Prints the median of each over ROUNDS alternating pairs,
the median per-pair ratio page / 404, and the page's query count. Target: ratio <= 10.

The pass/fail suite asserts the page's query count only (tests/labeling/test_label_pages.py);
its speed is measured here, where a loaded machine slows page and baseline alike.

Usage: DATABASE_URL=... python bench/label_page.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time

from _util import setup_django

TARGET_RATIO = 10.0


def timed_get(client: object, url: str, status: int) -> float:
    started = time.perf_counter()
    response = client.get(url)  # type: ignore[attr-defined]
    seconds = time.perf_counter() - started
    if response.status_code != status:
        raise SystemExit(f"GET {url}: {response.status_code}, expected {status}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    setup_django()
    logging.getLogger("django.request").setLevel(logging.ERROR)  # the 404s are the baseline
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from frontend.management.commands.seed_label_demo import seed_label_demo
    from labeling.labels.services import label_next
    from labeling.models import LabelJob

    if "testserver" not in settings.ALLOWED_HOSTS and "*" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    call_command("seed_demo", verbosity=0)
    job = LabelJob.objects.get(pk=seed_label_demo()["job"])
    annotator = get_user_model().objects.get(username="annotator")
    assignment = label_next(annotator=annotator, job=job)
    if assignment is None:
        print("nothing left to label for 'annotator' in the demo job; reseed the demo")
        return 1
    client = Client()
    client.force_login(annotator)
    page, missing = f"/label/assignments/{assignment.pk}/", "/label/assignments/0/"
    timed_get(client, page, 200)  # warm caches and templates
    timed_get(client, missing, 404)
    with CaptureQueriesContext(connection) as queries:
        timed_get(client, page, 200)

    pairs = []
    for _ in range(args.rounds):
        baseline = timed_get(client, missing, 404)
        pairs.append((timed_get(client, page, 200), baseline))
    ratio = statistics.median(p / b for p, b in pairs)

    print(
        f"labelling page: median {statistics.median(p for p, _ in pairs) * 1000:.1f} ms, "
        f"{len(queries)} queries; its 404: median "
        f"{statistics.median(b for _, b in pairs) * 1000:.1f} ms ({args.rounds} alternating pairs)"
    )
    print(
        f"ratio labelling page / its 404 (median of pairs): {ratio:.2f}x (target <= {TARGET_RATIO:g})"
    )
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
