"""Readable numbers on the pages: "no data" where nothing was measured, counts with their
noun and thousands separators, names not slugs, a heatmap of two different dimensions,
round pages paged, and visit times on the site's clock."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, timedelta
from html import unescape

import pytest
from django.urls import reverse

from frontend.templatetags.fc import count
from tests.factories import another_deployment


def visible_text(body: bytes) -> str:
    """What a person reads: the page without its tags, scripts and attributes."""
    html = body.decode()
    html = re.sub(r"<script.*?</script>", " ", html, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", " ", html))


def _unmeasured_deployment(world):
    return another_deployment(
        world, "dep-unmeasured", name="Deployment never measured", cycles_per_day=500
    )


# ------------------------------------------------------------------ no data, not zero


def test_a_deployment_without_production_or_evaluation_reads_no_data_not_zero(world_a, client_for):
    deployment = _unmeasured_deployment(world_a)
    client = client_for(world_a.manager)

    listing = client.get(reverse("planner:deployments"))
    detail = client.get(reverse("planner:deployment", args=[deployment.pk]))

    row = re.search(r"<tr>\s*<td><a[^>]*>Deployment never measured</a>.*?</tr>", listing.text, re.S)
    assert row is not None
    cells = re.findall(r'<td class="num">(.*?)</td>', row.group(0), re.S)
    interventions = cells[3]  # cycles/day, success now, target, interventions/day, at target
    assert "no data" in interventions and not re.search(r"\b0(\.0)?\b", interventions)
    card = re.search(r"Interventions/day</div><div class=\"value\">(.*?)</div>", detail.text)
    assert card is not None and "no data" in card.group(1)


def test_a_customer_dashboard_with_nothing_measured_reads_no_data_not_zero(world_a, client_for):
    from analytics.models import EvaluationRun

    EvaluationRun.objects.filter(deployment=world_a.deployment).delete()

    body = client_for(world_a.viewer).get(reverse("dashboard:home"), follow=True)

    card = re.search(r"Interventions/day now</div><div class=\"value\">(.*?)</div>", body.text)
    assert card is not None
    assert "no data" in card.group(1)
    assert ">0<" not in card.group(1)


def test_a_customer_dashboard_says_how_many_deployments_its_total_covers(world_a, client_for):
    _unmeasured_deployment(world_a)

    body = client_for(world_a.viewer).get(reverse("dashboard:home"), follow=True)

    assert "1 of 2 deployments measured" in visible_text(body.content)


# ------------------------------------------------------------------ counts


@pytest.mark.parametrize(
    ("value", "noun", "shown"),
    [
        (1, "row", "1 row"),
        (0, "row", "0 rows"),
        (2, "row", "2 rows"),
        (1234, "row", "1,234 rows"),
        (1.0, "episode", "1 episode"),
        (2.5, "day", "2.5 days"),
        (1, "uncovered cell", "1 uncovered cell"),
        (3, "entry,entries", "3 entries"),
        (None, "row", "—"),
    ],
)
def test_count_gives_the_noun_its_number_and_thousands_separators(value, noun, shown):
    assert count(value, noun) == shown


def test_an_import_of_one_row_says_row_and_of_1234_rows_says_1_234_rows(world_a, client_for):
    from labeling.models import InventoryImport

    client = client_for(world_a.manager)
    url = reverse("inventory:import", args=[world_a.inventory_import.pk])

    one = visible_text(client.get(url).content)
    InventoryImport.objects.filter(pk=world_a.inventory_import.pk).update(
        summary={"episodes": 1234, "frames": 100, "rows": 1234}
    )
    many = visible_text(client.get(url).content)

    assert "in 1 row" in one and "1 rows" not in one
    assert "in 1,234 rows" in many and "1234" not in many


def test_a_round_with_one_target_and_one_task_says_so_in_the_singular(world_a, client_for):
    body = visible_text(
        client_for(world_a.manager).get(reverse("planner:round", args=[world_a.round.pk])).content
    )

    assert re.search(r"\b1 target\b", body) and "1 targets" not in body
    assert re.search(r"\b1 task\b", body) and "1 tasks" not in body


# ------------------------------------------------------------------ names, not slugs


def test_the_campaign_page_names_a_round_s_dataset_instead_of_its_slug(world_a, client_for):
    dataset = world_a.round.dataset

    body = visible_text(
        client_for(world_a.manager)
        .get(reverse("planner:campaign", args=[world_a.campaign.pk]))
        .content
    )

    assert dataset.name in body
    assert dataset.slug not in body


@pytest.fixture
def two_dimension_report(world_a):
    from analytics.models import GapReport
    from analytics.services.gap import gap_report_build
    from sites.models import ConditionDimension, ConditionValue

    clutter = ConditionDimension.objects.create(
        organization=world_a.operator, slug="shelf-clutter", name="Shelf clutter"
    )
    ConditionValue.objects.create(dimension=clutter, slug="low", label="Low", order=0)
    ConditionValue.objects.create(dimension=clutter, slug="high", label="High", order=1)
    return gap_report_build(
        report=GapReport.objects.create(
            organization=world_a.operator,
            campaign=world_a.campaign,
            dimension_slugs=["lighting", "shelf-clutter"],
        )
    )


def test_the_gap_report_names_its_dimensions_in_text_and_heatmap_choices(
    two_dimension_report, world_a, client_for
):
    response = client_for(world_a.manager).get(
        reverse("planner:gap-report", args=[two_dimension_report.pk])
    )

    text = visible_text(response.content)
    assert "over Lighting, Shelf clutter" in text
    assert "shelf-clutter" not in text
    assert '<option value="shelf-clutter" selected>Shelf clutter</option>' in response.text


def test_the_heatmap_titles_its_axes_with_dimension_names(
    two_dimension_report, world_a, client_for
):
    url = reverse("planner:gap-heatmap", args=[two_dimension_report.pk])

    figure = client_for(world_a.manager).get(url, {"x": "lighting", "y": "shelf-clutter"}).json()

    assert figure["layout"]["xaxis"]["title"]["text"] == "Lighting"
    assert figure["layout"]["yaxis"]["title"]["text"] == "Shelf clutter"
    assert "shelf-clutter" not in json.dumps(figure)


# ------------------------------------------------------------------ heatmap axes


def test_a_heatmap_asked_for_one_dimension_twice_shows_it_against_another(
    two_dimension_report, world_a, client_for
):
    url = reverse("planner:gap-heatmap", args=[two_dimension_report.pk])

    figure = client_for(world_a.manager).get(url, {"x": "lighting", "y": "lighting"}).json()

    assert figure["layout"]["xaxis"]["title"]["text"] == "Lighting"
    assert figure["layout"]["yaxis"]["title"]["text"] == "Shelf clutter"
    assert figure["data"][0]["y"] == ["Low", "High"]


def test_a_heatmap_of_a_report_over_one_dimension_is_one_row_of_all_cells(world_a, client_for):
    url = reverse("planner:gap-heatmap", args=[world_a.gap_report.pk])

    figure = client_for(world_a.manager).get(url, {"x": "lighting", "y": "lighting"}).json()

    assert figure["layout"]["xaxis"]["title"]["text"] == "Lighting"
    assert figure["data"][0]["y"] == ["all cells"]
    assert any(v is not None for v in figure["data"][0]["z"][0])


def test_a_heatmap_of_one_dimension_against_itself_is_refused(two_dimension_report):
    from analytics.selectors import gap_heatmap

    figure = gap_heatmap(report=two_dimension_report, x="lighting", y="lighting", metric="")

    assert figure["data"] == []
    assert "two different dimensions" in figure["layout"]["title"]["text"]


def test_another_organization_s_heatmap_is_a_404(two_dimension_report, world_b, client_for):
    url = reverse("planner:gap-heatmap", args=[two_dimension_report.pk])

    response = client_for(world_b.manager).get(url, {"x": "lighting", "y": "lighting"})

    assert response.status_code == 404


# ------------------------------------------------------------------ round pages


@pytest.fixture
def big_round(world_a):
    """World A's round with 300 targets: one per failure mode, so each is a distinct target."""
    from campaigns.models import CaptureTarget
    from sites.models import FailureMode

    modes = FailureMode.objects.bulk_create(
        FailureMode(organization=world_a.operator, code=f"mode-{i}", name=f"Mode {i}")
        for i in range(300)
    )
    CaptureTarget.objects.bulk_create(
        CaptureTarget(
            round=world_a.round,
            condition_set=world_a.target.condition_set,
            failure_mode=mode,
            label=f"Target cell {i:03d} at {'Venlo' if i % 3 == 0 else 'Tilburg'}",
            episodes_wanted=10 + i,
            expected_avoided_per_day=1000 - i,
            rationale="A long reason why this cell matters. " * 3,
        )
        for i, mode in enumerate(modes)
    )
    return world_a.round


