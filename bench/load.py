"""Load: 50 dashboard users and 20 tablets syncing for 60 s against a real server on loopback.

Starts gunicorn (production settings, DEBUG=0) on 127.0.0.1 against DATABASE_URL, seeds the
demo if needed, gives Team Benelux a published task for today, then runs 70 virtual users in
threads over keep-alive connections: viewers open their dashboard (and managers a gap report),
tablets pull their tasks and post batches of capture records with fresh UUIDs. Prints
requests, errors, p50/p95/p99 latency per kind and overall, and checks afterwards that every
record a tablet got a 2xx for is in the database exactly once. Target: p95 < 300 ms, 0 errors.

Usage: DATABASE_URL=... python bench/load.py [--seconds 60] [--dashboards 50] [--tablets 20]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, date, datetime
from datetime import time as dtime
from pathlib import Path
from urllib.parse import urlencode

from _util import remove_field_records, setup_django

ROOT = Path(__file__).resolve().parents[1]
PORT = int(os.environ.get("LOAD_PORT", "8977"))


def prepare() -> dict[str, object]:
    """Seed the demo, give Team Benelux a published task today; return what the users need."""
    setup_django()
    from django.core.management import call_command

    from campaigns.models import Campaign, CollectionTask, FieldTeam, TaskTarget
    from campaigns.services import round_create
    from sites.models import Site

    call_command("seed_demo", verbosity=0)
    campaign = Campaign.objects.get(slug="northwind-2027-h1")
    round = campaign.rounds.filter(notes="load-bench").first() or round_create(
        campaign=campaign, notes="load-bench"
    )
    round.status = "scheduled"
    round.save(update_fields=["status"])
    team = FieldTeam.objects.get(slug="benelux")
    site = Site.objects.get(slug="rotterdam-dc")
    today = date.today()
    task, _ = CollectionTask.objects.get_or_create(
        round=round,
        site=site,
        team=team,
        scheduled_date=today,
        defaults={
            "embodiment": campaign.embodiments.first(),
            "status": "published",
            "start_at": datetime.combine(today, dtime(5, 0), tzinfo=UTC),
            "end_at": datetime.combine(today, dtime(13, 0), tzinfo=UTC),
        },
    )
    target = round.targets.first()
    if target is None:
        from sites.services import condition_set_intern

        value = site.presents.first()
        cs = condition_set_intern(organization=campaign.organization_id, value_ids=[value.pk])
        target = round.targets.create(
            condition_set=cs, label="Load bench cell", episodes_wanted=100000
        )
    TaskTarget.objects.get_or_create(
        task=task, target=target, defaults={"episodes_planned": 100000}
    )
    from analytics.models import GapReport

    report = GapReport.objects.filter(campaign=campaign, status="done").first()
    if report is None:
        call_command(
            "gap_report",
            "--campaign",
            campaign.slug,
            "--dimensions",
            "lighting,clutter,human-activity",
            stdout=open(os.devnull, "w"),  # noqa: SIM115
        )
        report = GapReport.objects.filter(campaign=campaign, status="done").first()
    return {
        "task": task.pk,
        "version": task.version,
        "target": target.pk,
        "round": round.pk,
        "gap": report.pk if report else None,
    }


def _processes() -> dict[int, tuple[int, str, float]]:
    """Every process: pid → (parent pid, name, CPU seconds so far). Linux /proc only."""
    tick = os.sysconf("SC_CLK_TCK")
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        table[int(stat.parent.name)] = (
            int(fields[1]),
            name,
            (int(fields[11]) + int(fields[12])) / tick,
        )
    return table


def cpu_split(server_pid: int) -> dict[str, float]:
    """CPU seconds used so far by the server's process tree, PostgreSQL and this process."""
    if not Path("/proc/self/stat").exists():
        return {}
    table = _processes()

    def in_tree(pid: int) -> bool:
        while pid > 1:
            if pid == server_pid:
                return True
            pid = table.get(pid, (0, "", 0.0))[0]
        return False

    split = {"server": 0.0, "postgres": 0.0, "load generator": 0.0}
    for pid, (_, name, seconds) in table.items():
        if in_tree(pid):
            split["server"] += seconds
        elif name.startswith("postgres"):
            split["postgres"] += seconds
        elif pid == os.getpid():
            split["load generator"] += seconds
    return split


