"""Reads over the training-data inventory: totals and breakdowns of a dataset's episodes.

Every count is ``SUM(episode_count)`` (a row may stand for many episodes). Breakdowns by
condition value group the dataset's episodes by ``condition_set_id`` first (one narrow
column) and only then expand the few distinct sets into their values.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, QuerySet, Sum

from accounts.models import Job
from labeling.capture.spec import CaptureSpec
from labeling.capture.streams import StreamMap
from labeling.models import Dataset, Episode, InventoryImport
from sites.models import Embodiment, Site


@dataclass
class ValueCount:
    value_id: int
    label: str
    episodes: int


@dataclass
class DimensionBreakdown:
    dimension_id: int
    name: str
    values: list[ValueCount] = field(default_factory=list)
    not_recorded: int = 0

    @property
    def recorded(self) -> int:
        return sum(v.episodes for v in self.values)


@dataclass
class SiteCount:
    site_id: int | None
    name: str
    episodes: int
    frames: int


@dataclass
class DatasetTotals:
    rows: int
    episodes: int
    frames: int
    duration_s: float


@dataclass
class DatasetCounts:
    """What one scan of a dataset's episodes gives the breakdown (or a loader, as it writes)."""

    totals: DatasetTotals
    per_set: dict[int, int]  # condition set id -> episodes
    per_site: dict[int | None, tuple[int, int]]  # site id -> (episodes, frames)


@dataclass
class DatasetBreakdown:
    totals: DatasetTotals
    dimensions: list[DimensionBreakdown]
    sites: list[SiteCount]


def dataset_counts(*, dataset_id: int) -> DatasetCounts:
    """Totals and episodes per condition set and per site, in one scan (GROUPING SETS)."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT GROUPING(condition_set_id, site_id), condition_set_id, site_id, count(*), "
            "coalesce(sum(episode_count), 0), coalesce(sum(frames), 0), "
            "coalesce(sum(duration_s), 0) FROM labeling_episode WHERE dataset_id = %s "
            "GROUP BY GROUPING SETS ((condition_set_id), (site_id), ())",
            [dataset_id],
        )
        groups = cur.fetchall()
    counts = DatasetCounts(DatasetTotals(0, 0, 0, 0.0), {}, {})
    for grouping, cs, site, rows, episodes, frames, seconds in groups:
        if grouping == 3:
            counts.totals = DatasetTotals(int(rows), int(episodes), int(frames), float(seconds))
        elif grouping == 1 and cs is not None:
            counts.per_set[cs] = int(episodes)
        elif grouping == 2:
            counts.per_site[site] = (int(episodes), int(frames))
    return counts


def dataset_breakdown(*, dataset_id: int, counts: DatasetCounts | None = None) -> DatasetBreakdown:
    """Totals, episodes per condition value (per dimension) and per site.

    The episodes are grouped by condition set and by site (:func:`dataset_counts`, unless
    the caller already has those counts); only the few distinct condition sets are then
    expanded into their values.
    """
    if counts is None:
        counts = dataset_counts(dataset_id=dataset_id)
    totals, per_set, per_site = counts.totals, counts.per_set, counts.per_site
    with connection.cursor() as cur:
        cur.execute(
            """
            SELECT d.id, d.name, cv.id, cv.label, coalesce(pv.n, 0)
            FROM labeling_dataset ds
            JOIN sites_conditiondimension d ON d.organization_id = ds.organization_id
            JOIN sites_conditionvalue cv ON cv.dimension_id = d.id
            LEFT JOIN (
                SELECT v.value_id, sum(p.n) AS n
                FROM unnest(%s::bigint[], %s::bigint[]) AS p(cs, n)
                JOIN sites_conditionset c ON c.id = p.cs
                CROSS JOIN LATERAL unnest(c.value_ids) AS v(value_id)
                GROUP BY v.value_id
            ) pv ON pv.value_id = cv.id
            WHERE ds.id = %s
            ORDER BY d."order", d.name, cv."order", cv.label
            """,
            [list(per_set), list(per_set.values()), dataset_id],
        )
        value_rows = cur.fetchall()
        names = dict(
            Site.objects.filter(pk__in=[k for k in per_site if k is not None]).values_list(
                "pk", "name"
            )
        )
    dims: dict[int, DimensionBreakdown] = {}
    for dim_id, dim_name, value_id, label, n in value_rows:
        entry = dims.setdefault(dim_id, DimensionBreakdown(dimension_id=dim_id, name=dim_name))
        if n:
            entry.values.append(ValueCount(value_id=value_id, label=label, episodes=int(n)))
    for entry in dims.values():
        entry.not_recorded = totals.episodes - entry.recorded
    sites = sorted(
        (
            SiteCount(
                site_id=site_id,
                name=names.get(site_id, "(no site)") if site_id else "(no site)",
                episodes=episodes,
                frames=frames,
            )
            for site_id, (episodes, frames) in per_site.items()
        ),
        key=lambda s: (-s.episodes, s.name),
    )
    return DatasetBreakdown(totals=totals, dimensions=list(dims.values()), sites=sites)


def datasets_with_totals(queryset: QuerySet[Dataset]) -> QuerySet[Dataset]:
    """Annotate datasets with their rows, episodes and frames (one grouped query)."""
    return queryset.select_related("embodiment").annotate(
        n_rows=Count("episodes"),
        n_episodes=Sum("episodes__episode_count"),
        n_frames=Sum("episodes__frames"),
    )


# --- maintained coverage counts --------------------------------------------------------

COVERAGE_KEY = ("organization_id", "dataset_id", "embodiment_id", "task_id", "condition_set_id")
CoverageKey = tuple[int, int, int | None, int | None, int]


@dataclass(frozen=True)
class CoverageDifference:
    """A key whose maintained count differs from the episodes' (0, 0 where one has no row)."""

    key: CoverageKey
    maintained: tuple[int, int]  # (episodes, rows)
    actual: tuple[int, int]

    def __str__(self) -> str:
        org, dataset, embodiment, task, condition_set = self.key
        return (
            f"organization {org} dataset {dataset} embodiment {embodiment} task {task} "
            f"condition set {condition_set}: maintained {self.maintained[0]} episodes in "
            f"{self.maintained[1]} rows, GROUP BY {self.actual[0]} in {self.actual[1]}"
        )


