"""Without DATABASE_URL, settings and manage.py use the embedded PostgreSQL `make run` uses: the
server `make run` keeps running, or one manage.py starts for its command; never another."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dj_database_url
import pytest

from config.embedded_db import running_url, settings_url, socket_url

ROOT = Path(__file__).resolve().parents[1]
DATA_DIRECTORY = (
    "from django.db import connection as c; "
    "print(c.cursor().execute(\"SELECT current_setting('data_directory')\").fetchone()[0])"
)


def embedded(pgdata: Path, command: str) -> subprocess.CompletedProcess[str]:
    """`python -m config.embedded_db COMMAND` on ``pgdata``, as the Makefile runs it."""
    return subprocess.run(
        [sys.executable, "-m", "config.embedded_db", command],
        cwd=ROOT,
        env={**os.environ, "FIELDCRAFT_PGDATA": str(pgdata)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def manage(pgdata: Path, *args: str, python: str = sys.executable) -> subprocess.CompletedProcess:
    """`python manage.py ARGS` from a shell where DATABASE_URL is not set."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(FIELDCRAFT_PGDATA=str(pgdata), FIELDCRAFT_DATA_DIR=str(pgdata.parent / "data"))
    return subprocess.run(
        [python, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def pgdata(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data folder of the embedded server's own, initialised once; stopped at the end."""
    path = tmp_path_factory.mktemp("embedded") / "postgres"
    embedded(path, "url")
    embedded(path, "stop")
    yield path
    if running_url(path):
        embedded(path, "stop")


@pytest.fixture
def stopped(pgdata: Path) -> Path:
    if running_url(pgdata):
        embedded(pgdata, "stop")
    return pgdata


@pytest.fixture
def started(pgdata: Path) -> Iterator[tuple[Path, str]]:
    """The embedded server running, and the DATABASE_URL `make run` gives its processes."""
    url = embedded(pgdata, "url").stdout.strip()
    yield pgdata, url
    embedded(pgdata, "stop")


def test_database_url_from_the_environment_wins(tmp_path):
    url = "postgres://app@db.example:5433/fieldcraft"

    assert settings_url({"DATABASE_URL": url}, tmp_path / "postgres") == url


def test_settings_resolve_to_the_embedded_server_make_run_started(started):
    pgdata, make_run_url = started

    url = settings_url({}, pgdata)

    assert url == make_run_url
    database = dj_database_url.parse(url)
    assert (database["HOST"], database["USER"], database["NAME"]) == (
        str(pgdata),
        "postgres",
        "fieldcraft",
    )


def test_settings_with_no_embedded_server_running_name_its_socket_never_another_server(
    stopped,
):
    url = settings_url({}, stopped)

    assert running_url(stopped) is None
    assert url == socket_url(stopped)
    assert dj_database_url.parse(url)["HOST"] == str(stopped)


def test_a_postmaster_pid_left_by_a_dead_server_does_not_count(stopped):
    gone = subprocess.Popen(["true"])
    gone.wait()
    (stopped / "postmaster.pid").write_text(
        f"{gone.pid}\n{stopped}\n1700000000\n5432\n{stopped}\n\n  1 2\nready\n"
    )

    try:
        assert running_url(stopped) is None
    finally:
        (stopped / "postmaster.pid").unlink()


def test_manage_py_without_database_url_uses_the_server_make_run_keeps_running(started):
    pgdata, _ = started

    result = manage(pgdata, "shell", "-c", DATA_DIRECTORY)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == str(pgdata)
    assert "Started the embedded PostgreSQL" not in result.stderr
    assert running_url(pgdata) is not None  # still running for `make run`


def test_manage_py_starts_the_embedded_server_for_its_command_and_stops_it_after(stopped):
    result = manage(stopped, "shell", "-c", DATA_DIRECTORY)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == str(stopped)
    assert f"Started the embedded PostgreSQL in {stopped}" in result.stderr
    assert running_url(stopped) is None


def python_without_django() -> str | None:
    for name in ("python3", "python"):
        python = shutil.which(name)
        if (
            python
            and subprocess.run([python, "-c", "import django"], capture_output=True).returncode
        ):
            return python
    return None


@pytest.mark.skipif(python_without_django() is None, reason="every Python here has Django")
def test_manage_py_run_by_a_python_without_django_runs_in_the_projects_virtualenv(stopped):
    python = python_without_django()
    assert python is not None

    result = manage(stopped, "shell", "-c", "import sys; print(sys.prefix)", python=python)

    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip().splitlines()[-1]).resolve() == (ROOT / ".venv").resolve()
