"""Helpers the benchmarks share: set up Django, remove a benchmark's organization, time and
trace a call, and the transfer reading the transfer benches take as their baseline."""

from __future__ import annotations

import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any


def setup_django() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


FK_COLUMNS_WITHOUT_INDEX = (
    "condition_set_id",
    "embodiment_id",
    "task_id",
    "site_id",
    "failure_mode_id",
)


def purge_organizations(*slugs: str) -> None:
    """Delete benchmark organizations and everything they own, children first.

    The domain protects its foreign keys on purpose (no cascading deletes of real work), so
    a benchmark tears its own world down explicitly, in one transaction.
    """
    from django.db import connection, transaction

    from accounts.models import Organization

    ids = list(Organization.objects.filter(slug__in=slugs).values_list("pk", flat=True))
    if not ids:
        return
    from analytics.models import EvaluationRun, GapReport, PolicyVersion
    from campaigns.models import Campaign, FieldTeam
    from labeling.models import Dataset
    from sites.models import (
        ConditionDimension,
        ConditionSet,
        Deployment,
        Embodiment,
        FailureMode,
        Site,
        Task,
    )

    big_tables = [
        "DELETE FROM analytics_gapcell WHERE report_id IN "
        "(SELECT id FROM analytics_gapreport WHERE organization_id = ANY(%(ids)s))",
        "DELETE FROM labeling_episode WHERE organization_id = ANY(%(ids)s)",
        "DELETE FROM sites_failurerecord WHERE organization_id = ANY(%(ids)s)",
        "DELETE FROM sites_productionlog WHERE deployment_id IN "
        "(SELECT id FROM sites_deployment WHERE organization_id = ANY(%(ids)s))",
    ]
    with transaction.atomic():
        with connection.cursor() as cursor:
            # The episode table indexes only what queries use (no index per foreign key), so
            # deleting thousands of condition sets, sites or failure modes would make the
            # database check each one with a scan of the whole table. For a bulk teardown,
            # index those columns for the length of this transaction only.
            for column in FK_COLUMNS_WITHOUT_INDEX:
                cursor.execute(f"CREATE INDEX bench_purge_{column} ON labeling_episode ({column})")
            for sql in big_tables:
                cursor.execute(sql, {"ids": ids})
        for model in (GapReport, EvaluationRun, PolicyVersion, Campaign, FieldTeam, Dataset):
            model.objects.filter(organization_id__in=ids).delete()
        while FailureMode.objects.filter(organization_id__in=ids).exists():
            FailureMode.objects.filter(organization_id__in=ids, children__isnull=True).delete()
        for model in (Deployment, Site, ConditionSet, ConditionDimension, Embodiment, Task):
            model.objects.filter(organization_id__in=ids).delete()
        Organization.objects.filter(pk__in=ids, kind="customer").delete()
        Organization.objects.filter(pk__in=ids).delete()
        with connection.cursor() as cursor:
            # Checks deferred to commit still need the indexes: fire them now, then drop.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for column in FK_COLUMNS_WITHOUT_INDEX:
                cursor.execute(f"DROP INDEX bench_purge_{column}")


def remove_field_records(uuids: list[str]) -> None:
    """Remove what a benchmark's tablets captured, so the demo programme stays as seeded."""
    from campaigns.models import FieldRecord
    from labeling.models import Episode

    records = FieldRecord.objects.filter(uuid__in=uuids)
    episode_ids = [e for e in records.values_list("episode_id", flat=True) if e]
    records.delete()
    Episode.objects.filter(pk__in=episode_ids).delete()


def measured(run: Callable[..., Any], *args: Any) -> tuple[Any, float, float]:
    """Return ``run(*args)``, its seconds and its peak traced memory in MiB."""
    tracemalloc.start()
    started = time.perf_counter()
    result = run(*args)
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return result, seconds, peak / 2**20


def conditional_reading(structure: Any, counts: Any, trials: Any, successes: Any) -> Any:
    """The transfer strengths as read before each one was the mean of its marginal posterior:
    the strengths of highest posterior (one dimension at a time), then each strength's
    posterior mean with the others held there, without an interval. What the estimate acted
    on until 2026-12-06 (eighth session) and refits of more than 2,000 cells until the ninth:
    the baseline of ``transfer_intervals.py`` and ``transfer_scale.py``, from the same score
    and prior as :func:`analytics.steering.transfer.estimate_transfer`."""
    import numpy as np

    from analytics.steering import transfer as tr

    score = tr._Score(structure, counts, trials, successes)
    log_prior = tr._log_prior()
    peak = tr._ascend(score, log_prior, np.zeros(len(structure.dimensions)))
    strength = peak.copy()
    for d in range(peak.size):
        conditional = log_prior + score.along(peak, d)
        weights = np.exp(conditional - conditional.max())
        strength[d] = float(np.dot(weights / weights.sum(), tr.STRENGTH_GRID))
    return strength


def refit_before_levels(
    structure: Any, counts: Any, trials: Any, successes: Any, n_now: Any
) -> Any:
    """The refit as it was until the evaluations' levels chose the transfer (2026-12-07): the
    per-dimension reading of the changes (:func:`analytics.steering.transfer.estimate_transfer`),
    then one curve refit at the effective counts it gives. Returns the transfer model; the
    baseline of ``transfer_levels.py`` and ``demo_steering.py``."""
    from analytics.learning import fit_history
    from analytics.steering.transfer import estimate_transfer

    changes = estimate_transfer(structure, counts, trials, successes)
    live = changes.transfers
    fit_history(
        changes.effective(counts) if live else counts,
        trials,
        successes,
        changes.effective(n_now) if live else n_now,
        conditions=structure.codes,
    )
    return changes