def coverage_grouped(*, organization_id: int | None = None) -> QuerySet[Episode, tuple[Any, ...]]:
    """Countable episodes and rows per coverage key, by a GROUP BY over the episodes."""
    episodes = Episode.objects.countable().filter(condition_set__isnull=False)
    if organization_id is not None:
        episodes = episodes.filter(organization_id=organization_id)
    return (
        episodes.order_by()
        .values_list(*COVERAGE_KEY)
        .annotate(n_episodes=Sum("episode_count"), n_rows=Count("id"))
    )


def coverage_differences(*, organization_id: int | None = None) -> list[CoverageDifference]:
    """Compare the maintained coverage counts with a fresh GROUP BY; return every difference.

    One statement reads both sides (one snapshot), so concurrent writes cannot show up as a
    difference. Costs a scan of the organization's episodes (all of them without one).
    """
    grouped, params = coverage_grouped(organization_id=organization_id).query.sql_with_params()
    keys = ", ".join(COVERAGE_KEY)
    # NULL embodiment/task ids join as 0 (ids start at 1).
    on = " AND ".join(f"COALESCE(g.{k}, 0) = COALESCE(c.{k}, 0)" for k in COVERAGE_KEY)
    picked = ", ".join(f"COALESCE(g.{k}, c.{k})" for k in COVERAGE_KEY)
    scope = "WHERE organization_id = %s" if organization_id is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT {picked}, COALESCE(c.episodes, 0), COALESCE(c.rows, 0),
                   COALESCE(g.episodes, 0), COALESCE(g.n, 0)
            FROM ({grouped}) AS g ({keys}, episodes, n)
            FULL JOIN (SELECT * FROM labeling_coveragecount {scope}) c ON {on}
            WHERE c.id IS NULL OR g.n IS NULL OR c.episodes <> g.episodes OR c.rows <> g.n
            ORDER BY 1, 2, 3 NULLS FIRST, 4 NULLS FIRST, 5
            """,
            [*params, *([organization_id] if organization_id is not None else [])],
        )
        return [
            CoverageDifference(
                key=tuple(r[:5]),  # type: ignore[arg-type]
                maintained=(int(r[5]), int(r[6])),
                actual=(int(r[7]), int(r[8])),
            )
            for r in cursor.fetchall()
        ]


# --- what the Django-free capture code reads of an embodiment ---------------------------


def embodiment_description(embodiment: Embodiment) -> dict[str, Any]:
    """The embodiment as the Django-free capture code reads it (one description for the
    capture spec and the stream map)."""
    return {
        "slug": embodiment.slug,
        "control_rate_hz": embodiment.control_rate_hz,
        "calibration_threshold": embodiment.calibration_threshold,
        "state_topic": embodiment.state_topic,
        "action_topic": embodiment.action_topic,
        "action_source": embodiment.action_source,
        "dataset_fps": embodiment.dataset_fps,
        "gap_policy": embodiment.gap_policy,
        "cameras": [
            {
                "name": c.name,
                "fps": c.fps,
                "topic": c.topic,
                "clock_offset_ms": c.clock_offset_ms,
                "width": c.width,
                "height": c.height,
            }
            for c in embodiment.cameras.all()
        ],
        "action_dimensions": [
            {"name": a.name, "unit": a.unit, "min": a.min_value, "max": a.max_value}
            for a in embodiment.action_dimensions.all()
        ],
    }


def capture_spec_for(*, embodiment: Embodiment, **tolerances: Any) -> CaptureSpec:
    """Return the capture spec an embodiment's recordings must meet (cameras, joints, rates)."""
    return CaptureSpec.from_embodiment(embodiment_description(embodiment), **tolerances)


