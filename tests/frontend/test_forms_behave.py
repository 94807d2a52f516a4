"""Forms and pages that behave (issue 19, point 10): an import's problems in the web page's
words, a failed job's bar that does not read as finished, and 403/404 pages in the layout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from accounts.models import Job
from labeling.management.commands.import_inventory import Command as ImportCommand
from labeling.models import Episode, InventoryImport
from labeling.services import inventory_import_start

UNKNOWN_VALUE_CSV = b"key,count,lighting\na,3,dim\nb,2,strobe\n"
# Options of the command with no field on the page: the page's organization is the member's.
NOT_ON_THE_PAGE = {"--organization", "--help", "--version", "--verbosity", "--settings"}
NOT_ON_THE_PAGE |= {"--pythonpath", "--traceback", "--no-color", "--force-color"}
NOT_ON_THE_PAGE |= {"--skip-checks"}


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def import_through_the_page(client, capture, **fields):
    upload = SimpleUploadedFile("sheet.csv", UNKNOWN_VALUE_CSV)
    with capture(execute=True):
        response = client.post("/inventory/", {"file": upload, "dataset": "Sheet", **fields})
    return response


def failed_import(world, **job_fields):
    return InventoryImport.objects.create(
        organization=world.operator,
        dataset_name="Sheet",
        source_path="/x/sheet.csv",
        source_name="sheet.csv",
        format="csv",
        job=Job.objects.create(
            organization=world.operator, kind="import", status="failed", **job_fields
        ),
    )


def test_an_unknown_value_is_explained_with_the_pages_checkbox_not_a_command_option(
    world_a, client_for, django_capture_on_commit_callbacks
):
    client = client_for(world_a.manager)

    response = import_through_the_page(client, django_capture_on_commit_callbacks)
    page = client.get(response["Location"]).content.decode()

    assert response.status_code == 302
    assert "unknown Lighting value &#x27;strobe&#x27;" in page
    assert "add it to the taxonomy or tick “Create missing condition values”" in page
    assert "--create-values" not in page
    assert not re.search(r"--[a-z]", page)


def test_the_import_form_has_the_checkbox_its_messages_name(world_a, client_for):
    body = client_for(world_a.manager).get("/inventory/").content.decode()

    assert re.search(
        r"<label>Create missing condition values\s*<input type=\"checkbox\" name=\"create_values\"",
        body,
    )


def test_ticking_create_missing_condition_values_imports_the_unknown_value(
    world_a, client_for, django_capture_on_commit_callbacks
):
    client = client_for(world_a.manager)

    response = import_through_the_page(
        client, django_capture_on_commit_callbacks, create_values="on"
    )

    record = InventoryImport.objects.get(dataset_name="Sheet")
    assert response.status_code == 302
    assert record.job.status == "succeeded"
    assert Episode.objects.filter(dataset=record.dataset).count() == 2


def test_a_refused_request_is_explained_in_the_forms_words(world_a, client_for):
    upload = SimpleUploadedFile("sheet.csv", UNKNOWN_VALUE_CSV)

    response = client_for(world_a.manager).post(
        "/inventory/", {"file": upload, "dataset": "Sheet", "sets": "lighting"}
    )

    body = response.content.decode()
    assert response.status_code == 200
    assert "“Condition values for every episode”" in body
    assert "--set" not in body


def test_every_option_of_the_import_command_has_words_on_the_page(world_a):
    from frontend.views.inventory import ImportForm

    parser = ImportCommand().create_parser("manage.py", "import_inventory")
    options = {o for action in parser._actions for o in action.option_strings if o.startswith("--")}

    leftover = {
        o: ImportForm.wording(f"no {o} was given; pass {o}")
        for o in options - NOT_ON_THE_PAGE
        if "--" in ImportForm.wording(f"no {o} was given; pass {o}")
    }
    assert leftover == {}


def test_the_command_line_keeps_its_own_wording(world_a, tmp_path):
    path = tmp_path / "sheet.csv"
    path.write_bytes(UNKNOWN_VALUE_CSV)
    record = inventory_import_start(
        organization=world_a.operator, dataset_name="Sheet", path=path, enqueue=False
    )
    from labeling.services import inventory_import_run

    inventory_import_run(job_id=str(record.job_id))

    record.job.refresh_from_db()
    assert "pass --create-values" in record.job.errors[0]["message"]


def test_a_failed_import_shows_a_red_bar_that_is_not_full(world_a, client_for):
    record = failed_import(world_a, progress_done=5_000, progress_total=None)

    body = client_for(world_a.manager).get(f"/inventory/imports/{record.pk}/").content.decode()

    bar = re.search(r"<progress[^>]*>", body)
    assert bar is not None
    assert 'class="job-bar job-failed"' in bar.group()
    assert 'data-state="failed"' in bar.group()
    assert 'value="0"' in bar.group()
    assert "<strong>Failed</strong>" in body


def test_a_failed_import_that_got_part_way_shows_where_it_stopped_in_red(world_a, client_for):
    record = failed_import(world_a, progress_done=40, progress_total=100)

    body = client_for(world_a.manager).get(f"/inventory/imports/{record.pk}/progress/").content

    bar = re.search(rb"<progress[^>]*>", body)
    assert bar is not None
    assert b'class="job-bar job-failed"' in bar.group()
    assert b'max="100" value="40"' in bar.group()


def test_the_stylesheet_draws_a_failed_bar_red_and_a_finished_one_green():
    css = (Path(django_settings.BASE_DIR) / "frontend/static/frontend/app.css").read_text()

    assert re.search(
        r"progress\.job-failed::-webkit-progress-value \{ background: var\(--bad\)", css
    )
    assert re.search(
        r"progress\.job-succeeded::-webkit-progress-value \{ background: var\(--ok\)", css
    )


def test_a_forbidden_page_is_in_the_layout_with_the_members_navigation(world_a, client_for):
    response = client_for(world_a.field).get("/planner/")

    body = response.content.decode()
    assert response.status_code == 403
    assert "<h1>Not allowed</h1>" in body
    assert '<nav class="mainnav" aria-label="Main">' in body
    assert 'href="/field/">Today</a>' in body
    assert "Sign out" in body
    assert 'href="/planner/"' not in body


def test_a_missing_page_is_in_the_layout_with_the_members_navigation(world_a, client_for):
    response = client_for(world_a.manager).get("/planner/no-such-page/")

    body = response.content.decode()
    assert response.status_code == 404
    assert "<h1>Page not found</h1>" in body
    assert 'href="/planner/">Planner</a>' in body
    assert "Sign out" in body
    for internal in ("URLconf", "api/schema/", "Traceback", "Resolver404", "no-such-page"):
        assert internal not in body, internal


def test_another_organizations_object_is_the_same_missing_page(world_a, world_b, client_for):
    response = client_for(world_a.manager).get(f"/planner/gap/{world_b.gap_report.pk}/")

    body = response.content.decode()
    assert response.status_code == 404
    assert "<h1>Page not found</h1>" in body
    assert 'href="/planner/">Planner</a>' in body
    assert "GapReport" not in body and "matches the given query" not in body


def test_a_missing_page_for_a_visitor_offers_no_navigation(db, client):
    response = client.get("/planner/no-such-page/")

    body = response.content.decode()
    assert response.status_code == 404
    assert "<h1>Page not found</h1>" in body
    assert '<nav class="mainnav"' not in body


def test_an_out_of_date_form_is_refused_in_the_layout_with_what_to_do(world_a):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world_a.manager)

    response = client.post("/inventory/", {"dataset": "Sheet"})

    body = response.content.decode()
    assert response.status_code == 403
    assert "<h1>The form was not sent</h1>" in body
    assert "reload the page and send it again" in body
    assert 'href="/planner/">Planner</a>' in body
    for internal in ("CSRF", "Referer", "cookie", "Reason given"):
        assert internal not in body, internal
    assert not InventoryImport.objects.filter(dataset_name="Sheet").exists()


def test_the_gap_page_loads_its_cell_table_with_the_filter_in_its_address(world_a, client_for):
    report = world_a.gap_report

    body = client_for(world_a.manager).get(f"/planner/gap/{report.pk}/?q=dim&sort=rank")

    assert f'hx-get="/planner/gap/{report.pk}/cells/?q=dim&amp;sort=rank"' in body.content.decode()


def test_the_cell_table_puts_its_filter_in_the_report_pages_address_and_nowhere_else(
    world_a, client_for
):
    report = world_a.gap_report
    client = client_for(world_a.manager)
    cells = f"/planner/gap/{report.pk}/cells/"
    params = {"q": "dim", "coverage": "", "sort": "rank"}

    from_report = client.get(
        cells,
        params,
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=f"http://x/planner/gap/{report.pk}/",
    )
    from_elsewhere = client.get(
        cells, params, HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://x/inventory/"
    )

    assert from_report["HX-Replace-Url"] == f"/planner/gap/{report.pk}/?q=dim&sort=rank"
    assert "HX-Replace-Url" not in from_elsewhere
