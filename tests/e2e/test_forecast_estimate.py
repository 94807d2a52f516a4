"""The forecast page's estimate of how long a forecast would take, in a real Chromium.

A forecast of 60 rounds over 8 worlds runs for an hour or more in the worker. Before the
click, the page says how long the one asked for would take at the pace of the organization's
last forecasts, and the estimate follows the form as its fields change, without a reload.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from accounts.models import Job
from analytics.models import CampaignForecast
from tests.browser import needs_chromium, sign_in
from tests.factories import build_world

pytestmark = needs_chromium


def test_the_estimate_follows_the_rounds_and_worlds_typed_without_a_reload(
    browser, live_server, transactional_db
):
    world = build_world("qzpace")
    end = timezone.now()
    # A forecast that ran to the end: 40 s in the worker for two rounds of one world.
    job = Job.objects.create(
        organization=world.operator,
        kind="forecast",
        status=Job.Status.SUCCEEDED,
        started_at=end - timedelta(seconds=40),
        finished_at=end,
    )
    CampaignForecast.objects.create(
        campaign=world.campaign, rounds=2, budget=100, seed=7, job=job, computed_at=end
    )
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    forecast_page = f"/planner/campaigns/{world.campaign.pk}/forecast/"
    page = sign_in(context, live_server.url, world.manager.username, forecast_page)
    estimate = page.locator("#forecast-estimate strong")
    assert estimate.inner_text() == "20 rounds in 1 world take about 20 min"
    page.evaluate("() => { window.notReloaded = true; }")

    page.fill("input[name=rounds]", "60")
    page.fill("input[name=worlds]", "8")
    page.wait_for_function(
        "() => document.querySelector('#forecast-estimate strong').textContent"
        " === '60 rounds in 8 worlds take about 19 h 51 min'",
        timeout=5000,
    )
    assert page.evaluate("() => window.notReloaded === true"), "the page reloaded"
    # Only the estimate was swapped: one of it, one form, one heading (not a page in a page).
    counts = page.evaluate(
        "() => ['#forecast-estimate', 'form.controls', 'h1']"
        ".map((s) => document.querySelectorAll(s).length)"
    )
    assert counts == [1, 1, 1]
    assert page.input_value("input[name=rounds]") == "60"
    assert page.url == f"{live_server.url}{forecast_page}"
    # Nothing was simulated by typing.
    assert CampaignForecast.objects.filter(campaign=world.campaign).count() == 1

    # Simulate still posts the form (a short one: the job runs in the request in tests).
    page.fill("input[name=rounds]", "1")
    page.fill("input[name=worlds]", "1")
    page.click("button.primary")
    page.wait_for_url(f"{live_server.url}{forecast_page}?rounds=1&*")
    asked = CampaignForecast.objects.get(campaign=world.campaign, rounds=1)
    assert (asked.worlds, asked.budget) == (1, 5000)
    context.close()
