def test_healthz_reports_database_and_broker(client, db):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok"}


def test_healthz_says_when_the_broker_is_down(client, db, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"

    response = client.get("/healthz")

    assert response.status_code == 503
    assert response.json()["broker"].startswith("error")
