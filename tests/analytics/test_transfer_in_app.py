"""Transfer between cells in the app: learnt from the stored evaluation history by the curve
refit, and the one model behind the gap report's value of capture, the recommendation and
the planner's allocation.

The history is synthetic with a known truth: four cells (lighting x clutter), three policies
trained on growing datasets, each evaluated in every cell with the failures a curve
``0.3 * (n_eff + 1) ** -0.8`` predicts, where an episode counts 0.4 of one in the cell that
differs from it in clutter only and nothing across lighting. The cell (dim, dense) gets no
episodes of its own between the first and second policy, but its neighbour (dim, tidy) gets
800: its failures fall, which only transfer explains.
"""

from __future__ import annotations

import itertools
import re
from datetime import date

import numpy as np
import pytest
from django.urls import reverse

from analytics.curves import LearningCurve
from analytics.gap import gap_curves
from analytics.learning import POSTERIOR_LEVELS, curves_from_quantiles, curves_on_history
from analytics.models import (
    CurveFitRecord,
    EvaluationResult,
    EvaluationRun,
    GapCell,
    GapReport,
    PolicyVersion,
)
from analytics.services.gap import gap_report_build
from analytics.services.gap_inputs import DimensionSpace
from analytics.services.planning import plan_cells_from_report
from analytics.services.steering import curves_refit, next_round_recommendation
from analytics.services.steering.curves import refit_history
from campaigns.planning.gain import decay_fraction
from labeling.models import Dataset, Episode
from sites.models import ConditionDimension, ConditionShare, ConditionValue, ProductionLog
from sites.services import condition_set_intern
from tests.concurrency import at_once
from tests.factories import another_deployment

CLUTTER_STRENGTH = 0.4
TRIALS = 3000
# Episodes per cell (bright/dim x tidy/dense) in the datasets the policies are trained on.
DATASETS = {
    "base": {
        ("bright", "tidy"): 400,
        ("bright", "dense"): 50,
        ("dim", "tidy"): 50,
        ("dim", "dense"): 10,
    },
    "dim-tidy": {("dim", "tidy"): 800},
    "bright-dense": {("bright", "dense"): 800},
}
POLICIES = {"p1": ["base"], "p2": ["base", "dim-tidy"], "p3": ["base", "dim-tidy", "bright-dense"]}


def _rate(counts: dict[tuple[str, str], int], cell: tuple[str, str]) -> float:
    n_eff = counts.get(cell, 0) + sum(
        CLUTTER_STRENGTH * n
        for other, n in counts.items()
        if other[0] == cell[0] and other[1] != cell[1]
    )
    return 0.3 * (n_eff + 1) ** -0.8


@pytest.fixture
def history(world_a):
    org, campaign = world_a.operator, world_a.campaign
    lighting = {v.slug: v for v in world_a.values}
    clutter_dim = ConditionDimension.objects.create(
        organization=org, slug="clutter", name="Clutter", order=1
    )
    clutter = {
        slug: ConditionValue.objects.create(
            dimension=clutter_dim, slug=slug, label=slug.title(), order=i
        )
        for i, slug in enumerate(("tidy", "dense"))
    }
    for value, share in (
        (lighting["bright"], 0.3),
        (lighting["dim"], 0.7),
        (clutter["tidy"], 0.4),
        (clutter["dense"], 0.6),
    ):
        ConditionShare.objects.create(deployment=world_a.deployment, value=value, share=share)
    sets = {
        (light, mess): condition_set_intern(
            organization=org, value_ids=[lighting[light].pk, clutter[mess].pk]
        )
        for light, mess in itertools.product(("bright", "dim"), ("tidy", "dense"))
    }
    datasets = {}
    for name, counts in DATASETS.items():
        dataset = Dataset.objects.create(organization=org, slug=f"ds-{name}", name=name)
        Episode.objects.bulk_create(
            Episode(
                organization=org,
                dataset=dataset,
                key=f"{cell[0]}-{cell[1]}-{i}",
                embodiment=world_a.embodiment,
                task=world_a.task,
                condition_set=sets[cell],
                frames=10,
            )
            for cell, n in counts.items()
            for i in range(n)
        )
        datasets[name] = dataset
    # The campaign's cells are both dimensions: a report over them comes first (the refit
    # reads its cells over the latest report's dimensions).
    gap_report_build(
        report=GapReport.objects.create(
            organization=org, campaign=campaign, dimension_slugs=["lighting", "clutter"]
        )
    )
    for name, trained in POLICIES.items():
        policy = PolicyVersion.objects.create(
            organization=org, slug=name, name=name, embodiment=world_a.embodiment
        )
        policy.trained_on_datasets.set([datasets[d] for d in trained])
        counts: dict[tuple[str, str], int] = {}
        for d in trained:
            for cell, n in DATASETS[d].items():
                counts[cell] = counts.get(cell, 0) + n
        run = EvaluationRun.objects.create(
            organization=org,
            policy_version=policy,
            deployment=world_a.deployment,
            label=name,
            evaluated_on=date(2026, 10, 2),
        )
        for cell, condition_set in sets.items():
            failures = round(TRIALS * _rate(counts, cell))
            EvaluationResult.objects.create(
                run=run, condition_set=condition_set, trials=TRIALS, successes=TRIALS - failures
            )
    return world_a, sets


