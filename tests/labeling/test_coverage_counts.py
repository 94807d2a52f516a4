"""Maintained coverage counts equal a fresh GROUP BY, whatever writes the episodes.

The counts (``labeling_coveragecount``) are kept by triggers on ``labeling_episode``; every
test here changes episodes the way a real path does and asks the check
(:func:`labeling.selectors.coverage_differences`) for differences, plus a hand count where
that is easy to state.
"""

from __future__ import annotations

import threading
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics.models import GapCell, GapReport
from analytics.services import gap_inputs
from analytics.services.gap import gap_report_build
from analytics.services.gap_inputs import DimensionSpace, campaign_inputs
from analytics.services.steering import train_counts
from labeling.importers import direct
from labeling.models import CoverageCount, Dataset, Episode
from labeling.selectors import coverage_differences
from sites.models import Embodiment, Task
from sites.services import condition_set_intern
from tests.labeling.imports import run


def counts(organization) -> dict[tuple[int, int | None, int | None, int], int]:
    """Maintained episodes per (dataset, embodiment, task, condition set)."""
    return {
        (c.dataset_id, c.embodiment_id, c.task_id, c.condition_set_id): c.episodes
        for c in CoverageCount.objects.filter(organization=organization)
    }


def assert_counts_match_group_by() -> None:
    assert coverage_differences() == []


def manifest(tmp_path, body: str, name: str = "m.csv"):
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


IMPORT_MAPPING = ["key=key", "count=count", "lighting=lighting", "robot=embodiment", "task=task"]


def inventory(world, rows: list[tuple[str, int, str, str, str]]) -> str:
    lines = ["key,count,lighting,robot,task"]
    lines += [",".join([k, str(n), light, robot, task]) for k, n, light, robot, task in rows]
    return "\n".join(lines) + "\n"


@pytest.fixture
def imported(world_a, tmp_path):
    """An inventory of 6 rows imported through the real importer: two lightings, one blank."""
    emb = world_a.embodiment.slug
    task = world_a.task.name
    body = inventory(
        world_a,
        [
            ("a", 3, "bright", emb, task),
            ("b", 2, "dim", emb, task),
            ("c", 5, "dim", emb, ""),
            ("d", 1, "", emb, task),  # no condition set: not countable
            ("e", 4, "bright", "", task),
            ("f", 7, "dim", emb, task),
        ],
    )
    record = run(world_a, manifest(tmp_path, body), name="Fleet", mapping=IMPORT_MAPPING)
    assert record.job.status == "succeeded", record.job.message
    return Dataset.objects.get(organization=world_a.operator, name="Fleet")


# --- imports ------------------------------------------------------------------------------


def test_an_imported_inventory_is_counted_as_a_group_by_counts_it(world_a, imported):
    bright, dim = (
        condition_set_intern(organization=world_a.operator, value_ids=[v.pk])
        for v in world_a.values
    )
    emb, task = world_a.embodiment.pk, world_a.task.pk

    mine = {k: v for k, v in counts(world_a.operator).items() if k[0] == imported.pk}

    assert mine == {
        (imported.pk, emb, task, bright.pk): 3,
        (imported.pk, emb, task, dim.pk): 2 + 7,
        (imported.pk, emb, None, dim.pk): 5,
        (imported.pk, None, task, bright.pk): 4,
    }
    assert_counts_match_group_by()


def test_the_staging_import_path_is_counted_too(world_a, tmp_path, monkeypatch):
    monkeypatch.setattr(direct, "ENABLED", False)
    body = inventory(world_a, [("a", 3, "bright", world_a.embodiment.slug, world_a.task.name)])

    record = run(world_a, manifest(tmp_path, body), name="Staged", mapping=IMPORT_MAPPING)

    assert record.job.status == "succeeded", record.job.message
    staged = Dataset.objects.get(organization=world_a.operator, name="Staged")
    assert CoverageCount.objects.get(dataset=staged).episodes == 3
    assert_counts_match_group_by()


