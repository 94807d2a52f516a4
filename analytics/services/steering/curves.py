"""Refit a campaign's learning curves and the transfer between its cells from its whole
history of outcomes (every policy's evaluations and the production the fleet logged under
it), and the training counts they are read at (part of
:mod:`analytics.services.steering`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import F, Q
from django.utils import timezone

from accounts.models import Job
from accounts.services import job_create, job_running, time_left_words
from analytics.gap import CellHistory
from analytics.learning import POSTERIOR_LEVELS, fit_history, posterior_quantiles
from analytics.models import (
    CurveFitRecord,
    EvaluationRun,
    PolicyVersion,
)
from analytics.selectors import gap_report_latest
from analytics.services.gap_inputs import UNKNOWN, DimensionSpace, project_sets
from analytics.steering.levels import candidate_count, fit_transfer
from analytics.steering.transfer import CellStructure, TransferModel
from campaigns.models import Campaign

Key = tuple[int, ...]


def _space(campaign: Campaign) -> DimensionSpace:
    """The campaign's cells: the dimensions of its latest gap report (all, without one)."""
    latest = gap_report_latest(campaign=campaign)
    slugs = latest.dimension_slugs if latest and latest.dimension_slugs else None
    return DimensionSpace.build(organization_id=campaign.organization_id, slugs=slugs)


def cell_id(space: DimensionSpace, key: Key) -> str:
    """A cell's name in what a refit stores: its value ids, comma-separated."""
    return ",".join(map(str, space.value_ids(key)))


def _project(space: DimensionSpace, rows: list[tuple[int, float]]) -> dict[Key, float]:
    """Sum values per projected cell for (condition_set_id, value) rows; drops unrecorded cells."""
    keys = project_sets(space, {r[0] for r in rows})
    out: dict[Key, float] = {}
    for set_id, value in rows:
        key = keys[set_id]
        if UNKNOWN not in key:
            out[key] = out.get(key, 0.0) + float(value)
    return out


def train_counts(
    *, campaign: Campaign, space: DimensionSpace, dataset_ids: list[int] | None = None
) -> dict[Key, float]:
    """Transfer-weighted training episodes per cell (in the given datasets, else all countable).

    Reads the counts the database maintains per (dataset, embodiment, task, condition set),
    which hold only countable episodes (labeling.models.CoverageCount).
    """
    own = list(campaign.embodiments.values_list("pk", flat=True))
    sql = """
        SELECT condition_set_id,
               SUM(episodes * CASE WHEN embodiment_id = ANY(%s) THEN 1.0 ELSE %s END)
        FROM labeling_coveragecount
        WHERE organization_id = %s AND (task_id = %s OR task_id IS NULL)
    """
    params: list[Any] = [own, campaign.transfer_weight, campaign.organization_id, campaign.task_id]
    if dataset_ids is not None:
        sql += " AND dataset_id = ANY(%s)"
        params.append(dataset_ids)
    with connection.cursor() as cursor:
        cursor.execute(sql + " GROUP BY condition_set_id", params)
        return _project(space, cursor.fetchall())


def policy_datasets(policy: PolicyVersion) -> list[int]:
    """Datasets a policy was trained on, including its rounds' capture datasets."""
    ids = set(policy.trained_on_datasets.values_list("pk", flat=True))
    ids |= set(policy.trained_on_rounds.exclude(dataset=None).values_list("dataset_id", flat=True))
    return sorted(ids)


