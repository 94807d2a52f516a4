"""Steering in the app: evaluations in, curves refitted, round impact measured, next round recommended."""

from __future__ import annotations

import json
from datetime import date
from io import StringIO

import pytest
from django.core.management import call_command

from analytics.models import CurveFitRecord, EvaluationResult, EvaluationRun, RoundImpactReport
from analytics.services.evaluations import EvaluationImportError, evaluation_import_file


def test_per_cell_csv_imports_with_failure_modes(world_a):
    content = (
        b"lighting,trials,successes,failures:grasp\ndim,120,113,7\nbright,80,80,0\nDIM ,20,19,1\n"
    )

    run = evaluation_import_file(
        organization=world_a.operator,
        name="eval.csv",
        content=content,
        policy=world_a.policy.slug,
        deployment=world_a.deployment.slug,
        label="csv",
        evaluated_on=date(2026, 11, 1),
    )

    results = {tuple(r.condition_set.value_ids): (r.trials, r.successes) for r in run.results.all()}
    dim, bright = world_a.values[1].pk, world_a.values[0].pk
    assert results == {(dim,): (140, 132), (bright,): (80, 80)}
    assert sum(f.count for r in run.results.all() for f in r.failures.all()) == 8


def test_per_episode_json_imports(world_a):
    payload = {
        "policy": world_a.policy.slug,
        "label": "bench json",
        "evaluated_on": "2026-11-02",
        "results": [
            {"conditions": {"lighting": "dim"}, "outcome": "success"},
            {"conditions": {"lighting": "dim"}, "outcome": "failure", "failure_mode": "grasp"},
        ],
    }

    run = evaluation_import_file(
        organization=world_a.operator, name="e.json", content=json.dumps(payload).encode()
    )

    assert run.deployment is None
    assert list(run.results.values_list("trials", "successes")) == [(2, 1)]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the file is empty"),
        (b"lighting,trials,successes\ndim,10,11\n", "row 2: 11 successes is more than 10 trials"),
        (
            b"lighting,trials,successes\nfoggy,10,9\n",
            "row 2, column 'lighting': unknown value 'foggy'",
        ),
        (
            b"weather,trials,successes\nsunny,10,9\n",
            "column 'weather': unknown condition dimension",
        ),
        (
            b"lighting,trials,successes\ndim,ten,9\n",
            "column 'trials': expected a whole number, got 'ten'",
        ),
        (b"lighting,trials,successes\ndim,-3,0\n", "expected a whole number of at least 0"),
        (b"{broken", "invalid JSON at line 1"),
        (b"\xff\xfe\x00l", "not UTF-8"),
    ],
)
def test_bad_evaluation_files_name_the_problem_and_write_nothing(world_a, content, message):
    before = EvaluationRun.objects.count(), EvaluationResult.objects.count()

    with pytest.raises(EvaluationImportError, match=message):
        evaluation_import_file(
            organization=world_a.operator,
            name="bad.csv",
            content=content,
            policy=world_a.policy.slug,
            label="bad",
        )

    assert (EvaluationRun.objects.count(), EvaluationResult.objects.count()) == before


def _import_dim_and_bright(world, label):
    """Import an evaluation of the world's policy at its deployment: dim 170/200, bright 196/200."""
    return evaluation_import_file(
        organization=world.operator,
        name="e.csv",
        content=b"lighting,trials,successes\ndim,200,170\nbright,200,196\n",
        policy=world.policy.slug,
        deployment=world.deployment.slug,
        label=label,
    )


