"""Production settings: refuse to start without a secret, and pass `check --deploy`; `make
run` serves with DEBUG off and a generated local key, and its error pages show no internals."""

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from config.run import local_env

ROOT = Path(__file__).resolve().parents[1]
# What `make run` would inherit from a person's shell: none of our variables set.
UNSET = {
    "SECRET_KEY",
    "DEBUG",
    "DJANGO_ALLOW_ASYNC_UNSAFE",
    "ALLOWED_HOSTS",
    "SECURE_SSL_REDIRECT",
    "SECURE_COOKIES",
    "FIELDCRAFT_HOST",
    "FIELDCRAFT_DATA_DIR",
}
SETTINGS_JSON = (
    "from django.conf import settings as s; import json; print(json.dumps({"
    "'DEBUG': s.DEBUG, 'SECRET_KEY': s.SECRET_KEY, 'ALLOWED_HOSTS': s.ALLOWED_HOSTS, "
    "'SECURE_SSL_REDIRECT': s.SECURE_SSL_REDIRECT, 'SESSION_COOKIE_SECURE': "
    "s.SESSION_COOKIE_SECURE, 'STATIC_ROOT': str(s.STATIC_ROOT)}))"
)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data folder of its own, so a developer's .data/secret_key plays no part."""
    return tmp_path / "data"


def shell_env(**env: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in UNSET}
    environment.update(env)
    return environment


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = shell_env(**env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_app_refuses_to_start_with_debug_off_and_no_secret_key(data_dir):
    result = run_manage(
        "check",
        DEBUG="0",
        ALLOWED_HOSTS="fieldcraft.example.com",
        FIELDCRAFT_DATA_DIR=str(data_dir),
    )

    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_check_deploy_is_clean_with_production_settings(data_dir):
    result = run_manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="0",
        SECRET_KEY="x" * 20 + "-production-secret-with-enough-entropy-" + "y" * 20,
        ALLOWED_HOSTS="fieldcraft.example.com",
        FIELDCRAFT_DATA_DIR=str(data_dir),
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def settings_under(env: dict[str, str]) -> dict:
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SETTINGS_JSON],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_make_run_serves_with_debug_off_and_a_generated_private_key(data_dir):
    env = local_env(shell_env(FIELDCRAFT_DATA_DIR=str(data_dir)))

    served = settings_under(env)

    key_file = data_dir / "secret_key"
    assert env["DEBUG"] == "0" and served["DEBUG"] is False
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert served["SECRET_KEY"] == key_file.read_text().strip()
    assert len(served["SECRET_KEY"]) >= 50
    assert "127.0.0.1" in served["ALLOWED_HOSTS"]
    # Plain HTTP on this machine: no redirect to HTTPS, cookies a browser keeps over HTTP.
    assert served["SECURE_SSL_REDIRECT"] is False and served["SESSION_COOKIE_SECURE"] is False


def test_make_run_reuses_its_key_on_later_runs(data_dir):
    local_env(shell_env(FIELDCRAFT_DATA_DIR=str(data_dir)))
    first = (data_dir / "secret_key").read_text()

    env = local_env(shell_env(FIELDCRAFT_DATA_DIR=str(data_dir)))

    assert (data_dir / "secret_key").read_text() == first
    assert settings_under(env)["SECRET_KEY"] == first.strip()
    assert [p.name for p in data_dir.iterdir() if "secret" in p.name] == ["secret_key"]


def test_make_run_with_debug_1_keeps_debug_on(data_dir):
    env = local_env(shell_env(FIELDCRAFT_DATA_DIR=str(data_dir), DEBUG="1"))

    assert settings_under(env)["DEBUG"] is True


def test_a_real_secret_key_wins_over_the_key_file(data_dir):
    local_env(shell_env(FIELDCRAFT_DATA_DIR=str(data_dir)))
    real = "r" * 20 + "-a-real-secret-key-from-the-environment-" + "s" * 20

    env = local_env(shell_env(FIELDCRAFT_DATA_DIR=str(data_dir), SECRET_KEY=real))

    assert settings_under(env)["SECRET_KEY"] == real


def test_make_run_binds_a_host_it_also_allows(data_dir):
    env = local_env(shell_env(FIELDCRAFT_DATA_DIR=str(data_dir), FIELDCRAFT_HOST="192.0.2.7"))

    assert "192.0.2.7" in settings_under(env)["ALLOWED_HOSTS"]


def test_manage_py_after_make_run_starts_with_debug_off_and_no_secret_key(data_dir):
    local_env(shell_env(FIELDCRAFT_DATA_DIR=str(data_dir)))

    result = run_manage("check", DEBUG="0", FIELDCRAFT_DATA_DIR=str(data_dir))

    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_a_key_file_others_can_read_is_refused(data_dir):
    local_env(shell_env(FIELDCRAFT_DATA_DIR=str(data_dir)))
    (data_dir / "secret_key").chmod(0o644)

    result = run_manage("check", DEBUG="0", FIELDCRAFT_DATA_DIR=str(data_dir))

    assert result.returncode != 0
    assert "readable by others" in result.stderr


# With the settings `make run` gives: collect the static files as it does, then ask for a
# page that does not exist, one that is refused, a static file, and the server-error page.
ERROR_PAGES = """
import json, re
from django.test import Client, RequestFactory
from django.views.defaults import server_error
client = Client(HTTP_HOST="127.0.0.1:8000")
missing = client.get("/no-such-page/")
refused = client.get("/api/schema/", HTTP_HOST="evil.example")
body = missing.content.decode()
css = re.search(r'href="(/static/frontend/app[^"]*[.]css)"', body).group(1)
asset = client.get(css)
broken = server_error(RequestFactory().get("/"))
print(json.dumps({
    "missing": [missing.status_code, body],
    "bad_host": [refused.status_code, refused.content.decode()],
    "css": [css, asset.status_code],
    "error": [broken.status_code, broken.content.decode()],
}))
"""


@pytest.mark.slow
def test_with_make_run_settings_error_pages_show_no_internals_and_assets_are_served(data_dir):
    env = local_env(shell_env(FIELDCRAFT_DATA_DIR=str(data_dir)))
    collect = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert collect.returncode == 0, collect.stderr

    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", ERROR_PAGES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    pages = json.loads(result.stdout.strip().splitlines()[-1])
    status, body = pages["missing"]
    assert status == 404
    assert "Page not found" in body
    for leak in ("URLconf", "api/schema/", "planner/", "Django", "DEBUG = True", "Traceback"):
        assert leak not in body, leak
    status, body = pages["bad_host"]
    assert status == 400 and "ALLOWED_HOSTS" not in body and "evil.example" not in body
    css, status = pages["css"]
    assert re.fullmatch(r"/static/frontend/app\.[0-9a-f]{12}\.css", css) and status == 200
    status, body = pages["error"]
    assert status == 500
    assert "Something went wrong" in body and "Traceback" not in body