def test_the_refit_learns_the_transfer_the_history_shows(history):
    world, _ = history

    fit = curves_refit(campaign=world.campaign)

    strengths = {d["name"]: d for d in fit.transfer["dimensions"]}
    assert fit.dimension_slugs == ["lighting", "clutter"]
    assert fit.transfer["evaluations"] == 3
    clutter, lighting = strengths["Clutter"], strengths["Lighting"]
    assert clutter["strength"] > 0
    assert clutter["low"] <= CLUTTER_STRENGTH <= clutter["high"]
    # Lighting transfers nothing here: its interval holds none, and what the model acts on,
    # the posterior mean, is small beside clutter's.
    assert lighting["low"] == 0
    assert lighting["strength"] < clutter["strength"] / 10
    assert "Clutter" in fit.transfer["how"]


def test_the_refit_says_how_far_it_is_and_a_refit_stopped_midway_stores_nothing(history):
    from accounts.services import JobCancelled
    from analytics.services.steering.curves import REFIT_STEPS, curves_refit_for_run
    from analytics.steering.transfer import GIBBS_SWEEPS

    world, _ = history
    run = EvaluationRun.objects.filter(organization=world.operator).latest("pk")

    # Stopped while it chooses the transfer (a job cancelled from the jobs list raises here,
    # from its progress): no refit is stored, and the next one starts from nothing.
    def stop_at_three(done: int, total: int, message: str) -> None:
        if "curve refit 3 of" in message:
            raise JobCancelled("Cancelled at the user's request.")

    with pytest.raises(JobCancelled):
        curves_refit_for_run(run_id=run.pk, progress=stop_at_three)
    assert not CurveFitRecord.objects.filter(campaign=world.campaign).exists()

    # Or stopped while it reads the changes, before any curve refit: nothing stored either.
    def stop_at_sweep_thirty(done: int, total: int, message: str) -> None:
        if message.endswith(f"sweep 30 of {GIBBS_SWEEPS}"):
            raise JobCancelled("Cancelled at the user's request.")

    with pytest.raises(JobCancelled):
        curves_refit_for_run(run_id=run.pk, progress=stop_at_sweep_thirty)
    assert not CurveFitRecord.objects.filter(campaign=world.campaign).exists()

    # Run through, it reports every sweep of the sampler that reads the changes (the job's
    # heartbeat through tens of seconds at scale), then every curve refit, in order, to the
    # last (told done when the transfer chosen was refitted already); a history whose
    # changes show no transfer takes one refit fewer.
    told: list[tuple[int, int, str]] = []
    (fit,) = curves_refit_for_run(run_id=run.pk, progress=lambda *step: told.append(step))
    name = world.campaign.name
    reading = f"{name}: refitting, transfer between cells, reading the changes: sweep"
    assert told[:GIBBS_SWEEPS] == [
        (0, REFIT_STEPS, f"{reading} {k} of {GIBBS_SWEEPS}") for k in range(1, GIBBS_SWEEPS + 1)
    ]
    refits = told[GIBBS_SWEEPS:]
    total = refits[-1][0]
    assert total in (REFIT_STEPS - 1, REFIT_STEPS)
    prefix = f"{name}: refitting, transfer between cells, curve refit"
    assert [(done, steps) for done, steps, _ in refits] == [
        (k, REFIT_STEPS) for k in range(1, total + 1)
    ]
    # Each but the last says how long the rest would take at the refits' pace so far.
    for k, (_, _, message) in enumerate(refits[:-1], start=1):
        assert re.fullmatch(
            rf"{re.escape(prefix)} {k} of {total} · (about .+ left|finishing)", message
        )
    assert refits[-1][2] == f"{prefix} {total} of {total}"
    assert fit.transfer["evaluations"] == 3
    # Evidence the latest refit already read is a read: nothing to report.
    told.clear()
    assert curves_refit_for_run(run_id=run.pk, progress=lambda *step: told.append(step)) == [fit]
    assert told == []