def test_a_round_of_300_targets_shows_a_page_of_them_with_a_next_link_and_whole_totals(
    big_round, client_for, world_a, django_assert_max_num_queries
):
    client = client_for(world_a.manager)
    url = reverse("planner:round", args=[big_round.pk])

    with django_assert_max_num_queries(30):
        response = client.get(url)

    body = response.content
    assert response.status_code == 200
    assert len(body) < 150_000
    rows = re.findall(r"Target cell \d{3}", visible_text(body))
    assert len(rows) == 50
    assert rows[0] == "Target cell 000"
    assert "301 targets" in visible_text(body)  # the count is the whole round's
    assert 'rel="next" href="?targets_page=2"' in response.text
    assert "page 1 of 7" in visible_text(body)


def test_the_next_page_of_targets_continues_where_the_first_ended(big_round, client_for, world_a):
    url = reverse("planner:round", args=[big_round.pk])

    body = visible_text(client_for(world_a.manager).get(url, {"targets_page": 2}).content)

    rows = re.findall(r"Target cell \d{3}", body)
    assert rows[0] == "Target cell 050" and len(rows) == 50
    assert "page 2 of 7" in body


def test_filtering_a_round_s_targets_by_text_pages_the_matches(big_round, client_for, world_a):
    url = reverse("planner:round", args=[big_round.pk])

    response = client_for(world_a.manager).get(url, {"q": "venlo"})

    body = visible_text(response.content)
    rows = re.findall(r"Target cell (\d{3}) at (\w+)", body)
    assert len(rows) == 50 and {place for _, place in rows} == {"Venlo"}
    assert "100 targets matching “venlo”" in body
    assert 'href="?q=venlo&amp;targets_page=2"' in response.text


