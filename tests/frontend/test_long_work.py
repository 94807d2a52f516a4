"""Long work runs as jobs the pages poll; stored results show at once; dashboards stay cheap.

Forecast "Simulate", "Recommend" and the impact page's first measurement queue a Job (one,
however often the button is pressed) and the page shows its progress bar; once the (eager)
job ran, the page shows the stored result without computing anything.
"""

from __future__ import annotations

import re
from datetime import date

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Job
from analytics.models import (
    CampaignForecast,
    EvaluationResult,
    EvaluationRun,
    GapReport,
    PolicyVersion,
    RoundImpactReport,
)
from analytics.services.gap import gap_report_build
from campaigns.models import Campaign

FORECAST = {"rounds": "2", "budget": "100", "seed": "7"}


def forecast_url(world):
    return f"/planner/campaigns/{world.campaign.pk}/forecast/"


def measurable_round(world):
    """Give the world's round a policy trained on it and evaluated where the first one was,
    and drop the world's placeholder impact report: the round can now be measured."""
    after = PolicyVersion.objects.create(
        organization=world.operator,
        slug="pol-after",
        name="Policy after",
        embodiment=world.embodiment,
        released_on=date(2026, 11, 1),
    )
    after.trained_on_rounds.set([world.round])
    run = EvaluationRun.objects.create(
        organization=world.operator,
        policy_version=after,
        deployment=world.deployment,
        label="after",
        evaluated_on=date(2026, 11, 2),
    )
    cs = world.evaluation.results.get().condition_set
    EvaluationResult.objects.create(run=run, condition_set=cs, trials=100, successes=99)
    RoundImpactReport.objects.filter(round=world.round).delete()
    return world.round


# ------------------------------------------------------------------ forecast


def test_simulate_queues_a_job_and_the_page_polls_its_progress(world_a, client_for):
    manager = client_for(world_a.manager)

    response = manager.post(forecast_url(world_a), FORECAST)
    page = manager.get(response["Location"])

    forecast = CampaignForecast.objects.get(campaign=world_a.campaign)
    assert response.status_code == 302
    assert (forecast.rounds, forecast.budget, forecast.seed) == (2, 100, 7)
    assert forecast.job.kind == "forecast" and forecast.job.status == "queued"
    assert forecast.computed_at is None
    body = page.content.decode()
    assert "progress-card" in body and 'hx-trigger="every 2s"' in body
    assert f"/planner/campaigns/{world_a.campaign.pk}/forecast/job/?rounds=2" in body


def test_after_the_job_ran_the_forecast_page_shows_the_stored_result(
    world_a, client_for, django_capture_on_commit_callbacks
):
    manager = client_for(world_a.manager)

    with django_capture_on_commit_callbacks(execute=True):
        response = manager.post(forecast_url(world_a), FORECAST)
    page = manager.get(response["Location"])
    progress = manager.get(
        f"/planner/campaigns/{world_a.campaign.pk}/forecast/job/?rounds=2&budget=100&seed=7"
    )

    forecast = CampaignForecast.objects.select_related("job").get(campaign=world_a.campaign)
    assert forecast.job.status == "succeeded", forecast.job.message
    assert set(forecast.result) == {
        "steered",
        "uniform",
        "proportional",
        "more-of-the-same",
        "oracle",
    }
    assert len(forecast.result["steered"]["interventions_per_day"]) == 3
    body = page.content.decode()
    assert "progress-card" not in body
    assert "Simulated" in body and "more-of-the-same" in body
    assert progress.status_code == 200 and progress["HX-Refresh"] == "true"


