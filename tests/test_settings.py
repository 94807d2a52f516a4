"""Production settings: refuse to start without a secret, and pass `check --deploy`."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in {"SECRET_KEY", "DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    }
    environment.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_app_refuses_to_start_with_debug_off_and_no_secret_key():
    result = run_manage("check", DEBUG="0", ALLOWED_HOSTS="fieldcraft.example.com")

    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_check_deploy_is_clean_with_production_settings():
    result = run_manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="0",
        SECRET_KEY="x" * 20 + "-production-secret-with-enough-entropy-" + "y" * 20,
        ALLOWED_HOSTS="fieldcraft.example.com",
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