def _outcomes(
    policy: PolicyVersion | int,
    space: DimensionSpace,
    deployment_ids: list[int],
    by_site: bool = False,
    run_ids: list[int] | None = None,
) -> dict[Any, list[float]]:
    """Trials and successes of a policy's evaluations at the campaign's deployments (and
    bench); only those of the given runs with ``run_ids``."""
    policy_id = policy.pk if isinstance(policy, PolicyVersion) else policy
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT r.condition_set_id, COALESCE(e.site_id, 0), SUM(r.trials), SUM(r.successes)
            FROM analytics_evaluationresult r JOIN analytics_evaluationrun e ON e.id = r.run_id
            WHERE e.policy_version_id = %s
              AND (e.deployment_id = ANY(%s) OR e.deployment_id IS NULL)
              AND (%s::bigint[] IS NULL OR e.id = ANY(%s))
            GROUP BY 1, 2
            """,
            [policy_id, deployment_ids, run_ids, run_ids],
        )
        rows = cursor.fetchall()
    keys = project_sets(space, {r[0] for r in rows})
    out: dict[Any, list[float]] = {}
    for set_id, site_id, trials, successes in rows:
        key = keys[set_id]
        if UNKNOWN in key:
            continue
        k = (key, site_id) if by_site else key
        acc = out.setdefault(k, [0.0, 0.0])
        acc[0] += float(trials)
        acc[1] += float(successes)
    return out


def _production(
    policies: list[PolicyVersion], space: DimensionSpace, deployment_ids: list[int]
) -> dict[int, dict[Key, list[float]]]:
    """Each policy's logged production at the campaign's deployments, per cell: cycles and
    cycles that did not fail, from the fleet's logs that name the policy (by its slug; cycles
    the fleet did not attribute to a policy are no policy's outcomes)."""
    by_slug = {p.slug: p.pk for p in policies}
    if not by_slug or not deployment_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT policy, condition_set_id, SUM(cycles), SUM(cycles - failures)
            FROM sites_productionlog
            WHERE deployment_id = ANY(%s) AND policy = ANY(%s)
            GROUP BY 1, 2
            """,
            [deployment_ids, list(by_slug)],
        )
        rows = cursor.fetchall()
    keys = project_sets(space, {r[1] for r in rows})
    out: dict[int, dict[Key, list[float]]] = {}
    for slug, set_id, cycles, successes in rows:
        key = keys[set_id]
        if UNKNOWN in key:
            continue
        acc = out.setdefault(by_slug[slug], {}).setdefault(key, [0.0, 0.0])
        acc[0] += float(cycles)
        acc[1] += float(successes)
    return out


REFIT_INPUTS_VERSION = "4"
"""Part of every refit's inputs fingerprint: raise it when the refit's model changes, so a
refit on unchanged evidence is made again rather than taken as current. 2: each transfer
strength is the mean of its marginal posterior, with an interval, at every size (before, the
mean with the others at their most probable, and above 2,000 cells without an interval). 3:
the transfer is chosen by the evaluations' levels, one strength for every dimension and how
far it reaches, or the per-dimension reading of the changes where that explains them best
(:func:`analytics.steering.levels.fit_transfer`). 4: each policy's outcomes hold its logged
production beside its evaluations, and the policies are read oldest first."""


def _inputs_fingerprint(
    dimension_slugs: list[str],
    keys: list[Key],
    runs: list[int],
    arrays: tuple[np.ndarray, ...],
) -> str:
    """A digest of everything a refit reads: its cells, the runs it holds, and the training
    counts and outcomes per evaluation and now. Equal digests give equal refits (the fit is
    deterministic), so a refit whose digest the latest one already has need not run again."""
    digest = hashlib.sha256(REFIT_INPUTS_VERSION.encode())
    digest.update(repr((dimension_slugs, keys, runs)).encode())
    for array in arrays:
        digest.update(repr(array.shape).encode())
        digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
    return digest.hexdigest()


REFIT_STEPS = candidate_count(2)
"""A refit's steps for its job's progress: the curve refits that choose the transfer
(:func:`analytics.steering.levels.fit_transfer`; a history of one evaluation takes one)."""

Progress = Callable[[int, int, str], None]
"""Told ``(done, total, message)`` as a refit goes (see :data:`REFIT_STEPS`)."""


@dataclasses.dataclass(frozen=True)
class RefitEvidence:
    """What a campaign's refit reads: its cells (``keys`` in ``space``), one row of outcomes
    per policy with any, oldest first (each cell's training counts in the data the policy was
    trained on, and its trials and successes: its evaluations' plus its logged production),
    each cell's training now, the runs and policies read, and the production each policy's
    row holds (``production[policy id][key]``: cycles, successes)."""

    space: DimensionSpace
    keys: list[Key]
    runs: list[int]
    policies: int
    counts: np.ndarray
    trials: np.ndarray
    successes: np.ndarray
    n_now: np.ndarray
    production: dict[int, dict[Key, list[float]]]

    @property
    def slugs(self) -> list[str]:
        return [d.slug for d in self.space.dimensions]

    @property
    def structure(self) -> CellStructure | None:
        """The cells' conditions, for the transfer between them (None without cells)."""
        return self.space.structure(self.keys) if self.keys else None

    def fingerprint(self) -> str:
        return _inputs_fingerprint(
            self.slugs, self.keys, self.runs, (self.counts, self.trials, self.successes, self.n_now)
        )


def refit_evidence(*, campaign: Campaign) -> RefitEvidence:
    """Read the campaign's whole history of outcomes as its refit reads it: each policy's
    evaluations and the production the fleet logged under it at the campaign's deployments
    (the fleet's cycles are outcomes of the policy that ran them, and the most of them)."""
    space = _space(campaign)
    deployment_ids = list(campaign.deployments.values_list("pk", flat=True))
    policies = list(
        PolicyVersion.objects.filter(
            organization_id=campaign.organization_id, embodiment__in=campaign.embodiments.all()
        )
        .order_by(F("released_on").asc(nulls_last=True), "created_at", "pk")
        .prefetch_related("trained_on_datasets", "trained_on_rounds")
    )
    # The runs this refit holds, named once: a report reads on top of it only what they miss.
    runs = sorted(
        EvaluationRun.objects.filter(policy_version__in=policies)
        .filter(Q(deployment__in=deployment_ids) | Q(deployment=None))
        .values_list("pk", flat=True)
    )
    current = train_counts(campaign=campaign, space=space)
    keys: list[Key] = sorted(current)
    index = {k: i for i, k in enumerate(keys)}
    production = _production(policies, space, deployment_ids)
    # One row per policy with outcomes, oldest first: the training counts of every cell in
    # the data it was trained on, and its outcomes where it was evaluated or ran.
    evaluated: list[tuple[dict[Key, float], dict[Key, list[float]]]] = []
    for policy in policies:
        outcomes = _outcomes(policy, space, deployment_ids, run_ids=runs)
        for key, (cycles, ran) in production.get(policy.pk, {}).items():
            acc = outcomes.setdefault(key, [0.0, 0.0])
            acc[0] += cycles
            acc[1] += ran
        if not outcomes:
            continue
        trained = train_counts(campaign=campaign, space=space, dataset_ids=policy_datasets(policy))
        for key in [*outcomes, *trained]:
            if key not in index:
                index[key] = len(keys)
                keys.append(key)
        evaluated.append((trained, outcomes))
    size = max(1, len(keys))
    counts = np.zeros((len(evaluated), size))
    trials = np.zeros((len(evaluated), size))
    successes = np.zeros((len(evaluated), size))
    for e, (trained, outcomes) in enumerate(evaluated):
        for key, n in trained.items():
            counts[e, index[key]] = n
        for key, (t, s) in outcomes.items():
            trials[e, index[key]], successes[e, index[key]] = t, s
    n_now = np.array([current.get(k, 0.0) for k in keys] or [0.0])
    return RefitEvidence(
        space=space,
        keys=keys,
        runs=runs,
        policies=len(policies),
        counts=counts,
        trials=trials,
        successes=successes,
        n_now=n_now,
        production=production,
    )


def _current_refit(campaign: Campaign, slugs: list[str], fingerprint: str) -> CurveFitRecord | None:
    """The campaign's latest refit over these dimensions when it read exactly the evidence
    whose fingerprint is given, else None."""
    latest = (
        CurveFitRecord.objects.filter(campaign=campaign, dimension_slugs=slugs)
        .order_by("-created_at", "-pk")
        .first()
    )
    if latest is not None and (latest.evidence or {}).get("inputs") == fingerprint:
        return latest
    return None


def curves_refit(*, campaign: Campaign, progress: Progress | None = None) -> CurveFitRecord:
    """Refit the campaign's learning curves from its whole history of outcomes (every
    policy's evaluations and logged production, :func:`refit_evidence`) and store them.

    A refit reads only stored evidence, and the same evidence gives the same refit: when the
    latest refit over the same cells read exactly what this one would (its inputs
    fingerprint), it is returned as it is and nothing is stored. So the refits two imports
    in a row queue, or one run after a manager already refitted, cost a read, not a fit.
    ``progress`` is told after each sweep of the sampler reading the changes and after each
    curve refit, in :data:`REFIT_STEPS`.
    """
    with _refit_lock(campaign):
        return _refit_locked(campaign, progress)


REFIT_ADVISORY_NAMESPACE = 7403
"""pg_advisory_lock(namespace, campaign id) held by a campaign's refit; labeling uses 7401,
the field's records 7402."""


@contextlib.contextmanager
def _refit_lock(campaign: Campaign) -> Iterator[None]:
    """Hold the campaign's refit lock: two refits of one campaign (an import's and the beat
    sweep's, or two imports' on two workers) run one after the other, and the second reads
    what the first stored and stores nothing. Outside a transaction the lock is the
    session's, released as the refit returns, when its record is already committed; inside
    one it lasts until that transaction ends, so a waiting refit sees the record."""
    key = [REFIT_ADVISORY_NAMESPACE, campaign.pk]
    in_transaction = connection.in_atomic_block
    with connection.cursor() as cur:
        cur.execute(f"SELECT pg_advisory{'_xact' if in_transaction else ''}_lock(%s, %s)", key)
    try:
        yield
    finally:
        if not in_transaction:
            with connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_unlock(%s, %s)", key)


def _refit_locked(campaign: Campaign, progress: Progress | None) -> CurveFitRecord:
    """:func:`curves_refit`'s work, under the campaign's refit lock."""
    evidence = refit_evidence(campaign=campaign)
    space, keys = evidence.space, evidence.keys
    counts, trials, successes = evidence.counts, evidence.trials, evidence.successes
    fingerprint = evidence.fingerprint()
    current = _current_refit(campaign, evidence.slugs, fingerprint)
    if current is not None:
        return current

    # The curve refits cost alike, and follow the sampler's sweeps: their pace so far tells
    # how long the rest will take (minutes at 20,000 cells).
    refits_from = [time.monotonic()]

    def stepped(done: int, total: int) -> None:
        if progress is not None:
            said = f"transfer between cells, curve refit {done} of {total}"
            if 0 < done < total:
                pace = (time.monotonic() - refits_from[0]) / done
                said += f" · {time_left_words(pace * (total - done))}"
            progress(done, REFIT_STEPS, said)

    def swept(done: int, total: int) -> None:
        refits_from[0] = time.monotonic()
        if progress is not None:
            progress(  # the sampler runs before the curve refits
                0,
                REFIT_STEPS,
                f"transfer between cells, reading the changes: sweep {done} of {total}",
            )

    # The refit steering measures in bench/steering.py and the recommender runs: with
    # history, an exponent per cell and an amplitude prior from the cells' conditions, at the
    # effective training of the transfer the evaluations' levels show (fit_transfer; none
    # until two evaluations show it), here and wherever this refit is used.
    structure = evidence.structure
    transfer: TransferModel | None
    if structure is not None:
        transfer, curves = fit_transfer(
            structure,
            counts,
            trials,
            successes,
            evidence.n_now,
            on_step=stepped,
            on_sweep=swept,
        )
    else:
        transfer = None
        curves = fit_history(counts, trials, successes, evidence.n_now)
    pooled = curves.pooled
    produced = {
        str(policy_id): {cell_id(space, k): [float(c), float(s)] for k, (c, s) in cells.items()}
        for policy_id, cells in evidence.production.items()
    }
    return CurveFitRecord.objects.create(
        campaign=campaign,
        dimension_slugs=evidence.slugs,
        f_inf=pooled.f_inf,
        a=pooled.a,
        b=pooled.b,
        tau=curves.tau,
        source=curves.fit.source,
        cells={
            cell_id(space, k): float(curves.amplitude[i])
            for i, k in enumerate(keys)
            if i < len(curves.amplitude)
        },
        posteriors={
            cell_id(space, k): [round(float(v), 6) for v in row]
            for k, row in zip(keys, posterior_quantiles(curves.posterior).tolist(), strict=False)
        },
        evidence={
            "policies": evidence.policies,
            "rows": int(np.count_nonzero(trials > 0)),  # evaluated (policy, cell) pairs
            "runs": evidence.runs,
            "inputs": fingerprint,
            "trials": float(trials.sum()),
            "failures": float((trials - successes).sum()),
            "production_cycles": float(sum(c for p in produced.values() for c, _ in p.values())),
            # What each policy's row holds of its production, per cell: a gap report reads on
            # top of the refit only the outcomes the refit does not hold (refit_history).
            "production": produced,
            "reason": curves.fit.reason,
        },
        transfer=transfer.stored() if transfer is not None else {},
    )


def curves_refit_for_run(*, run_id: int, progress: Progress | None = None) -> list[CurveFitRecord]:
    """Refit every campaign an evaluation run bears on (its deployment's, or its embodiment's);
    ``progress`` is told, campaign after campaign, how far the refits are, in
    :data:`REFIT_STEPS` each."""
    return _refit_each(_campaigns_of_runs([run_id]), progress)


def _campaigns_of_runs(run_ids: list[int]) -> list[Campaign]:
    """The campaigns evaluation runs bear on, in two queries: each run's organization's of
    its policy's embodiment, at its deployment when it names one (none for runs gone)."""
    bears = Q(pk__in=[])
    for run in EvaluationRun.objects.select_related("policy_version").filter(pk__in=run_ids):
        one = Q(organization_id=run.organization_id) & Q(
            embodiments=run.policy_version.embodiment_id
        )
        if run.deployment_id:
            one &= Q(deployments=run.deployment_id)
        bears |= one
    return list(Campaign.objects.filter(bears).distinct().order_by("pk"))


def _refit_each(chosen: list[Campaign], progress: Progress | None) -> list[CurveFitRecord]:
    """Refit each campaign in turn; ``progress`` is told how far, campaign after campaign,
    in :data:`REFIT_STEPS` each, naming the campaign."""
    total = len(chosen) * REFIT_STEPS

    def within(report: Progress, before: int, campaign: Campaign) -> Progress:
        def told(done: int, _steps: int, message: str) -> None:
            report(before + done, total, f"{campaign.name}: refitting, {message}")

        return told

    return [
        curves_refit(
            campaign=c,
            progress=None if progress is None else within(progress, i * REFIT_STEPS, c),
        )
        for i, c in enumerate(chosen)
    ]


REFIT_LEASE_SECONDS = 900.0
"""How long a refit may run without a heartbeat before the reaper runs it again: a campaign
of 20,000 cells takes tens of seconds per curve refit (``bench/history_refit.py``) and the
transfer's choice eleven of them, so it reports its progress after every refit (a heartbeat)."""


def curves_refit_request(*, run: EvaluationRun, actor: Any = None) -> Job:
    """Queue, for when the import commits, the refit of every campaign an evaluation run
    bears on: a Celery job, so that a large campaign's refit (tens of seconds) never holds
    the request that imported the evaluation."""
    return job_create(
        organization=run.organization,
        kind="curves_refit",
        title=f"Learning curves refitted after evaluation {run.label}"[:200],
        task_name="analytics.tasks.curves_refit_compute",
        task_kwargs={"run_id": run.pk},
        created_by=actor,
    )


def curves_refit_stale() -> list[Job]:
    """Queue a refit of every campaign refitted before whose evidence has changed since its
    latest refit, and that has no refit queued or running: production the fleet logged under
    its policies, mostly, which no evaluation import brings (run by Celery beat, see
    ``CELERY_BEAT_SCHEDULE``). A campaign whose latest refit read exactly what a refit would
    read now is left alone, at the cost of reading its evidence; so is a campaign an
    import's refit is queued or running for. Should two refits of a campaign still meet, the
    refit lock runs them one after the other, and the second is a read."""
    active = list(
        Job.objects.filter(kind="curves_refit", status__in=Job.ACTIVE).values_list(
            "task_kwargs", flat=True
        )
    )
    busy = {int(k["campaign_id"]) for k in active if "campaign_id" in k}
    # An import's refit, of every campaign its run bears on.
    busy.update(
        c.pk for c in _campaigns_of_runs([int(k["run_id"]) for k in active if "run_id" in k])
    )
    queued: list[Job] = []
    refitted = CurveFitRecord.objects.values_list("campaign_id", flat=True).distinct()
    for campaign in Campaign.objects.filter(pk__in=refitted).exclude(pk__in=busy).order_by("pk"):
        evidence = refit_evidence(campaign=campaign)
        if _current_refit(campaign, evidence.slugs, evidence.fingerprint()) is not None:
            continue
        queued.append(
            job_create(
                organization=campaign.organization,
                kind="curves_refit",
                title=f"Learning curves of {campaign.name} refitted on new outcomes"[:200],
                task_name="analytics.tasks.curves_refit_compute",
                task_kwargs={"campaign_id": campaign.pk},
            )
        )
    return queued


def curves_refit_compute(*, job_id: str) -> None:
    """Run a queued refit: of every campaign an evaluation run bears on
    (:func:`curves_refit_request`), or of one campaign (:func:`curves_refit_stale`)."""
    with job_running(job_id=job_id) as ctx:
        if ctx is None:
            return
        ctx.progress(
            0, 1, "Refitting the learning curves and the transfer between cells", force=True
        )
        ctx.extend_lease(REFIT_LEASE_SECONDS)
        started = timezone.now()
        kwargs = ctx.job.task_kwargs
        if "campaign_id" in kwargs:
            # Only a campaign of the job's own organization.
            chosen = Campaign.objects.filter(
                pk=int(kwargs["campaign_id"]), organization_id=ctx.job.organization_id
            )
            records = _refit_each(list(chosen), ctx.progress)
        else:
            records = curves_refit_for_run(run_id=int(kwargs["run_id"]), progress=ctx.progress)
        said = [
            f"{r.campaign.name}: "
            + (
                f"refitted on {len(r.posteriors):,} cells"
                if r.created_at >= started
                else "already current (the refit of "
                + f"{timezone.localtime(r.created_at):%Y-%m-%d %H:%M %Z} read the same evidence)"
            )
            for r in records
        ]
        steps = max(len(records) * REFIT_STEPS, 1)
        ctx.progress(
            steps,
            steps,
            "; ".join(said)
            or (
                "The campaign is gone."
                if "campaign_id" in kwargs
                else "No campaign reads this evaluation."
            ),
            force=True,
        )


def refit_history(
    *,
    campaign: Campaign,
    space: DimensionSpace,
    keys: list[Key],
    refit: CurveFitRecord,
    policy_id: int | None,
    trials: np.ndarray,
    successes: np.ndarray,
) -> CellHistory | None:
    """The refit's reading of each of ``keys`` (a gap report's cells), and the outcomes of
    the report's policy (``policy_id``, the latest) it already holds, its evaluations and
    the production it read, so the report adds only the rest of its ``trials`` /
    ``successes`` per cell. ``None`` for a refit that
    stored no posteriors (made before they were)."""
    if not refit.posteriors:
        return None
    levels = POSTERIOR_LEVELS.size
    quantiles = np.full((len(keys), levels), np.nan)
    for i, key in enumerate(keys):
        row = refit.posteriors.get(cell_id(space, key))
        if row is not None and len(row) == levels:
            quantiles[i] = row
    held_trials, held_successes = np.zeros(len(keys)), np.zeros(len(keys))
    runs = list((refit.evidence or {}).get("runs") or [])
    index = {k: i for i, k in enumerate(keys)}
    if policy_id is not None and runs:
        deployment_ids = list(campaign.deployments.values_list("pk", flat=True))
        held = _outcomes(policy_id, space, deployment_ids, run_ids=runs)
        for key, (t, s) in held.items():
            if key in index:
                held_trials[index[key]], held_successes[index[key]] = t, s
    # And the policy's production the refit read, as it stored it (production logs grow in
    # place, so what it read is kept, not read again).
    produced = ((refit.evidence or {}).get("production") or {}).get(str(policy_id)) or {}
    if produced:
        by_ids = {cell_id(space, k): i for k, i in index.items()}
        for ids, (cycles, ran) in produced.items():
            at = by_ids.get(ids)
            if at is not None:
                held_trials[at] += cycles
                held_successes[at] += ran
    # What the refit holds is part of what the report reads, run for run; should a cell's
    # evidence have shrunk since (a deployment taken off the campaign), only what the
    # report still reads counts as held, its failures and its successes each.
    held_failures = np.minimum(held_trials - held_successes, trials - successes)
    held_successes = np.minimum(held_successes, successes)
    return CellHistory(
        quantiles=quantiles,
        tau=float(refit.tau),
        trials=held_successes + held_failures,
        successes=held_successes,
    )