def test_a_forecast_plays_the_world_and_record_asked_for_against_the_oracle(
    world_a, client_for, django_capture_on_commit_callbacks
):
    from analytics.steering.simulate import excess_failures, simulate, world_config

    manager = client_for(world_a.manager)
    asked = {**FORECAST, "world": "cost", "production_days": "1", "earlier_release": "300"}

    with django_capture_on_commit_callbacks(execute=True):
        response = manager.post(forecast_url(world_a), asked)
    page = manager.get(response["Location"]).content.decode()
    plain = manager.get(f"{forecast_url(world_a)}?rounds=2&budget=100&seed=7").content.decode()

    forecast = CampaignForecast.objects.select_related("job").get(campaign=world_a.campaign)
    assert forecast.job.status == "succeeded", forecast.job.message
    assert (forecast.world, forecast.production_days, forecast.earlier_release) == ("cost", 1, 300)
    config = world_config("cost", production_days=1, earlier_release=300)
    runs = {
        name: simulate(name, seed=7, rounds=2, budget=100.0, config=config)
        for name in ("steered", "oracle")
    }
    steered = forecast.result["steered"]
    assert steered["interventions_per_day"] == list(runs["steered"].interventions_per_day)
    ratio = excess_failures(runs["steered"]) / excess_failures(runs["oracle"])
    assert steered["versus_oracle"] == pytest.approx(ratio)
    assert forecast.result["oracle"]["versus_oracle"] == pytest.approx(1.0)
    assert "× the oracle's" in page and f"{ratio:,.3f}" in page
    rows = [page.index(f"<tr><td>{name}</td>") for name in ("steered", "uniform", "oracle")]
    assert rows == sorted(rows)  # in the order they are played, not the JSON's
    assert "episodes cost per cell, the dearest five times the cheapest" in page
    assert "each policy&#x27;s evaluation and 1 day of its production" in page
    assert 'option value="cost" title=' in page and "selected>cost" in page
    # The same rounds, budget and seed in the benchmark's world are another forecast.
    assert "Simulated" not in plain and "neighbours one condition apart" in plain


def test_a_forecast_over_several_worlds_gives_medians_and_the_range_of_the_ratios(
    world_a, client_for, django_capture_on_commit_callbacks, monkeypatch
):
    from accounts.services import JobContext
    from analytics.steering.simulate import excess_failures, simulate, world_config

    manager = client_for(world_a.manager)
    # What the job tells the page as it goes (the real progress call, listened to).
    told: list[str] = []
    progress = JobContext.progress

    def listened(self, done, total=None, message="", **kwargs):
        told.append(message)
        return progress(self, done, total, message, **kwargs)

    monkeypatch.setattr(JobContext, "progress", listened)

    with django_capture_on_commit_callbacks(execute=True):
        response = manager.post(forecast_url(world_a), {**FORECAST, "worlds": "3"})
    page = manager.get(response["Location"]).content.decode()

    forecast = CampaignForecast.objects.select_related("job").get(campaign=world_a.campaign)
    assert forecast.job.status == "succeeded", forecast.job.message
    assert forecast.worlds == 3
    config = world_config("default")
    excess = {
        name: [
            excess_failures(simulate(name, seed=s, rounds=2, budget=100.0, config=config))
            for s in (7, 8, 9)
        ]
        for name in ("proportional", "oracle")
    }
    ratios = sorted(p / o for p, o in zip(excess["proportional"], excess["oracle"], strict=True))
    figures = forecast.result["proportional"]
    assert figures["excess_failures"] == pytest.approx(sorted(excess["proportional"])[1])
    assert figures["versus_oracle"] == pytest.approx(ratios[1])
    assert figures["versus_oracle_range"] == pytest.approx([ratios[0], ratios[2]])
    # The curves are the first world's.
    first = simulate("proportional", seed=7, rounds=2, budget=100.0, config=config)
    assert figures["interventions_per_day"] == list(first.interventions_per_day)
    assert "medians over 3 worlds (seeds 7–9)" in page
    assert f"[{ratios[0]:,.3f}–{ratios[2]:,.3f}]" in page
    # The first world's play says no time left (within a world the steered rounds cost
    # far more than the others'); from the second on, the worlds left at the pace of those
    # played.
    played = [m for m in told if ", world " in m]
    assert played and all("left" not in m for m in played if "world 1 of 3" in m)
    later = [m for m in played if "world 1 of 3" not in m]
    assert later and all(re.search(r"round \d of 2 · (about .+ left|finishing)$", m) for m in later)


