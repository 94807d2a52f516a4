"""Gap report at scale: N episodes (default 1,000,000) over 8 condition dimensions (~5,000 cells).

Builds the inventory in SQL (generate_series, 1,000,000 rows per statement, so 10,000,000
build in minutes), VACUUMs and CHECKPOINTs (so the load's writes are not flushed while
measuring), checks the maintained coverage counts against a fresh GROUP BY, then times the
full report (aggregation, scoring, domain shift, storing every cell) in 7 alternating pairs:
training coverage from the maintained counts (labeling_coveragecount, what the report reads)
against the GROUP BY over every episode (the path before them), same numbers asserted. Also
prints the bare GROUP BY over the 8 condition columns of a plain wide table and times the
gap page. Targets: report < 0.5 s with maintained counts at 10,000,000 episodes and the same
at 1,000,000 (cost independent of the episode count); page under 300 ms.

Usage: DATABASE_URL=... python bench/gap_report.py [--episodes N] [--keep]
"""

from __future__ import annotations

import argparse
import time
from datetime import date

from _util import purge_organizations, setup_django

setup_django()

import numpy as np  # noqa: E402
from django.db import DatabaseError, connection, transaction  # noqa: E402

from accounts.models import Organization  # noqa: E402

ORG = "bench-gap"
DIMS = [("d1", 6), ("d2", 5), ("d3", 4), ("d4", 4), ("d5", 3), ("d6", 3), ("d7", 3), ("d8", 2)]


ROUNDS = 7
CHUNK = 1_000_000  # episodes per INSERT statement (and per trigger delta)