def test_an_edit_from_a_filtered_page_returns_to_that_page(big_round, client_for, world_a):
    from campaigns.models import CaptureTarget

    target = CaptureTarget.objects.get(round=big_round, label__startswith="Target cell 051")
    url = reverse("planner:round-action", args=[big_round.pk, "target"])

    response = client_for(world_a.manager).post(
        url,
        {"target": target.pk, "episodes": 25, "view": "q=Tilburg&targets_page=2&evil=1"},
    )

    assert response.status_code == 302
    assert response["Location"] == (
        reverse("planner:round", args=[big_round.pk]) + "?q=Tilburg&targets_page=2"
    )
    target.refresh_from_db()
    assert target.episodes_wanted == 25


def test_another_organization_s_round_page_is_a_404_whatever_the_filter(
    big_round, client_for, world_b
):
    url = reverse("planner:round", args=[big_round.pk])

    response = client_for(world_b.manager).get(url, {"q": "venlo", "targets_page": 2})

    assert response.status_code == 404


# ------------------------------------------------------------------ visit times


@pytest.fixture
def tokyo_visit(world_a):
    """World A's task today, 09:30–13:30 in Tokyo (JST all year: no daylight saving)."""
    from campaigns.models import CollectionTask
    from sites.models import Site

    Site.objects.filter(pk=world_a.site.pk).update(timezone="Asia/Tokyo")
    task = world_a.collection_task
    day = task.scheduled_date
    start = datetime(day.year, day.month, day.day, 0, 30, tzinfo=UTC)
    CollectionTask.objects.filter(pk=task.pk).update(
        start_at=start, end_at=start + timedelta(hours=4)
    )
    return task


def test_visit_times_read_in_the_site_s_zone_on_round_page_run_sheet_and_tablet(
    tokyo_visit, world_a, client_for
):
    manager, field = client_for(world_a.manager), client_for(world_a.field)
    day: date = tokyo_visit.scheduled_date

    round_page = visible_text(
        manager.get(reverse("planner:round", args=[world_a.round.pk])).content
    )
    run_sheet = visible_text(
        manager.get(
            reverse("planner:team-runsheet", args=[world_a.team.pk]), {"date": day.isoformat()}
        ).content
    )
    tablet = visible_text(field.get(reverse("field:today")).content)
    synced = field.get(reverse("field-task-list")).json()

    for page in (round_page, run_sheet, tablet):
        assert "09:30–13:30 JST" in page
        assert "00:30" not in page and "UTC" not in page
    task = next(t for t in synced["tasks"] if t["id"] == tokyo_visit.pk)
    assert task["local_window"] == "09:30–13:30 JST"
