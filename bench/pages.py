"""Pages: p50/p95 of the main planner, dashboard, field and label pages on the demo, in-process.

Seeds the demo (and plays its round 1, as `make run` does), then requests each page N times
with the Django test client signed in as the role that uses it. The long work — forecast
"Simulate", "Recommend", the impact page's first measurement — runs as jobs: the page's
request only queues one (its time is the page's), and the job's work is timed separately,
by running the queued job the way a worker does. The old synchronous path (the same
computation inside the request) is timed in the same run for the before/after ratio.
The dashboard is timed after a data change every time (its cache cannot answer).

Target: every page p95 < 1 s.

Usage: DATABASE_URL=... python bench/pages.py [-n 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from _util import setup_django

TARGET_SECONDS = 1.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, list[float]]] = []

    def add(self, name: str, samples: list[float]) -> None:
        self.rows.append((name, samples))

    def p95(self, name: str) -> float:
        return percentile(dict(self.rows)[name], 0.95)

    def print(self, title: str) -> None:
        print(f"\n{title}")
        print(f"  {'page / work':58} {'n':>3} {'p50 ms':>9} {'p95 ms':>9}")
        for name, samples in self.rows:
            p50 = statistics.median(samples) * 1000
            p95 = percentile(samples, 0.95) * 1000
            print(f"  {name:58} {len(samples):>3} {p50:9.1f} {p95:9.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=15, help="requests per page")
    args = parser.parse_args()
    n = max(3, args.n)
    # Jobs are queued to a broker nobody reads: the bench runs them itself, timed apart.
    os.environ["CELERY_BROKER_URL"] = "memory://"
    os.environ.setdefault("DEBUG", "1")
    setup_django()

    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction
    from django.test import Client

    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.AXES_ENABLED = False
    settings.ALLOWED_HOSTS = ["*"]

    from accounts.models import Job
    from analytics.models import CampaignForecast, GapReport, RoundImpactReport
    from analytics.services.forecast import FORECAST_STRATEGIES, campaign_forecast_run
    from analytics.services.steering import next_round_recommendation, round_impact_compute
    from analytics.services.steering_jobs import round_impact_run, round_recommendation_run
    from analytics.steering.simulate import simulate
    from campaigns.models import Campaign
    from labeling.models import LabelJob
    from sites.models import ProductionLog

    print("Seeding the demo (seed_demo, demo_round --import, seed_label_demo)…")
    call_command("migrate", verbosity=0)
    call_command("seed_demo", verbosity=0)
    with tempfile.TemporaryDirectory() as out:
        call_command("demo_round", "--import", "--out", out, "--recordings", "0", verbosity=0)
    call_command("seed_label_demo", verbosity=0)

    users = get_user_model().objects
    clients: dict[str, Client] = {}
    for username in ("manager", "viewer", "field", "annotator"):
        client = Client()
        client.force_login(users.get(username=username))
        clients[username] = client
    manager, viewer = clients["manager"], clients["viewer"]
    campaign = Campaign.objects.get(slug="northwind-2027-h1")
    round1 = campaign.rounds.get(number=1)
    gap = GapReport.objects.filter(campaign=campaign, status="done").order_by("-pk").first()
    label_job = LabelJob.objects.order_by("pk").first()

    def get(client: Client, url: str) -> float:
        elapsed, response = timed(lambda: client.get(url))
        assert response.status_code == 200, (url, response.status_code)
        return elapsed

    def post(client: Client, url: str, data: dict[str, str]) -> float:
        elapsed, response = timed(lambda: client.post(url, data))
        assert response.status_code in (200, 302), (url, response.status_code)
        return elapsed

    def run_job(kind: str, runner: Callable[..., None]) -> float:
        job = Job.objects.filter(kind=kind, status="queued").order_by("-created_at").first()
        assert job is not None, kind
        elapsed, _ = timed(lambda: runner(job_id=str(job.pk)))
        job.refresh_from_db()
        assert job.status == "succeeded", (kind, job.message)
        return elapsed

    # Warm up imports and connections.
    get(manager, "/planner/")
    get(viewer, f"/dashboard/{campaign.customer.slug}/")

    pages = Table()
    work = Table()

    # --- forecast: old = the simulations inside the GET; new = POST queues a job.
    old = []
    for i in range(max(3, n // 5)):
        old.append(
            timed(
                lambda i=i: {
                    s: simulate(s, seed=1000 + i, rounds=20, budget=5000)
                    for s in FORECAST_STRATEGIES
                }
            )[0]
        )
    forecast_work = (
        f"forecast: {len(FORECAST_STRATEGIES)} strategies × 20 rounds (old: inside the GET)"
    )
    work.add(forecast_work, old)
    forecast_url = f"/planner/campaigns/{campaign.pk}/forecast/"
    posts, jobs = [], []
    for i in range(n):
        params = {"rounds": "20", "budget": "5000", "seed": str(2000 + i)}
        posts.append(post(manager, forecast_url, params))
        jobs.append(run_job("forecast", campaign_forecast_run))
    pages.add("POST forecast Simulate (queues the job)", posts)
    work.add("forecast job (worker)", jobs)
    pages.add(
        "GET forecast with its stored result",
        [get(manager, f"{forecast_url}?rounds=20&budget=5000&seed=2000") for _ in range(n)],
    )
    pages.add(
        "GET forecast progress partial",
        [get(manager, f"{forecast_url}job/?rounds=20&budget=5000&seed=2000") for _ in range(n)],
    )

    # --- impact: old = round_impact_compute inside the first GET; new = the page reads and
    # its "Measure this round" POST queues a job.
    impact_url = f"/planner/rounds/{round1.pk}/impact/"
    old = []
    for _ in range(max(3, n // 5)):
        with transaction.atomic():
            sid = transaction.savepoint()
            old.append(timed(lambda: round_impact_compute(round=round1))[0])
            transaction.savepoint_rollback(sid)
    work.add("impact: round_impact_compute (old: inside the first GET)", old)
    firsts, jobs = [], []
    for _ in range(n):
        RoundImpactReport.objects.filter(round=round1).delete()
        firsts.append(get(manager, impact_url) + post(manager, impact_url, {}))
        jobs.append(run_job("round_impact", round_impact_run))
    pages.add("GET impact, first view + POST Measure (queues the job)", firsts)
    work.add("impact job (worker)", jobs)

    # --- recommend: old = next_round_recommendation inside the POST; new = POST queues a job.
    old = [
        timed(lambda: next_round_recommendation(campaign=campaign, budget=2000.0))[0]
        for _ in range(max(3, n // 5))
    ]
    work.add("recommend: next_round_recommendation (old: inside the POST)", old)
    posts, jobs = [], []
    for _ in range(n):
        posts.append(post(manager, f"/planner/rounds/{round1.pk}/recommend/", {"budget": "2000"}))
        jobs.append(run_job("recommend", round_recommendation_run))
    pages.add("POST Recommend (queues the job)", posts)
    work.add("recommend job (worker)", jobs)
    pages.add(
        "GET impact with report and recommendation", [get(manager, impact_url) for _ in range(n)]
    )
    pages.add(
        "GET impact progress partial",
        [get(manager, f"/planner/rounds/{round1.pk}/impact/job/") for _ in range(n)],
    )

    # --- the customer dashboard, after a data change every time (no cached answer).
    log = ProductionLog.objects.filter(deployment__customer=campaign.customer).first()
    assert log is not None
    changed, cached = [], []
    dashboard = f"/dashboard/{campaign.customer.slug}/"
    for _ in range(n):
        ProductionLog.objects.filter(pk=log.pk).update(cycles=log.cycles + 1 + len(changed))
        changed.append(get(viewer, dashboard))
        cached.append(get(viewer, dashboard))
    ProductionLog.objects.filter(pk=log.pk).update(cycles=log.cycles)
    pages.add("GET dashboard (viewer) after a data change", changed)
    pages.add("GET dashboard (viewer), unchanged data", cached)

    # --- the other main pages.
    others: list[tuple[str, Client, str]] = [
        ("GET planner home", manager, "/planner/"),
        ("GET campaign", manager, f"/planner/campaigns/{campaign.pk}/"),
        ("GET round", manager, f"/planner/rounds/{round1.pk}/"),
        ("GET campaign gap report", manager, f"/planner/campaigns/{campaign.pk}/gap/"),
        ("GET evaluations", manager, "/planner/evaluations/"),
        ("GET dashboard (manager)", manager, dashboard),
        ("GET field today (field)", clients["field"], "/field/"),
        ("GET label queue (annotator)", clients["annotator"], "/label/"),
    ]
    if gap is not None:
        others.append(("GET gap cells", manager, f"/planner/gap/{gap.pk}/cells/"))
    if label_job is not None:
        others.append(("GET label job (manager)", manager, f"/label/jobs/{label_job.pk}/"))
    for name, client, url in others:
        pages.add(name, [get(client, url) for _ in range(n)])

    pages.print(f"Page requests (in-process test client, {n} each; target p95 < 1000 ms)")
    work.print("Job work, timed apart from the pages")

    print("\nBefore/after (p95: old synchronous request ≈ its work + the page; new: the page)")
    for label, old_name, new_name, page_name in (
        (
            "forecast Simulate",
            forecast_work,
            "POST forecast Simulate (queues the job)",
            "GET forecast with its stored result",
        ),
        (
            "impact first view",
            "impact: round_impact_compute (old: inside the first GET)",
            "GET impact, first view + POST Measure (queues the job)",
            "GET impact with report and recommendation",
        ),
        (
            "Recommend",
            "recommend: next_round_recommendation (old: inside the POST)",
            "POST Recommend (queues the job)",
            "GET impact with report and recommendation",
        ),
    ):
        before = work.p95(old_name) + pages.p95(page_name)
        after = pages.p95(new_name)
        print(
            f"  {label:20} before ≈ {before * 1000:8.1f} ms   after {after * 1000:7.1f} ms"
            f"   ratio {before / after:6.1f}×"
        )
    slow = [name for name, samples in pages.rows if percentile(samples, 0.95) > TARGET_SECONDS]
    print(
        "\nAll pages p95 under 1 s." if not slow else f"\nPages over 1 s at p95: {', '.join(slow)}"
    )
    # Keep the demo as seeded: drop the forecasts this run stored.
    CampaignForecast.objects.filter(campaign=campaign, seed__gte=2000).delete()


if __name__ == "__main__":
    main()