def test_a_reimport_that_changes_counts_conditions_and_rows_keeps_the_counts_equal(
    world_a, imported, tmp_path
):
    emb = world_a.embodiment.slug
    task = world_a.task.name
    body = inventory(
        world_a,
        [
            ("a", 30, "bright", emb, task),  # count changed
            ("b", 2, "bright", emb, task),  # lighting changed
            ("c", 5, "dim", emb, ""),  # unchanged
            ("d", 1, "dim", emb, task),  # gained a condition set
            ("e", 4, "", "", task),  # lost it
            ("f", 7, "dim", emb, task),
            ("g", 11, "dim", emb, task),  # new
        ],
    )

    record = run(world_a, manifest(tmp_path, body), name="Fleet", mapping=IMPORT_MAPPING)

    assert record.job.status == "succeeded", record.job.message
    mine = sum(v for k, v in counts(world_a.operator).items() if k[0] == imported.pk)
    assert mine == 30 + 2 + 5 + 1 + 7 + 11
    assert_counts_match_group_by()


# --- deletions ----------------------------------------------------------------------------


def test_deleting_episodes_and_a_whole_dataset_takes_their_counts_away(world_a, imported):
    Episode.objects.filter(dataset=imported, key__in=["a", "b"]).delete()
    assert_counts_match_group_by()

    imported.delete()

    assert not CoverageCount.objects.filter(dataset_id=imported.pk).exists()
    assert_counts_match_group_by()


def test_deleting_the_last_episode_of_a_key_removes_its_row(world_a):
    key_rows = CoverageCount.objects.filter(dataset=world_a.dataset)
    assert key_rows.count() == 1

    world_a.episode.delete()

    assert not key_rows.exists()


def test_truncating_the_episode_table_empties_the_counts(world_a, imported):
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the test's deferred checks first
        cursor.execute("TRUNCATE labeling_episode CASCADE")

    assert not CoverageCount.objects.exists()


# --- label review, validation and edits ---------------------------------------------------


def test_rejecting_an_episode_takes_it_out_and_accepting_it_again_puts_it_back(world_a, imported):
    f = Episode.objects.get(dataset=imported, key="f")
    total = sum(counts(world_a.operator).values())

    Episode.objects.filter(pk=f.pk).update(label_status=Episode.LabelStatus.ACCEPTED)
    assert sum(counts(world_a.operator).values()) == total
    Episode.objects.filter(pk=f.pk).update(label_status=Episode.LabelStatus.REJECTED)
    assert sum(counts(world_a.operator).values()) == total - 7
    assert_counts_match_group_by()
    Episode.objects.filter(pk=f.pk).update(label_status=Episode.LabelStatus.ACCEPTED)

    assert sum(counts(world_a.operator).values()) == total
    assert_counts_match_group_by()


def test_validation_flips_move_episodes_in_and_out(world_a, imported):
    total = sum(counts(world_a.operator).values())

    Episode.objects.filter(dataset=imported).update(validated=False)
    assert sum(counts(world_a.operator).values()) == total - (3 + 2 + 5 + 4 + 7)
    assert_counts_match_group_by()
    Episode.objects.filter(dataset=imported, key__in=["a", "c"]).update(validated=True)

    assert sum(counts(world_a.operator).values()) == total - (2 + 4 + 7)
    assert_counts_match_group_by()


def test_episode_count_condition_set_and_embodiment_edits_move_the_counts(world_a, imported):
    bright = condition_set_intern(organization=world_a.operator, value_ids=[world_a.values[0].pk])
    both = condition_set_intern(
        organization=world_a.operator, value_ids=[v.pk for v in world_a.values]
    )
    other = Embodiment.objects.create(
        organization=world_a.operator,
        slug="other-qz",
        name="Other",
        morphology="arm",
        control_rate_hz=50,
    )

    Episode.objects.filter(dataset=imported, key="a").update(episode_count=12)
    Episode.objects.filter(dataset=imported, key="b").update(condition_set=both)
    Episode.objects.filter(dataset=imported, key="c").update(embodiment=other, task=None)
    Episode.objects.filter(dataset=imported, key="d").update(condition_set=bright)
    Episode.objects.filter(dataset=imported, key="e").update(condition_set=None)

    mine = {k: v for k, v in counts(world_a.operator).items() if k[0] == imported.pk}
    assert mine[(imported.pk, world_a.embodiment.pk, world_a.task.pk, bright.pk)] == 12 + 1
    assert mine[(imported.pk, world_a.embodiment.pk, world_a.task.pk, both.pk)] == 2
    assert (
        mine[
            (
                imported.pk,
                other.pk,
                None,
                Episode.objects.get(dataset=imported, key="c").condition_set_id,
            )
        ]
        == 5
    )
    assert (imported.pk, None, world_a.task.pk, bright.pk) not in mine
    assert_counts_match_group_by()


