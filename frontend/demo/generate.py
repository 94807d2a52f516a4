"""The demo's synthetic data: inventory, production, evaluations, drawn from the hidden failure model."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import numpy as np

from analytics.models import EvaluationResult, EvaluationRun, PolicyVersion
from frontend.demo.data import (
    CAM_OFFSET_CM,
    DEPLOYMENT_PROFILES,
    DIFFICULTY,
    DIMENSIONS,
    INVENTORY,
    LAB_MARGINALS,
    LUX,
    PILOT_MARGINALS,
    SEED,
    TODAY,
    VALUE_FAILURE_MODE,
    Ctx,
)
from labeling.models import Dataset, Episode
from sites.models import (
    ConditionSample,
    ConditionValue,
    Deployment,
    Embodiment,
    FailureMode,
    FailureRecord,
    ProductionLog,
    Site,
    Task,
)
from sites.services import condition_sets_intern


def sample_combos(
    ctx: Ctx, marginals: dict[str, dict[str, float]], n: int, rng: np.random.Generator
) -> list[tuple[str, ...]]:
    """Draw n combinations (value slugs in DIMENSIONS order), independently per dimension."""
    columns = []
    for slug, _, _, _ in DIMENSIONS:
        dist = marginals[slug]
        names = list(dist)
        probs = np.array([dist[k] for k in names], dtype=float)
        columns.append(np.array(names)[rng.choice(len(names), size=n, p=probs / probs.sum())])
    return [tuple(row) for row in zip(*columns, strict=True)]


def combo_ids(ctx: Ctx, combos: list[tuple[str, ...]]) -> dict[tuple[str, ...], int]:
    dims = [d[0] for d in DIMENSIONS]
    unique = sorted(set(combos))
    as_ids = {
        c: tuple(sorted(ctx.values[(dims[i], v)].pk for i, v in enumerate(c))) for c in unique
    }
    interned = condition_sets_intern(organization=ctx.operator, combinations=as_ids.values())
    return {c: interned[as_ids[c]] for c in unique}


def inventory(
    ctx: Ctx, embodiments: dict[str, Embodiment], sites: dict[str, Site], tasks: dict[str, Task]
) -> dict[str, Dataset]:
    result = {}
    for index, (slug, name, emb, site, task, marg, rows, per_row) in enumerate(INVENTORY):
        rng = np.random.default_rng(SEED + index)
        dataset, _ = Dataset.objects.get_or_create(
            organization=ctx.operator,
            slug=slug,
            defaults={
                "name": name,
                "embodiment": embodiments[emb],
                "fps": 30.0,
                "format_version": "LeRobot v3.0" if per_row == 1 else "manifest",
            },
        )
        result[slug] = dataset
        if Episode.objects.filter(dataset=dataset).count() == rows:
            continue
        marginals = LAB_MARGINALS if marg == "lab" else PILOT_MARGINALS
        combos = sample_combos(ctx, marginals, rows, rng)
        ids = combo_ids(ctx, combos)
        frames = rng.integers(240, 900, size=rows)
        outcomes = rng.random(rows)
        base = datetime(2026, 1, 12, 9, 0, tzinfo=UTC)
        episodes = [
            Episode(
                organization=ctx.operator,
                dataset=dataset,
                key=f"{i:06d}",
                embodiment=embodiments[emb],
                site=sites[site] if site else None,
                task=tasks[task],
                condition_set_id=ids[combo],
                episode_count=per_row,
                frames=int(frames[i]) * per_row,
                duration_s=round(float(frames[i]) * per_row / 30.0, 3),
                outcome="success" if outcomes[i] > 0.08 else "failure",
                storage_uri=f"s3://northwind-robot-data/{slug}/episode_{i:06d}",
                provenance="imported",
                validated=True,
                sync_status="synced",
                recorded_at=base + timedelta(minutes=7 * i),
                features=features(combo, rng),
            )
            for i, combo in enumerate(combos)
        ]
        Episode.objects.bulk_create(
            episodes,
            batch_size=5000,
            update_conflicts=True,
            unique_fields=["dataset", "key"],
            update_fields=[
                "condition_set",
                "episode_count",
                "frames",
                "duration_s",
                "outcome",
                "features",
            ],
        )
    return result


def features(combo: tuple[str, ...], rng: np.random.Generator) -> dict[str, float]:
    """Continuous measurements consistent with the categorical values (light level, camera offset)."""
    lux = LUX[combo[0]] * float(np.exp(rng.normal(0, 0.15)))
    offset = CAM_OFFSET_CM[combo[2]] + float(abs(rng.normal(0, 0.8)))
    return {"light_lux": round(lux, 1), "camera_offset_cm": round(offset, 2)}


def true_failure_rate(combo: tuple[str, ...], train_count: float) -> float:
    """The demo world's hidden failure rate of policy v1 for a cell with ``train_count`` episodes."""
    amplitude = 0.005 + 0.5 * sum(DIFFICULTY.get(v, 0.0) for v in combo)
    return min(0.6, 0.0008 + amplitude * (train_count + 1) ** -0.45)