def build(episodes: int) -> tuple[object, int]:
    from campaigns.models import Campaign
    from labeling.models import Dataset
    from sites.models import (
        ConditionDimension,
        ConditionShare,
        ConditionValue,
        Deployment,
        Embodiment,
        Site,
        Task,
    )
    from sites.services import condition_sets_intern

    purge_organizations(ORG, ORG + "-customer")
    org = Organization.objects.create(slug=ORG, name="Bench gap", kind="operator")
    customer = Organization.objects.create(
        slug=ORG + "-customer", name="Bench customer", kind="customer", operator=org
    )
    rng = np.random.default_rng(7)
    values = []
    for i, (slug, n) in enumerate(DIMS):
        dim = ConditionDimension.objects.create(
            organization=org, slug=slug, name=slug.upper(), order=i
        )
        values.append(
            [
                ConditionValue.objects.create(
                    dimension=dim, slug=f"v{j}", label=f"{slug}-v{j}", order=j
                )
                for j in range(n)
            ]
        )
    emb = Embodiment.objects.create(
        organization=org,
        slug="arm",
        name="Arm",
        morphology="arm",
        end_effector="g",
        control_rate_hz=50,
    )
    other = Embodiment.objects.create(
        organization=org,
        slug="arm2",
        name="Arm 2",
        morphology="arm",
        end_effector="g",
        control_rate_hz=50,
    )
    task = Task.objects.create(organization=org, slug="pick", name="Pick")
    campaign = Campaign.objects.create(
        organization=org,
        customer=customer,
        slug="bench",
        name="Bench",
        task=task,
        reliability_goal=0.999,
        start_date=date(2026, 1, 1),
        end_date=date(2026, 12, 31),
    )
    campaign.embodiments.set([emb])
    for d in range(2):
        site = Site.objects.create(
            organization=org,
            customer=customer,
            slug=f"s{d}",
            name=f"Site {d}",
            country="NL",
            latitude=52,
            longitude=5,
            timezone="Europe/Amsterdam",
        )
        dep = Deployment.objects.create(
            organization=org,
            customer=customer,
            slug=f"dep{d}",
            name=f"Dep {d}",
            site=site,
            embodiment=emb,
            task=task,
            cycles_per_day=4000 + 1000 * d,
            reliability_target=0.999,
        )
        shares = []
        for vs in values:
            support = vs[: max(2, len(vs) - 1 - d)]
            w = rng.dirichlet(np.ones(len(support)))
            shares += [
                ConditionShare(deployment=dep, value=v, share=float(x))
                for v, x in zip(support, w, strict=True)
            ]
        ConditionShare.objects.bulk_create(shares)
        campaign.deployments.add(dep)
    # ~5,000 occupied combinations, lab-skewed: a Zipf-like weight over sampled combinations.
    combos = {tuple(int(rng.integers(0, n)) for _, n in DIMS) for _ in range(5200)}
    combos_list = sorted(combos)[:5000]
    ids = condition_sets_intern(
        organization=org,
        combinations=[[values[i][c].pk for i, c in enumerate(k)] for k in combos_list],
    )
    set_ids = np.array(
        [ids[tuple(sorted(values[i][c].pk for i, c in enumerate(k)))] for k in combos_list]
    )
    weights = 1.0 / np.arange(1, len(set_ids) + 1) ** 0.9
    weights /= weights.sum()
    dataset = Dataset.objects.create(organization=org, slug="bench", name="Bench inventory")
    started = time.perf_counter()
    with connection.cursor() as cursor:
        # The episodes are generated in SQL (no Python loop over rows, so 10,000,000 build in
        # minutes in constant memory), in statements of CHUNK rows: each is one COPY-sized
        # insert whose trigger adds its delta to the maintained coverage counts.
        cursor.execute("SELECT setseed(0.7)")
        cumulative = np.cumsum(weights)[:-1].tolist()
        for lo in range(0, episodes, CHUNK):
            hi = min(episodes, lo + CHUNK)
            cursor.execute(
                """
                INSERT INTO labeling_episode (organization_id, dataset_id, key, embodiment_id,
                    task_id, condition_set_id, episode_count, frames, duration_s, outcome,
                    storage_uri, provenance, sync_status, label_status, validated, features,
                    extra, created_at, updated_at)
                SELECT %(org)s, %(dataset)s, i::text,
                       CASE WHEN random() < 0.85 THEN %(emb)s ELSE %(other)s END, %(task)s,
                       (%(sets)s::bigint[])[width_bucket(random(), %(cum)s::float8[]) + 1],
                       1, 300, 10, 'unknown', '', 'imported', 'synced', 'unlabelled', true,
                       jsonb_build_object('light_lux', round((exp(6.5 + 0.3 *
                           sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random())))::numeric, 1)),
                       '{}', now(), now()
                FROM generate_series(%(lo)s, %(hi)s - 1) AS i
                """,
                {
                    "org": org.pk,
                    "dataset": dataset.pk,
                    "emb": emb.pk,
                    "other": other.pk,
                    "task": task.pk,
                    "sets": set_ids.tolist(),
                    "cum": cumulative,
                    "lo": lo,
                    "hi": hi,
                },
            )
            print(f"  {hi:,} episodes ({time.perf_counter() - started:.0f} s)", flush=True)
        # The same episodes as a conventional wide table: one column per condition dimension.
        cursor.execute("DROP TABLE IF EXISTS bench_wide_episodes")
        cursor.execute(
            "CREATE TEMPORARY TABLE bench_set_codes (set_id bigint PRIMARY KEY, "
            + ", ".join(f"d{i + 1} smallint" for i in range(len(DIMS)))
            + ")"
        )
        with cursor.copy("COPY bench_set_codes FROM STDIN") as copy:
            for sid, k in zip(set_ids, combos_list, strict=True):
                copy.write(f"{int(sid)}\t" + "\t".join(map(str, k)) + "\n")
        columns = ", ".join(f"m.d{i + 1}" for i in range(len(DIMS)))
        cursor.execute(
            f"CREATE TABLE bench_wide_episodes AS SELECT e.embodiment_id, {columns}, "
            "e.episode_count FROM labeling_episode e "
            "JOIN bench_set_codes m ON m.set_id = e.condition_set_id WHERE e.dataset_id = %s",
            [dataset.pk],
        )
        cursor.execute("ANALYZE labeling_episode")
    from sites.models import ConditionSample

    ConditionSample.objects.bulk_create(
        ConditionSample(
            deployment=dep, measured_at="2026-06-01T00:00:00Z", features={"light_lux": float(x)}
        )
        for dep in campaign.deployments.all()
        for x in rng.lognormal(5.5, 0.5, 400).round(1)
    )
    print(
        f"built {episodes:,} episodes over {len(DIMS)} dimensions, {len(set_ids):,} occupied cells "
        f"in {time.perf_counter() - started:.1f}s"
    )
    return campaign, org.pk


