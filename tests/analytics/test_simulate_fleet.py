"""The fleet simulator streams production through the ingest API; a second run counts nothing."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command
from django.db.models import Sum

from sites.models import FailureRecord, ProductionEvent, ProductionLog


def test_a_week_of_the_fleet_arrives_once_however_often_it_is_sent(world_a):
    deployment = world_a.deployment
    logs = ProductionLog.objects.filter(deployment=deployment)
    before = logs.aggregate(n=Sum("cycles"))["n"] or 0
    args = ["--days", "3", "--scale", "0.05", "--shift", f"grasp@{deployment.slug}"]
    args += ["--shift-rate", "0.2"]
    first, second = StringIO(), StringIO()

    call_command("simulate_fleet", *args, stdout=first)
    call_command("simulate_fleet", *args, stdout=second)

    cycles = ProductionEvent.objects.filter(deployment=deployment, kind="cycle").count()
    assert cycles == 3 * 50
    assert (logs.aggregate(n=Sum("cycles"))["n"] or 0) - before == cycles
    interventions = FailureRecord.objects.filter(
        deployment=deployment, external_id__startswith="sim0-"
    )
    # The injected mode fails about a fifth of the last two days' cycles.
    assert interventions.filter(failure_mode__code="grasp").count() >= 5
    assert f"{cycles:,} cycles" in first.getvalue()
    assert "0 cycles and 0 interventions stored" in second.getvalue()
