"""Build the gap engine's inputs from the database with SQL aggregation.

Every count here is a GROUP BY in PostgreSQL over narrow integer columns (training coverage
over the maintained per-cell counts, not the episodes); the only Python loops run over
distinct condition sets (thousands), never over episodes (millions).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from django.db import connection

from accounts.beside import Beside
from analytics.steering.transfer import CellStructure
from campaigns.models import Campaign
from sites.models import ConditionDimension, ConditionSample, ConditionShare, Deployment

# A deployment's target comes from its production logs when they hold at least this many
# cycles over at least this many days; otherwise from its surveyed profile.
MIN_PRODUCTION_CYCLES = 10_000
MIN_PRODUCTION_DAYS = 7
PRODUCTION_WINDOW_DAYS = 90
UNKNOWN = -1


@dataclass
class DimensionSpace:
    """The chosen dimensions and how value ids map to (dimension index, code)."""

    dimensions: list[ConditionDimension]
    values: list[list[Any]]  # per dimension, its ConditionValue rows in order
    value_pos: dict[int, tuple[int, int]]  # value id -> (dimension index, code)

    @classmethod
    def build(cls, *, organization_id: int, slugs: list[str] | None) -> DimensionSpace:
        qs = ConditionDimension.objects.filter(organization_id=organization_id).prefetch_related(
            "values"
        )
        dims = list(qs.order_by("order", "name"))
        if slugs:
            by_slug = {d.slug: d for d in dims}
            unknown = [s for s in slugs if s not in by_slug]
            if unknown:
                raise ValueError(
                    f"unknown condition dimension(s) {', '.join(unknown)}; known: {', '.join(by_slug)}"
                )
            dims = [by_slug[s] for s in slugs]
        if not dims:
            raise ValueError("the organization has no condition dimensions to score")
        values = [sorted(d.values.all(), key=lambda v: (v.order, v.label)) for d in dims]
        pos = {v.pk: (i, j) for i, vs in enumerate(values) for j, v in enumerate(vs)}
        return cls(dims, values, pos)

    def project(self, value_ids: list[int]) -> tuple[int, ...]:
        codes = [UNKNOWN] * len(self.dimensions)
        for vid in value_ids:
            p = self.value_pos.get(vid)
            if p is not None:
                codes[p[0]] = p[1]
        return tuple(codes)

    def __post_init__(self) -> None:
        # Lookup tables indexed by code (UNKNOWN = -1 reads the last entry): thousands of
        # cells are labelled and stored per report, so these avoid attribute lookups per cell.
        self._labels = [
            [v.label for v in vs] + [f"{d.name.lower()} unrecorded"]
            for d, vs in zip(self.dimensions, self.values, strict=True)
        ]
        self._pks = [[v.pk for v in vs] + [0] for vs in self.values]
        self._slugs = [[v.slug for v in vs] + [""] for vs in self.values]
        self._json_keys = [json.dumps(d.slug) for d in self.dimensions]

    def label(self, key: tuple[int, ...]) -> str:
        labels = self._labels
        return " · ".join([labels[i][c] for i, c in enumerate(key)])

    def value_ids(self, key: tuple[int, ...]) -> list[int]:
        pks = self._pks
        return [pks[i][c] for i, c in enumerate(key) if c != UNKNOWN]

    def slugs(self, key: tuple[int, ...]) -> dict[str, str]:
        return {
            d.slug: self._slugs[i][c]
            for i, (d, c) in enumerate(zip(self.dimensions, key, strict=True))
        }

    def structure(self, keys: list[tuple[int, ...]]) -> CellStructure:
        """The cells' conditions for the transfer model: dimension names, value labels, and
        each key's codes (an unrecorded value states nothing, as the model expects)."""
        return CellStructure(
            dimensions=tuple(d.name for d in self.dimensions),
            values=tuple(tuple(v.label for v in vs) for vs in self.values),
            codes=np.array(keys, dtype=np.int64).reshape(len(keys), len(self.dimensions)),
        )

    # Whole columns at once, for storing thousands of cells: ``codes`` is (cells × dimensions).

    def value_id_literals(self, codes: np.ndarray) -> pa.Array:
        """Each row's value ids, sorted, as PostgreSQL array literals (``{3,17,40}``); the
        same ids as :meth:`value_ids`."""
        missing = np.iinfo(np.int64).max
        ids = np.empty(codes.shape, dtype=np.int64)
        for i, pks in enumerate(self._pks):
            ids[:, i] = np.asarray(pks, dtype=np.int64)[codes[:, i]]  # UNKNOWN reads the last
        ids[codes == UNKNOWN] = missing
        ids.sort(axis=1)
        texts = [
            pc.cast(pa.array(ids[:, i], mask=ids[:, i] == missing), pa.string())
            for i in range(len(self._pks))
        ]
        joined = pc.binary_join_element_wise(*texts, ",", null_handling="skip")
        return pc.binary_join_element_wise("{", joined, "}", "")

    def slugs_json_texts(self, codes: np.ndarray) -> pa.Array:
        """Each row's :meth:`slugs` as JSON text (slugs need no JSON escaping)."""
        parts = [
            pc.take(
                pa.array([f'{self._json_keys[i]}: "{slug}"' for slug in self._slugs[i]]),
                pa.array(np.where(codes[:, i] == UNKNOWN, len(self._slugs[i]) - 1, codes[:, i])),
            )
            for i in range(len(self._slugs))
        ]
        return pc.binary_join_element_wise("{", pc.binary_join_element_wise(*parts, ", "), "}", "")