def test_importing_refits_the_campaign_curves(
    world_a, world_b, client_for, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        _import_dim_and_bright(world_a, "refit")

    fit = CurveFitRecord.objects.get(campaign=world_a.campaign)
    assert fit.evidence["policies"] == 1
    assert fit.dimension_slugs == ["lighting"]
    # In a job of its own, so a large campaign's refit never holds the importing request.
    from accounts.models import Job

    job = Job.objects.get(kind="curves_refit")
    assert job.status == "succeeded" and job.organization_id == world_a.operator.pk
    from analytics.services.steering.curves import REFIT_STEPS

    assert job.progress_done == job.progress_total == REFIT_STEPS  # one campaign refitted
    # Managers follow it with the other long work; another organization never sees it.
    listed = client_for(world_a.manager).get("/api/jobs/?kind=curves_refit").json()
    other = client_for(world_b.manager).get("/api/jobs/?kind=curves_refit").json()
    assert [row["id"] for row in listed["results"]] == [str(job.pk)]
    assert other["results"] == []


def test_the_evaluations_page_shows_each_runs_refit_and_no_other_organizations(
    world_a, world_b, client_for, django_capture_on_commit_callbacks
):
    from accounts.models import Job

    with django_capture_on_commit_callbacks(execute=True):
        _import_dim_and_bright(world_a, "shown")
    job = Job.objects.get(kind="curves_refit", organization=world_a.operator)
    fit = CurveFitRecord.objects.get(campaign=world_a.campaign)

    def refit_cells(user) -> list[str]:
        html = client_for(user).get("/planner/evaluations/").content.decode()
        return [c.split("</td>")[0] for c in html.split("<td")[1:] if "data-refit" in c[:40]]

    said = f"{world_a.campaign.name}: refitted on {len(fit.posteriors)} cells"
    assert [c for c in refit_cells(world_a.manager) if said in c] != []
    assert all("succeeded" in c for c in refit_cells(world_a.manager) if said in c)
    # A refit still running shows how far it is.
    Job.objects.filter(pk=job.pk).update(
        status="running", message=f"{world_a.campaign.name}: refitting, learning curves"
    )
    running = [c for c in refit_cells(world_a.manager) if "refitting" in c]
    assert len(running) == 1 and "running</span>" in running[0]
    # Another organization's manager sees neither the runs nor their refit.
    assert all(world_a.campaign.name not in c for c in refit_cells(world_b.manager))
    assert (
        "refitting" not in client_for(world_b.manager).get("/planner/evaluations/").content.decode()
    )


def test_a_refit_on_evidence_the_latest_refit_read_stores_nothing_and_says_so(
    world_a, django_capture_on_commit_callbacks
):
    from accounts.models import Job
    from analytics.services.steering import curves_refit
    from analytics.services.steering.curves import curves_refit_request
    from labeling.models import Episode

    with django_capture_on_commit_callbacks(execute=True):
        run = _import_dim_and_bright(world_a, "first")
    first = CurveFitRecord.objects.get(campaign=world_a.campaign)
    assert Job.objects.get(kind="curves_refit").message == (
        f"{world_a.campaign.name}: refitted on {len(first.posteriors)} cells"
    )

    # A second job on the same evidence (a re-delivered task, or two imports in a row whose
    # first job already read both) is a read, not a fit.
    with django_capture_on_commit_callbacks(execute=True):
        again = curves_refit_request(run=run)
    again.refresh_from_db()
    assert again.status == "succeeded"
    assert "already current" in again.message and world_a.campaign.name in again.message
    assert list(CurveFitRecord.objects.filter(campaign=world_a.campaign)) == [first]
    assert curves_refit(campaign=world_a.campaign) == first

    # Any change to what it reads refits: an episode captured in a cell ...
    Episode.objects.create(
        organization=world_a.operator,
        dataset=world_a.dataset,
        key="1",
        embodiment=world_a.embodiment,
        condition_set=world_a.episode.condition_set,
        frames=100,
    )
    second = curves_refit(campaign=world_a.campaign)
    assert second.pk != first.pk and second.evidence["inputs"] != first.evidence["inputs"]
    # ... or an outcome of a run it holds.
    EvaluationResult.objects.filter(run=run).update(successes=150)
    third = curves_refit(campaign=world_a.campaign)
    assert third.pk != second.pk
    assert third.evidence["failures"] > second.evidence["failures"]


def test_a_refit_made_by_an_earlier_model_is_made_again_on_the_same_evidence(
    world_a, monkeypatch, django_capture_on_commit_callbacks
):
    from analytics.services.steering import curves, curves_refit

    # A refit stored before the refit's model last changed, on exactly this evidence ...
    monkeypatch.setattr(curves, "REFIT_INPUTS_VERSION", "earlier")
    with django_capture_on_commit_callbacks(execute=True):
        _import_dim_and_bright(world_a, "model")
    earlier = CurveFitRecord.objects.get(campaign=world_a.campaign)
    assert curves_refit(campaign=world_a.campaign) == earlier
    # ... is not taken as current by today's model: it refits, and says what it read.
    monkeypatch.undo()
    now = curves_refit(campaign=world_a.campaign)
    assert now.pk != earlier.pk
    assert now.evidence["inputs"] != earlier.evidence["inputs"]
    assert now.evidence["failures"] == earlier.evidence["failures"]
    assert curves_refit(campaign=world_a.campaign) == now


def test_an_import_that_does_not_commit_refits_nothing(world_a):
    from accounts.models import Job

    evaluation_import_file(
        organization=world_a.operator,
        name="e.csv",
        content=b"lighting,trials,successes\ndim,200,170\n",
        policy=world_a.policy.slug,
        deployment=world_a.deployment.slug,
        label="uncommitted",
    )

    job = Job.objects.get(kind="curves_refit")
    assert job.status == "queued" and job.task_kwargs["run_id"] > 0
    assert not CurveFitRecord.objects.filter(campaign=world_a.campaign).exists()


def test_evaluation_api_is_scoped(world_a, world_b, client_for):
    response = client_for(world_b.manager).get(f"/api/evaluations/{world_a.evaluation.pk}/")

    assert response.status_code == 404


@pytest.mark.slow
def test_demo_round_impact_and_recommendation_flow_into_planning(
    db, client_for, django_capture_on_commit_callbacks
):
    from django.contrib.auth import get_user_model

    from campaigns.models import Campaign, CollectionRound

    call_command("seed_demo", stdout=StringIO())
    call_command(
        "gap_report",
        "--campaign",
        "northwind-2027-h1",
        "--dimensions",
        "lighting,clutter,human-activity",
        stdout=StringIO(),
    )
    out = StringIO()
    call_command(
        "demo_round", "--import", "--out", str(__import__("tempfile").mkdtemp()), stdout=out
    )
    campaign = Campaign.objects.get(slug="northwind-2027-h1")
    round1 = campaign.rounds.get(number=1)
    manager = client_for(get_user_model().objects.get(username="manager"))

    # The demo round measured the round's impact; the recommendation is a job, run
    # (eagerly) when the request's transaction commits.
    page = manager.get(f"/planner/rounds/{round1.pk}/impact/")
    report = RoundImpactReport.objects.get(round=round1)
    with django_capture_on_commit_callbacks(execute=True):
        manager.post(f"/planner/rounds/{round1.pk}/recommend/", {"budget": "2000"})
    planned = manager.post(f"/planner/rounds/{round1.pk}/recommend/", {"action": "plan"})

    assert page.status_code == 200
    body = page.content.decode()
    assert "Round 1 added" in body and "success there rose from" in body
    assert report.summary["did"]["estimate"] is not None
    assert all(
        c["before_low"] <= c["before"] <= c["before_high"]
        for c in report.cells
        if c["before"] is not None
    )
    assert CollectionRound.objects.get(pk=round1.pk).status == "evaluated"
    round2 = campaign.rounds.get(number=2)
    assert planned.status_code == 302 and planned["Location"].endswith(
        f"/planner/rounds/{round2.pk}/"
    )
    assert round2.status == "planned"
    assert round2.plan_summary["source"].startswith("recommendation")
    assert round2.plan_summary["use"]["episodes"] <= 2000


def test_the_recommendation_and_the_gap_report_agree_about_every_cell(world_a):
    from analytics.models import GapCell
    from analytics.services.steering import next_round_recommendation

    report = world_a.gap_report
    cells = {tuple(c.value_ids): c for c in GapCell.objects.filter(report=report)}

    recommendation = next_round_recommendation(
        campaign=report.campaign, budget=500.0, report=report
    )

    # One per-cell model: where the report saw outcomes (and where it did not), the
    # recommendation's "failure rate now" is the gap page's failure rate of the same cell.
    assert any(c.trials > 0 for c in cells.values())
    allocated = recommendation["allocations"]
    assert allocated
    for row in allocated:
        cell = cells[tuple(row["value_ids"])]
        assert row["failure_now"] == pytest.approx(cell.failure_rate, rel=1e-9)


def test_a_flagged_production_shift_moves_episodes_to_the_flagged_cell_and_says_why(world_a):
    from analytics.models import GapReport
    from analytics.services.gap import gap_report_build
    from analytics.services.steering import next_round_recommendation
    from tests.analytics.production_support import seed_production

    seed_production(world_a, shift=True)
    campaign = world_a.campaign
    report = gap_report_build(
        report=GapReport.objects.create(organization=world_a.operator, campaign=campaign)
    )
    dim = [world_a.values[1].pk]

    def dim_episodes(recommendation):
        return sum(a["episodes"] for a in recommendation["allocations"] if a["value_ids"] == dim)

    without = next_round_recommendation(
        campaign=campaign, budget=300.0, report=report, production_shifts=False
    )
    flagged = next_round_recommendation(campaign=campaign, budget=300.0, report=report)

    assert dim_episodes(flagged) > dim_episodes(without)
    assert without["notes"] == []
    note = flagged["notes"][0]
    assert note.startswith("Grasp failure rose from")
    assert "under dim lighting since" in note
    assert "The recommendation adds the rise to the failure rate of the cells" in note
    dim_row = next(a for a in flagged["allocations"] if a["value_ids"] == dim)
    assert "Production shift: failure rate raised by" in dim_row["rationale"]
