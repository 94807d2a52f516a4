"""make backup / make restore: a dump restores into a database with the same rows."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from accounts.models import Organization
from config.backup import dump, restore


@pytest.mark.django_db(transaction=True)
def test_backup_restores_into_a_fresh_database(tmp_path):
    Organization.objects.create(slug="backup-probe", name="Backup probe", kind="operator")
    settings = connection.settings_dict
    host = settings["HOST"] or ""
    base = {
        "host": host,
        "port": settings["PORT"] or None,
        "user": settings["USER"],
        "dbname": settings["NAME"],
    }
    base = {k: v for k, v in base.items() if v}
    scratch = f"{settings['NAME']}_restore"
    url_of = lambda name: (  # noqa: E731
        f"postgres://{settings['USER']}@{host.replace('/', '%2F')}"
        + (f":{settings['PORT']}" if settings["PORT"] else "")
        + f"/{name}"
    )
    with psycopg.connect(**{**base, "dbname": "postgres"}, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{scratch}"')
        admin.execute(f'CREATE DATABASE "{scratch}"')
    try:
        dump(tmp_path / "fc.dump", url=url_of(settings["NAME"]))
        restore(tmp_path / "fc.dump", url=url_of(scratch))

        with psycopg.connect(**{**base, "dbname": scratch}) as restored:
            names = [
                r[0] for r in restored.execute("SELECT slug FROM accounts_organization").fetchall()
            ]
            tables = restored.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
            ).fetchone()[0]
        assert "backup-probe" in names
        assert tables > 30
    finally:
        with psycopg.connect(**{**base, "dbname": "postgres"}, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{scratch}"')
