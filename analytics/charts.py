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


# Units of each heatmap metric, for its colour bar.
METRIC_UNITS = {
    "target_share": "share of production cycles",
    "train_share": "share of training episodes",
    "priority": "interventions per day avoided per episode",
    "interventions_per_day": "interventions per day",
}
SHARE_METRICS = frozenset({"target_share", "train_share"})


# A legend in one row between the title and the plot, where it hides no bar and no tick.
LEGEND_ABOVE = {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"}


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": plot_text(title), "font": {"size": 14}},
        # Small fixed margins: every axis sets ``automargin`` so plotly grows them to fit
        # its tick labels and titles instead of clipping them; the top one leaves the title
        # a row of its own above a legend.
        "margin": {"l": 40, "r": 20, "t": 70 if "legend" in extra else 40, "b": 40},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "font": {"family": "system-ui, sans-serif", "size": 12},
    }
    layout.update(extra)
    return layout


def tick_label(label: Any, *, width: int = 18, lines: int = 2) -> str:
    """Fit a label into at most ``lines`` lines of about ``width`` characters, for a tick.

    Wraps on spaces, cuts what does not fit with an ellipsis and escapes the text (the
    ``<br>`` between lines is the only markup). The full label stays the category's value,
    so hovers show it whole.
    """
    words = ("" if label is None else str(label)).split()
    rows: list[str] = []
    for word in words:
        if rows and len(rows[-1]) + 1 + len(word) <= width:
            rows[-1] = f"{rows[-1]} {word}"
        else:
            rows.append(word)
    cut = len(rows) > lines
    rows = rows[:lines]
    if rows and cut:
        rows[-1] = rows[-1][: width - 1].rstrip() + "…"
    rows = [r if len(r) <= width + 2 else r[: width - 1].rstrip() + "…" for r in rows]
    return "<br>".join(plot_text(r) for r in rows)


def _category_axis(
    labels: list[str], *, title: str, width: int, lines: int = 2, **extra: Any
) -> dict[str, Any]:
    """An axis of named categories: full labels as values, wrapped and shortened tick text."""
    axis: dict[str, Any] = {
        "title": {"text": plot_text(title)},
        "automargin": True,
        "type": "category",
        "tickmode": "array",
        "tickvals": plot_texts(labels),
        "ticktext": [tick_label(v, width=width, lines=lines) for v in labels],
    }
    axis.update(extra)
    return axis


def _value_axis(title: str, **extra: Any) -> dict[str, Any]:
    axis: dict[str, Any] = {"title": {"text": plot_text(title)}, "automargin": True}
    axis.update(extra)
    return axis


def _lines(labels: list[str], *, width: int, lines: int) -> int:
    """How many lines the tallest tick label of ``labels`` takes."""
    return max(
        (tick_label(v, width=width, lines=lines).count("<br>") + 1 for v in labels), default=1
    )