@dataclass
class DeploymentTarget:
    deployment: Deployment
    source: str  # "production" | "survey"
    observations: int
    shares: dict[tuple[int, ...], float]
    notes: list[str] = field(default_factory=list)


@dataclass
class CampaignInputs:
    space: DimensionSpace
    keys: list[tuple[int, ...]]
    target_share: np.ndarray
    train_count: np.ndarray
    trials: np.ndarray
    successes: np.ndarray
    top_deployment: list[str]
    cycles_per_day: float
    reliability_target: float
    targets: list[DeploymentTarget]
    train_total_raw: float
    evidence: dict[str, Any]


def project_sets(space: DimensionSpace, set_ids: set[int]) -> dict[int, tuple[int, ...]]:
    """Each condition set's cell in ``space`` (one query)."""
    if not set_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, value_ids FROM sites_conditionset WHERE id = ANY(%s)", [list(set_ids)]
        )
        return {pk: space.project(values) for pk, values in cursor.fetchall()}


def deployment_target(*, deployment: Deployment, space: DimensionSpace) -> DeploymentTarget:
    """Return the deployment's target distribution over cells and where it came from."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH last AS (SELECT MAX(day) AS d FROM sites_productionlog WHERE deployment_id = %s)
            SELECT condition_set_id, SUM(cycles), COUNT(DISTINCT day)
            FROM sites_productionlog, last
            WHERE deployment_id = %s AND day > last.d - %s
            GROUP BY condition_set_id
            """,
            [deployment.pk, deployment.pk, PRODUCTION_WINDOW_DAYS],
        )
        rows = cursor.fetchall()
        cursor.execute(
            "SELECT COUNT(DISTINCT day) FROM sites_productionlog WHERE deployment_id = %s",
            [deployment.pk],
        )
        days = cursor.fetchone()[0]
    total = sum(r[1] for r in rows)
    notes: list[str] = []
    if total >= MIN_PRODUCTION_CYCLES and days >= MIN_PRODUCTION_DAYS:
        projected = project_sets(space, {r[0] for r in rows})
        shares: dict[tuple[int, ...], float] = {}
        unknown_mass = 0
        for set_id, cycles, _ in rows:
            key = projected[set_id]
            if UNKNOWN in key:
                unknown_mass += cycles
                continue
            shares[key] = shares.get(key, 0.0) + cycles
        known = total - unknown_mass
        notes.append(f"the last {PRODUCTION_WINDOW_DAYS} logged days")
        if known > 0:
            if unknown_mass:
                notes.append(
                    f"{unknown_mass / total:.1%} of logged cycles had unrecorded conditions"
                )
            return DeploymentTarget(
                deployment,
                "production",
                int(total),
                {k: v / known for k, v in shares.items()},
                notes,
            )
    if total:
        notes.append(
            f"only {int(total):,} logged cycles over {days} days (needs {MIN_PRODUCTION_CYCLES:,} over "
            f"{MIN_PRODUCTION_DAYS}): used the surveyed profile"
        )
    return _survey_target(deployment, space, notes)