def test_before_a_forecast_starts_the_page_says_how_long_it_would_take_at_the_last_ones_pace(
    world_a, world_b, client_for, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    manager = client_for(world_a.manager)
    name = world_a.operator.name
    page = manager.get(forecast_url(world_a)).content.decode()
    assert f"No forecast of {name} has run to the end yet to time this one by." in page
    # The form asks again as its fields change, for the estimate alone (below).
    assert 'hx-target="#forecast-estimate"' in page

    with django_capture_on_commit_callbacks(execute=True):
        manager.post(forecast_url(world_a), FORECAST)  # 2 rounds, 1 world
    job = CampaignForecast.objects.get(campaign=world_a.campaign).job
    assert job.status == "succeeded"
    # Its time in the worker, made round for the test: 40 s for two rounds of one world.
    Job.objects.filter(pk=job.pk).update(finished_at=job.started_at + timedelta(seconds=40))

    # Its work: rounds 1 and 2, each its number plus three (HISTORY_ROUNDS), 9 units in
    # 40 s. Sixty rounds in one world are 1,830 + 180 = 2,010 units; in eight, 16,080.
    page = manager.get(f"{forecast_url(world_a)}?rounds=60&worlds=8").content.decode()
    assert (
        f"At the pace of the last forecast of {name}, <strong>60 rounds in 8 worlds take "
        "about 19 h 51 min</strong> in the worker"
    ) in page
    # As the form's fields change, htmx asks for the estimate alone: that paragraph, no page.
    asked = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "forecast-estimate"}
    part = manager.get(f"{forecast_url(world_a)}?rounds=3", **asked).content.decode()
    # 6 + 9 = 15 units: 66.7 s.
    assert part.startswith('<p id="forecast-estimate"') and "<h1>" not in part
    assert "<strong>3 rounds in 1 world take about 1 min 7 s</strong>" in part

    # Another organization's forecasts time nothing of this one's, and its campaign is not
    # theirs to ask about, estimate or page; a viewer reaches neither.
    other = client_for(world_b.manager)
    page = other.get(forecast_url(world_b)).content.decode()
    assert f"No forecast of {world_b.operator.name} has run to the end yet" in page
    assert other.get(forecast_url(world_a), **asked).status_code == 404
    assert client_for(world_a.viewer).get(forecast_url(world_a), **asked).status_code == 403


def test_forecast_parameters_out_of_range_are_clamped_and_an_unknown_world_is_the_default(
    world_a, client_for
):
    manager = client_for(world_a.manager)

    manager.post(
        forecast_url(world_a),
        {
            **FORECAST,
            "world": "mars",
            "production_days": "99",
            "earlier_release": "-4",
            "worlds": "50",
        },
    )

    forecast = CampaignForecast.objects.get(campaign=world_a.campaign)
    assert (
        forecast.world,
        forecast.production_days,
        forecast.earlier_release,
        forecast.worlds,
    ) == ("default", 30, 0, 8)


def test_a_second_simulate_click_while_the_job_is_queued_starts_no_second_job(world_a, client_for):
    manager = client_for(world_a.manager)

    manager.post(forecast_url(world_a), FORECAST)
    manager.post(forecast_url(world_a), FORECAST)

    assert Job.objects.filter(organization=world_a.operator, kind="forecast").count() == 1
    assert CampaignForecast.objects.filter(campaign=world_a.campaign).count() == 1


def test_a_stored_forecast_is_not_simulated_again(
    world_a, client_for, django_capture_on_commit_callbacks
):
    manager = client_for(world_a.manager)
    with django_capture_on_commit_callbacks(execute=True):
        manager.post(forecast_url(world_a), FORECAST)

    with django_capture_on_commit_callbacks(execute=True):
        manager.post(forecast_url(world_a), FORECAST)

    assert Job.objects.filter(organization=world_a.operator, kind="forecast").count() == 1


def test_opening_the_forecast_page_simulates_nothing(world_a, client_for):
    page = client_for(world_a.manager).get(f"{forecast_url(world_a)}?run=1&rounds=2")

    assert page.status_code == 200
    assert not Job.objects.filter(kind="forecast").exists()


def test_forecasts_of_another_organization_are_404_and_viewers_are_refused(
    world_a, world_b, client_for
):
    other = client_for(world_b.manager)

    posted = other.post(forecast_url(world_a), FORECAST)
    progress = other.get(f"/planner/campaigns/{world_a.campaign.pk}/forecast/job/")
    viewer = client_for(world_a.viewer).post(forecast_url(world_a), FORECAST)

    assert posted.status_code == 404 and progress.status_code == 404
    assert viewer.status_code == 403
    assert not CampaignForecast.objects.exists()