def heatmap(
    *,
    x_labels: list[str],
    y_labels: list[str],
    z: list[list[float | None]],
    metric: str,
    hover: list[list[str]] | None = None,
    x_title: str = "",
    y_title: str = "",
) -> dict[str, Any]:
    """Heatmap of a metric over two condition dimensions (``x_title``, ``y_title``: their names).

    ``hover`` is trusted markup (numbers and ``<br>``) built by the caller; the labels are
    escaped here. The figure grows with the number of rows, so each stays readable.
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
        "colorbar": {
            "title": {"text": plot_text(METRIC_UNITS.get(metric, metric)), "side": "right"},
            **({"tickformat": ".0%"} if metric in SHARE_METRICS else {}),
        },
    }
    if hover is not None:
        trace["text"] = hover
        trace["hovertemplate"] = "%{y} × %{x}<br>%{text}<extra></extra>"
    else:
        trace["hovertemplate"] = "%{y} × %{x}: %{z}<extra></extra>"
    x_lines = _lines(x_labels, width=14, lines=3)
    return {
        "data": [trace],
        "layout": _layout(
            METRICS.get(metric, metric),
            height=max(320, 140 + 36 * len(y_labels) + 14 * x_lines),
            xaxis=_category_axis(x_labels, title=x_title or "condition", width=14, lines=3),
            yaxis=_category_axis(
                y_labels, title=y_title or "condition", width=24, autorange="reversed"
            ),
        ),
    }


def dimension_bars(
    *, dimension: str, values: list[str], target: list[float], training: list[float], psi: float
) -> dict[str, Any]:
    """Target vs training share per value of one dimension, one row of bars per value."""
    shown = plot_texts(values)
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "name": "Target",
                "y": shown,
                "x": target,
                "marker": {"color": PALETTE["target"]},
                "hovertemplate": "%{y}: %{x:.1%} of production<extra></extra>",
            },
            {
                "type": "bar",
                "orientation": "h",
                "name": "Training",
                "y": shown,
                "x": training,
                "marker": {"color": PALETTE["training"]},
                "hovertemplate": "%{y}: %{x:.1%} of training<extra></extra>",
            },
        ],
        "layout": _layout(
            f"{dimension} (PSI {psi:.2f})",
            barmode="group",
            height=max(240, 110 + 44 * len(values)),
            xaxis=_value_axis("share of production cycles or training episodes", tickformat=".0%"),
            yaxis=_category_axis(values, title=dimension, width=20, autorange="reversed"),
            legend=LEGEND_ABOVE,
        ),
    }


def comparison_bars(
    *, labels: list[str], before: list[float | None], after: list[float | None], title: str
) -> dict[str, Any]:
    """Before/after of a metric for a few cells (what moved between two reports).

    A ``None`` is a cell one of the reports did not have: no bar, not a bar at zero.
    """
    shown = plot_texts(labels)
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "name": "Earlier",
                "y": shown,
                "x": before,
                "marker": {"color": "#9aa5ad"},
                "hovertemplate": "%{y}<br>earlier: %{x:.2f} interventions per day<extra></extra>",
            },
            {
                "type": "bar",
                "orientation": "h",
                "name": "Later",
                "y": shown,
                "x": after,
                "marker": {"color": PALETTE["target"]},
                "hovertemplate": "%{y}<br>later: %{x:.2f} interventions per day<extra></extra>",
            },
        ],
        "layout": _layout(
            title,
            barmode="group",
            height=max(260, 110 + 40 * len(labels)),
            xaxis=_value_axis("interventions per day", rangemode="tozero"),
            yaxis=_category_axis(labels, title="condition cell", width=32),
            legend=LEGEND_ABOVE,
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
                "automargin": True,
                "showgrid": True,
                "gridcolor": "#eef2f5",
                "zeroline": False,
            },
            yaxis={
                "range": [min(lats) - pad, max(lats) + pad],
                "title": {"text": "latitude °N"},
                "automargin": True,
                "showgrid": True,
                "gridcolor": "#eef2f5",
                "zeroline": False,
                "scaleanchor": "x",
                "scaleratio": 1.6,
            },
            legend=LEGEND_ABOVE,
        ),
    }


def gap_trend(*, series: list[dict[str, Any]]) -> dict[str, Any]:
    """Interventions per day and uncovered target mass over successive gap reports."""
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "Interventions per day",
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
            xaxis=_value_axis("report finished", type="date"),
            yaxis=_value_axis("interventions per day", rangemode="tozero"),
            yaxis2={
                "title": {"text": "target mass uncovered"},
                "automargin": True,
                "overlaying": "y",
                "side": "right",
                "tickformat": ".0%",
                "rangemode": "tozero",
            },
            legend=LEGEND_ABOVE,
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
    category: str = "site or condition group",
) -> dict[str, Any]:
    """Success before and after a round per cell or site, with 95% intervals as error bars.

    ``category`` names what the bars are per (the x axis title): "site", "condition group".
    """

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
            height=300 + 16 * _lines(labels, width=16, lines=3),
            xaxis=_category_axis(labels, title=category, width=16, lines=3),
            yaxis=_value_axis("success rate", tickformat=".1%", range=[bottom, 1.0]),
            legend=LEGEND_ABOVE,
        ),
    }


def forecast_lines(*, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Interventions per day by round, one line per strategy of a forecast (log scale)."""
    rounds = max((len(r["interventions_per_day"]) - 1 for r in runs.values()), default=0)
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": name,
                "x": list(range(len(r["interventions_per_day"]))),
                "y": r["interventions_per_day"],
            }
            for name, r in runs.items()
        ],
        "layout": _layout(
            "Interventions per day by round (synthetic world)",
            # Whole rounds: a tick on each while they are few, never at half a round.
            xaxis={"title": {"text": "round"}, "automargin": True, "tickformat": "d"}
            | ({"dtick": 1} if rounds <= 15 else {}),
            yaxis={"title": {"text": "interventions per day"}, "type": "log", "automargin": True},
            height=380,
        ),
    }


