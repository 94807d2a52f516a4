"""The gap service on real data: the demo's lab skew surfaces, and a cell matches a hand calculation."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Q, Sum

from analytics.curves import LearningCurve
from analytics.models import GapCell, GapReport
from analytics.services.gap import gap_report_build, gap_report_request
from campaigns.models import Campaign
from labeling.models import Episode
from sites.models import ConditionShare, ConditionValue, ProductionLog
from tests.analytics import curve_oracle

DIMS = ["lighting", "clutter", "human-activity"]


@pytest.fixture
def demo(db):
    call_command("seed_demo", stdout=StringIO())
    return Campaign.objects.get(slug="northwind-2027-h1")


@pytest.mark.slow
def test_demo_report_surfaces_the_lab_skew_and_matches_a_hand_calculation(demo):
    report = gap_report_build(
        report=GapReport.objects.create(
            organization=demo.organization, campaign=demo, dimension_slugs=DIMS
        )
    )

    top = report.summary["top_gaps"]
    # The top gaps are conditions the sites present and the lab does not: no training data.
    assert len(top) >= 5
    assert all(g["train_count"] == 0 and g["target_share"] > 0 for g in top[:5])
    assert "Busy" in top[0]["label"] and "Dim sodium" in top[0]["label"]
    assert "of production cycles but no training episodes" in top[0]["sentence"]
    assert "interventions a day" in top[0]["sentence"]
    sources = {s["deployment"]: s["source"] for s in report.summary["sources"]}
    assert sources == {"Rotterdam tote picking": "production", "Venlo each picking": "survey"}

    # Hand calculation of the top cell from raw rows, independently of the service.
    cell = GapCell.objects.get(report=report, rank=1)
    values = {
        v.dimension.slug: v
        for v in ConditionValue.objects.filter(pk__in=cell.value_ids).select_related("dimension")
    }
    in_cell = Q()
    for v in values.values():
        in_cell &= Q(condition_set__value_ids__contains=[v.pk])
    rotterdam, venlo = demo.deployments.order_by("pk")
    logs = ProductionLog.objects.filter(deployment=rotterdam)
    p_rotterdam = (
        logs.filter(in_cell).aggregate(n=Sum("cycles"))["n"] / logs.aggregate(n=Sum("cycles"))["n"]
    )
    p_venlo = 1.0
    for v in values.values():
        share = ConditionShare.objects.filter(deployment=venlo, value=v).first()
        p_venlo *= share.share if share else 0.0
    w_r = rotterdam.cycles_per_day / (rotterdam.cycles_per_day + venlo.cycles_per_day)
    p = w_r * p_rotterdam + (1 - w_r) * p_venlo
    assert cell.target_share == pytest.approx(p, rel=1e-9)

    own = (
        Episode.objects.filter(in_cell, embodiment__in=demo.embodiments.all()).aggregate(
            n=Sum("episode_count")
        )["n"]
        or 0
    )
    other = (
        Episode.objects.filter(in_cell)
        .exclude(embodiment__in=demo.embodiments.all())
        .aggregate(n=Sum("episode_count"))["n"]
        or 0
    )
    assert cell.train_count == pytest.approx(own + demo.transfer_weight * other)

    # The cell's rate is the per-cell model read from the report's own stored cells and
    # pooled curve: what the recommendation reads back (the one model of both).
    stored = list(GapCell.objects.filter(report=report).order_by("rank"))
    curve = LearningCurve(**{k: report.summary["curve"][k] for k in ("f_inf", "a", "b")})
    rates = curve_oracle.cell_rates(
        curve,
        [c.train_count for c in stored],
        [c.trials for c in stored],
        [c.successes for c in stored],
    )
    f = rates[[c.pk for c in stored].index(cell.pk)][0]
    assert cell.failure_rate == pytest.approx(f, rel=1e-9)
    cycles = rotterdam.cycles_per_day + venlo.cycles_per_day
    assert cell.interventions_per_day == pytest.approx(cycles * p * f, rel=1e-9)
    assert cell.explanation == top[0]["sentence"]


def test_cells_with_no_target_mass_never_rank_as_gaps(world_a):
    report = world_a.gap_report

    top_indices = {g["label"] for g in report.summary["top_gaps"]}
    zero_target = GapCell.objects.filter(report=report, target_share=0)

    assert not top_indices & set(zero_target.values_list("label", flat=True))
    assert GapCell.objects.filter(report=report, target_share__gt=0, train_count=0).exists()


def test_stored_cells_keep_labels_with_tabs_backslashes_and_newlines(world_a):
    """Cells are COPYed as text: what COPY would read as a separator is escaped."""
    value = ConditionValue.objects.filter(dimension__organization=world_a.operator).first()
    value.label = "dim\tsodium \\ C:\\lamps\nrow two"
    value.save()
    campaign = world_a.gap_report.campaign

    report = gap_report_build(
        report=GapReport.objects.create(organization=world_a.operator, campaign=campaign)
    )

    cells = list(GapCell.objects.filter(report=report, value_ids__contains=[value.pk]))
    assert cells
    assert all(value.label in c.label for c in cells)
    assert all(c.values[value.dimension.slug] == value.slug for c in cells)
    assert all(c.value_ids == sorted(c.value_ids) for c in cells)
    assert sorted(GapCell.objects.filter(report=report).values_list("rank", flat=True)) == list(
        range(1, report.n_cells + 1)
    )


def test_deleting_a_report_deletes_its_cells_and_a_deleted_report_gets_none(world_a):
    from analytics.services.gap import GapReportFailed

    report = world_a.gap_report
    assert GapCell.objects.filter(report_id=report.pk).exists()
    report.campaign.gap_reports.filter(pk=report.pk).delete()  # the ORM cascades
    assert not GapCell.objects.filter(report_id=report.pk).exists()

    # The database deletes cells with their report even when the ORM's cascade did not see
    # them (a store that committed while the deletion ran): here, a bare SQL delete.
    other = gap_report_build(
        report=GapReport.objects.create(organization=world_a.operator, campaign=world_a.campaign)
    )
    assert GapCell.objects.filter(report_id=other.pk).exists()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM analytics_gapreport WHERE id = %s", [other.pk])
    assert not GapCell.objects.filter(report_id=other.pk).exists()

    gone = GapReport.objects.create(organization=world_a.operator, campaign=world_a.campaign)
    GapReport.objects.filter(pk=gone.pk).delete()  # deleted while it is being computed
    with pytest.raises(GapReportFailed, match="deleted while it was computed"):
        gap_report_build(report=gone)
    assert not GapCell.objects.filter(report_id=gone.pk).exists()


def test_requesting_a_report_runs_it_in_celery_and_records_progress(
    world_a, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        report = gap_report_request(campaign=world_a.campaign, actor=world_a.manager)

    report.refresh_from_db()
    assert report.status == GapReport.Status.DONE
    assert report.job.status == "succeeded"
    assert report.job.progress_done == report.job.progress_total
    assert report.n_cells == GapCell.objects.filter(report=report).count()


def test_unknown_dimension_fails_with_the_known_ones_named(world_a):
    from analytics.services.gap import GapReportFailed

    report = GapReport.objects.create(
        organization=world_a.operator, campaign=world_a.campaign, dimension_slugs=["weather"]
    )

    with pytest.raises(
        GapReportFailed, match="unknown condition dimension.*weather.*known: lighting"
    ):
        gap_report_build(report=report)


def test_gap_report_command_prints_json_with_summary_and_cells(world_a):
    out = StringIO()

    call_command("gap_report", "--campaign", world_a.campaign.slug, "--json", stdout=out)

    data = json.loads(out.getvalue())
    assert data["campaign"] == world_a.campaign.slug
    assert {
        "uncovered_mass",
        "js_divergence",
        "psi",
        "interventions_per_day",
        "reliability_now",
    } <= set(data["summary"])
    assert len(data["cells"]) == data["summary"]["n_cells"]
    assert abs(sum(c["target_share"] for c in data["cells"]) - 1) < 1e-9


def test_gap_report_command_names_a_missing_campaign(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="'nope': not found"):
        call_command("gap_report", "--campaign", "nope")


def test_api_triggers_a_report_and_pages_its_cells(
    world_a, client_for, django_capture_on_commit_callbacks
):
    client = client_for(world_a.manager)

    with django_capture_on_commit_callbacks(execute=True):
        created = client.post(
            "/api/gap-reports/", {"campaign": world_a.campaign.pk}, content_type="application/json"
        )
    cells = client.get(f"/api/gap-reports/{created.json()['id']}/cells/?coverage=0&page_size=5")

    assert created.status_code == 202
    assert cells.status_code == 200
    assert all(c["coverage"] == 0 for c in cells.json()["results"])


def test_api_refuses_a_campaign_of_another_organization(world_a, world_b, client_for):
    response = client_for(world_b.manager).post(
        "/api/gap-reports/", {"campaign": world_a.campaign.pk}, content_type="application/json"
    )

    assert response.status_code == 400
    assert not GapReport.objects.filter(
        campaign=world_a.campaign, organization=world_b.operator
    ).exists()


def test_gap_page_shows_summary_top_gaps_and_heatmap(world_a, client_for):
    client = client_for(world_a.manager)

    page = client.get(f"/planner/campaigns/{world_a.campaign.pk}/gap/")
    heatmap = client.get(
        f"/planner/gap/{world_a.gap_report.pk}/heatmap/?x=lighting&y=lighting&metric=priority"
    )
    cells = client.get(f"/planner/gap/{world_a.gap_report.pk}/cells/?sort=interventions")

    assert page.status_code == 200
    assert "Top gaps" in page.content.decode()
    assert heatmap.json()["data"][0]["type"] == "heatmap"
    assert cells.status_code == 200 and "Dim" in cells.content.decode()


def test_the_report_progress_card_reloads_the_page_once_the_report_ends(world_a, client_for):
    pending = GapReport.objects.create(
        organization=world_a.operator, campaign=world_a.campaign, status=GapReport.Status.RUNNING
    )
    client = client_for(world_a.manager)

    running = client.get(f"/planner/gap/{pending.pk}/progress/")
    GapReport.objects.filter(pk=pending.pk).update(status=GapReport.Status.FAILED)
    ended = client.get(f"/planner/gap/{pending.pk}/progress/")

    assert running.status_code == ended.status_code == 200
    assert "HX-Refresh" not in running
    assert ended["HX-Refresh"] == "true"