def start_server() -> subprocess.Popen[bytes]:
    env = dict(
        os.environ,
        DEBUG="0",
        SECRET_KEY="load-bench-" + "k" * 40,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_SSL_REDIRECT="0",
        AXES_ENABLED="0",
        FIELDCRAFT_DATA_DIR=str(ROOT / ".data" / "loadbench"),
    )
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "config.wsgi",
            "--bind",
            f"127.0.0.1:{PORT}",
            "--workers",
            os.environ.get("LOAD_WORKERS", "8"),
            "--threads",
            os.environ.get("LOAD_THREADS", "2"),
            "--worker-class",
            "gthread",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    for _ in range(100):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status in (200, 503):
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("gunicorn did not come up")


class Client:
    """A keep-alive HTTP client with a Django session (logs in through the login form)."""

    def __init__(self) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        self.cookies: dict[str, str] = {}

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        head = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()), **(headers or {})}
        try:
            self.conn.request(method, path, body=body, headers=head)
            response = self.conn.getresponse()
        except (http.client.HTTPException, OSError):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
            self.conn.request(method, path, body=body, headers=head)
            response = self.conn.getresponse()
        data = response.read()
        for header, value in response.getheaders():
            if header.lower() == "set-cookie":
                name, _, rest = value.partition("=")
                self.cookies[name] = rest.split(";", 1)[0]
        return response.status, data

    def login(self, username: str) -> None:
        status, page = self.request("GET", "/login/")
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1).decode()  # type: ignore[union-attr]
        body = urlencode(
            {"username": username, "password": "demo", "csrfmiddlewaretoken": token}
        ).encode()
        status, _ = self.request(
            "POST",
            "/login/",
            body,
            {
                "Content-Type": "application/x-www-form-urlencoded",
                "Referer": f"http://127.0.0.1:{PORT}/login/",
            },
        )
        if status != 302:
            raise SystemExit(f"login as {username} failed ({status})")