def _survey_target(
    deployment: Deployment, space: DimensionSpace, notes: list[str]
) -> DeploymentTarget:
    """Product of the surveyed marginals (dimensions without a survey: uniform, noted)."""
    marginals: list[np.ndarray] = [np.zeros(len(vs)) for vs in space.values]
    surveyed = [False] * len(space.dimensions)
    for share in ConditionShare.objects.filter(deployment=deployment).values("value_id", "share"):
        pos = space.value_pos.get(share["value_id"])
        if pos is not None:
            marginals[pos[0]][pos[1]] += share["share"]
            surveyed[pos[0]] = True
    for i, ok in enumerate(surveyed):
        if not ok or marginals[i].sum() <= 0:
            marginals[i] = np.ones(len(space.values[i]))
            notes.append(f"no survey of {space.dimensions[i].name.lower()}: assumed uniform")
        marginals[i] = marginals[i] / marginals[i].sum()
    if not marginals:
        return DeploymentTarget(deployment, "survey", 0, {(): 1.0}, notes)
    # The joint share of every cell with positive mass at once: an outer product of the
    # marginals over their supports (row-major, the order itertools.product would give).
    supports = [np.flatnonzero(m > 0) for m in marginals]
    joint = functools.reduce(
        np.multiply.outer, [m[s] for m, s in zip(marginals, supports, strict=True)]
    )
    flat = joint.ravel()
    positive = np.flatnonzero(flat > 0)
    positions = np.unravel_index(positive, joint.shape)
    codes = np.column_stack([s[p] for s, p in zip(supports, positions, strict=True)]).tolist()
    shares = dict(zip(map(tuple, codes), flat[positive].tolist(), strict=True))
    n_shares = ConditionShare.objects.filter(deployment=deployment).count()
    return DeploymentTarget(deployment, "survey", n_shares, shares, notes)


# The condition values come back with each group (a join on a few thousand groups), which
# saves a second round trip to look the condition sets up. Training coverage is read from
# the counts the database maintains per (dataset, embodiment, task, condition set) as
# episodes change (labeling.models.CoverageCount): its cost follows the cells, not the
# episodes. TRAINING_SQL_SCAN is the same numbers by a GROUP BY over every episode (the
# benchmark's and the tests' reference).
TRAINING_SQL = """
    SELECT t.embodiment_id, t.condition_set_id, t.episodes, cs.value_ids
    FROM (
        SELECT embodiment_id, condition_set_id, SUM(episodes)::bigint AS episodes
        FROM labeling_coveragecount
        WHERE organization_id = %s AND (task_id = %s OR task_id IS NULL)
        GROUP BY embodiment_id, condition_set_id
    ) t
    JOIN sites_conditionset cs ON cs.id = t.condition_set_id
"""
TRAINING_SQL_SCAN = """
    SELECT t.embodiment_id, t.condition_set_id, t.episodes, cs.value_ids
    FROM (
        SELECT embodiment_id, condition_set_id, SUM(episode_count) AS episodes
        FROM labeling_episode
        WHERE organization_id = %s AND validated AND label_status <> 'rejected'
          AND condition_set_id IS NOT NULL AND (task_id = %s OR task_id IS NULL)
        GROUP BY embodiment_id, condition_set_id
    ) t
    JOIN sites_conditionset cs ON cs.id = t.condition_set_id
"""


def _training_rows(organization_id: int, task_id: int | None) -> list[tuple[Any, ...]]:
    """Training coverage per (embodiment, condition set), from the maintained counts."""
    with connection.cursor() as cursor:
        cursor.execute(TRAINING_SQL, [organization_id, task_id])
        return cursor.fetchall()


