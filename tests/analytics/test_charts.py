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


# ------------------------------------------------------------------ readable figures

LONG = "Dim sodium lighting with shrink-wrapped totes on the lower shelves near dock 4"


def _figures(labels: list[str]) -> dict[str, dict]:
    n = len(labels)
    return {
        "heatmap": charts.heatmap(
            x_labels=labels,
            y_labels=labels,
            z=[[0.1] * n for _ in labels],
            metric="interventions_per_day",
            x_title="Lighting",
            y_title="Clutter",
        ),
        "dimension_bars": charts.dimension_bars(
            dimension="Lighting", values=labels, target=[0.1] * n, training=[0.2] * n, psi=0.1
        ),
        "comparison_bars": charts.comparison_bars(
            labels=labels, before=[1.0] * n, after=[2.0] * n, title="Moved"
        ),
        "performance_shift": charts.performance_shift(
            labels=labels,
            before=[0.9] * n,
            before_err=[[0.01, 0.01]] * n,
            after=[0.95] * n,
            after_err=[[0.01, 0.01]] * n,
            title="Shift",
            category="site",
        ),
        "gap_trend": charts.gap_trend(
            series=[
                {"when": "2027-01-01T00:00:00", "interventions": 3.0, "uncovered": 0.2},
                {"when": "2027-02-01T00:00:00", "interventions": 2.0, "uncovered": 0.1},
            ]
        ),
        "site_map": charts.site_map(
            sites=[{"name": "Venlo DC", "lat": 51.4, "lon": 6.2, "kind": "deployment"}]
        ),
    }


def _axes(figure: dict) -> dict[str, dict]:
    return {k: v for k, v in figure["layout"].items() if k.startswith(("xaxis", "yaxis"))}


@pytest.mark.parametrize("name", list(_figures(["a"])))
def test_every_axis_is_titled_and_grows_its_margin_to_fit_its_labels(name):
    figure = _figures(["Bright", LONG])[name]

    axes = _axes(figure)

    assert {"xaxis", "yaxis"} <= set(axes)
    for key, axis in axes.items():
        assert axis["title"]["text"].strip(), f"{name}.{key} has no title"
        assert axis.get("automargin") is True, f"{name}.{key} may clip its tick labels"


def test_axes_say_what_they_count_with_units():
    figures = _figures(["Bright", "Dim"])

    assert figures["comparison_bars"]["layout"]["xaxis"]["title"]["text"] == (
        "interventions per day"
    )
    assert figures["gap_trend"]["layout"]["yaxis"]["title"]["text"] == "interventions per day"
    assert figures["heatmap"]["layout"]["xaxis"]["title"]["text"] == "Lighting"
    assert figures["heatmap"]["layout"]["yaxis"]["title"]["text"] == "Clutter"
    assert figures["heatmap"]["data"][0]["colorbar"]["title"]["text"] == "interventions per day"
    assert figures["performance_shift"]["layout"]["xaxis"]["title"]["text"] == "site"


@pytest.mark.parametrize(
    "name", ["heatmap", "dimension_bars", "comparison_bars", "performance_shift"]
)
def test_a_long_label_is_shortened_on_its_tick_but_whole_in_the_hover(name):
    figure = _figures(["Bright", LONG])[name]
    trace = figure["data"][0]
    category_axes = [a for a in _axes(figure).values() if "ticktext" in a]

    values = [v for axis in category_axes for v in axis["tickvals"]]
    ticks = [t for axis in category_axes for t in axis["ticktext"]]

    assert LONG in values  # the category itself, which %{x} / %{y} show in the hover
    assert LONG in (trace.get("x") or []) + (trace.get("y") or [])
    assert "%{" in trace["hovertemplate"]
    long_ticks = [t for t in ticks if t.startswith("Dim sodium")]
    assert long_ticks and all(t != LONG for t in long_ticks)
    for tick in long_ticks:
        assert all(len(line) <= 34 for line in tick.split("<br>")), tick
        assert tick.endswith("…")


def test_tick_label_wraps_on_words_cuts_with_an_ellipsis_and_escapes():
    assert charts.tick_label("Dim", width=10) == "Dim"
    assert charts.tick_label("Dim sodium lighting", width=10) == "Dim sodium<br>lighting"
    assert charts.tick_label("a b c d e f g h i j k l", width=3, lines=2) == "a b<br>c…"
    assert charts.tick_label("Supercalifragilistic", width=8, lines=1) == "Superca…"
    assert charts.tick_label("R&D <b>", width=20) == "R&amp;D &lt;b&gt;"


@pytest.mark.parametrize("name", ["heatmap", "dimension_bars", "comparison_bars"])
def test_a_figure_with_more_categories_is_taller(name):
    few = _figures([f"Value {i}" for i in range(3)])[name]
    many = _figures([f"Value {i}" for i in range(30)])[name]

    assert many["layout"]["height"] > few["layout"]["height"]
    assert many["layout"]["height"] >= 30 * 20  # room for every row of labels


def test_a_comparison_leaves_out_the_bar_of_a_cell_a_report_did_not_have():
    figure = charts.comparison_bars(labels=["New"], before=[None], after=[2.0], title="Moved")

    assert figure["data"][0]["x"] == [None]
