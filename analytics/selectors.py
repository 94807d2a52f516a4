"""Reads that span models or feed pages and charts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import F, Sum

from analytics.intervals import wilson_interval
from analytics.models import (
    CampaignForecast,
    CurveFitRecord,
    EvaluationResult,
    EvaluationRun,
    GapReport,
)
from sites.models import Deployment

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accounts.models import Organization
    from campaigns.models import Campaign

PRODUCTION_WINDOW_DAYS = 28


@dataclass(frozen=True)
class Reliability:
    deployment_id: int
    success_rate: float | None
    low: float | None
    high: float | None
    interventions_per_day: float | None
    target: float
    target_interventions_per_day: float
    source: str  # "production (28 days)", "evaluation <label>", or "no data"
    observations: int

    @property
    def meets_target(self) -> bool:
        return self.success_rate is not None and self.success_rate >= self.target

    @property
    def gap_interventions_per_day(self) -> float | None:
        if self.interventions_per_day is None:
            return None
        return max(0.0, self.interventions_per_day - self.target_interventions_per_day)


def deployments_reliability(*, deployments: list[Deployment]) -> dict[int, Reliability]:
    """Reliability now per deployment: logged production when there is some, else its latest evaluation.

    Interventions per day are the observed failure rate times the deployment's cycles per day.
    A fixed number of queries whatever the number of deployments.
    """
    ids = [d.pk for d in deployments]
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH last AS (
                SELECT deployment_id, MAX(day) AS last_day FROM sites_productionlog
                WHERE deployment_id = ANY(%s) GROUP BY deployment_id
            )
            SELECT p.deployment_id, SUM(p.cycles), SUM(p.failures), COUNT(DISTINCT p.day)
            FROM sites_productionlog p JOIN last ON last.deployment_id = p.deployment_id
            WHERE p.day > last.last_day - %s
            GROUP BY p.deployment_id
            """,
            [ids, PRODUCTION_WINDOW_DAYS],
        )
        production = {row[0]: (int(row[1]), int(row[2]), int(row[3])) for row in cursor.fetchall()}
    latest_runs = {
        run.deployment_id: run
        for run in EvaluationRun.objects.filter(deployment_id__in=ids)
        .order_by("deployment_id", "-evaluated_on", "-id")
        .distinct("deployment_id")
    }
    eval_totals = {
        row["run_id"]: (row["trials"], row["successes"])
        for row in EvaluationResult.objects.filter(run__in=list(latest_runs.values()))
        .values("run_id")
        .annotate(trials=Sum("trials"), successes=Sum("successes"))
    }
    result = {}
    for dep in deployments:
        target_ipd = dep.cycles_per_day * (1 - dep.reliability_target)
        run = latest_runs.get(dep.pk)
        if dep.pk in production and production[dep.pk][0]:
            cycles, failures, days = production[dep.pk]
            successes, trials, source = (
                cycles - failures,
                cycles,
                f"production, last {days} day{'' if days == 1 else 's'}",
            )
        elif run is not None and eval_totals.get(run.pk, (0, 0))[0]:
            trials, successes = eval_totals[run.pk]
            source = f"evaluation: {run.label}"
        else:
            result[dep.pk] = Reliability(
                dep.pk, None, None, None, None, dep.reliability_target, target_ipd, "no data", 0
            )
            continue
        rate = successes / trials
        low, high = (float(x) for x in wilson_interval(successes, trials))
        result[dep.pk] = Reliability(
            dep.pk,
            rate,
            low,
            high,
            dep.cycles_per_day * (1 - rate),
            dep.reliability_target,
            target_ipd,
            source,
            trials,
        )
    return result


# ------------------------------------------------------------------ gap reports

GAP_SORTS = {
    "priority": "-priority",
    "interventions": "-interventions_per_day",
    "target": "-target_share",
    "training": "train_count",
    "failure": "-failure_rate",
    "rank": "rank",
}