# --- any sequence of writes ---------------------------------------------------------------

OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "insert",
                "delete",
                "reject",
                "accept",
                "invalidate",
                "validate",
                "count",
                "set",
                "embodiment",
                "task",
            ]
        ),
        st.integers(min_value=0, max_value=2**31),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=OPERATIONS)
def test_any_sequence_of_episode_writes_keeps_the_counts_equal_to_a_group_by(world_a, operations):
    org = world_a.operator
    sets = [
        None,
        *(condition_set_intern(organization=org, value_ids=[v.pk]) for v in world_a.values),
    ]
    embodiments = [None, world_a.embodiment]
    tasks = [None, world_a.task]
    with transaction.atomic():
        dataset = Dataset.objects.create(organization=org, slug="prop", name="Prop")
        made = 0
        for op, seed in operations:
            rng = np.random.default_rng(seed)
            mine = Episode.objects.filter(dataset=dataset)
            ids = list(mine.values_list("pk", flat=True))
            some = (
                [
                    int(i)
                    for i in rng.choice(
                        ids, size=min(len(ids), int(rng.integers(1, 6))), replace=False
                    )
                ]
                if ids
                else []
            )
            chosen = Episode.objects.filter(pk__in=some)
            if op == "insert":
                n = int(rng.integers(1, 8))
                Episode.objects.bulk_create(
                    Episode(
                        organization=org,
                        dataset=dataset,
                        key=str(made + i),
                        embodiment=embodiments[int(rng.integers(0, 2))],
                        task=tasks[int(rng.integers(0, 2))],
                        condition_set=sets[int(rng.integers(0, 3))],
                        episode_count=int(rng.integers(1, 50)),
                        validated=bool(rng.random() < 0.8),
                        label_status=str(rng.choice(["unlabelled", "accepted", "rejected"])),
                    )
                    for i in range(n)
                )
                made += n
            elif op == "delete":
                chosen.delete()
            elif op == "reject":
                chosen.update(label_status=Episode.LabelStatus.REJECTED)
            elif op == "accept":
                chosen.update(label_status=Episode.LabelStatus.ACCEPTED)
            elif op == "invalidate":
                chosen.update(validated=False)
            elif op == "validate":
                chosen.update(validated=True)
            elif op == "count":
                chosen.update(episode_count=int(rng.integers(1, 50)))
            elif op == "set":
                chosen.update(condition_set=sets[int(rng.integers(0, 3))])
            elif op == "embodiment":
                chosen.update(embodiment=embodiments[int(rng.integers(0, 2))])
            else:
                chosen.update(task=tasks[int(rng.integers(0, 2))])

        assert coverage_differences(organization_id=org.pk) == []
        transaction.set_rollback(True)


# --- concurrent writers -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_imports_into_the_same_keys_lose_no_counts():
    from tests.factories import build_world

    world = build_world("qzcov")
    org = world.operator
    sets = [condition_set_intern(organization=org, value_ids=[v.pk]) for v in world.values]
    datasets = [
        Dataset.objects.create(organization=org, slug=f"c{i}", name=f"C{i}") for i in range(4)
    ]
    writers = 6
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            with transaction.atomic():
                # Keys in opposite orders in alternate writers; several statements each.
                order = sets if i % 2 else sets[::-1]
                for round_ in range(3):
                    Episode.objects.bulk_create(
                        Episode(
                            organization=org,
                            dataset=datasets[i % len(datasets)],
                            key=f"w{i}-{round_}-{j}",
                            embodiment=world.embodiment,
                            condition_set=order[j % 2],
                            episode_count=j + 1,
                        )
                        for j in range(20)
                    )
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    assert not errors, errors
    assert coverage_differences(organization_id=org.pk) == []
    added = sum(c.episodes for c in CoverageCount.objects.filter(dataset__in=datasets))
    assert added == writers * 3 * sum(range(1, 21))


# --- the reads the gap report and steering make -------------------------------------------