@pytest.mark.django_db(transaction=True)
def test_two_refits_of_one_campaign_at_once_fit_once_and_store_one_record(history):
    # An import's refit and the beat sweep's (or two imports' on two workers) start at the
    # same instant: the campaign's refit lock runs them one after the other, and the second
    # reads what the first stored.
    world, _ = history

    stored = at_once(lambda: curves_refit(campaign=world.campaign).pk)

    assert stored[0] == stored[1]
    assert list(
        CurveFitRecord.objects.filter(campaign=world.campaign).values_list("pk", flat=True)
    ) == [stored[0]]


def test_gap_report_recommendation_and_planner_value_an_episode_alike(history):
    world, sets = history
    curves_refit(campaign=world.campaign)
    fit = CurveFitRecord.objects.filter(campaign=world.campaign).latest("created_at")
    report = gap_report_build(
        report=GapReport.objects.create(
            organization=world.operator,
            campaign=world.campaign,
            dimension_slugs=["lighting", "clutter"],
        )
    )
    cells = {tuple(c.value_ids): c for c in GapCell.objects.filter(report=report)}
    key = {cell: tuple(sorted(s.value_ids)) for cell, s in sets.items()}
    dim_dense, dim_tidy = cells[key[("dim", "dense")]], cells[key[("dim", "tidy")]]

    # The gap report reads each cell at its effective training, with the refit's strengths.
    assert report.summary["transfer"]["dimensions"] == fit.transfer["dimensions"]
    strength = {
        d["name"].lower(): d["strength"] for d in fit.transfer["dimensions"]
    }  # lighting, clutter
    dimension_of = dict(
        ConditionValue.objects.filter(
            pk__in={v for c in cells.values() for v in c.value_ids}
        ).values_list("pk", "dimension__slug")
    )

    def stated(cell: GapCell) -> dict[str, int]:
        return {dimension_of[v]: v for v in cell.value_ids}

    # Its own episodes, plus each other cell's times the strength of every dimension in
    # which the two differ (a dimension the other leaves unrecorded counts as different).
    mine = stated(dim_dense)
    expected = dim_dense.train_count
    for other in cells.values():
        if other.pk == dim_dense.pk:
            continue
        theirs = stated(other)
        factor = 1.0
        for slug in ("lighting", "clutter"):
            if theirs.get(slug) != mine[slug]:
                factor *= strength[slug]
        expected += factor * other.train_count
    assert dim_dense.effective_count == pytest.approx(expected)
    # An episode under dim lighting is worth something in the other clutter cell too: the
    # value of capture counts it, and the sentence says so where it matters.
    assert dim_tidy.priority_elsewhere > 0
    assert dim_tidy.priority > dim_tidy.priority_elsewhere
    assert any(
        "also trains cells that share its conditions" in c.explanation for c in cells.values()
    )

    recommendation = next_round_recommendation(campaign=world.campaign, budget=400.0, report=report)

    # The recommendation uses the same model: the same strengths, the same failure rates.
    assert recommendation["transfer"]["dimensions"] == fit.transfer["dimensions"]
    assert any(note.startswith("Transfer: an episode counts") for note in recommendation["notes"])
    for row in recommendation["allocations"]:
        assert row["failure_now"] == pytest.approx(cells[tuple(row["value_ids"])].failure_rate)
    assert any("also help" in row["rationale"] for row in recommendation["allocations"])
    planner_cells = {tuple(c["value_ids"]): c for c in recommendation["planner"]["cells"]}
    for value_ids, cell in planner_cells.items():
        assert cell["n0"] == pytest.approx(cells[value_ids].effective_count)

    # The planner allocating on its own reads the same cells: each at its effective training,
    # its first episode worth the report's value of capture, here and elsewhere.
    b = report.summary["curve"]["b"]
    for plan_cell in plan_cells_from_report(report=report):
        cell = cells[tuple(sorted(plan_cell.value_ids))]
        assert plan_cell.n0 == pytest.approx(cell.effective_count)
        own = plan_cell.weight * max(plan_cell.failure_rate - report.summary["curve"]["f_inf"], 0)
        first = plan_cell.spill * float(decay_fraction(b, plan_cell.n0, 1.0))
        assert first == pytest.approx(cell.priority_elsewhere)
        assert own * float(decay_fraction(b, plan_cell.n0, 1.0)) + first == pytest.approx(
            cell.priority, rel=1e-6
        )