class GapFilterInvalid(ValueError):
    """A cell-table filter that the report cannot answer; ``parameter`` names the input."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


def _shown(text: str, limit: int = 60) -> str:
    # repr escapes what cannot be printed (control characters, lone surrogates).
    return repr(text if len(text) <= limit else text[:limit] + "…")


def gap_value_filter(*, report: Any, value: str) -> tuple[str, str]:
    """Parse a ``dimension=value`` cell filter into slugs the report knows.

    Raises GapFilterInvalid unless the dimension is one of the report's and the value one of
    that dimension's values: the slugs become a JSON lookup, so nothing else may pass.
    """
    from sites.models import ConditionValue

    dims = [str(d) for d in report.dimension_slugs or []]
    if "=" not in value:
        raise GapFilterInvalid(
            "value",
            f"value must be dimension=value (e.g. {dims[0] if dims else 'lighting'}=dim); "
            f"got {_shown(value)}.",
        )
    dim, val = value.split("=", 1)
    if dim not in dims:
        raise GapFilterInvalid(
            "value",
            f"value: {_shown(dim)} is not a dimension of this report; expected one of: "
            f"{', '.join(dims) or '(none)'}.",
        )
    known = list(
        ConditionValue.objects.filter(
            dimension__organization_id=report.organization_id, dimension__slug=dim
        )
        .order_by("order", "slug")
        .values_list("slug", flat=True)
    )
    if val not in known:
        raise GapFilterInvalid(
            "value",
            f"value: {_shown(val)} is not a value of {dim}; expected one of: "
            f"{', '.join(known) or '(none)'}.",
        )
    return dim, val


def gap_cells(
    *,
    report: Any,
    coverage: str | None = None,
    search: str | None = None,
    value: str | None = None,
    sort: str = "rank",
) -> Any:
    """A report's cells, filtered and sorted for the cell table (paginate the result).

    Raises GapFilterInvalid when ``value`` is not ``dimension=value`` of the report.
    """
    from analytics.models import GapCell

    qs = GapCell.objects.filter(report=report)
    if coverage in {"0", "1", "2"}:
        qs = qs.filter(coverage=int(coverage))
    if search:
        qs = qs.filter(label__icontains=search)
    if value:
        dim, val = gap_value_filter(report=report, value=value)
        # Containment, not a key lookup: a slug may hold "__", which a lookup would split.
        qs = qs.filter(values__contains={dim: val})
    return qs.order_by(GAP_SORTS.get(sort, "rank"), "rank")


def gap_report_dimensions(*, report: Any) -> list[tuple[str, str]]:
    """The report's dimensions in its order, as (slug, name): pages show names, forms send slugs."""
    from sites.models import ConditionDimension

    slugs = list(report.dimension_slugs or [])
    names = dict(
        ConditionDimension.objects.filter(
            organization_id=report.organization_id, slug__in=slugs
        ).values_list("slug", "name")
    )
    return [(slug, names.get(slug, slug)) for slug in slugs]


def gap_heatmap(*, report: Any, x: str, y: str, metric: str) -> dict[str, Any]:
    """Aggregate a report's cells over two dimensions with one GROUP BY.

    Two different dimensions of the report (``y`` empty: one row of all cells, for a report
    over one dimension), or a figure that says so: one dimension against itself would fill
    only the diagonal.
    """
    if x == y:
        return {"data": [], "layout": {"title": {"text": "Pick two different dimensions"}}}
    return gap_heatmaps(views=[(report, x, y)], metrics=(metric,))[(report.pk, x, y)][metric]


HeatmapView = tuple[Any, str, str]  # (report, x dimension slug, y dimension slug)


