import re

from django.core.management import call_command


def test_openapi_schema_generates_without_warnings(db, tmp_path):
    out = tmp_path / "schema.yml"

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))

    text = out.read_text()
    assert "/api/sites/" in text
    assert "/api/rounds/{id}/transition/" in text


def test_schema_and_docs_are_served(client, db):
    assert client.get("/api/schema/").status_code == 200
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"cdn" not in docs.content.lower()


def test_docs_page_carries_no_inline_script_and_serves_its_start_up_script_as_a_file(client, db):
    page = client.get("/api/docs/")
    scripts = re.findall(rb"<script([^>]*)>(.*?)</script>", page.content, re.S)
    start_up = [attrs for attrs, _ in scripts if b"script=" in attrs]

    assert page.status_code == 200
    assert scripts and all(b"src=" in attrs and not body.strip() for attrs, body in scripts)
    assert len(start_up) == 1
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert b"SwaggerUIBundle(" in script.content
    assert b"/api/schema/" in script.content