def test_without_history_nothing_transfers_and_reports_are_as_before(world_a):
    fit = curves_refit(campaign=world_a.campaign)
    report = gap_report_build(
        report=GapReport.objects.create(organization=world_a.operator, campaign=world_a.campaign)
    )

    assert all(d["strength"] == 0 for d in fit.transfer["dimensions"])
    assert report.summary["transfer"] is None
    for cell in GapCell.objects.filter(report=report):
        assert cell.effective_count == cell.train_count
        assert cell.priority_elsewhere == 0
    assert np.isfinite([c.priority for c in GapCell.objects.filter(report=report)]).all()


def _report(world) -> GapReport:
    return gap_report_build(
        report=GapReport.objects.create(
            organization=world.operator,
            campaign=world.campaign,
            dimension_slugs=["lighting", "clutter"],
        )
    )


def _key(condition_set) -> str:
    return ",".join(map(str, sorted(condition_set.value_ids)))


def test_the_gap_report_reads_every_cell_on_the_refit_of_its_history(history, client_for):
    """Each cell's rate in the report is what the refit over the whole evaluation history
    reads (its own exponent, its conditions), not what the latest evaluation alone says; on
    this history, whose truth is known, that is the closer reading. The page says so."""
    world, sets = history
    fit = curves_refit(campaign=world.campaign)
    report = _report(world)
    page = client_for(world.manager).get(reverse("planner:gap-report", args=[report.pk]))
    assert (
        "read on the campaign's whole history of outcomes, every policy's evaluations and logged production (4 cells refitted"
        in (page.content.decode())
    )

    pooled = LearningCurve(f_inf=fit.f_inf, a=fit.a, b=fit.b)
    cells = {tuple(c.value_ids): c for c in GapCell.objects.filter(report=report)}
    latest = {}
    for d in POLICIES["p3"]:
        for cell, n in DATASETS[d].items():
            latest[cell] = latest.get(cell, 0) + n
    history_error = snapshot_error = 0.0
    assert report.summary["curve"]["refit"] == fit.pk
    # The refit holds the latest policy's evaluations: the report adds nothing to them.
    assert report.summary["history"]["held_trials"] == TRIALS * len(sets)
    for name, condition_set in sets.items():
        cell = cells[tuple(sorted(condition_set.value_ids))]
        assert len(cell.log_multiplier) == POSTERIOR_LEVELS.size
        on_history = curves_from_quantiles(
            pooled,
            fit.tau,
            [fit.posteriors[_key(condition_set)]],
            [cell.effective_count],
            [cell.trials],
            [cell.successes],
        ).rate([cell.effective_count])[0]
        assert cell.failure_rate == pytest.approx(on_history, rel=0.005)
        snapshot = gap_curves([cell.effective_count], [cell.trials], [cell.successes], pooled)
        truth = _rate(latest, name)
        history_error += abs(cell.failure_rate / truth - 1)
        snapshot_error += abs(snapshot.rate([cell.effective_count])[0] / truth - 1)
    assert history_error < snapshot_error