def train_counts(datasets: list[Dataset]) -> dict[tuple[str, ...], float]:
    """Training episodes per full combination (value slugs in DIMENSIONS order)."""
    from django.db.models import Sum

    from sites.models import ConditionSet

    dims = [d[0] for d in DIMENSIONS]
    rows = (
        Episode.objects.filter(dataset__in=datasets)
        .values("condition_set")
        .annotate(n=Sum("episode_count"))
    )
    sets = {
        cs.pk: cs.value_ids
        for cs in ConditionSet.objects.filter(pk__in=[r["condition_set"] for r in rows])
    }
    value_slug = {
        v.pk: (v.dimension.slug, v.slug) for v in ConditionValue.objects.select_related("dimension")
    }
    counts: dict[tuple[str, ...], float] = {}
    for row in rows:
        by_dim = dict(value_slug[v] for v in sets[row["condition_set"]])
        counts[tuple(by_dim[d] for d in dims)] = float(row["n"])
    return counts


def production(
    ctx: Ctx,
    deployments: dict[str, Deployment],
    modes: dict[str, FailureMode],
    datasets: dict[str, Dataset],
) -> None:
    train = train_counts(
        [datasets["lab-mm7-2026"], datasets["pilot-rotterdam-mm7"], datasets["vendor-pretrain-mm7"]]
    )
    fa6_train = train_counts([datasets["lab-fa6-2026"]])
    # Rotterdam runs π-MM7 v1 (released 60 days ago) and the fleet says so: its cycles are
    # that policy's outcomes, which the curve refit reads beside its evaluations. Duisburg's
    # FA6 runs a policy the demo does not register: its cycles name none.
    plans = [
        ("rotterdam-totes", 14, train, "pi-mm7-v1"),
        ("duisburg-induction", 2, fa6_train, ""),
        ("leeds-backroom", 0, train, ""),
    ]
    for slug, days, counts, policy in plans:
        dep = deployments[slug]
        if days == 0 or ProductionLog.objects.filter(deployment=dep).exists():
            continue
        rng = np.random.default_rng(SEED + 101 + len(slug))
        logs: list[ProductionLog] = []
        records: list[FailureRecord] = []
        for d in range(days):
            day = TODAY - timedelta(days=days - d)
            combos = _sample_correlated(ctx, DEPLOYMENT_PROFILES[slug], dep.cycles_per_day, rng)
            ids = combo_ids(ctx, combos)
            per_combo: dict[tuple[str, ...], int] = {}
            for combo in combos:
                per_combo[combo] = per_combo.get(combo, 0) + 1
            for combo, cycles in sorted(per_combo.items()):
                rate = true_failure_rate(combo, counts.get(combo, 0.0))
                failures = int(rng.binomial(cycles, rate))
                logs.append(
                    ProductionLog(
                        deployment=dep,
                        condition_set_id=ids[combo],
                        day=day,
                        policy=policy,
                        cycles=cycles,
                        failures=failures,
                    )
                )
                for k in range(failures):
                    mode = _failure_mode_for(combo, rng)
                    minute = int(rng.integers(0, 24 * 60))
                    records.append(
                        FailureRecord(
                            organization=ctx.operator,
                            deployment=dep,
                            failure_mode=modes[mode],
                            condition_set_id=ids[combo],
                            occurred_at=datetime.combine(day, time(0, 0), tzinfo=UTC)
                            + timedelta(minutes=minute),
                            intervention=mode != "navigation.blocked.human" or k % 2 == 0,
                            external_id=f"{slug}-{day:%Y%m%d}-{len(records):06d}",
                        )
                    )
        ProductionLog.objects.bulk_create(logs, batch_size=5000, ignore_conflicts=True)
        FailureRecord.objects.bulk_create(records, batch_size=5000, ignore_conflicts=True)