def campaign_inputs(*, campaign: Campaign, slugs: list[str] | None = None) -> CampaignInputs:
    """Assemble target, training and outcome arrays for a campaign's cells."""
    # PostgreSQL aggregates the inventory (first: it is the long pole) while this process
    # reads the dimensions and builds the targets.
    with Beside(lambda: _training_rows(campaign.organization_id, campaign.task_id)) as coverage:
        # On an error before its result is read, leaving the block waits for the query.
        space = DimensionSpace.build(organization_id=campaign.organization_id, slugs=slugs)
        deployments = list(campaign.deployments.select_related("site").order_by("pk"))
        if not deployments:
            raise ValueError(f"campaign {campaign.slug!r} has no target deployments")
        embodiment_ids = list(campaign.embodiments.values_list("pk", flat=True))
        targets = [deployment_target(deployment=d, space=space) for d in deployments]
        cycles = np.array([d.cycles_per_day for d in deployments], dtype=float)
        weights = (
            cycles / cycles.sum()
            if cycles.sum() > 0
            else np.full(len(deployments), 1 / len(deployments))
        )

        target: dict[tuple[int, ...], float] = {}
        top: dict[tuple[int, ...], tuple[float, str]] = {}
        for w, t in zip(weights, targets, strict=True):
            for key, share in t.shares.items():
                mass = w * share
                target[key] = target.get(key, 0.0) + mass
                if mass > top.get(key, (0.0, ""))[0]:
                    top[key] = (mass, t.deployment.site.name)

        # Outcomes are independent of training coverage: gather them while it aggregates.
        evidence, outcome_rows = _outcome_rows(campaign, deployments, embodiment_ids)
        projected = project_sets(space, {r[0] for r in outcome_rows})
        train_rows = coverage.result()
    project = space.project
    for _, set_id, _, value_ids in train_rows:
        if set_id not in projected:
            projected[set_id] = project(value_ids)

    train: dict[tuple[int, ...], float] = {}
    own = set(embodiment_ids)
    raw_total = 0.0
    for emb_id, set_id, count, _ in train_rows:
        weight = 1.0 if emb_id in own else campaign.transfer_weight
        key = projected[set_id]
        train[key] = train.get(key, 0.0) + weight * float(count)
        raw_total += float(count)
    outcomes: dict[tuple[int, ...], list[int]] = {}
    for set_id, observed, succeeded in outcome_rows:
        key = projected[set_id]
        if UNKNOWN in key:
            continue
        acc = outcomes.setdefault(key, [0, 0])
        acc[0] += int(observed)
        acc[1] += int(succeeded)

    keys = sorted(set(target) | {k for k, v in train.items() if v > 0})
    index = {k: i for i, k in enumerate(keys)}
    size = len(keys)
    target_share = np.zeros(size)
    train_count = np.zeros(size)
    trials = np.zeros(size, dtype=np.int64)
    successes = np.zeros(size, dtype=np.int64)
    for k, v in target.items():
        target_share[index[k]] = v
    for k, v in train.items():
        if v > 0:
            train_count[index[k]] = v
    for k, (n_trials, n_successes) in outcomes.items():
        if k in index:
            trials[index[k]] = n_trials
            successes[index[k]] = n_successes
    target_share = target_share / target_share.sum()
    reliability_target = campaign.reliability_goal
    return CampaignInputs(
        space=space,
        keys=keys,
        target_share=target_share,
        train_count=train_count,
        trials=trials,
        successes=successes,
        top_deployment=[top.get(k, (0.0, ""))[1] for k in keys],
        cycles_per_day=float(cycles.sum()),
        reliability_target=reliability_target,
        targets=targets,
        train_total_raw=raw_total,
        evidence=evidence,
    )