def test_the_report_page_says_when_the_curves_were_refitted_after_it(history, client_for):
    world, _ = history
    # The fixture's report came before the evaluations: no refit reads it yet.
    before = _report(world)
    page = client_for(world.manager).get(reverse("planner:gap-report", args=[before.pk]))
    assert 'id="newer-refit"' not in page.content.decode()

    curves_refit(campaign=world.campaign)
    page = client_for(world.manager).get(reverse("planner:gap-report", args=[before.pk]))
    assert "compute a new report to read every cell on them" in page.content.decode()

    after = _report(world)
    page = client_for(world.manager).get(reverse("planner:gap-report", args=[after.pk]))
    assert 'id="newer-refit"' not in page.content.decode()


def test_the_recommendation_reads_back_the_curves_the_report_scored(history):
    world, _ = history
    curves_refit(campaign=world.campaign)
    report = _report(world)
    stored = {tuple(c.value_ids): c for c in GapCell.objects.filter(report=report)}

    rec = next_round_recommendation(
        campaign=world.campaign, budget=500, report=report, production_shifts=False
    )

    assert rec["notes"][0].startswith(
        "Curves: every cell is read on the campaign's history of outcomes, every policy's "
        "evaluations and logged production (the refit of 4 cells"
    )
    assert rec["allocations"]
    for cell in rec["allocations"]:
        assert cell["failure_now"] == pytest.approx(
            stored[tuple(cell["value_ids"])].failure_rate, rel=1e-9
        )


def test_what_the_refit_does_not_hold_is_added_once_and_what_it_holds_is_not_added_again(
    history,
):
    world, sets = history
    fit = curves_refit(campaign=world.campaign)
    before = {tuple(c.value_ids): c for c in GapCell.objects.filter(report=_report(world))}
    dim_dense = sets[("dim", "dense")]
    p3 = PolicyVersion.objects.get(organization=world.operator, slug="p3")
    # An evaluation of the latest policy imported after the refit (its refit job not yet
    # run), and production since its release, bad in one cell.
    late = EvaluationRun.objects.create(
        organization=world.operator,
        policy_version=p3,
        deployment=world.deployment,
        label="p3 again",
        evaluated_on=date(2026, 10, 9),
    )
    EvaluationResult.objects.create(run=late, condition_set=dim_dense, trials=1000, successes=960)
    ProductionLog.objects.create(
        deployment=world.deployment,
        condition_set=dim_dense,
        day=date(2026, 10, 10),
        cycles=2000,
        failures=80,
    )

    report = _report(world)
    after = {tuple(c.value_ids): c for c in GapCell.objects.filter(report=report)}
    key = tuple(sorted(dim_dense.value_ids))
    assert report.summary["curve"]["refit"] == fit.pk
    assert report.summary["history"]["held_trials"] == TRIALS * len(sets)
    assert after[key].trials == before[key].trials + 3000
    # 120 failures in 3,000 more trials (4%, against about 0.3%) raise the cell's rate about
    # five-fold above what the refit read; the cells without new outcomes keep their reading.
    assert after[key].failure_rate > 4 * before[key].failure_rate
    for other, cell in after.items():
        if other != key:
            assert cell.failure_rate == pytest.approx(before[other].failure_rate, rel=1e-6)