# ------------------------------------------------------------------ round impact


def test_the_impact_page_only_reads_and_measuring_is_a_posted_job(world_a, client_for):
    round = measurable_round(world_a)
    manager = client_for(world_a.manager)
    url = f"/planner/rounds/{round.pk}/impact/"

    first = manager.get(url)
    assert not Job.objects.filter(kind="round_impact").exists()  # a GET starts nothing
    manager.post(url)
    page = manager.get(url)

    assert "Measure this round" in first.content.decode()
    assert not RoundImpactReport.objects.filter(round=round).exists()
    job = Job.objects.get(kind="round_impact", task_kwargs__round_id=round.pk)
    assert job.status == "queued"
    body = page.content.decode()
    assert "progress-card" in body and f"/planner/rounds/{round.pk}/impact/job/" in body


def test_reloading_the_impact_page_while_it_is_measured_starts_no_second_job(world_a, client_for):
    round = measurable_round(world_a)
    manager = client_for(world_a.manager)

    manager.post(f"/planner/rounds/{round.pk}/impact/")
    manager.get(f"/planner/rounds/{round.pk}/impact/")
    manager.post(f"/planner/rounds/{round.pk}/impact/")

    assert Job.objects.filter(kind="round_impact", task_kwargs__round_id=round.pk).count() == 1


def test_after_the_impact_job_ran_the_page_shows_the_stored_report(
    world_a, client_for, django_capture_on_commit_callbacks
):
    round = measurable_round(world_a)
    manager = client_for(world_a.manager)
    with django_capture_on_commit_callbacks(execute=True):
        manager.post(f"/planner/rounds/{round.pk}/impact/")

    page = manager.get(f"/planner/rounds/{round.pk}/impact/")
    progress = manager.get(f"/planner/rounds/{round.pk}/impact/job/")

    report = RoundImpactReport.objects.get(round=round)
    assert report.after_policy.slug == "pol-after"
    body = page.content.decode()
    assert "progress-card" not in body and "Measured" in body and "Recompute" in body
    assert progress["HX-Refresh"] == "true"


def test_the_stored_impact_report_says_when_new_evaluations_make_it_stale(
    world_a, client_for, django_capture_on_commit_callbacks
):
    round = measurable_round(world_a)
    manager = client_for(world_a.manager)
    with django_capture_on_commit_callbacks(execute=True):
        manager.post(f"/planner/rounds/{round.pk}/impact/")
    EvaluationRun.objects.create(
        organization=world_a.operator,
        policy_version=world_a.policy,
        deployment=world_a.deployment,
        label="later",
        evaluated_on=date(2026, 11, 5),
    )

    body = manager.get(f"/planner/rounds/{round.pk}/impact/").content.decode()

    assert "Evaluation results were imported since." in body


def test_a_failed_impact_job_is_shown_and_not_retried_on_every_reload(
    world_a, client_for, django_capture_on_commit_callbacks
):
    from sites.services import condition_set_intern

    round = measurable_round(world_a)
    bright = condition_set_intern(organization=world_a.operator, value_ids=[world_a.values[0].pk])
    EvaluationResult.objects.filter(run__label="after").update(condition_set=bright)
    manager = client_for(world_a.manager)
    with django_capture_on_commit_callbacks(execute=True):
        manager.post(f"/planner/rounds/{round.pk}/impact/")

    body = manager.get(f"/planner/rounds/{round.pk}/impact/").content.decode()

    assert Job.objects.get(kind="round_impact").status == "failed"
    assert "not evaluated in any common condition cell" in body
    assert "Measure again" in body and "progress-card" not in body


def test_the_impact_page_query_count_does_not_grow_with_evaluations(
    world_a, client_for, django_assert_max_num_queries
):
    round = measurable_round(world_a)
    manager = client_for(world_a.manager)
    url = f"/planner/rounds/{round.pk}/impact/"
    manager.post(url)  # queues the job; later views show its progress
    cs = world_a.evaluation.results.get().condition_set
    with CaptureQueriesContext(connection) as first:
        manager.get(url)
    for i in range(20):
        run = EvaluationRun.objects.create(
            organization=world_a.operator,
            policy_version=world_a.policy,
            deployment=world_a.deployment,
            label=f"more {i}",
            evaluated_on=date(2026, 10, 2),
        )
        EvaluationResult.objects.create(run=run, condition_set=cs, trials=50, successes=49)

    with django_assert_max_num_queries(len(first)):
        manager.get(url)


