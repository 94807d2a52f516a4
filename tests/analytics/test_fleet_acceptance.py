"""Issue 20's acceptance on a small world: the simulated fleet streams five weeks through the
API with a failure mode injected at the end; the reliability page flags it, the gap report
counts the cycles, and the next round's recommendation reacts."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from analytics.models import GapReport
from analytics.services.gap import gap_report_build
from analytics.services.steering import next_round_recommendation
from sites.models import ProductionEvent

pytestmark = pytest.mark.slow


def test_a_streamed_fleet_with_an_injected_shift_is_flagged_and_steers_the_next_round(
    world_a, client_for
):
    deployment = world_a.deployment
    call_command(
        "simulate_fleet",
        "--days",
        "35",
        "--scale",
        "0.2",
        "--shift",
        f"grasp@{deployment.slug}",
        "--shift-days",
        "5",
        "--shift-rate",
        "0.05",
        stdout=StringIO(),
    )
    cycles = ProductionEvent.objects.filter(deployment=deployment, kind="cycle").count()

    page = client_for(world_a.manager).get(f"/planner/deployments/{deployment.pk}/reliability/")
    report = gap_report_build(
        report=GapReport.objects.create(organization=world_a.operator, campaign=world_a.campaign)
    )
    flagged = next_round_recommendation(campaign=world_a.campaign, budget=300.0, report=report)
    steady = next_round_recommendation(
        campaign=world_a.campaign, budget=300.0, report=report, production_shifts=False
    )

    assert cycles == 35 * 200
    body = page.content.decode()
    assert page.status_code == 200 and "Grasp failure rose from" in body
    assert report.summary["evidence"]["production_cycles"] >= cycles
    assert flagged["notes"] and flagged["notes"][0].startswith("Grasp failure rose from")
    assert flagged["allocations"] != steady["allocations"]
