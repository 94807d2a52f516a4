"""Budgets and costs are never negative, time zones are IANA names, and a job that fails
unexpectedly tells people a sentence, not a traceback (issue 15)."""

from __future__ import annotations

import logging

import pytest
from django.db import IntegrityError, transaction

from accounts.models import Job
from accounts.services import job_running
from campaigns.models import Campaign, CollectionRound, FieldTeam
from sites.models import Site

AT_LEAST_ZERO = ["Ensure this value is greater than or equal to 0."]


@pytest.mark.parametrize("field", ["budget_hours", "budget_money"])
def test_a_negative_campaign_budget_is_a_400_and_is_not_stored(world_a, client_for, field):
    response = client_for(world_a.manager).patch(
        f"/api/campaigns/{world_a.campaign.pk}/", {field: "-1"}, content_type="application/json"
    )

    assert response.status_code == 400
    assert response.json() == {field: AT_LEAST_ZERO}
    world_a.campaign.refresh_from_db()
    assert getattr(world_a.campaign, field) is None


def test_a_negative_campaign_episode_budget_is_a_400(world_a, client_for):
    response = client_for(world_a.manager).patch(
        f"/api/campaigns/{world_a.campaign.pk}/",
        {"budget_episodes": -3},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert list(response.json()) == ["budget_episodes"]


def test_a_round_with_a_negative_budget_or_no_days_is_a_400_and_none_is_created(
    world_a, client_for
):
    client = client_for(world_a.manager)
    rounds_before = CollectionRound.objects.count()

    money = client.post(
        "/api/rounds/",
        {"campaign": world_a.campaign.pk, "budget_money": "-10.00"},
        content_type="application/json",
    )
    days = client.post(
        "/api/rounds/",
        {"campaign": world_a.campaign.pk, "days": 0},
        content_type="application/json",
    )

    assert money.status_code == days.status_code == 400
    assert money.json() == {"budget_money": AT_LEAST_ZERO}
    assert days.json() == {"days": ["Ensure this value is greater than or equal to 1."]}
    assert CollectionRound.objects.count() == rounds_before


def test_a_negative_cost_per_hour_of_a_team_or_a_site_is_a_400(world_a, client_for):
    client = client_for(world_a.manager)

    team = client.patch(
        f"/api/teams/{world_a.team.pk}/", {"cost_per_hour": "-40"}, content_type="application/json"
    )
    site = client.patch(
        f"/api/sites/{world_a.site.pk}/", {"cost_per_hour": "-40"}, content_type="application/json"
    )

    assert team.status_code == site.status_code == 400
    assert team.json() == site.json() == {"cost_per_hour": AT_LEAST_ZERO}
    world_a.team.refresh_from_db()
    world_a.site.refresh_from_db()
    assert world_a.team.cost_per_hour == world_a.site.cost_per_hour == 0


@pytest.mark.parametrize(
    ("model", "attribute", "field"),
    [
        (Campaign, "campaign", "budget_hours"),
        (Campaign, "campaign", "budget_money"),
        (CollectionRound, "round", "budget_hours"),
        (CollectionRound, "round", "budget_money"),
        (CollectionRound, "round", "days"),
        (FieldTeam, "team", "cost_per_hour"),
        (Site, "site", "cost_per_hour"),
    ],
)
def test_the_database_refuses_a_negative_budget_or_cost_whatever_writes_it(
    world_a, model, attribute, field
):
    pk = getattr(world_a, attribute).pk

    with pytest.raises(IntegrityError), transaction.atomic():
        model.objects.filter(pk=pk).update(**{field: -1})


def test_an_empty_budget_is_still_allowed(world_a):
    Campaign.objects.filter(pk=world_a.campaign.pk).update(budget_hours=None, budget_money=None)

    world_a.campaign.refresh_from_db()
    assert world_a.campaign.budget_hours is None


def test_a_team_home_time_zone_must_be_an_iana_name(world_a, client_for):
    client = client_for(world_a.manager)

    mars = client.patch(
        f"/api/teams/{world_a.team.pk}/",
        {"home_timezone": "Mars/Olympus_Mons"},
        content_type="application/json",
    )
    tokyo = client.patch(
        f"/api/teams/{world_a.team.pk}/",
        {"home_timezone": "Asia/Tokyo"},
        content_type="application/json",
    )

    assert mars.status_code == 400
    assert mars.json() == {
        "home_timezone": [
            "Unknown IANA time zone 'Mars/Olympus_Mons'; use a name such as Europe/Amsterdam."
        ]
    }
    assert tokyo.status_code == 200
    world_a.team.refresh_from_db()
    assert world_a.team.home_timezone == "Asia/Tokyo"


@pytest.mark.parametrize("zone", ["../../etc/passwd", "/etc/localtime", ""])
def test_a_site_time_zone_that_looks_like_a_path_is_refused_by_the_same_check(
    world_a, client_for, zone
):
    response = client_for(world_a.manager).patch(
        f"/api/sites/{world_a.site.pk}/", {"timezone": zone}, content_type="application/json"
    )

    assert response.status_code == 400
    assert list(response.json()) == ["timezone"]
    world_a.site.refresh_from_db()
    assert world_a.site.timezone == "Europe/Amsterdam"


def test_a_job_that_fails_unexpectedly_records_a_sentence_and_logs_the_traceback(
    world_a, client_for, caplog
):
    job = Job.objects.create(
        organization=world_a.operator, kind="plan", title="Plan · round 1", status="queued"
    )

    with caplog.at_level(logging.ERROR, logger="fieldcraft.jobs"), job_running(job_id=str(job.pk)):
        {}["budget"]  # an unexpected error inside the job's work

    response = client_for(world_a.manager).get(f"/api/jobs/{job.pk}/")
    body = response.json()
    expected = (
        f"Plan · round 1 stopped on an unexpected error. Try again; if it fails again, tell "
        f"your administrator (job {job.pk}: the details are in the server log)."
    )
    assert body["status"] == "failed"
    assert body["message"] == expected
    assert body["errors"] == [{"message": expected}]
    assert "Traceback" not in response.content.decode()
    assert "KeyError" in caplog.text and "Traceback" in caplog.text
