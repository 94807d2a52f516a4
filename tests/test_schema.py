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