def test_the_refit_holds_no_more_of_a_cell_than_the_report_still_reads(history):
    """Evidence that shrank since the refit (a deployment taken off the campaign) is held
    only as far as the report still reads it, failures and successes each: the report
    never refuses to read its cells on the history."""
    world, sets = history
    fit = curves_refit(campaign=world.campaign)
    space = DimensionSpace.build(organization_id=world.operator.pk, slugs=["lighting", "clutter"])
    keys = [space.project(list(s.value_ids)) for s in sets.values()]
    p3 = PolicyVersion.objects.get(organization=world.operator, slug="p3")
    trained: dict[tuple[str, str], int] = {}
    for d in POLICIES["p3"]:
        for cell, n in DATASETS[d].items():
            trained[cell] = trained.get(cell, 0) + n
    failures = [float(round(TRIALS * _rate(trained, cell))) for cell in sets]

    def held(trials, successes):
        return refit_history(
            campaign=world.campaign,
            space=space,
            keys=keys,
            refit=fit,
            policy_id=p3.pk,
            trials=np.array(trials, dtype=float),
            successes=np.array(successes, dtype=float),
        )

    full = held([TRIALS] * 4, [TRIALS - f for f in failures])
    assert full.trials.tolist() == [TRIALS] * 4
    assert full.successes.tolist() == [TRIALS - f for f in failures]

    shrunk = held([TRIALS, 100, 0, 5], [TRIALS - failures[0], 100, 0, 0])
    assert shrunk.trials.tolist() == [TRIALS, 100, 0, min(failures[3], 5)]
    assert shrunk.successes.tolist() == [TRIALS - failures[0], 100, 0, 0]


def _log(deployment, condition_set, day: int, cycles: int, failures: int, policy: str):
    return ProductionLog.objects.create(
        deployment=deployment,
        condition_set=condition_set,
        day=date(2026, 10, day),
        cycles=cycles,
        failures=failures,
        policy=policy,
    )


def test_the_refit_reads_each_policys_logged_production_as_its_outcomes(history, world_b):
    """The fleet's cycles under a policy are outcomes of that policy: the refit reads them
    beside its evaluations, per cell, at the training the policy had. Cycles the fleet did
    not attribute, cycles at a deployment outside the campaign and another organization's
    cycles under the same slug are no outcomes of this campaign's policies."""
    world, sets = history
    dim_dense, bright_tidy = sets[("dim", "dense")], sets[("bright", "tidy")]
    without = curves_refit(campaign=world.campaign)
    p1 = PolicyVersion.objects.get(organization=world.operator, slug="p1")
    p3 = PolicyVersion.objects.get(organization=world.operator, slug="p3")
    _log(world.deployment, dim_dense, 3, 5000, 40, "p3")
    _log(world.deployment, dim_dense, 4, 4000, 30, "p3")
    _log(world.deployment, bright_tidy, 4, 7000, 3, "p1")
    _log(world.deployment, dim_dense, 5, 9000, 900, "")  # not attributed: no policy's
    elsewhere = another_deployment(world, "dep-elsewhere")
    _log(elsewhere, dim_dense, 5, 9000, 900, "p3")  # not a deployment of the campaign
    other_set = condition_set_intern(
        organization=world_b.operator, value_ids=[world_b.values[1].pk]
    )
    _log(world_b.deployment, other_set, 5, 9000, 900, "p3")  # another organization's p3

    fit = curves_refit(campaign=world.campaign)

    assert fit.pk != without.pk  # new evidence, a new refit
    held = fit.evidence["production"]
    assert held == {
        str(p3.pk): {_key(dim_dense): [9000.0, 9000.0 - 70]},
        str(p1.pk): {_key(bright_tidy): [7000.0, 7000.0 - 3]},
    }
    assert fit.evidence["production_cycles"] == 16000
    assert fit.evidence["trials"] == without.evidence["trials"] + 16000
    assert fit.evidence["failures"] == without.evidence["failures"] + 73
    # The same evidence again is the same refit.
    assert curves_refit(campaign=world.campaign).pk == fit.pk