def run(
    seconds: float, dashboards: int, tablets: int, ctx: dict[str, object], server_pid: int = 0
) -> dict[str, object]:
    samples: dict[str, list[float]] = {
        "dashboard": [],
        "gap": [],
        "tablet-sync": [],
        "tablet-tasks": [],
    }
    errors: list[str] = []
    accepted: list[str] = []
    lock = threading.Lock()
    # Sign everyone in first (password hashing is deliberately slow) and only then start the clock.
    viewers = []
    for i in range(dashboards):
        client = Client()
        client.login("viewer" if i % 5 else "manager")
        viewers.append(client)
    tablet_clients = []
    for _ in range(tablets):
        client = Client()
        client.login("field")
        tablet_clients.append(client)
    cpu_before = cpu_split(server_pid)
    stop = time.monotonic() + seconds

    def timed(
        kind: str,
        client: Client,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        started = time.perf_counter()
        status, data = client.request(method, path, body, headers)
        elapsed = time.perf_counter() - started
        with lock:
            samples[kind].append(elapsed)
            if status >= 400:
                errors.append(f"{kind} {method} {path} → {status}")
        return status, data

    def viewer(n: int) -> None:
        client = viewers[n]
        while time.monotonic() < stop:
            if n % 5 == 0 and ctx.get("gap"):
                timed("gap", client, "GET", f"/planner/gap/{ctx['gap']}/")
            else:
                timed("dashboard", client, "GET", "/dashboard/")
            time.sleep(1.0)

    def tablet(n: int) -> None:
        client = tablet_clients[n]
        csrf = client.cookies.get("csrftoken", "")
        while time.monotonic() < stop:
            timed("tablet-tasks", client, "GET", "/api/field/tasks/")
            batch = [
                {
                    "uuid": str(uuid.uuid4()),
                    "kind": "capture",
                    "task": ctx["task"],
                    "payload": {"outcome": "success", "target": ctx["target"]},
                    "client_created_at": datetime.now(UTC).isoformat(),
                    "task_version_seen": ctx["version"],
                }
                for _ in range(3)
            ]
            status, data = timed(
                "tablet-sync",
                client,
                "POST",
                "/api/field/records/",
                json.dumps(batch).encode(),
                {
                    "Content-Type": "application/json",
                    "X-CSRFToken": csrf,
                    "Referer": f"http://127.0.0.1:{PORT}/field/",
                },
            )
            if status == 200:
                results = json.loads(data)["results"]
                with lock:
                    accepted.extend(r["uuid"] for r in results if r["status"] in (200, 201))
            time.sleep(2.0)

    threads = [threading.Thread(target=viewer, args=(i,)) for i in range(dashboards)]
    threads += [threading.Thread(target=tablet, args=(i,)) for i in range(tablets)]
    for t in threads:
        t.start()
        time.sleep(0.02)
    for t in threads:
        t.join()
    cpu_after = cpu_split(server_pid)
    cpu = {k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after}
    return {"samples": samples, "errors": errors, "accepted": accepted, "cpu": cpu}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--dashboards", type=int, default=50)
    parser.add_argument("--tablets", type=int, default=20)
    args = parser.parse_args()
    ctx = prepare()
    server = start_server()
    try:
        result = run(args.seconds, args.dashboards, args.tablets, ctx, server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    samples: dict[str, list[float]] = result["samples"]  # type: ignore[assignment]
    everything = [x for v in samples.values() for x in v]
    print(
        f"{args.dashboards} dashboard users + {args.tablets} tablets for {args.seconds:.0f} s, "
        f"gunicorn {os.environ.get('LOAD_WORKERS', '8')}x{os.environ.get('LOAD_THREADS', '2')} threads on loopback"
    )
    for kind, values in samples.items():
        if values:
            print(
                f"  {kind:<13} {len(values):>6} requests  p50 {pct(values, 0.5) * 1000:6.0f} ms  "
                f"p95 {pct(values, 0.95) * 1000:6.0f} ms  p99 {pct(values, 0.99) * 1000:6.0f} ms"
            )
    print(
        f"  all           {len(everything):>6} requests  p50 {pct(everything, 0.5) * 1000:6.0f} ms  "
        f"p95 {pct(everything, 0.95) * 1000:6.0f} ms  ({len(everything) / args.seconds:.0f} req/s)"
    )
    cpu: dict[str, float] = result["cpu"]  # type: ignore[assignment]
    if cpu:
        # PostgreSQL backends that exited during the run are not counted: approximate.
        available = (os.cpu_count() or 1) * args.seconds
        print(
            f"  CPU over the run ({available:.0f} core-seconds available): "
            + ", ".join(f"{k} {v:.0f} s ({v / available:.0%})" for k, v in cpu.items())
        )
    errors: list[str] = result["errors"]  # type: ignore[assignment]
    print(f"  errors: {len(errors)}" + (f" (first: {errors[0]})" if errors else ""))
    from campaigns.models import FieldRecord

    accepted: list[str] = result["accepted"]  # type: ignore[assignment]
    stored = FieldRecord.objects.filter(uuid__in=accepted).count()
    episodes = (
        FieldRecord.objects.filter(uuid__in=accepted, episode__isnull=False)
        .values("episode")
        .distinct()
        .count()
    )
    print(
        f"  tablet records confirmed {len(accepted):,}; in the database exactly once: {stored:,} records, "
        f"{episodes:,} episodes"
    )
    remove_field_records(accepted)  # leave the demo programme as it was
    print(
        f"  p95 target < 300 ms: {'met' if pct(everything, 0.95) < 0.3 else 'MISSED'}; "
        f"errors target 0: {'met' if not errors else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
