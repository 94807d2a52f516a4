"""Figures show user-supplied labels as text: plotly never gets markup from our data."""

from __future__ import annotations

import json

import pytest

from analytics import charts

EVIL = '<a href="https://evil.example">x</a>'
ESCAPED = '&lt;a href="https://evil.example"&gt;x&lt;/a&gt;'


def text_fields(figure: dict) -> str:
    """Every string plotly would draw as text, as JSON (templates with our own <br> aside)."""
    shown = []

    def walk(node, key=""):
        if isinstance(node, dict):
            for k, v in node.items():
                if k not in ("hovertemplate",):
                    walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str):
            shown.append(node)

    walk(figure)
    return json.dumps(shown)


def test_plot_text_escapes_markup_and_ampersands_once():
    assert charts.plot_text(EVIL) == ESCAPED
    assert charts.plot_text("R&D <b>lab</b>") == "R&amp;D &lt;b&gt;lab&lt;/b&gt;"
    assert charts.plot_text(None) == ""
    assert charts.plot_text("Dim sodium") == "Dim sodium"


@pytest.mark.parametrize(
    "figure",
    [
        charts.heatmap(
            x_labels=[EVIL, "Dim"], y_labels=["Low", EVIL], z=[[1, 2], [3, 4]], metric="priority"
        ),
        charts.dimension_bars(
            dimension=EVIL, values=[EVIL, "Dim"], target=[0.5, 0.5], training=[1, 0], psi=0.1
        ),
        charts.comparison_bars(labels=[EVIL], before=[1.0], after=[2.0], title=EVIL),
        charts.site_map(
            sites=[{"name": EVIL, "lat": 52, "lon": 4, "kind": "deployment", "status": EVIL}]
        ),
        charts.performance_shift(
            labels=[EVIL],
            before=[0.9],
            before_err=[[0.01, 0.01]],
            after=[0.95],
            after_err=[[0.01, 0.01]],
            title=EVIL,
        ),
    ],
    ids=["heatmap", "dimension_bars", "comparison_bars", "site_map", "performance_shift"],
)
def test_every_figure_escapes_labels_from_user_data(figure):
    shown = text_fields(figure)

    assert "<a" not in shown and "</a>" not in shown
    assert json.dumps(ESCAPED)[1:-1] in shown


def test_a_condition_value_labelled_with_a_link_gives_a_heatmap_without_markup(world_a):
    from analytics.models import GapReport
    from analytics.selectors import gap_heatmap
    from analytics.services.gap import gap_report_build
    from sites.models import ConditionDimension, ConditionValue

    clutter = ConditionDimension.objects.create(
        organization=world_a.operator, slug="clutter", name="Clutter"
    )
    ConditionValue.objects.create(dimension=clutter, slug="low", label="Low", order=0)
    ConditionValue.objects.create(dimension=clutter, slug="evil", label=EVIL, order=1)
    report = gap_report_build(
        report=GapReport.objects.create(
            organization=world_a.operator,
            campaign=world_a.campaign,
            dimension_slugs=["lighting", "clutter"],
        )
    )

    figure = gap_heatmap(report=report, x="lighting", y="clutter", metric="target_share")

    assert figure["data"][0]["y"] == ["Low", ESCAPED]
    assert "<a" not in json.dumps(figure)
