"""`make run`: database, migrations, demo programme, web server and Celery worker in one go.

Uses the embedded PostgreSQL (``.data/postgres``) unless DATABASE_URL is set, and the
filesystem Celery broker (``.data/broker``) unless CELERY_BROKER_URL is set. Ctrl-C stops
everything; running it again reuses the data.

It serves with DEBUG off (``DEBUG=1 make run`` for Django's debug pages): error pages show
nothing of the code, settings or URLconf to whoever asks. Without SECRET_KEY it generates a
key once into ``.data/secret_key`` (mode 0600) and every later run, and any ``manage.py``
command run beside it, reads the same file (see ``config/settings.py``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HOST = os.environ.get("FIELDCRAFT_HOST", "127.0.0.1")
PORT = os.environ.get("FIELDCRAFT_PORT", "8000")


TRUE = {"1", "true", "yes", "on"}  # as config.settings.env_bool reads them
WILDCARD_HOSTS = {"0.0.0.0", "::", "[::]", ""}  # noqa: S104 - names, not a bind


def local_secret_key(path: Path) -> None:
    """Create the local secret key file once: random, readable by its owner only (0600).

    Assumes nothing else writes ``path``; two runs starting at once end with one key (the
    file appears whole or not at all, and an existing one is never replaced).
    """
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(50) + "\n")
        with contextlib.suppress(FileExistsError):  # another run made it first: keep that
            os.link(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def local_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment `make run` gives migrate, the web server and the worker.

    DEBUG off unless DEBUG is set truthy; the generated key in the data folder unless
    SECRET_KEY is set; the bound host in ALLOWED_HOSTS; plain HTTP on this machine, so no
    redirect to HTTPS and cookies without the Secure flag (a browser would drop those).
    Bound to all interfaces (0.0.0.0), no name is added: set ALLOWED_HOSTS to the names
    the other machines use.
    """
    env = dict(environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if not env.get("DEBUG"):
        env["DEBUG"] = "0"
    data_dir = Path(env.get("FIELDCRAFT_DATA_DIR") or BASE_DIR / ".data")
    if not env.get("SECRET_KEY"):
        local_secret_key(data_dir / "secret_key")
    host = env.get("FIELDCRAFT_HOST", HOST)
    hosts = [h.strip() for h in env.get("ALLOWED_HOSTS", "").split(",") if h.strip()]
    hosts = hosts or ["127.0.0.1", "localhost"]
    if host not in WILDCARD_HOSTS and host not in hosts:
        hosts.append(host)
    env["ALLOWED_HOSTS"] = ",".join(hosts)
    if env["DEBUG"].strip().lower() not in TRUE:
        env.setdefault("SECURE_SSL_REDIRECT", "0")
        env.setdefault("SECURE_COOKIES", "0")
    return env


def main() -> int:
    env = local_env(os.environ)
    debug = env["DEBUG"].strip().lower() in TRUE
    server = None
    if not env.get("DATABASE_URL"):
        from config.embedded_db import PGDATA, _server, database_url

        server = _server(cleanup_mode="stop")
        env["DATABASE_URL"] = database_url(server)
        print(f"Embedded PostgreSQL running, data in {PGDATA}")
    manage = [sys.executable, str(BASE_DIR / "manage.py")]
    subprocess.check_call([*manage, "migrate", "--no-input", "-v", "0"], env=env)
    subprocess.check_call([*manage, "seed_demo"], env=env)
    # Round 1 played out with robot recordings, its evaluation imported and a label job, so a
    # newcomer can play captures, export them with video and read the round's impact at once.
    subprocess.check_call([*manage, "demo_round", "--import"], env=env)
    subprocess.check_call([*manage, "seed_label_demo"], env=env)
    if not debug:
        # Hashed, compressed files that whitenoise serves from the app with DEBUG off.
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
                str(
                    Path(env.get("FIELDCRAFT_DATA_DIR") or BASE_DIR / ".data")
                    / "celerybeat-schedule"
                ),
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
        f"  Fieldcraft is running at http://{HOST}:{PORT}/"
        f" (DEBUG {'on' if debug else 'off; DEBUG=1 make run for debug pages'})\n"
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
