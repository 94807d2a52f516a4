"""seed_demo builds the demo deterministically and idempotently."""

from __future__ import annotations

import hashlib

import pytest
from django.apps import apps
from django.core.management import call_command

# Natural content of every table, without surrogate ids or timestamps.
SKIP_FIELDS = {
    "id",
    "created_at",
    "updated_at",
    "status_changed_at",
    "password",
    "last_login",
    "date_joined",
}


def snapshot() -> dict[str, tuple[int, str]]:
    result = {}
    for model in apps.get_models():
        if model._meta.app_label not in {
            "accounts",
            "sites",
            "labeling",
            "campaigns",
            "analytics",
            "auth",
        }:
            continue
        if model._meta.label in {"auth.Permission", "auth.Group"}:
            continue
        fields = [
            f.attname
            for f in model._meta.concrete_fields
            if f.attname not in SKIP_FIELDS and f.attname != "calendar_token"
        ]
        rows = (
            sorted(repr(r) for r in model._default_manager.values_list(*fields)) if fields else []
        )
        digest = hashlib.sha256("\n".join(rows).encode()).hexdigest()
        result[model._meta.label] = (model._default_manager.count(), digest)
    return result


@pytest.mark.slow
@pytest.mark.django_db(transaction=False)
def test_seed_demo_twice_gives_the_same_database():
    call_command("seed_demo")
    first = snapshot()

    call_command("seed_demo")
    second = snapshot()

    assert first == second
    assert first["labeling.Episode"][0] >= 20000
    assert first["sites.FailureMode"][0] >= 15
    assert first["sites.ConditionDimension"][0] >= 6


@pytest.mark.slow
def test_seed_demo_builds_what_the_demo_needs(db):
    from django.db.models import Sum

    from accounts.models import Membership
    from campaigns.models import CollectionRound, FieldTeam
    from labeling.models import Episode
    from sites.models import Embodiment, FailureMode, Site

    call_command("seed_demo")

    assert set(Membership.objects.values_list("user__username", flat=True)) >= {
        "manager",
        "field",
        "annotator",
        "viewer",
        "viewer-b",
    }
    customer_sites = Site.objects.filter(customer__slug="northwind")
    assert customer_sites.count() >= 3
    assert customer_sites.values("country").distinct().count() >= 2
    assert Embodiment.objects.count() == 2
    assert FieldTeam.objects.count() == 2
    assert CollectionRound.objects.get().status == "draft"
    assert max(m.level for m in FailureMode.objects.all()) == 3
    total = Episode.objects.aggregate(n=Sum("episode_count"))["n"]
    lab = Episode.objects.filter(site__kind="lab").aggregate(n=Sum("episode_count"))["n"]
    assert total >= 20000
    assert lab / total > 0.7  # skewed towards lab conditions on purpose


def test_the_demo_analyses_its_own_tables_and_no_others(db):
    # The planner must know how many rows the demo wrote (a join planned for empty tables
    # ran for minutes), and re-seeding a large working database should not analyse all of it.
    from django.db import connection

    from accounts.models import Organization
    from frontend.demo.world import DEMO_APPS, refresh_statistics

    Organization.objects.bulk_create(
        [
            Organization(slug=f"analysed-{i}", name=f"Analysed {i}", kind="operator")
            for i in range(37)
        ]
    )
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE unrelated_to_the_demo (x int)")
        cursor.execute("INSERT INTO unrelated_to_the_demo SELECT generate_series(1, 50)")
    refresh_statistics()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, reltuples FROM pg_class WHERE relname = ANY(%s)",
            [["unrelated_to_the_demo", Organization._meta.db_table]],
        )
        tuples = dict(cursor.fetchall())

    assert "accounts" in DEMO_APPS
    # Analysed inside this transaction: the statistics count its own rows.
    assert tuples[Organization._meta.db_table] == Organization.objects.count()
    assert tuples["unrelated_to_the_demo"] == -1  # never analysed
