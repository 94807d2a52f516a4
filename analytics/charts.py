"""Plotly figures for pages. Figures are returned as plain JSON-ready dicts.

Pages put the figure JSON in a ``<script type="application/json">`` block and the app's
static JS renders it with plotly.js served by the app: the content security policy allows no
inline scripts, which ``plotly.io.to_html`` would emit. Dicts rather than
``plotly.graph_objects`` because validating objects cost tens of milliseconds per figure on
pages that must render in under 300 ms; the dicts follow plotly.js's schema directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

PALETTE = {"target": "#0f6e8c", "training": "#e0a030", "priority": "#b42318"}
METRICS = {
    "target_share": "Target share of production cycles",
    "train_share": "Share of training episodes",
    "priority": "Capture priority (interventions/day avoided per episode)",
    "interventions_per_day": "Expected interventions per day",
}


def plot_text(value: Any) -> str:
    """Escape a label from user data so plotly shows it as text, never as markup.

    plotly.js renders a subset of HTML in every text it draws (titles, tick labels, trace
    text, hover labels, legend names, annotations): ``<a href>`` becomes a live link and
    ``<br>`` a line break. With ``&``, ``<`` and ``>`` as entities, which plotly turns back
    into characters, a condition label or site name reads exactly as typed. Escape once:
    every figure function below escapes its inputs, so callers pass raw text.
    """
    text = "" if value is None else str(value)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plot_texts(values: Iterable[Any]) -> list[str]:
    """:func:`plot_text` over a list of labels (tick labels, trace text)."""
    return [plot_text(v) for v in values]


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": plot_text(title), "font": {"size": 14}},
        "margin": {"l": 140, "r": 20, "t": 40, "b": 80},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "font": {"family": "system-ui, sans-serif", "size": 12},
    }
    layout.update(extra)
    return layout


def heatmap(
    *,
    x_labels: list[str],
    y_labels: list[str],
    z: list[list[float | None]],
    metric: str,
    hover: list[list[str]] | None = None,
) -> dict[str, Any]:
    """Heatmap of a metric over two condition dimensions.

    ``hover`` is trusted markup (numbers and ``<br>``) built by the caller; the labels are
    escaped here.
    """
    trace: dict[str, Any] = {
        "type": "heatmap",
        "x": plot_texts(x_labels),
        "y": plot_texts(y_labels),
        "z": z,
        # Light for little, dark for much (plotly's named "Blues" runs the other way).
        "colorscale": (
            [[0, "#fff5f0"], [0.5, "#fb6a4a"], [1, "#67000d"]]
            if metric in {"priority", "interventions_per_day"}
            else [[0, "#f7fbff"], [0.5, "#6baed6"], [1, "#08306b"]]
        ),
        "hoverongaps": False,
        "colorbar": {"title": {"text": ""}},
    }
    if hover is not None:
        trace["text"] = hover
        trace["hovertemplate"] = "%{y} × %{x}<br>%{text}<extra></extra>"
    return {"data": [trace], "layout": _layout(METRICS.get(metric, metric), height=360)}


def dimension_bars(
    *, dimension: str, values: list[str], target: list[float], training: list[float], psi: float
) -> dict[str, Any]:
    """Target vs training share per value of one dimension."""
    return {
        "data": [
            {
                "type": "bar",
                "name": "Target",
                "x": plot_texts(values),
                "y": target,
                "marker": {"color": PALETTE["target"]},
                "hovertemplate": "%{x}: %{y:.1%} of production<extra></extra>",
            },
            {
                "type": "bar",
                "name": "Training",
                "x": plot_texts(values),
                "y": training,
                "marker": {"color": PALETTE["training"]},
                "hovertemplate": "%{x}: %{y:.1%} of training<extra></extra>",
            },
        ],
        "layout": _layout(
            f"{dimension} (PSI {psi:.2f})",
            barmode="group",
            height=260,
            yaxis={"tickformat": ".0%"},
            margin={"l": 50, "r": 10, "t": 40, "b": 60},
            legend={"orientation": "h", "y": -0.3},
        ),
    }


def comparison_bars(
    *, labels: list[str], before: list[float], after: list[float], title: str
) -> dict[str, Any]:
    """Before/after of a metric for a few cells (what moved between two reports)."""
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "name": "Earlier",
                "y": plot_texts(labels),
                "x": before,
                "marker": {"color": "#9aa5ad"},
            },
            {
                "type": "bar",
                "orientation": "h",
                "name": "Later",
                "y": plot_texts(labels),
                "x": after,
                "marker": {"color": PALETTE["target"]},
            },
        ],
        "layout": _layout(
            title,
            barmode="group",
            height=max(260, 28 * len(labels) + 80),
            margin={"l": 320, "r": 20, "t": 40, "b": 40},
            yaxis={"automargin": True},
        ),
    }


def site_map(*, sites: list[dict[str, Any]]) -> dict[str, Any]:
    """A schematic map: sites at their coordinates on an equirectangular grid (no tiles, no topology).

    Each site dict has name, lat, lon, kind and an optional ``status`` text for the hover.
    """
    if not sites:
        return {"data": [], "layout": _layout("Sites")}
    lats = [s["lat"] for s in sites]
    lons = [s["lon"] for s in sites]
    pad = 1.5
    colours = {"deployment": PALETTE["target"], "collection": PALETTE["training"], "lab": "#6b7a86"}
    traces = []
    for kind in sorted({s["kind"] for s in sites}):
        group = [s for s in sites if s["kind"] == kind]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "name": plot_text(str(kind).capitalize()),
                "x": [s["lon"] for s in group],
                "y": [s["lat"] for s in group],
                "text": plot_texts(s["name"] for s in group),
                "textposition": "top center",
                "customdata": plot_texts(s.get("status", "") for s in group),
                "hovertemplate": "%{text}<br>%{customdata}<extra></extra>",
                "marker": {
                    "size": 14,
                    "color": colours.get(kind, "#333"),
                    "line": {"width": 1, "color": "#fff"},
                },
            }
        )
    return {
        "data": traces,
        "layout": _layout(
            "Sites (schematic: longitude × latitude)",
            height=380,
            xaxis={
                "range": [min(lons) - pad, max(lons) + pad],
                "title": {"text": "longitude °E"},
                "showgrid": True,
                "gridcolor": "#eef2f5",
                "zeroline": False,
            },
            yaxis={
                "range": [min(lats) - pad, max(lats) + pad],
                "title": {"text": "latitude °N"},
                "showgrid": True,
                "gridcolor": "#eef2f5",
                "zeroline": False,
                "scaleanchor": "x",
                "scaleratio": 1.6,
            },
            margin={"l": 60, "r": 20, "t": 40, "b": 50},
            legend={"orientation": "h", "y": -0.2},
        ),
    }


def gap_trend(*, series: list[dict[str, Any]]) -> dict[str, Any]:
    """Interventions per day and uncovered target mass over successive gap reports."""
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "Interventions/day",
                "x": [p["when"] for p in series],
                "y": [p["interventions"] for p in series],
                "marker": {"color": PALETTE["priority"]},
            },
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "Target mass uncovered",
                "yaxis": "y2",
                "x": [p["when"] for p in series],
                "y": [p["uncovered"] for p in series],
                "marker": {"color": PALETTE["target"]},
            },
        ],
        "layout": _layout(
            "Gap trend across reports",
            height=320,
            yaxis={"title": {"text": "interventions/day"}, "rangemode": "tozero"},
            yaxis2={
                "title": {"text": "uncovered"},
                "overlaying": "y",
                "side": "right",
                "tickformat": ".0%",
                "rangemode": "tozero",
            },
            margin={"l": 60, "r": 60, "t": 40, "b": 50},
            legend={"orientation": "h", "y": -0.25},
        ),
    }


def performance_shift(
    *,
    labels: list[str],
    before: list[float],
    before_err: list[list[float]],
    after: list[float],
    after_err: list[list[float]],
    title: str,
) -> dict[str, Any]:
    """Success before and after a round per cell or site, with 95% intervals as error bars."""

    shown = plot_texts(labels)

    def bars(name: str, y: list[float], err: list[list[float]], colour: str) -> dict[str, Any]:
        return {
            "type": "bar",
            "name": name,
            "x": shown,
            "y": y,
            "marker": {"color": colour},
            "error_y": {
                "type": "data",
                "symmetric": False,
                "array": [e[1] for e in err],
                "arrayminus": [e[0] for e in err],
            },
            "hovertemplate": "%{x}: %{y:.2%}<extra>" + name + "</extra>",
        }

    # Success rates live near 100%: start the axis just below the lowest interval, not at 0.
    lows = [v - e[0] for v, e in zip(before + after, before_err + after_err, strict=True)]
    bottom = max(0.0, (min(lows) if lows else 0.0) - 0.01)
    return {
        "data": [
            bars("Before", before, before_err, "#9aa5ad"),
            bars("After", after, after_err, PALETTE["target"]),
        ],
        "layout": _layout(
            title,
            barmode="group",
            height=340,
            yaxis={"tickformat": ".1%", "range": [bottom, 1.0]},
            margin={"l": 60, "r": 20, "t": 40, "b": 120},
            legend={"orientation": "h", "y": 1.1},
        ),
    }