@pytest.fixture
def mixed_inventory(world_a, imported):
    """Rejected, unvalidated, other-task and other-embodiment episodes beside the import."""
    org = world_a.operator
    dim = condition_set_intern(organization=org, value_ids=[world_a.values[1].pk])
    other_task = Task.objects.create(organization=org, slug="stack-qz", name="Stack")
    other = Embodiment.objects.create(
        organization=org, slug="other-qz", name="Other", morphology="arm", control_rate_hz=50
    )
    extra = Dataset.objects.create(organization=org, slug="extra", name="Extra")
    Episode.objects.bulk_create(
        [
            Episode(
                organization=org,
                dataset=extra,
                key="r",
                embodiment=world_a.embodiment,
                task=world_a.task,
                condition_set=dim,
                episode_count=100,
                label_status=Episode.LabelStatus.REJECTED,
            ),
            Episode(
                organization=org,
                dataset=extra,
                key="u",
                embodiment=world_a.embodiment,
                task=world_a.task,
                condition_set=dim,
                episode_count=200,
                validated=False,
            ),
            Episode(
                organization=org,
                dataset=extra,
                key="t",
                embodiment=world_a.embodiment,
                task=other_task,
                condition_set=dim,
                episode_count=400,
            ),
            Episode(
                organization=org,
                dataset=extra,
                key="o",
                embodiment=other,
                task=world_a.task,
                condition_set=dim,
                episode_count=800,
            ),
        ]
    )
    return extra


def test_the_gap_report_numbers_equal_the_group_by_path(world_a, mixed_inventory, monkeypatch):
    campaign = world_a.campaign

    maintained = campaign_inputs(campaign=campaign)
    maintained_report = gap_report_build(
        report=GapReport.objects.create(organization=world_a.operator, campaign=campaign)
    )
    monkeypatch.setattr(gap_inputs, "TRAINING_SQL", gap_inputs.TRAINING_SQL_SCAN)
    scanned = campaign_inputs(campaign=campaign)
    scanned_report = gap_report_build(
        report=GapReport.objects.create(organization=world_a.operator, campaign=campaign)
    )

    assert maintained.keys == scanned.keys
    assert maintained.train_count.tolist() == scanned.train_count.tolist()
    assert maintained.train_total_raw == scanned.train_total_raw == 3 + 2 + 5 + 4 + 7 + 1 + 800
    fields = ("value_ids", "rank", "train_count", "train_share", "coverage", "target_share")
    cells = [
        list(GapCell.objects.filter(report=r).order_by("rank").values_list(*fields))
        for r in (maintained_report, scanned_report)
    ]
    assert cells[0] == cells[1]
    assert maintained_report.summary == scanned_report.summary


def test_steering_training_counts_equal_a_group_by_over_the_episodes(
    world_a, imported, mixed_inventory
):
    campaign = world_a.campaign
    campaign.transfer_weight = 0.25
    campaign.save(update_fields=["transfer_weight"])
    space = DimensionSpace.build(organization_id=world_a.operator.pk, slugs=None)
    own = {world_a.embodiment.pk}

    def by_group_by(dataset_ids):
        episodes = Episode.objects.countable().filter(
            organization=world_a.operator, condition_set__isnull=False
        )
        out: dict[tuple[int, ...], float] = {}
        for e in episodes.select_related("condition_set"):
            if e.task_id not in (None, campaign.task_id):
                continue
            if dataset_ids is not None and e.dataset_id not in dataset_ids:
                continue
            key = space.project(e.condition_set.value_ids)
            weight = 1.0 if e.embodiment_id in own else 0.25
            out[key] = out.get(key, 0.0) + weight * e.episode_count
        return out

    for dataset_ids in (
        None,
        [imported.pk],
        [mixed_inventory.pk],
        [imported.pk, mixed_inventory.pk],
    ):
        got = train_counts(campaign=campaign, space=space, dataset_ids=dataset_ids)
        assert got == pytest.approx(by_group_by(dataset_ids)), dataset_ids


# --- the check ----------------------------------------------------------------------------