def test_production_the_refit_read_is_not_added_again_by_the_report_and_later_production_is(
    history,
):
    world, sets = history
    dim_dense = sets[("dim", "dense")]
    key = tuple(sorted(dim_dense.value_ids))
    # The latest policy ran 9,000 cycles in (dim, dense) before the refit, 70 failing.
    _log(world.deployment, dim_dense, 3, 9000, 70, "p3")
    fit = curves_refit(campaign=world.campaign)
    report = _report(world)
    cells = {tuple(c.value_ids): c for c in GapCell.objects.filter(report=report)}

    # The report reads the evaluation and the production (since the release: all of it),
    # and the refit holds both: nothing is read twice, the cell is the refit's reading.
    assert report.summary["history"]["held_trials"] == TRIALS * len(sets) + 9000
    assert cells[key].trials == TRIALS + 9000
    pooled = LearningCurve(f_inf=fit.f_inf, a=fit.a, b=fit.b)
    cell = cells[key]

    def read(held_trials: float, held_successes: float) -> float:
        curves, _ = curves_on_history(
            pooled,
            fit.tau,
            [fit.posteriors[_key(dim_dense)]],
            [held_trials],
            [held_successes],
            [cell.effective_count],
            [cell.trials],
            [cell.successes],
        )
        return float(curves.rate([cell.effective_count])[0])

    eval_failures = TRIALS - (cell.successes - (9000 - 70))
    holding_all = read(TRIALS + 9000, cell.successes)
    holding_evaluation_only = read(TRIALS, TRIALS - eval_failures)
    assert cell.failure_rate == pytest.approx(holding_all, rel=1e-6)
    # Read twice, the 9,000 cycles would move the cell measurably (what this test guards).
    assert abs(holding_evaluation_only / holding_all - 1) > 0.05

    # Production logged after the refit, 300 failures in 3,000 cycles (10%), is read once:
    # on top of the refit, it raises the cell and no other.
    _log(world.deployment, dim_dense, 9, 3000, 300, "p3")
    later = _report(world)
    after = {tuple(c.value_ids): c for c in GapCell.objects.filter(report=later)}
    assert later.summary["curve"]["refit"] == fit.pk
    assert later.summary["history"]["held_trials"] == TRIALS * len(sets) + 9000
    assert after[key].trials == TRIALS + 12000
    assert after[key].failure_rate > 3 * cell.failure_rate
    for other, c in after.items():
        if other != key:
            assert c.failure_rate == pytest.approx(cells[other].failure_rate, rel=1e-6)


def test_a_policy_seen_only_in_production_is_evidence_of_its_training(history):
    """A policy the fleet ran but nobody evaluated still shows how the cells fell with the
    data it was trained on: its production is a row of the refit's history."""
    world, sets = history
    before = curves_refit(campaign=world.campaign)
    p4 = PolicyVersion.objects.create(
        organization=world.operator, slug="p4", name="p4", embodiment=world.embodiment
    )
    p4.trained_on_datasets.set(Dataset.objects.filter(organization=world.operator))
    for condition_set in sets.values():
        _log(world.deployment, condition_set, 6, 4000, 4, "p4")

    fit = curves_refit(campaign=world.campaign)

    assert before.transfer["evaluations"] == 3
    assert fit.transfer["evaluations"] == 4
    assert fit.evidence["production"] == {
        str(p4.pk): {_key(s): [4000.0, 3996.0] for s in sets.values()}
    }


def test_the_gap_report_reads_its_policys_production_and_not_another_versions(history):
    """The report's outcomes are the latest policy's: its evaluations and the cycles that
    name it or name no policy; cycles naming an earlier version are that version's."""
    world, sets = history
    dim_dense = sets[("dim", "dense")]
    _log(world.deployment, dim_dense, 3, 2000, 500, "p1")  # an earlier version's cycles
    _log(world.deployment, dim_dense, 3, 1000, 10, "p3")
    _log(world.deployment, dim_dense, 4, 500, 5, "")

    report = _report(world)

    cell = GapCell.objects.get(report=report, value_ids=sorted(dim_dense.value_ids))
    assert report.summary["evidence"]["policy"] == "p3"
    assert report.summary["evidence"]["production_cycles"] == 1500
    assert cell.trials == TRIALS + 1500