def stream_map_for(*, embodiment: Embodiment) -> StreamMap:
    """Which recorded streams are the embodiment's state, action and cameras, and how
    conversion puts them on one clock. Raises StreamMappingError (no action dimensions)."""
    return StreamMap.from_embodiment(embodiment_description(embodiment))


def stream_map_of(embodiment: Embodiment, *, fps: float | None = None) -> StreamMap:
    """The embodiment's stream map with the dataset fps fixed (as an export fixes it)."""
    stream_map = stream_map_for(embodiment=embodiment)
    rate = (
        fps
        or stream_map.fps
        or max((c.fps or 0.0 for c in stream_map.cameras), default=0.0)
        or embodiment.control_rate_hz
    )
    return stream_map.with_options(fps=rate)


def conversion_codec() -> str:
    """The video codec of stored conversions (the player's and the export's)."""
    return str(getattr(settings, "FIELDCRAFT_EXPORT_CODEC", "libsvtav1"))


STAGED_PACE_IMPORTS = 5
"""How many of an organization's latest staged imports time the phases of the next."""


@dataclass(frozen=True)
class StagedImportPace:
    """How long a staged import's single-statement phases took, as multiples of its staging
    (reading the file into the staging table, the one phase its rows count): the median
    over the organization's latest staged imports that succeeded. Multiples of the staging,
    not seconds a row, so that a loaded machine, slow for every phase alike, is timed as
    loaded."""

    after_staging: float  # checking, writing and committing, over staging
    after_checking: float  # writing and committing, over staging
    imports: int  # how many imports it was measured on


def staged_import_pace(*, organization_id: int) -> StagedImportPace | None:
    """The pace of the organization's latest staged imports (:class:`StagedImportPace`);
    ``None`` when none of them succeeded yet (the first staged import cannot tell)."""
    after_staging: list[float] = []
    after_checking: list[float] = []
    summaries = (
        InventoryImport.objects.filter(
            organization_id=organization_id,
            job__status=Job.Status.SUCCEEDED,
            summary__phases__has_key="check",
        )
        .order_by("-created_at")
        .values_list("summary__phases", flat=True)[:STAGED_PACE_IMPORTS]
    )
    for phases in summaries:
        stage = float(phases.get("stage") or 0.0)
        if stage <= 0:
            continue
        writing = sum(float(phases.get(k) or 0.0) for k in ("upsert", "write", "commit"))
        after_checking.append(writing / stage)
        after_staging.append((float(phases.get("check") or 0.0) + writing) / stage)
    if not after_staging:
        return None
    return StagedImportPace(
        after_staging=statistics.median(after_staging),
        after_checking=statistics.median(after_checking),
        imports=len(after_staging),
    )
