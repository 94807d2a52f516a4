"""Faults: kill the Celery worker (SIGKILL) mid-import, mid-gap-report and mid-export, and
restart PostgreSQL during tablet sync; every job must complete after restart with no duplicate
rows, and every tablet record must arrive exactly once.

How recovery works: jobs are rows with a heartbeat; services are idempotent (an import writes
in one transaction and cleans its stale staging table; a report replaces its cells in one
transaction); the beat task ``jobs_requeue_stale`` re-dispatches jobs whose heartbeat went
stale, so a killed worker's job is picked up by the next worker. Tablets resend with the same
UUIDs until confirmed, and the server is idempotent on (organization, UUID).

Usage: DATABASE_URL=... python bench/faults.py [--only import,gap,export,sync] [--rows 300000]
Needs a PostgreSQL it may restart for the sync scenario: the embedded one (.data/postgres),
or the machine's cluster via pg_ctlcluster (run as root); otherwise that scenario is skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _util import purge_organizations, remove_field_records, setup_django

ROOT = Path(__file__).resolve().parents[1]
WORKDIR = Path(tempfile.mkdtemp(prefix="fieldcraft-faults-"))
ENV = dict(
    os.environ,
    FIELDCRAFT_DATA_DIR=str(WORKDIR),
    FIELDCRAFT_JOB_STALE_SECONDS="6",
    FIELDCRAFT_REQUEUE_SECONDS="3",
    CELERY_TASK_ALWAYS_EAGER="0",
)
os.environ.update(
    {
        k: ENV[k]
        for k in ("FIELDCRAFT_DATA_DIR", "FIELDCRAFT_JOB_STALE_SECONDS", "CELERY_TASK_ALWAYS_EAGER")
    }
)
setup_django()

from django.db import connection  # noqa: E402

from accounts.models import Job, Organization  # noqa: E402


def worker() -> subprocess.Popen[bytes]:
    """A real Celery worker with beat, in its own process group so SIGKILL takes all of it."""
    return subprocess.Popen(
        [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "config",
            "worker",
            "--beat",
            "-c",
            "1",
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
            "--schedule",
            str(WORKDIR / "beat-schedule"),
        ],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=open(WORKDIR / "worker.log", "ab"),
        start_new_session=True,
    )


def kill(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def job(pk: Any) -> Job:
    return Job.objects.get(pk=pk)


def kill_mid_job(
    job_id: Any, label: str, started: subprocess.Popen[bytes], min_progress: int = 0
) -> subprocess.Popen[bytes]:
    wait_for(
        lambda: job(job_id).status == "running" and job(job_id).progress_done >= min_progress,
        120,
        f"{label} to start",
    )
    kill(started)
    print(
        f"  killed the worker (SIGKILL) while the {label} was running "
        f"({job(job_id).progress_done:,}/{job(job_id).progress_total or 0:,})"
    )
    return worker()


def finish(job_id: Any, label: str, timeout: float = 300) -> Job:
    wait_for(
        lambda: job(job_id).status in ("succeeded", "failed", "cancelled"),
        timeout,
        f"{label} to finish",
    )
    done = job(job_id)
    print(f"  {label}: {done.status} after {done.attempts} attempt(s) — {done.message[:120]}")
    return done


def scenario_import(rows: int) -> bool:
    from labeling.models import Dataset, Episode
    from labeling.services import inventory_import_start
    from sites.models import ConditionDimension, ConditionValue

    purge_organizations("faults-import")
    org = Organization.objects.create(slug="faults-import", name="Faults import", kind="operator")
    dim = ConditionDimension.objects.create(organization=org, slug="lighting", name="Lighting")
    for slug in ("bright", "dim", "glare"):
        ConditionValue.objects.create(dimension=dim, slug=slug, label=slug.title())
    path = WORKDIR / "manifest.csv"
    with path.open("w") as fh:
        fh.write("key,frames,duration_s,lighting\n")
        for i in range(rows):
            fh.write(f"ep-{i},{300 + i % 50},{10 + i % 7},{('bright', 'dim', 'glare')[i % 3]}\n")
    print(f"import of {rows:,} rows")
    w = worker()
    started = inventory_import_start(
        organization=org, path=path, dataset_name="faults", format="csv"
    )
    job_id = started.job_id
    w = kill_mid_job(job_id, "import", w)
    try:
        done = finish(job_id, "import")
    finally:
        kill(w)
    dataset = Dataset.objects.get(organization=org, slug="faults")
    count = Episode.objects.filter(dataset=dataset).count()
    distinct = Episode.objects.filter(dataset=dataset).values("key").distinct().count()
    ok = done.status == "succeeded" and done.attempts >= 2 and count == distinct == rows
    print(
        f"  episodes {count:,} (distinct keys {distinct:,}, expected {rows:,}): {'OK' if ok else 'FAILED'}"
    )
    purge_organizations("faults-import")
    return ok


def scenario_gap() -> bool:
    from django.core.management import call_command

    from analytics.models import GapCell
    from analytics.services.gap import gap_report_request
    from campaigns.models import Campaign

    call_command("seed_demo", verbosity=0)
    campaign = Campaign.objects.get(slug="northwind-2027-h1")
    print("gap report over all seven dimensions of the demo")
    w = worker()
    report = gap_report_request(campaign=campaign)
    w = kill_mid_job(report.job_id, "gap report", w)
    try:
        done = finish(report.job_id, "gap report")
    finally:
        kill(w)
    report.refresh_from_db()
    cells = GapCell.objects.filter(report=report).count()
    ranks = GapCell.objects.filter(report=report).values("rank").distinct().count()
    ok = (
        done.status == "succeeded"
        and report.status == "done"
        and cells == ranks == report.n_cells > 0
    )
    print(
        f"  report {report.status}, {cells:,} cells stored once each (n_cells {report.n_cells:,}): "
        f"{'OK' if ok else 'FAILED'}"
    )
    return ok


def scenario_export(rows: int) -> bool:
    import zipfile

    from labeling.exports.services import dataset_export_start
    from labeling.models import Dataset, DatasetExport

    purge_organizations("faults-export")
    org = Organization.objects.create(slug="faults-export", name="Faults export", kind="operator")
    dataset = Dataset.objects.create(organization=org, slug="faults", name="Faults export")
    with connection.cursor() as cursor:
        # Synchronised, accepted episodes: all of them export.
        cursor.execute(
            "INSERT INTO labeling_episode (organization_id, dataset_id, key, episode_count, frames,"
            " duration_s, outcome, storage_uri, provenance, sync_status, label_status, validated,"
            " features, extra, created_at, updated_at)"
            " SELECT %s, %s, 'ep-' || i, 1, 300, 10, CASE WHEN i %% 5 = 0 THEN 'failure'"
            " ELSE 'success' END, '', 'captured', 'synced', 'accepted', true, '{}', '{}',"
            " now(), now() FROM generate_series(1, %s) AS i",
            [org.pk, dataset.pk, rows],
        )
    print(f"export of {rows:,} accepted episodes as a CSV manifest")
    w = worker()
    export = dataset_export_start(dataset=dataset, format="csv")
    job_id = export.job_id
    w = kill_mid_job(job_id, "export", w)
    try:
        done = finish(job_id, "export")
    finally:
        kill(w)
    export.refresh_from_db()
    exports = DatasetExport.objects.filter(dataset=dataset).count()
    written = 0
    if export.path and Path(export.path).exists():
        with zipfile.ZipFile(export.path) as archive:
            for name in archive.namelist():
                if name.endswith(".csv"):
                    with archive.open(name) as fh:
                        written += sum(1 for _ in fh) - 1  # header
    ok = done.status == "succeeded" and done.attempts >= 2 and exports == 1 and written == rows
    print(
        f"  one export record ({exports}), {written:,} episode rows in the archive "
        f"(expected {rows:,}): {'OK' if ok else 'FAILED'}"
    )
    purge_organizations("faults-export")
    return ok


def restart_postgres() -> str | None:
    settings = connection.settings_dict
    host = settings.get("HOST") or ""
    if (
        host.startswith("/") and (ROOT / ".data" / "postgres") in Path(host).parents
    ) or host.endswith(".data/postgres"):
        subprocess.run([sys.executable, "-m", "config.embedded_db", "stop"], cwd=ROOT, check=True)
        subprocess.run(
            [sys.executable, "-m", "config.embedded_db", "url"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        return "embedded"
    if shutil.which("pg_ctlcluster") and os.geteuid() == 0:
        versions = sorted(Path("/etc/postgresql").iterdir())
        if versions:
            subprocess.run(
                [
                    "pg_ctlcluster",
                    "--skip-systemctl-redirect",
                    versions[-1].name,
                    "main",
                    "restart",
                ],
                check=True,
                capture_output=True,
            )
            return f"cluster {versions[-1].name}/main"
    return None


def scenario_sync(tablets: int = 20, per_tablet: int = 100) -> bool:
    import http.client
    import re
    from urllib.parse import urlencode

    from load import prepare  # type: ignore[import-not-found]

    ctx = prepare()
    port = 8978
    env = dict(
        ENV,
        DEBUG="0",
        SECRET_KEY="faults-" + "k" * 40,
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="0",
        AXES_ENABLED="0",
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
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--threads",
            "8",
            "--worker-class",
            "gthread",
            "--log-level",
            "error",
        ],
        cwd=ROOT,
        env=env,
        stderr=open(WORKDIR / "gunicorn.log", "ab"),  # noqa: SIM115 - lives as long as the server
    )
    time.sleep(3)
    sent: dict[str, int] = {}
    confirmed: set[str] = set()
    lock = threading.Lock()
    failures = {"retries": 0}

    def tablet(n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        cookies: dict[str, str] = {}

        def call(
            method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
        ) -> tuple[int, bytes]:
            nonlocal conn
            head = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()), **(headers or {})}
            try:
                conn.request(method, path, body=body, headers=head)
                r = conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
                return 0, b""
            for h, v in r.getheaders():
                if h.lower() == "set-cookie":
                    cookies[v.split("=", 1)[0]] = v.split("=", 1)[1].split(";", 1)[0]
            return r.status, data

        for _ in range(50):
            status, page = call("GET", "/login/")
            m = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page)
            if m:
                body = urlencode(
                    {
                        "username": "field",
                        "password": "demo",
                        "csrfmiddlewaretoken": m.group(1).decode(),
                    }
                )
                status, _ = call(
                    "POST",
                    "/login/",
                    body.encode(),
                    {
                        "Content-Type": "application/x-www-form-urlencoded",
                        "Referer": f"http://127.0.0.1:{port}/login/",
                    },
                )
                if status == 302:
                    break
            time.sleep(0.5)
        outbox = [
            {
                "uuid": str(uuid.uuid4()),
                "kind": "capture",
                "task": ctx["task"],
                "payload": {"outcome": "success", "target": ctx["target"]},
                "client_created_at": datetime.now(UTC).isoformat(),
                "task_version_seen": ctx["version"],
            }
            for _ in range(per_tablet)
        ]
        with lock:
            for r in outbox:
                sent[r["uuid"]] = 0
        delay = 0.2
        while outbox:
            batch = outbox[:5]
            status, data = call(
                "POST",
                "/api/field/records/",
                json.dumps(batch).encode(),
                {
                    "Content-Type": "application/json",
                    "X-CSRFToken": cookies.get("csrftoken", ""),
                    "Referer": f"http://127.0.0.1:{port}/field/",
                },
            )
            if status == 200:
                results = json.loads(data)["results"]
                done = {r["uuid"] for r in results if r["status"] in (200, 201)}
                with lock:
                    confirmed.update(done)
                outbox = [r for r in outbox if r["uuid"] not in done]
                delay = 0.2
                time.sleep(0.25)  # a tablet syncs as records are captured, not all at once
            else:
                with lock:
                    failures["retries"] += 1
                time.sleep(delay)
                delay = min(5.0, delay * 2)

    threads = [threading.Thread(target=tablet, args=(i,)) for i in range(tablets)]
    for t in threads:
        t.start()
    total = tablets * per_tablet
    wait_for(lambda: len(confirmed) >= total // 4, 120, "a quarter of the records to sync")
    at_restart = len(confirmed)
    print(
        f"tablet sync: {tablets} tablets x {per_tablet} records; restarting PostgreSQL mid-sync "
        f"({at_restart:,} of {total:,} confirmed so far)"
    )
    how = restart_postgres()
    if how is None:
        print(
            "  no restartable PostgreSQL here (needs the embedded one, or root with pg_ctlcluster); skipped"
        )
    else:
        print(f"  restarted PostgreSQL ({how})")
    for t in threads:
        t.join(timeout=300)
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)
    connection.close()
    from campaigns.models import FieldRecord

    uuids = list(sent)
    stored = FieldRecord.objects.filter(uuid__in=uuids).count()
    episodes = (
        FieldRecord.objects.filter(uuid__in=uuids, episode__isnull=False)
        .values("episode")
        .distinct()
        .count()
    )
    ok = stored == len(uuids) == len(confirmed) == episodes and at_restart < len(uuids)
    remove_field_records(uuids)  # leave the demo programme as it was
    print(
        f"  sent {len(uuids):,}, confirmed {len(confirmed):,}, stored {stored:,} records / {episodes:,} episodes "
        f"(each exactly once), {failures['retries']} failed requests retried: {'OK' if ok else 'FAILED'}"
    )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="import,gap,export,sync")
    parser.add_argument("--rows", type=int, default=300_000)
    args = parser.parse_args()
    chosen = set(args.only.split(","))
    results = {}
    if "import" in chosen:
        results["import"] = scenario_import(args.rows)
    if "gap" in chosen:
        results["gap"] = scenario_gap()
    if "export" in chosen:
        results["export"] = scenario_export(args.rows)
    if "sync" in chosen:
        results["sync"] = scenario_sync()
    print("faults: " + ", ".join(f"{k} {'OK' if v else 'FAILED'}" for k, v in results.items()))
    shutil.rmtree(WORKDIR, ignore_errors=True)
    sys.exit(0 if all(results.values()) else 1)


if __name__ == "__main__":
    main()