def test_the_check_command_names_corrupted_counts_and_fix_repairs_them(world_a, imported):
    first, second = CoverageCount.objects.filter(dataset=imported).order_by("pk")[:2]
    CoverageCount.objects.filter(pk=first.pk).update(episodes=first.episodes + 5)
    CoverageCount.objects.filter(pk=second.pk).delete()
    CoverageCount.objects.create(
        organization=world_a.operator,
        dataset=imported,
        embodiment=None,
        task=None,
        condition_set=first.condition_set,
        episodes=9,
        rows=1,
    )
    out = StringIO()

    with pytest.raises(CommandError, match="3 coverage count"):
        call_command("coverage_check", stdout=out)

    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert (
        f"maintained {first.episodes + 5} episodes in {first.rows} rows, GROUP BY {first.episodes} in {first.rows}"
        in out.getvalue()
    )
    assert (
        f"maintained 0 episodes in 0 rows, GROUP BY {second.episodes} in {second.rows}"
        in out.getvalue()
    )
    assert "maintained 9 episodes in 1 rows, GROUP BY 0 in 0" in out.getvalue()

    fixed = StringIO()
    call_command("coverage_check", "--fix", stdout=fixed)

    assert "rebuilt" in fixed.getvalue()
    assert_counts_match_group_by()
    again = StringIO()
    call_command("coverage_check", "--organization", world_a.operator.slug, stdout=again)
    assert "match" in again.getvalue()


# --- the direct load counts its own rows (migration 0010) ----------------------------------


def _setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('fieldcraft.coverage', true)")
        return cursor.fetchone()[0] or ""


def _long_inventory(world, n: int, *, late_quote: bool = False) -> str:
    """``n`` rows in many pyarrow blocks: lightings new to the organization arrive in the
    second half (their condition sets interned between COPYs), some rows rejected, some
    without an embodiment, a task or a lighting."""
    emb, task = world.embodiment.slug, world.task.name
    lines = ["key,count,lighting,robot,task,status"]
    for i in range(n):
        lighting = ["bright", "dim", ""][i % 3] if i < n // 2 else f"lamp {i % 7}"
        robot = "" if i % 5 == 0 else emb
        status = ["unlabelled", "rejected", "accepted", "labelled"][i % 4]
        lines.append(f"k{i},{1 + i % 4},{lighting},{robot},{task if i % 6 else ''},{status}")
    if late_quote:
        # A doubled quote in a quoted value: the staging path reads it, the direct load not.
        key, count, lighting, rest = lines[-3].split(",", 3)
        doubled = lighting.replace("lamp", 'la""mp')
        lines[-3] = f'{key},{count},"{doubled}",{rest}'
    return "\n".join(lines) + "\n"


LONG_MAPPING = [*IMPORT_MAPPING, "status=label_status"]


def test_the_direct_load_adds_its_counts_once_and_the_trigger_counts_after_it(
    world_a, tmp_path, monkeypatch
):
    monkeypatch.setattr(direct, "BLOCK_BYTES", 1024)  # ~30 blocks, the COPY restarted
    body = _long_inventory(world_a, 900)

    record = run(
        world_a, manifest(tmp_path, body), name="Long", mapping=LONG_MAPPING, create_values=True
    )

    assert record.job.status == "succeeded", record.job.message
    assert record.summary["path"]["direct"] is True
    long = Dataset.objects.get(organization=world_a.operator, name="Long")
    countable = Episode.objects.countable().filter(dataset=long, condition_set__isnull=False)
    assert 0 < countable.count() < 900  # rejected and set-less rows left out
    assert_counts_match_group_by()
    # The load's deferral ended with it: in the same transaction the trigger counts again.
    assert _setting() == ""
    Episode.objects.create(
        organization=world_a.operator,
        dataset=long,
        key="after",
        episode_count=2,
        embodiment=world_a.embodiment,
        condition_set=countable.first().condition_set,
    )
    assert_counts_match_group_by()


def test_a_direct_load_given_up_midway_leaves_the_staging_path_counted_by_the_trigger(
    world_a, tmp_path, monkeypatch
):
    monkeypatch.setattr(direct, "BLOCK_BYTES", 1024)
    body = _long_inventory(world_a, 900, late_quote=True)

    record = run(
        world_a, manifest(tmp_path, body), name="Long", mapping=LONG_MAPPING, create_values=True
    )

    assert record.job.status == "succeeded", record.job.message
    assert record.summary["path"]["direct"] is False
    assert "quote" in record.summary["path"]["why"] or '"' in record.summary["path"]["why"]
    assert _setting() == ""  # rolled back with the direct load's rows
    assert CoverageCount.objects.filter(dataset__name="Long").exists()
    assert_counts_match_group_by()