def test_the_impact_page_of_another_organization_is_404_and_queues_nothing(
    world_a, world_b, client_for
):
    round = measurable_round(world_a)
    other = client_for(world_b.manager)

    page = other.get(f"/planner/rounds/{round.pk}/impact/")
    posted = other.post(f"/planner/rounds/{round.pk}/impact/")
    progress = other.get(f"/planner/rounds/{round.pk}/impact/job/")

    assert (page.status_code, posted.status_code, progress.status_code) == (404, 404, 404)
    assert not Job.objects.filter(kind="round_impact").exists()


# ------------------------------------------------------------------ recommendation


def test_recommend_queues_a_job_and_returns_to_the_polling_page(world_a, client_for):
    manager = client_for(world_a.manager)
    round = world_a.round

    response = manager.post(f"/planner/rounds/{round.pk}/recommend/", {"budget": "500"})
    page = manager.get(response["Location"])

    job = Job.objects.get(kind="recommend", task_kwargs__round_id=round.pk)
    assert response.status_code == 302 and job.status == "queued"
    assert job.task_kwargs["budget"] == 500.0
    assert "recommendation" not in RoundImpactReport.objects.get(round=round).summary
    body = page.content.decode()
    assert "progress-card" in body and "Computing the recommended next round" in body


def test_a_second_recommend_click_while_the_job_is_queued_starts_no_second_job(world_a, client_for):
    manager = client_for(world_a.manager)
    url = f"/planner/rounds/{world_a.round.pk}/recommend/"

    manager.post(url, {"budget": "500"})
    manager.post(url, {"budget": "500"})

    assert Job.objects.filter(kind="recommend").count() == 1


def test_after_the_recommend_job_ran_the_page_shows_the_stored_recommendation(
    world_a, client_for, django_capture_on_commit_callbacks
):
    manager = client_for(world_a.manager)
    round = world_a.round

    with django_capture_on_commit_callbacks(execute=True):
        manager.post(f"/planner/rounds/{round.pk}/recommend/", {"budget": "500"})
    page = manager.get(f"/planner/rounds/{round.pk}/impact/")

    job = Job.objects.get(kind="recommend")
    assert job.status == "succeeded", job.message
    recommendation = RoundImpactReport.objects.get(round=round).summary["recommendation"]
    assert recommendation["budget"] == 500.0 and recommendation["computed_at"]
    assert recommendation["report"] == world_a.gap_report.pk
    body = page.content.decode()
    assert "progress-card" not in body
    assert f"from gap report #{world_a.gap_report.pk}" in body
    assert "Plan round 2 from this recommendation" in body


def test_a_stored_recommendation_says_when_a_newer_gap_report_supersedes_it(
    world_a, client_for, django_capture_on_commit_callbacks
):
    manager = client_for(world_a.manager)
    round = world_a.round
    with django_capture_on_commit_callbacks(execute=True):
        manager.post(f"/planner/rounds/{round.pk}/recommend/", {"budget": "500"})
    newer = gap_report_build(
        report=GapReport.objects.create(organization=world_a.operator, campaign=world_a.campaign)
    )

    body = manager.get(f"/planner/rounds/{round.pk}/impact/").content.decode()

    assert f"A newer gap report (#{newer.pk}) was computed since." in body


def test_recommending_for_another_organizations_round_is_404(world_a, world_b, client_for):
    response = client_for(world_b.manager).post(
        f"/planner/rounds/{world_a.round.pk}/recommend/", {"budget": "500"}
    )

    assert response.status_code == 404
    assert not Job.objects.filter(kind="recommend").exists()


# ------------------------------------------------------------------ dashboard