def bare_group_by(org_id: int) -> float:
    with connection.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute(
            "SELECT embodiment_id, condition_set_id, SUM(episode_count) FROM labeling_episode "
            "WHERE organization_id = %s GROUP BY embodiment_id, condition_set_id",
            [org_id],
        )
        rows = cursor.fetchall()
        elapsed = time.perf_counter() - started
    assert rows
    return elapsed


def report_group_by(campaign: object) -> float:
    """The report's former aggregation alone: the GROUP BY over every episode, same filters."""
    from analytics.services.gap_inputs import TRAINING_SQL_SCAN as TRAINING_SQL

    with connection.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute(TRAINING_SQL, [campaign.organization_id, campaign.task_id])  # type: ignore[attr-defined]
        rows = cursor.fetchall()
        elapsed = time.perf_counter() - started
    assert rows
    return elapsed


def wide_group_by() -> float:
    """The conventional baseline: GROUP BY the eight condition columns of a wide table."""
    columns = ", ".join(["embodiment_id"] + [f"d{i + 1}" for i in range(len(DIMS))])
    with connection.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute(
            f"SELECT {columns}, SUM(episode_count) FROM bench_wide_episodes GROUP BY {columns}"
        )
        rows = cursor.fetchall()
        elapsed = time.perf_counter() - started
    assert rows
    return elapsed


def full_report(campaign: object, *, scan: bool = False) -> tuple[float, object]:
    """Build the full report; ``scan``: training coverage by the GROUP BY over every episode
    (the path before maintained counts) instead of the maintained counts."""
    from analytics.models import GapReport
    from analytics.services import gap_inputs
    from analytics.services.gap import gap_report_build

    maintained_sql = gap_inputs.TRAINING_SQL
    if scan:
        gap_inputs.TRAINING_SQL = gap_inputs.TRAINING_SQL_SCAN
    try:
        report = GapReport.objects.create(
            organization_id=campaign.organization_id, campaign=campaign
        )  # type: ignore[attr-defined]
        started = time.perf_counter()
        report = gap_report_build(report=report)
        return time.perf_counter() - started, report
    finally:
        gap_inputs.TRAINING_SQL = maintained_sql


def maintained_group_by(campaign: object) -> float:
    """The report's training read alone, from the maintained counts."""
    from analytics.services.gap_inputs import TRAINING_SQL

    with connection.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute(TRAINING_SQL, [campaign.organization_id, campaign.task_id])  # type: ignore[attr-defined]
        rows = cursor.fetchall()
        elapsed = time.perf_counter() - started
    assert rows
    return elapsed