def _sample_correlated(
    ctx: Ctx, marginals: dict[str, dict[str, float]], n: int, rng: np.random.Generator
) -> list[tuple[str, ...]]:
    """Production is not a product of marginals: the night shift is dim and busy at once."""
    combos = sample_combos(ctx, marginals, n, rng)
    out = []
    for combo in combos:
        c = list(combo)
        if c[0] == "dim-sodium" and "busy" in marginals["human-activity"] and rng.random() < 0.5:
            c[5] = "busy"
        out.append(tuple(c))
    return out


def condition_samples(ctx: Ctx, deployments: dict[str, Deployment]) -> None:
    """Site survey measurements (light level, camera offset) the domain classifier compares."""
    for index, (slug, dep) in enumerate(sorted(deployments.items())):
        if ConditionSample.objects.filter(deployment=dep).exists():
            continue
        rng = np.random.default_rng(SEED + 500 + index)
        combos = sample_combos(ctx, DEPLOYMENT_PROFILES[slug], 400, rng)
        start = datetime(2026, 9, 1, 6, 0, tzinfo=UTC)
        ConditionSample.objects.bulk_create(
            ConditionSample(
                deployment=dep,
                measured_at=start + timedelta(minutes=97 * i),
                features=features(combo, rng),
            )
            for i, combo in enumerate(combos)
        )


def _failure_mode_for(combo: tuple[str, ...], rng: np.random.Generator) -> str:
    weights = [(VALUE_FAILURE_MODE[v], DIFFICULTY[v]) for v in combo if v in VALUE_FAILURE_MODE]
    if not weights:
        return "grasp.miss"
    probs = np.array([w for _, w in weights])
    return weights[int(rng.choice(len(weights), p=probs / probs.sum()))][0]


def evaluations(
    ctx: Ctx,
    deployments: dict[str, Deployment],
    embodiments: dict[str, Embodiment],
    tasks: dict[str, Task],
    datasets: dict[str, Dataset],
) -> None:
    policy, created = PolicyVersion.objects.get_or_create(
        organization=ctx.operator,
        slug="pi-mm7-v1",
        defaults={
            "name": "π-MM7 v1",
            "embodiment": embodiments["mm7"],
            "task": tasks["tote-picking"],
            "released_on": TODAY - timedelta(days=60),
            "notes": "Trained on the lab inventory, the Rotterdam pilot week and the vendor mix.",
        },
    )
    if created:
        policy.trained_on_datasets.set(
            [
                datasets["lab-mm7-2026"],
                datasets["pilot-rotterdam-mm7"],
                datasets["vendor-pretrain-mm7"],
            ]
        )
    train = train_counts(
        [datasets["lab-mm7-2026"], datasets["pilot-rotterdam-mm7"], datasets["vendor-pretrain-mm7"]]
    )
    runs = [
        ("rotterdam-totes", "Rotterdam acceptance test Oct 2026", 2400),
        ("venlo-each-pick", "Venlo acceptance test Oct 2026", 1200),
        (None, "Lab bench regression Oct 2026", 600),
    ]
    for i, (dep_slug, label, trials) in enumerate(runs):
        dep = deployments[dep_slug] if dep_slug else None
        run, created = EvaluationRun.objects.get_or_create(
            organization=ctx.operator,
            policy_version=policy,
            label=label,
            defaults={
                "deployment": dep,
                "site": dep.site if dep else None,
                "evaluated_on": TODAY - timedelta(days=30 - i),
                "source": "seed_demo",
            },
        )
        if not created:
            continue
        rng = np.random.default_rng(SEED + 300 + i)
        marginals = DEPLOYMENT_PROFILES[dep_slug] if dep_slug else LAB_MARGINALS
        combos = sample_combos(ctx, marginals, trials, rng)
        ids = combo_ids(ctx, combos)
        per_combo: dict[tuple[str, ...], int] = {}
        for combo in combos:
            per_combo[combo] = per_combo.get(combo, 0) + 1
        results = []
        for combo, n in sorted(per_combo.items()):
            failures = int(rng.binomial(n, true_failure_rate(combo, train.get(combo, 0.0))))
            results.append(
                EvaluationResult(
                    run=run, condition_set_id=ids[combo], trials=n, successes=n - failures
                )
            )
        EvaluationResult.objects.bulk_create(results)