def _more_campaigns(world, n):
    """Give the world's customer ``n`` more campaigns, each with two finished gap reports."""
    for i in range(n):
        campaign = Campaign.objects.create(
            organization=world.operator,
            customer=world.customer,
            slug=f"more-{i}",
            name=f"More {i}",
            task=world.task,
            reliability_goal=0.99,
            start_date=world.campaign.start_date,
            end_date=world.campaign.end_date,
        )
        campaign.embodiments.set([world.embodiment])
        campaign.deployments.set([world.deployment])
        for _ in range(2):
            gap_report_build(
                report=GapReport.objects.create(organization=world.operator, campaign=campaign)
            )
    # Two dimensions (the world has one: lighting by lighting), so every campaign has heatmaps.
    GapReport.objects.filter(organization=world.operator).update(
        dimension_slugs=["lighting", "lighting"]
    )


def test_the_dashboard_query_count_does_not_grow_with_campaigns_and_reports(
    world_a, client_for, django_assert_max_num_queries
):
    viewer = client_for(world_a.viewer)
    url = f"/dashboard/{world_a.customer.slug}/"
    GapReport.objects.filter(organization=world_a.operator).update(
        dimension_slugs=["lighting", "lighting"]
    )
    cache.clear()
    with CaptureQueriesContext(connection) as one:
        viewer.get(url)
    _more_campaigns(world_a, 3)
    cache.clear()

    with django_assert_max_num_queries(len(one)):
        response = viewer.get(url)

    body = response.content.decode()
    assert response.status_code == 200
    assert "More 2" in body and 'id="heat-' in body


def test_the_dashboard_after_a_change_shows_only_its_own_customer(world_a, world_b, client_for):
    viewer = client_for(world_a.viewer)
    viewer.get(f"/dashboard/{world_a.customer.slug}/")
    _more_campaigns(world_b, 1)
    Campaign.objects.filter(pk=world_a.campaign.pk).update(name="Campaign QZALPHA renamed")

    body = viewer.get(f"/dashboard/{world_a.customer.slug}/").content.decode()
    other = client_for(world_a.viewer).get(f"/dashboard/{world_b.customer.slug}/")

    assert "Campaign QZALPHA renamed" in body
    assert "qzbravo" not in body.lower() and "More 0" not in body
    assert other.status_code == 404


@pytest.mark.parametrize("metric", ["target_share", "train_share"])
def test_heatmaps_of_many_reports_take_three_queries(world_a, metric, django_assert_num_queries):
    reports = [world_a.gap_report] + [
        gap_report_build(
            report=GapReport.objects.create(
                organization=world_a.operator, campaign=world_a.campaign
            )
        )
        for _ in range(3)
    ]

    with django_assert_num_queries(3):
        from analytics.selectors import gap_heatmaps

        figures = gap_heatmaps(
            views=[(r, "lighting", "lighting") for r in reports], metrics=(metric,)
        )

    assert len(figures) == 4
    figure = figures[(reports[0].pk, "lighting", "lighting")][metric]
    assert figure["data"], figure
    assert figure["data"][0]["x"] == ["Bright", "Dim"]


def test_the_recommend_job_holds_its_lease_for_every_cell_of_the_gap_report(
    world_a, client_for, django_capture_on_commit_callbacks, monkeypatch
):
    # Every cell of the report is a candidate, so a large report may run for minutes without
    # a heartbeat: the job tells the stale-job reaper so before it starts, or it would run
    # twice. A campaign without a budget stops it right after, with the lease still in force.
    from analytics.services import steering_jobs

    # The demo-sized report has a handful of cells: a long lease per cell makes each count.
    monkeypatch.setattr(steering_jobs, "LEASE_SECONDS_PER_CELL", 100.0)
    Campaign.objects.filter(pk=world_a.campaign.pk).update(budget_episodes=None)
    manager = client_for(world_a.manager)

    with django_capture_on_commit_callbacks(execute=True):
        manager.post(f"/planner/rounds/{world_a.round.pk}/recommend/", {"budget": ""})

    job = Job.objects.get(kind="recommend")
    cells = world_a.gap_report.cells.count()
    assert job.status == "failed" and "no episode budget" in job.message
    assert cells > 0
    # The heartbeat was pushed past the claim by the lease (and the moments between them).
    lease = (job.heartbeat_at - job.started_at).total_seconds()
    assert lease >= 60 + cells * 100.0