def interventions_timeline(
    *,
    days: list[str],
    interventions: list[float],
    low: list[float],
    high: list[float],
    rate: list[float | None],
    level: float = 0.95,
    since: str | None = None,
) -> dict[str, Any]:
    """Interventions per day with their exact Poisson interval as a band; ``since`` marks a shift.

    ``rate`` (per 1,000 cycles, None on a day without cycles) shows in the hover.
    """
    band = f"{level:.0%} interval"
    figure: dict[str, Any] = {
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": band,
                "x": days + days[::-1],
                "y": high + low[::-1],
                "fill": "toself",
                "fillcolor": "rgba(180, 35, 24, 0.15)",
                "line": {"width": 0},
                "hoverinfo": "skip",
            },
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "Interventions per day",
                "x": days,
                "y": interventions,
                "customdata": [None if r is None else round(r, 3) for r in rate],
                "marker": {"color": PALETTE["priority"]},
                "hovertemplate": "%{x}: %{y:.0f} interventions<br>%{customdata} per 1,000 "
                "cycles<extra></extra>",
            },
        ],
        "layout": _layout(
            "Interventions per day",
            height=340,
            xaxis=_value_axis("site-local day", type="date"),
            yaxis=_value_axis("interventions per day", rangemode="tozero"),
            legend=LEGEND_ABOVE,
        ),
    }
    if since is not None:
        figure["layout"]["shapes"] = [
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": since,
                "x1": since,
                "y0": 0,
                "y1": 1,
                "line": {"color": "#333", "dash": "dot", "width": 1},
            }
        ]
    return figure


def interventions_by_mode(
    *, days: list[str], series: list[tuple[str, list[float]]]
) -> dict[str, Any]:
    """Interventions per day stacked by failure mode (the most frequent first)."""
    return {
        "data": [
            {
                "type": "bar",
                "name": plot_text(label),
                "x": days,
                "y": counts,
                "hovertemplate": "%{x}: %{y:.0f}<extra>" + plot_text(label) + "</extra>",
            }
            for label, counts in series
        ],
        "layout": _layout(
            "Interventions per day by failure mode",
            barmode="stack",
            height=360,
            xaxis=_value_axis("site-local day", type="date"),
            yaxis=_value_axis("interventions per day", rangemode="tozero"),
            legend=LEGEND_ABOVE,
        ),
    }


def rate_bars(
    *,
    labels: list[str],
    rate: list[float | None],
    low: list[float | None],
    high: list[float | None],
    title: str,
    category: str,
) -> dict[str, Any]:
    """Interventions per 1,000 cycles per category with 95% intervals as error bars."""
    value = [r if r is not None else 0.0 for r in rate]
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "y": plot_texts(labels),
                "x": value,
                "marker": {"color": PALETTE["target"]},
                "error_x": {
                    "type": "data",
                    "symmetric": False,
                    "array": [
                        (h - v) if h is not None else 0.0 for h, v in zip(high, value, strict=True)
                    ],
                    "arrayminus": [
                        (v - lo) if lo is not None else 0.0
                        for lo, v in zip(low, value, strict=True)
                    ],
                },
                "hovertemplate": "%{y}: %{x:.2f} per 1,000 cycles<extra></extra>",
            }
        ],
        "layout": _layout(
            title,
            height=max(220, 100 + 30 * len(labels)),
            xaxis=_value_axis("interventions per 1,000 cycles", rangemode="tozero"),
            yaxis=_category_axis(labels, title=category, width=28, autorange="reversed"),
        ),
    }