def _outcome_rows(
    campaign: Campaign, deployments: list[Deployment], embodiment_ids: list[int]
) -> tuple[dict[str, Any], list[tuple[int, int, int]]]:
    """Observed outcomes per condition set: the latest policy's evaluations plus its
    production since its release (cycles naming it, or naming no policy)."""
    from analytics.models import PolicyVersion

    policy = (
        PolicyVersion.objects.filter(
            organization_id=campaign.organization_id, embodiment_id__in=embodiment_ids
        )
        .order_by("-released_on", "-created_at")
        .first()
    )
    dep_ids = [d.pk for d in deployments]
    rows: list[tuple[int, int, int]] = []
    evidence: dict[str, Any] = {
        "policy": policy.name if policy else None,
        "policy_id": policy.pk if policy else None,
    }
    with connection.cursor() as cursor:
        if policy is not None:
            cursor.execute(
                """
                SELECT r.condition_set_id, SUM(r.trials), SUM(r.successes)
                FROM analytics_evaluationresult r JOIN analytics_evaluationrun e ON e.id = r.run_id
                WHERE e.policy_version_id = %s AND (e.deployment_id = ANY(%s) OR e.deployment_id IS NULL)
                GROUP BY r.condition_set_id
                """,
                [policy.pk, dep_ids],
            )
            eval_rows = cursor.fetchall()
            rows.extend(eval_rows)
            evidence["evaluation_trials"] = int(sum(r[1] for r in eval_rows))
        since = policy.released_on if policy and policy.released_on else None
        # The policy's production: cycles since its release that name it or name none
        # (cycles naming another version are that version's outcomes, not this one's).
        slug = policy.slug if policy is not None else None
        cursor.execute(
            """
            SELECT condition_set_id, SUM(cycles), SUM(cycles - failures)
            FROM sites_productionlog
            WHERE deployment_id = ANY(%s) AND (%s::date IS NULL OR day >= %s::date)
              AND (%s::text IS NULL OR policy = %s OR policy = '')
            GROUP BY condition_set_id
            """,
            [dep_ids, since, since, slug, slug],
        )
        prod_rows = cursor.fetchall()
        rows.extend(prod_rows)
        evidence["production_cycles"] = int(sum(r[1] for r in prod_rows))
        evidence["production_since"] = since.isoformat() if since else None
    return evidence, rows


def feature_samples(
    *, campaign: Campaign, limit: int = 4000
) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """Continuous measurements of training episodes and of the target sites, same columns."""
    dep_ids = list(campaign.deployments.values_list("pk", flat=True))
    target = list(
        ConditionSample.objects.filter(deployment_id__in=dep_ids).values_list(
            "features", flat=True
        )[:limit]
    )
    if not target:
        return None
    with connection.cursor() as cursor:
        # A deterministic spread sample of the training side: every k-th id, k from the
        # planner's row estimate, so it never scans and sorts millions of rows.
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = 'labeling_episode'")
        estimate = max(1, int(cursor.fetchone()[0] or 1))
        # SYSTEM sampling reads only a few pages; REPEATABLE makes it deterministic.
        percent = min(100.0, 100.0 * 4 * limit / estimate) if estimate > 4 * limit else 100.0
        cursor.execute(
            f"""
            SELECT features FROM labeling_episode TABLESAMPLE SYSTEM ({percent:.4f}) REPEATABLE (17)
            WHERE organization_id = %s AND validated AND features <> '{{}}'::jsonb
              AND (task_id = %s OR task_id IS NULL)
            LIMIT %s
            """,
            [campaign.organization_id, campaign.task_id, limit],
        )
        # Django's cursor hands jsonb back as text (JSONField decodes it, raw SQL must).
        train = [
            json.loads(row[0]) if isinstance(row[0], str) else row[0] for row in cursor.fetchall()
        ]
    if not train:
        return None
    names = sorted({k for f in target for k in f} & {k for f in train for k in f})
    if not names:
        return None

    def matrix(rows: list[dict[str, Any]]) -> np.ndarray:
        return np.array(
            [
                [float(r.get(n, np.nan)) if r.get(n) is not None else np.nan for n in names]
                for r in rows
            ]
        )

    return names, matrix(train), matrix(target)
