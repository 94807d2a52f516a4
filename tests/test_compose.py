"""docker-compose.yml cannot run here; check it by reading it."""

import importlib
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def load() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_names_the_services_to_run_at_scale():
    services = load()["services"]

    assert {"postgres", "redis", "web", "worker", "beat"} <= set(services)
    for name in ("postgres", "redis", "web", "worker"):
        assert "healthcheck" in services[name], name
    assert "pgdata" in load()["volumes"]


def test_compose_commands_point_at_things_that_exist_in_the_project():
    services = load()["services"]

    web = " ".join(services["web"]["command"])
    assert "config.wsgi" in web
    importlib.import_module("config.wsgi")
    for name in ("worker", "beat"):
        command = services[name]["command"]
        assert command[:3] == ["celery", "-A", "config"]
        assert hasattr(importlib.import_module("config"), "celery_app")
    assert services["migrate"]["command"][:2] == ["python", "manage.py"]
    assert (ROOT / "manage.py").exists()
    assert (ROOT / "Dockerfile").exists()


def test_compose_is_driven_by_the_environment():
    services = load()["services"]

    env = services["web"]["environment"]
    assert env["DEBUG"] == "0"
    assert env["DATABASE_URL"].startswith("postgres://")
    assert env["CELERY_BROKER_URL"].startswith("redis://")
    assert re.search(r"\$\{SECRET_KEY", env["SECRET_KEY"])
