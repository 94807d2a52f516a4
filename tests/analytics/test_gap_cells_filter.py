"""The gap cell table's ``value`` filter (issue 15): only a dimension and value of the report.

The dimension name from the query string was once spliced into an ORM lookup, so
``value=a__range=x`` was a server error for anyone who could read a report.
"""

from __future__ import annotations

import pytest

from analytics.models import GapCell

LOOKUPS_IN_DISGUISE = ["a__range=x", "a__isnull=maybe", "a__regex=(", "lighting__regex=("]


def cells_url(report):
    return f"/api/gap-reports/{report.pk}/cells/"


@pytest.mark.parametrize("value", LOOKUPS_IN_DISGUISE)
@pytest.mark.parametrize("role", ["manager", "viewer"])
def test_a_lookup_smuggled_into_the_value_filter_is_a_400_naming_the_parameter(
    world_a, client_for, role, value
):
    cells_before = GapCell.objects.count()

    response = client_for(getattr(world_a, role)).get(
        cells_url(world_a.gap_report), {"value": value}
    )

    assert response.status_code == 400
    message = response.json()["value"][0]
    assert message.startswith("value")
    assert "expected one of: lighting" in message
    assert GapCell.objects.count() == cells_before


def test_a_value_the_dimension_does_not_have_is_a_400_listing_its_values(world_a, client_for):
    response = client_for(world_a.manager).get(
        cells_url(world_a.gap_report), {"value": "lighting=sodium"}
    )

    assert response.status_code == 400
    assert response.json() == {
        "value": ["value: 'sodium' is not a value of lighting; expected one of: bright, dim."]
    }


def test_a_filter_without_an_equals_sign_says_what_it_should_look_like(world_a, client_for):
    response = client_for(world_a.manager).get(cells_url(world_a.gap_report), {"value": "dim"})

    assert response.status_code == 400
    assert response.json()["value"][0].startswith("value must be dimension=value")


def test_a_known_dimension_and_value_filters_the_cells(world_a, client_for):
    response = client_for(world_a.viewer).get(
        cells_url(world_a.gap_report), {"value": "lighting=dim"}
    )

    assert response.status_code == 200
    results = response.json()["results"]
    assert results
    assert {tuple(c["values"].items()) for c in results} == {(("lighting", "dim"),)}


def test_another_organizations_report_is_a_404_whatever_the_filter(world_a, world_b, client_for):
    response = client_for(world_a.manager).get(
        cells_url(world_b.gap_report), {"value": "a__range=x"}
    )

    assert response.status_code == 404


def test_the_cell_table_page_shows_a_bad_filter_in_the_page(world_a, client_for):
    response = client_for(world_a.manager).get(
        f"/planner/gap/{world_a.gap_report.pk}/cells/", {"value": "a__regex=("}
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert 'class="error" role="alert"' in page
    assert "is not a dimension of this report; expected one of: lighting." in page
    assert "No cells match." in page


def test_the_cell_table_page_filters_by_a_known_value(world_a, client_for):
    response = client_for(world_a.manager).get(
        f"/planner/gap/{world_a.gap_report.pk}/cells/", {"value": "lighting=bright"}
    )

    assert response.status_code == 200
    assert 'role="alert"' not in response.content.decode()
    assert [c.values for c in response.context["page"]] == [{"lighting": "bright"}]