def gap_heatmaps(
    *, views: list[HeatmapView], metrics: tuple[str, ...]
) -> dict[tuple[int, str, str], dict[str, dict[str, Any]]]:
    """Heatmaps of several reports, each over its own two dimensions, in every metric asked.

    Three queries whatever the number of reports (one GROUP BY over all their cells, the
    dimensions, their values): pages that show many reports stay at a fixed query count.
    Keyed by ``(report.pk, x, y)``, then metric.
    """
    from analytics import charts
    from sites.models import ConditionDimension, ConditionValue

    out: dict[tuple[int, str, str], dict[str, dict[str, Any]]] = {}
    if not views:
        return out
    rows: dict[tuple[int, str, str], list[tuple[Any, ...]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT v.report_id, v.x, v.y, c."values"->>v.x, c."values"->>v.y, SUM(c.target_share),
                   SUM(c.train_share), SUM(c.priority), SUM(c.interventions_per_day),
                   SUM(c.train_count)
            FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS v(report_id, x, y)
            JOIN analytics_gapcell c ON c.report_id = v.report_id
            GROUP BY 1, 2, 3, 4, 5
            """,
            [[r.pk for r, _, _ in views], [x for _, x, _ in views], [y for _, _, y in views]],
        )
        for report_id, x, y, *row in cursor.fetchall():
            rows.setdefault((report_id, x, y), []).append(tuple(row))
    dims = {
        (d.organization_id, d.slug): d
        for d in ConditionDimension.objects.filter(
            organization_id__in={r.organization_id for r, _, _ in views},
            slug__in={s for _, x, y in views for s in (x, y)},
        )
    }
    values: dict[int, list[tuple[str, str]]] = {}
    for dimension_id, slug, label in (
        ConditionValue.objects.filter(dimension__in=list(dims.values()))
        .order_by("dimension_id", "order")
        .values_list("dimension_id", "slug", "label")
    ):
        values.setdefault(dimension_id, []).append((slug, label))
    for report, x, y in views:
        dim_x = dims.get((report.organization_id, x))
        dim_y = dims.get((report.organization_id, y))
        figures: dict[str, dict[str, Any]] = {}
        for metric in metrics:
            if dim_x is None or (dim_y is None and y):
                figures[metric] = {
                    "data": [],
                    "layout": {"title": {"text": "Pick two dimensions of this report"}},
                }
                continue
            figures[metric] = _heatmap_figure(
                rows=rows.get((report.pk, x, y), []),
                x_values=values.get(dim_x.pk, []),
                # No second dimension (a report over one): a single row of all cells.
                y_values=list(values.get(dim_y.pk, [])) if dim_y else [(None, "all cells")],
                metric=metric if metric in charts.METRICS else "target_share",
                x_title=dim_x.name,
                y_title=dim_y.name if dim_y else "",
            )
        out[(report.pk, x, y)] = figures
    return out


def _heatmap_figure(
    *,
    rows: list[tuple[Any, ...]],
    x_values: list[tuple[str, str]],
    y_values: list[tuple[str | None, str]],
    metric: str,
    x_title: str = "",
    y_title: str = "",
) -> dict[str, Any]:
    """The heatmap figure of aggregated rows (x value, y value, target share, train share,
    priority, interventions per day, train count)."""
    from analytics import charts

    xi = {slug: i for i, (slug, _) in enumerate(x_values)}
    yi = {slug: i for i, (slug, _) in enumerate(y_values)}
    index = {"target_share": 2, "train_share": 3, "priority": 4, "interventions_per_day": 5}[metric]
    z: list[list[float | None]] = [[None] * len(xi) for _ in yi]
    hover = [[""] * len(xi) for _ in yi]
    for row in rows:
        if row[0] in xi and row[1] in yi:
            r, c = yi[row[1]], xi[row[0]]
            z[r][c] = float(row[index])
            hover[r][c] = (
                f"target {float(row[2]):.1%} · training {float(row[3]):.1%}"
                f" ({float(row[6]):,.0f} episode{'' if float(row[6]) == 1 else 's'})"
                f"<br>{float(row[5]):.1f} interventions/day · priority {float(row[4]):.4f}"
            )
    return charts.heatmap(
        x_labels=[label for _, label in x_values],
        y_labels=[label for _, label in y_values],
        z=z,
        metric=metric,
        hover=hover,  # type: ignore[arg-type]
        x_title=x_title,
        y_title=y_title,
    )


def gap_compare(*, earlier: Any, later: Any, limit: int = 15) -> dict[str, Any]:
    """What moved between two reports of a campaign: summary deltas and the cells that moved most."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT COALESCE(b.label, a.label), a.interventions_per_day, b.interventions_per_day,
                   a.train_count, b.train_count, a.failure_rate, b.failure_rate
            FROM (SELECT * FROM analytics_gapcell WHERE report_id = %s) a
            FULL OUTER JOIN (SELECT * FROM analytics_gapcell WHERE report_id = %s) b
              ON a.value_ids = b.value_ids
            ORDER BY ABS(COALESCE(b.interventions_per_day, 0) - COALESCE(a.interventions_per_day, 0)) DESC
            LIMIT %s
            """,
            [earlier.pk, later.pk, limit],
        )
        rows = cursor.fetchall()
    keys = [
        "interventions_per_day",
        "reliability_now",
        "uncovered_mass",
        "js_divergence",
        "training_episodes",
    ]
    deltas = {k: (earlier.summary.get(k), later.summary.get(k)) for k in keys}
    moved = [
        {
            "label": r[0],
            # None where a report has no such cell: shown as absent, not as zero.
            "before_ipd": r[1],
            "after_ipd": r[2],
            "before_n": r[3],
            "after_n": r[4],
            "before_f": r[5],
            "after_f": r[6],
        }
        for r in rows
    ]
    from analytics import charts

    figure = charts.comparison_bars(
        labels=[m["label"] for m in moved][::-1],
        before=[m["before_ipd"] for m in moved][::-1],
        after=[m["after_ipd"] for m in moved][::-1],
        title="Expected interventions per day: cells that moved most",
    )
    return {"deltas": deltas, "moved": moved, "figure": figure}


# ------------------------------------------------------------------ customer dashboard


def customer_dashboard(
    *, customer: Any, deployments: list[Any], campaigns: list[Any]
) -> dict[str, Any]:
    """Everything a customer dashboard shows, from precomputed reports; a fixed number of queries."""
    from analytics import charts
    from analytics.models import GapReport
    from campaigns.models import CollectionRound
    from sites.models import Site

    reliability = deployments_reliability(deployments=deployments)
    site_ids = {d.site_id for d in deployments}
    sites = list(Site.objects.filter(pk__in=site_ids).order_by("name"))
    dep_by_site: dict[int, list[Any]] = {}
    for d in deployments:
        dep_by_site.setdefault(d.site_id, []).append(d)
    site_points = [
        {
            "name": s.name,
            "lat": s.latitude,
            "lon": s.longitude,
            "kind": s.kind,
            "status": "; ".join(
                f"{d.name}: {reliability[d.pk].success_rate:.2%} vs {d.reliability_target:.2%}"
                if reliability[d.pk].success_rate is not None
                else f"{d.name}: no data"
                for d in dep_by_site.get(s.pk, [])
            ),
        }
        for s in sites
    ]
    campaign_ids = [c.pk for c in campaigns]
    # The trend needs two numbers of each report, not its whole summary: read those only,
    # then the latest report of each campaign in full.
    history = list(
        GapReport.objects.filter(campaign_id__in=campaign_ids, status=GapReport.Status.DONE)
        .order_by("campaign_id", "finished_at", "pk")
        .values(
            "pk",
            "campaign_id",
            "finished_at",
            "dimension_slugs",
            interventions=F("summary__interventions_per_day"),
            uncovered=F("summary__uncovered_mass"),
        )
    )
    latest_ids = {r["campaign_id"]: r["pk"] for r in history}
    latest: dict[int, Any] = {
        r.campaign_id: r
        for r in GapReport.objects.filter(pk__in=list(latest_ids.values())).only(
            "pk", "organization_id", "campaign_id", "finished_at", "summary", "dimension_slugs"
        )
    }
    trends: dict[int, list[dict[str, Any]]] = {}
    for h in history:
        # Only reports over the same dimensions as the latest are comparable over time.
        if h["dimension_slugs"] == latest[h["campaign_id"]].dimension_slugs:
            trends.setdefault(h["campaign_id"], []).append(
                {
                    "when": h["finished_at"].isoformat() if h["finished_at"] else "",
                    "interventions": h["interventions"],
                    "uncovered": h["uncovered"],
                }
            )
    heat_views = [
        (r, r.dimension_slugs[0], r.dimension_slugs[1])
        for r in latest.values()
        if len(r.dimension_slugs or []) >= 2
    ]
    heatmaps = gap_heatmaps(views=heat_views, metrics=("target_share", "train_share"))
    # Customers see published rounds only (the one place this rule lives for the dashboard
    # and its share links): a draft or planned round, its dates, targets and counts stay
    # with the operator until the plan is published.
    rounds = list(
        CollectionRound.objects.published()
        .filter(campaign_id__in=campaign_ids)
        .order_by("campaign_id", "number")
    )
    sections = []
    for c in campaigns:
        report = latest.get(c.pk)
        heat = training = None
        if report is not None and len(report.dimension_slugs or []) >= 2:
            figures = heatmaps[(report.pk, report.dimension_slugs[0], report.dimension_slugs[1])]
            heat, training = figures["target_share"], figures["train_share"]
        c_rounds = [r for r in rounds if r.campaign_id == c.pk]
        next_round = next(
            (r for r in reversed(c_rounds) if r.status in ("scheduled", "collecting")),
            None,
        )
        sections.append(
            {
                "campaign": c,
                "report": report,
                "top_gaps": (report.summary.get("top_gaps", [])[:5] if report else []),
                "heatmap": heat,
                "training_heatmap": training,
                "trend": charts.gap_trend(series=trends[c.pk])
                if len(trends.get(c.pk, [])) > 1
                else None,
                "ids": {"heat": f"heat-{c.pk}", "train": f"train-{c.pk}", "trend": f"trend-{c.pk}"},
                "rounds": c_rounds,
                "next_round": next_round,
            }
        )
    measured = [
        r.interventions_per_day for r in reliability.values() if r.interventions_per_day is not None
    ]
    return {
        "reliability": reliability,
        "map": charts.site_map(sites=site_points),
        "sections": sections,
        # None, not 0, when no deployment is measured: zero interventions would read as perfect.
        "total_ipd": sum(measured) if measured else None,
        "measured": len(measured),
        "target_ipd": sum(r.target_interventions_per_day for r in reliability.values()),
    }


def gap_report_latest(*, campaign: Campaign) -> GapReport | None:
    """Return the campaign's latest finished report."""
    return (
        GapReport.objects.filter(campaign=campaign, status=GapReport.Status.DONE)
        .order_by("-finished_at")
        .first()
    )


def latest_curves(*, campaign: Campaign, dimension_slugs: list[str]) -> CurveFitRecord | None:
    """The latest refit over the same dimensions (what the gap engine and planner use)."""
    return (
        CurveFitRecord.objects.filter(
            campaign=campaign, dimension_slugs=dimension_slugs, source="fitted"
        )
        .order_by("-created_at")
        .first()
    )


def campaign_forecast_find(
    *, campaign: Campaign, parameters: Mapping[str, Any]
) -> CampaignForecast | None:
    """The stored forecast of a campaign for these parameters (with its job), if any:
    ``parameters`` are its fields (``ForecastParameters.fields()``)."""
    return (
        CampaignForecast.objects.filter(campaign=campaign, **parameters)
        .select_related("job")
        .first()
    )


PACE_FORECASTS = 5
"""How many of an organization's latest forecasts time the next one."""

HISTORY_ROUNDS = 3.0
"""How a forecast's round costs more the more rounds came before it: its steered refit reads
every evaluation so far. Measured on 2026-12-07 in one world of the default family: 1.45,
3.37 and 5.80 s a round over rounds 1-20, 21-40 and 41-60, about in proportion to the
round's number plus three."""


def forecast_work(rounds: int) -> float:
    """A forecast's work in one world, in units of a first round's less its fixed part: the
    sum over its rounds of the round's number plus :data:`HISTORY_ROUNDS`."""
    return rounds * (rounds + 1) / 2 + HISTORY_ROUNDS * rounds


@dataclass(frozen=True)
class ForecastPace:
    """How fast an organization's latest forecasts ran in the worker: ``seconds_per_unit``
    of :func:`forecast_work` in one world, over the ``forecasts`` timed."""

    forecasts: int
    seconds_per_unit: float

    def seconds(self, *, rounds: int, worlds: int) -> float:
        """How long a forecast of ``rounds`` rounds in ``worlds`` worlds would take."""
        return self.seconds_per_unit * forecast_work(rounds) * worlds


def forecast_pace(*, organization: Organization) -> ForecastPace | None:
    """The pace of the organization's latest :data:`PACE_FORECASTS` forecasts that ran to
    the end (their jobs' time from start to finish over their work, :func:`forecast_work`
    times their worlds), or ``None`` before any has: what a manager is told before starting
    a long one."""
    timed = list(
        CampaignForecast.objects.filter(
            campaign__organization=organization,
            computed_at__isnull=False,
            job__status="succeeded",
            job__started_at__isnull=False,
            job__finished_at__isnull=False,
        )
        .order_by("-computed_at", "-pk")
        .values_list("rounds", "worlds", "job__started_at", "job__finished_at")[:PACE_FORECASTS]
    )
    work, seconds = 0.0, 0.0
    for rounds, worlds, start, end in timed:
        if start is not None and end is not None:  # the filter says so; the types do not
            work += forecast_work(rounds) * max(worlds, 1)
            seconds += max((end - start).total_seconds(), 0.0)
    if work <= 0:
        return None
    return ForecastPace(forecasts=len(timed), seconds_per_unit=seconds / work)