def test_the_sweep_refits_a_campaign_whose_outcomes_changed_and_no_other(
    history, world_b, client_for, django_capture_on_commit_callbacks
):
    """Production logged under a campaign's policies reaches its refit without an
    evaluation import: Celery beat's sweep queues a refit, in the campaign's organization,
    of each campaign refitted before whose evidence has changed, and of no other."""
    from django.conf import settings

    from accounts.models import Job
    from analytics.services.steering.curves import REFIT_STEPS, curves_refit_stale
    from analytics.tasks import curves_refit_stale as beat_task

    world, sets = history
    fit = curves_refit(campaign=world.campaign)
    curves_refit(campaign=world_b.campaign)  # another organization's, refitted, unchanged
    schedule = settings.CELERY_BEAT_SCHEDULE["refit-on-new-outcomes"]
    assert schedule["task"] == beat_task.name

    with django_capture_on_commit_callbacks(execute=True):
        assert curves_refit_stale() == []  # nothing new anywhere: nothing queued
    _log(world.deployment, sets[("dim", "dense")], 3, 5000, 40, "p3")
    with django_capture_on_commit_callbacks(execute=True):
        jobs = curves_refit_stale()

    assert [job.task_kwargs for job in jobs] == [{"campaign_id": world.campaign.pk}]
    job = Job.objects.get(pk=jobs[0].pk)
    assert job.status == "succeeded" and job.organization_id == world.operator.pk
    assert job.progress_done == job.progress_total == REFIT_STEPS
    assert job.message == f"{world.campaign.name}: refitted on 4 cells"
    latest = CurveFitRecord.objects.filter(campaign=world.campaign).latest("created_at")
    assert latest.pk != fit.pk and latest.evidence["production_cycles"] == 5000
    # Read now, the evidence is current again: the next sweep queues nothing.
    with django_capture_on_commit_callbacks(execute=True):
        assert beat_task() == 0
    # Each organization's managers see only their own refits.
    mine = client_for(world.manager).get("/api/jobs/?kind=curves_refit").json()["results"]
    theirs = client_for(world_b.manager).get("/api/jobs/?kind=curves_refit").json()["results"]
    assert [row["id"] for row in mine] == [str(job.pk)]
    assert theirs == []


def test_the_sweep_leaves_a_campaign_an_import_s_refit_is_queued_or_running_for(history):
    from accounts.services import job_create
    from analytics.services.steering.curves import curves_refit_stale

    world, sets = history
    curves_refit(campaign=world.campaign)
    _log(world.deployment, sets[("dim", "dense")], 3, 5000, 40, "p3")
    run = EvaluationRun.objects.filter(organization=world.operator).latest("pk")
    imported = job_create(
        organization=world.operator,
        kind="curves_refit",
        task_name="analytics.tasks.curves_refit_compute",
        task_kwargs={"run_id": run.pk},
        enqueue=False,
    )

    for status in ("queued", "running"):
        imported.status = status
        imported.save(update_fields=["status"])
        assert curves_refit_stale() == [], status  # the import's refit will read it all

    imported.status = "succeeded"
    imported.save(update_fields=["status"])
    assert [job.task_kwargs for job in curves_refit_stale()] == [{"campaign_id": world.campaign.pk}]


def test_the_sweep_leaves_a_campaign_whose_refit_is_queued_and_a_job_refits_only_its_own(
    history, world_b, django_capture_on_commit_callbacks
):
    from accounts.models import Job
    from accounts.services import job_create
    from analytics.services.steering.curves import curves_refit_stale

    world, sets = history
    curves_refit(campaign=world.campaign)
    _log(world.deployment, sets[("dim", "dense")], 3, 5000, 40, "p3")
    waiting = job_create(
        organization=world.operator,
        kind="curves_refit",
        task_name="analytics.tasks.curves_refit_compute",
        task_kwargs={"campaign_id": world.campaign.pk},
        enqueue=False,
    )
    assert curves_refit_stale() == []  # its refit is queued already
    refits = CurveFitRecord.objects.filter(campaign=world.campaign).count()

    # A job names a campaign of its own organization; another's is not refitted.
    with django_capture_on_commit_callbacks(execute=True):
        stray = job_create(
            organization=world_b.operator,
            kind="curves_refit",
            task_name="analytics.tasks.curves_refit_compute",
            task_kwargs={"campaign_id": world.campaign.pk},
        )
    stray.refresh_from_db()
    assert stray.status == "succeeded" and stray.message == "The campaign is gone."
    assert CurveFitRecord.objects.filter(campaign=world.campaign).count() == refits
    assert Job.objects.get(pk=waiting.pk).status == "queued"
