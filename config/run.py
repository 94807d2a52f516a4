"""`make run`: database, migrations, demo programme, web server and Celery worker in one go.

Uses the embedded PostgreSQL (``.data/postgres``) unless DATABASE_URL is set, and the
filesystem Celery broker (``.data/broker``) unless CELERY_BROKER_URL is set. Ctrl-C stops
everything; running it again reuses the data.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HOST = os.environ.get("FIELDCRAFT_HOST", "127.0.0.1")
PORT = os.environ.get("FIELDCRAFT_PORT", "8000")


def main() -> int:
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    server = None
    if not env.get("DATABASE_URL"):
        from config.embedded_db import _server, database_url

        server = _server(cleanup_mode="stop")
        env["DATABASE_URL"] = database_url(server)
        print(f"Embedded PostgreSQL running, data in {BASE_DIR / '.data' / 'postgres'}")
    manage = [sys.executable, str(BASE_DIR / "manage.py")]
    subprocess.check_call([*manage, "migrate", "--no-input", "-v", "0"], env=env)
    subprocess.check_call([*manage, "seed_demo"], env=env)
    if env.get("DEBUG", "1") in {"0", "false", "False"}:
        subprocess.check_call([*manage, "collectstatic", "--no-input", "-v", "0"], env=env)

    children = [
        subprocess.Popen(
            [
                str(BIN / "celery"),
                "-A",
                "config",
                "worker",
                "--beat",
                "--concurrency",
                os.environ.get("CELERY_CONCURRENCY", "2"),
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--schedule",
                str(BASE_DIR / ".data" / "celerybeat-schedule"),
            ],
            env=env,
            cwd=BASE_DIR,
        ),
        subprocess.Popen(
            [
                str(BIN / "gunicorn"),
                "config.wsgi",
                "--bind",
                f"{HOST}:{PORT}",
                # Processes rather than threads: threads of one process queue for the GIL,
                # which doubled p95 latency under bench/load.py (4x8 against 8x2).
                "--workers",
                os.environ.get("WEB_WORKERS", str(min(8, 2 * (os.cpu_count() or 1) + 1))),
                "--threads",
                os.environ.get("WEB_THREADS", "2"),
                "--access-logfile",
                "-",
                "--graceful-timeout",
                "5",
            ],
            env=env,
            cwd=BASE_DIR,
        ),
    ]
    names = {children[0].pid: "celery worker", children[1].pid: "gunicorn"}
    print(
        "\n"
        f"  Fieldcraft is running at http://{HOST}:{PORT}/\n"
        "  Demo logins (password: demo):\n"
        "    manager    programme manager (planner)\n"
        "    field      field team member (tablet app)\n"
        "    annotator  annotator (label queue)\n"
        "    viewer     customer viewer, Northwind Logistics\n"
        "    viewer-b   customer viewer, Brightline Retail\n"
        "  API docs: /api/docs/   Admin: /admin/   Ctrl-C stops everything.\n",
        flush=True,
    )

    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    exit_code = 0
    while not stopping:
        for child in children:
            if child.poll() is not None:
                print(
                    f"{names[child.pid]} exited with {child.returncode}; stopping.", file=sys.stderr
                )
                stopping = True
                exit_code = child.returncode or 1
        time.sleep(0.5)
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
    print("Stopped. Data kept in .data/ for next time.")
    del server
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