def page_time(report: object) -> float:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from accounts.models import Membership

    user, _ = get_user_model().objects.get_or_create(username="bench-gap-manager")
    Membership.objects.get_or_create(
        user=user, defaults={"organization_id": report.organization_id, "role": "manager"}
    )  # type: ignore[attr-defined]
    client = Client()
    client.force_login(user)
    url = f"/planner/gap/{report.pk}/"  # type: ignore[attr-defined]
    client.get(url)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        response = client.get(url)
        best = min(best, time.perf_counter() - started)
        assert response.status_code == 200, response.status_code
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    with transaction.atomic():
        campaign, org_id = build(args.episodes)
    with connection.cursor() as cursor:
        # As autovacuum would soon after a bulk load: sets the visibility map, so both the
        # bare GROUP BY and the report's can use index-only scans.
        cursor.execute("VACUUM ANALYZE labeling_episode")
    try:
        with connection.cursor() as cursor:
            # Write out the load's dirty pages now, not in the background while we measure.
            cursor.execute("CHECKPOINT")
    except DatabaseError as exc:  # needs superuser or pg_checkpoint; the figures get noisier
        print(f"no CHECKPOINT before measuring ({str(exc).strip()})")
    from labeling.selectors import coverage_differences

    started = time.perf_counter()
    differences = coverage_differences(organization_id=org_id)
    check = time.perf_counter() - started
    print(
        f"maintained counts vs a fresh GROUP BY: {len(differences)} difference(s) "
        f"(check took {check:.1f} s)"
    )
    # The machine is noisy (autovacuum, other jobs): measure in alternation, each report
    # with maintained counts next to the GROUP BY path, and compare pair by pair.
    bare = min(bare_group_by(org_id) for _ in range(3))
    own = min(report_group_by(campaign) for _ in range(3))
    kept = min(maintained_group_by(campaign) for _ in range(3))
    pairs = []
    for _ in range(ROUNDS):
        wide = wide_group_by()
        scanned, scanned_report = full_report(campaign, scan=True)
        seconds, report = full_report(campaign)
        pairs.append((seconds, wide, report, scanned, scanned_report))
    assert all(
        p[2].summary == p[4].summary  # type: ignore[attr-defined]
        for p in pairs
    ), "the report with maintained counts differs from the GROUP BY path"
    median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    best, _, report, _, _ = min(pairs, key=lambda pair: pair[0])
    best_scan = min(p[3] for p in pairs)
    timings = report.params.get("timings_s", {})  # type: ignore[attr-defined]
    scan_timings = min(pairs, key=lambda p: p[3])[4].params.get("timings_s", {})  # type: ignore[attr-defined]
    print(
        f"bare GROUP BY (embodiment, condition set) over {args.episodes:,} episodes: {bare:.3f} s"
    )
    print(
        f"training read: maintained counts {kept * 1000:.1f} ms, GROUP BY over the episodes "
        f"{own:.3f} s ({own / kept:.0f}x)"
    )
    print(
        f"full gap report, maintained counts ({report.n_cells:,} cells stored): best {best:.3f} s, "  # type: ignore[attr-defined]
        f"median {median([p[0] for p in pairs]):.3f} s "
        f"[inputs {timings.get('inputs')}, score {timings.get('score')}, domain shift {timings.get('domain_shift')}, store {timings.get('store')}]"
        " (target < 0.5 s, independent of the episode count)"
    )
    print(
        f"full gap report, GROUP BY path: best {best_scan:.3f} s, median "
        f"{median([p[3] for p in pairs]):.3f} s [inputs {scan_timings.get('inputs')}]"
    )
    ratios = sorted(p[3] / p[0] for p in pairs)
    print(
        f"speed-up of maintained counts over the GROUP BY path, {ROUNDS} alternating pairs: "
        f"median {median(ratios):.1f}x (min {ratios[0]:.1f}x, max {ratios[-1]:.1f}x)"
    )
    print(
        "bare GROUP BY over the 8 condition columns of a wide table (same episodes): "
        f"best {min(p[1] for p in pairs):.3f} s; ratio best report / it: "
        f"{best / min(p[1] for p in pairs):.2f}x"
    )
    try:
        page = page_time(report)
        print(
            f"gap page with {report.n_cells:,} stored cells: {page * 1000:.0f} ms (target < 300 ms)"
        )  # type: ignore[attr-defined]
    except Exception as exc:  # the page may not exist yet in older checkouts
        print(f"gap page: not measured ({exc})")
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_wide_episodes")
    if not args.keep:
        from django.contrib.auth import get_user_model

        get_user_model().objects.filter(username="bench-gap-manager").delete()
        purge_organizations(ORG, ORG + "-customer")


if __name__ == "__main__":
    main()
