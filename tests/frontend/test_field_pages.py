"""The field app's pages: the shell, its service worker, setup photos and the manager's progress."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders

from campaigns.models import CollectionTask
from frontend.views.field import FIELD_ASSETS
from tests.campaigns.field_support import field_setup, record

BUDGET_BYTES = 150 * 1024


@pytest.fixture
def setup(world_a):
    return field_setup(world_a)


def test_the_field_shell_is_an_installable_app_without_inline_script(setup, client_for):
    response = client_for(setup.world.field).get("/field/")

    body = response.content.decode()
    assert response.status_code == 200
    assert 'rel="manifest"' in body
    assert "Warehouse QZALPHA" in body
    assert f'href="#/task/{setup.task.pk}"' in body
    assert "htmx" not in body and "plotly" not in body
    for script in re.findall(r"<script[^>]*>", body):
        assert "src=" in script, f"inline script: {script}"
    assert not re.search(r"\son[a-z]+=", body), "inline event handler"


def test_the_manifest_is_standalone_with_icons_for_the_field_scope():
    manifest = json.loads(Path(finders.find("frontend/field/manifest.json")).read_text())

    assert manifest["display"] == "standalone"
    assert manifest["scope"] == "/field/"
    assert manifest["start_url"] == "/field/"
    sizes = {icon["sizes"] for icon in manifest["icons"]}
    assert {"192x192", "512x512"} <= sizes
    for icon in manifest["icons"]:
        data = Path(finders.find("frontend/field/" + icon["src"])).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n")


def test_the_service_worker_covers_the_field_scope_and_precaches_the_shell(setup, client_for):
    response = client_for(setup.world.field).get("/field/sw.js")

    body = response.content.decode()
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    assert response["Service-Worker-Allowed"] == "/field/"
    assert response["Cache-Control"] == "no-cache"
    config = json.loads(re.search(r"const CONFIG = (\{.*?\});", body).group(1))
    assert config["shell"] == "/field/"
    assert config["tasksApi"] == "/api/field/tasks/"
    assert "/static/frontend/field/app.js" in config["assets"]
    assert re.fullmatch(r"[0-9a-f]{16}", config["version"])


def test_the_service_worker_needs_a_signed_in_member(client_for, world_a):
    assert client_for(None).get("/field/sw.js").status_code == 302
    assert client_for(world_a.viewer).get("/field/sw.js").status_code == 403


def test_field_scripts_and_styles_stay_under_the_first_load_budget():
    sizes = {
        path: Path(finders.find(path)).stat().st_size
        for path in FIELD_ASSETS
        if path.endswith((".js", ".css"))
    }

    total = sum(sizes.values())
    print(f"field JS+CSS on first load: {total} bytes ({total / 1024:.1f} KiB): {sizes}")
    assert total < BUDGET_BYTES


def test_managers_see_captured_vs_wanted_per_target_and_task(setup, client_for):
    field = client_for(setup.world.field)
    for outcome in ["success", "success", "failure"]:
        field.post(
            "/api/field/records/",
            data=json.dumps(record(setup.task, target=setup.dim.pk, outcome=outcome)),
            content_type="application/json",
        )
    field.post(
        "/api/field/records/",
        data=json.dumps(record(setup.task, "blocked", reason="site_closed", detail="strike")),
        content_type="application/json",
    )
    url = f"/planner/rounds/{setup.world.round.pk}/progress/"

    page = client_for(setup.world.manager).get(url)
    partial = client_for(setup.world.manager).get(url, HTTP_HX_REQUEST="true")

    body = page.content.decode()
    assert page.status_code == 200
    assert 'hx-trigger="every 5s"' in body
    dim_row = re.search(rf'<tr data-target="{setup.dim.pk}">.*?</tr>', body, re.S).group(0)
    assert re.search(r'class="num captured">3<', dim_row)
    task_row = re.search(rf'<tr data-task="{setup.task.pk}">.*?</tr>', body, re.S).group(0)
    assert "Blocked" in task_row and "Site closed: strike" in task_row
    assert "strike" in body
    assert partial.status_code == 200
    assert "<html" not in partial.content.decode()
    assert 'id="round-progress"' in partial.content.decode()


def test_the_progress_page_is_for_managers_of_the_round_only(setup, world_b, client_for):
    url = f"/planner/rounds/{setup.world.round.pk}/progress/"

    assert client_for(world_b.manager).get(url).status_code == 404
    assert client_for(setup.world.field).get(url).status_code == 403


def test_the_progress_page_query_count_does_not_grow_with_tasks(
    setup, client_for, django_assert_max_num_queries
):
    client = client_for(setup.world.manager)
    url = f"/planner/rounds/{setup.world.round.pk}/progress/"
    client.get(url)
    for _ in range(5):
        task = CollectionTask.objects.create(
            round=setup.world.round,
            site=setup.task.site,
            embodiment=setup.task.embodiment,
            team=setup.task.team,
            scheduled_date=setup.task.scheduled_date,
            status="published",
        )
        client_for(setup.world.field).post(
            "/api/field/records/",
            data=json.dumps(record(task, "note", text="n")),
            content_type="application/json",
        )

    with django_assert_max_num_queries(14):
        assert client.get(url).status_code == 200
