"""The demo's first round, played out: plan, publish, capture, label, and the next policy's evaluation."""

from __future__ import annotations

from datetime import date
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction

from analytics.models import EvaluationRun, PolicyVersion
from campaigns.models import Campaign, CollectionRound
from frontend.demo.data import DEPLOYMENT_PROFILES, DIMENSIONS, SEED
from frontend.demo.generate import (
    combo_ids,
    features,
    sample_combos,
    train_counts,
    true_failure_rate,
)
from frontend.demo.world import organizations
from labeling.models import Episode
from sites.models import (
    ConditionDimension,
    ConditionValue,
    Embodiment,
)


def demo_round(
    *, write_dir: Any, import_results: bool = False, recordings: int | None = None
) -> dict[str, Any]:
    """Play round 1 of the demo campaign forward: plan, publish, capture, label; then write
    the evaluation of a policy trained on it (π-MM7 v2) as CSV files a manager can import.

    Captured episodes follow the same hidden failure model as the seed, so the measured
    impact is what the data really did in this synthetic world.
    """
    import csv
    from pathlib import Path

    from analytics.models import GapReport
    from analytics.selectors import gap_report_latest
    from analytics.services.gap import gap_report_build
    from analytics.services.planning import round_plan_from_gap
    from campaigns.models import CollectionTask
    from campaigns.services import round_transition
    from campaigns.services.plan_edit import round_publish

    ctx = organizations()
    ctx.dims = list(ConditionDimension.objects.filter(organization=ctx.operator).order_by("order"))
    ctx.values = {
        (v.dimension.slug, v.slug): v
        for v in ConditionValue.objects.filter(dimension__organization=ctx.operator).select_related(
            "dimension"
        )
    }
    campaign = Campaign.objects.get(organization=ctx.operator, slug="northwind-2027-h1")
    round = campaign.rounds.get(number=1)
    rng = np.random.default_rng(SEED + 900)
    with transaction.atomic():
        if round.status in ("draft", "planned"):
            report = gap_report_latest(campaign=campaign) or gap_report_build(
                report=GapReport.objects.create(organization=ctx.operator, campaign=campaign)
            )
            # Start on the round's day, or today if that has passed: never plan into the past.
            round = round_plan_from_gap(round=round, report=report, days=21)
            round = round_publish(round=round)
        dims = [d[0] for d in DIMENSIONS]
        slug_of = {v.pk: (v.dimension.slug, v.slug) for v in ctx.values.values()}
        profile = DEPLOYMENT_PROFILES["rotterdam-totes"]
        episodes = []
        if round.dataset and not Episode.objects.filter(dataset=round.dataset).exists():
            tasks = (
                CollectionTask.objects.filter(round=round)
                .select_related("site", "embodiment")
                .prefetch_related("task_targets__target__condition_set")
            )
            for task in tasks:
                for tt in task.task_targets.all():
                    fixed = dict(
                        slug_of[v] for v in tt.target.condition_set.value_ids if v in slug_of
                    )
                    for i in range(tt.episodes_planned):
                        combo = tuple(
                            fixed.get(d)
                            or str(
                                rng.choice(
                                    list(profile[d]),
                                    p=np.array(list(profile[d].values()))
                                    / sum(profile[d].values()),
                                )
                            )
                            for d in dims
                        )
                        episodes.append((task, combo, f"demo-{task.pk}-{tt.target_id}-{i:04d}"))
            ids = combo_ids(ctx, [e[1] for e in episodes])
            Episode.objects.bulk_create(
                [
                    Episode(
                        organization=ctx.operator,
                        dataset=round.dataset,
                        key=key,
                        embodiment=task.embodiment,
                        site=task.site,
                        task=campaign.task,
                        condition_set_id=ids[combo],
                        frames=600,
                        duration_s=20.0,
                        outcome="success",
                        provenance="captured",
                        validated=True,
                        sync_status="synced",
                        label_status="accepted",
                        features=features(combo, rng),
                    )
                    for task, combo, key in episodes
                ],
                batch_size=5000,
            )
            CollectionTask.objects.filter(round=round).update(status=CollectionTask.Status.DONE)
        for to in ("collecting", "labelling"):
            if CollectionRound.can_move(round.status, to):
                round = round_transition(round=round, to_status=to)
        policy, created = PolicyVersion.objects.get_or_create(
            organization=ctx.operator,
            slug="pi-mm7-v2",
            defaults={
                "name": "π-MM7 v2",
                "embodiment": Embodiment.objects.get(organization=ctx.operator, slug="mm7"),
                "task": campaign.task,
                "released_on": date(2027, 1, 8),
                "notes": "v1's data plus round 1 of the Northwind campaign.",
            },
        )
        if created:
            v1 = PolicyVersion.objects.get(organization=ctx.operator, slug="pi-mm7-v1")
            policy.trained_on_datasets.set(v1.trained_on_datasets.all())
            policy.trained_on_rounds.set([round])
    attached = 0
    if recordings is None:
        recordings = int(settings.FIELDCRAFT.get("DEMO_RECORDINGS", 24))
    if round.dataset and recordings > 0:
        from frontend.demo_recordings import attach_demo_recordings

        attached = attach_demo_recordings(dataset=round.dataset, count=recordings)
    datasets = [*policy.trained_on_datasets.all(), *([round.dataset] if round.dataset else [])]
    train = train_counts(datasets)
    out = Path(write_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for slug, label, trials in (
        ("rotterdam-totes", "Rotterdam acceptance test Jan 2027", 2400),
        ("venlo-each-pick", "Venlo acceptance test Jan 2027", 1200),
    ):
        combos = sample_combos(
            ctx, DEPLOYMENT_PROFILES[slug], trials, np.random.default_rng(SEED + 950 + len(slug))
        )
        per_combo: dict[tuple[str, ...], int] = {}
        for combo in combos:
            per_combo[combo] = per_combo.get(combo, 0) + 1
        path = out / f"pi-mm7-v2-{slug}.csv"
        with path.open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow([*dims, "trials", "successes"])
            for combo, n in sorted(per_combo.items()):
                failures = int(rng.binomial(n, true_failure_rate(combo, train.get(combo, 0.0))))
                writer.writerow([*combo, n, n - failures])
        files.append((path, slug, label))
    if import_results:
        from analytics.services.evaluations import evaluation_import_file
        from analytics.services.steering import curves_refit

        imported = 0
        # One batch: the refits each import queues run once both are in, so the first reads
        # everything and the second finds it read (a refit of the demo takes ~20 s).
        with transaction.atomic():
            for path, slug, label in files:
                if EvaluationRun.objects.filter(
                    organization=ctx.operator, policy_version=policy, label=label
                ).exists():
                    continue  # played before: the evaluation is in already
                imported += 1
                evaluation_import_file(
                    organization=ctx.operator,
                    name=path.name,
                    content=path.read_bytes(),
                    policy="pi-mm7-v2",
                    deployment=slug,
                    label=label,
                    evaluated_on=date(2027, 1, 12),
                )
        if imported:
            # The refit the imports queued, made now, and the gap after round 1 on it: the
            # demo's latest report reads every cell on the whole evaluation history (the
            # queued refits then find the evidence already read and store nothing).
            curves_refit(campaign=campaign)
            latest = gap_report_latest(campaign=campaign)
            gap_report_build(
                report=GapReport.objects.create(
                    organization=ctx.operator,
                    campaign=campaign,
                    dimension_slugs=latest.dimension_slugs if latest else [],
                )
            )
        # The round's impact, measured once (the page only reads; it measures on request).
        from analytics.models import RoundImpactReport
        from analytics.services.steering import round_impact_compute

        if not RoundImpactReport.objects.filter(round=round).exists():
            round_impact_compute(round=round)

    return {
        "round": round.pk,
        "episodes": len(episodes),
        "recordings": attached,
        "files": [str(f[0]) for f in files],
        "policy": policy.slug,
    }
