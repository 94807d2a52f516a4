from typing import Any

import numpy as np
import pytest
from scipy import stats

from analytics.curves import CurveFit, LearningCurve
from analytics.learning import LOG_MULTIPLIER_GRID, CurveSet
from analytics.steering.economics import DeploymentProfile, demonstration, project_campaign


def _curve_set(curve: LearningCurve, cells: int) -> CurveSet:
    """A curve set where every cell follows ``curve`` exactly (multiplier 1, no spread)."""
    posterior = np.zeros((cells, LOG_MULTIPLIER_GRID.size))
    posterior[:, int(np.argmin(np.abs(LOG_MULTIPLIER_GRID)))] = 1.0
    return CurveSet(
        fit=CurveFit(
            curve=curve, source="given", n_cells=0, n_trials=0, n_failures=0, log_likelihood=0.0
        ),
        grid=LOG_MULTIPLIER_GRID,
        posterior=posterior,
        tau=0.0,
        amplitude=np.full(cells, curve.a),
        trials=np.zeros(cells),
        failures=np.zeros(cells),
    )


CURVE = LearningCurve(f_inf=0.0002, a=0.2, b=1.0)


def test_interventions_now_and_after_the_next_round_follow_the_curves():
    curves = _curve_set(CURVE, 2)
    n = np.array([100.0, 0.0])
    p = np.array([0.5, 0.5])

    projection = project_campaign(
        curves,
        train_count=n,
        target_share=p,
        cycles_per_day=5000,
        reliability_target=0.999,
        budget_per_round=1000,
        first_round=np.array([0, 1000]),
    ).campaign

    # now: 5000 * (0.5 * (0.0002 + 0.2 / 101) + 0.5 * (0.0002 + 0.2))
    assert projection.interventions_per_day_now == pytest.approx(
        5000 * (0.0002 + 0.5 * 0.2 / 101 + 0.5 * 0.2)
    )
    assert projection.interventions_per_day_after_next == pytest.approx(
        5000 * (0.0002 + 0.5 * 0.2 / 101 + 0.5 * 0.2 / 1001)
    )
    assert projection.interventions_per_day_at_target == pytest.approx(5.0)


def test_rounds_and_episodes_to_target_are_interpolated_on_the_path():
    curves = _curve_set(CURVE, 3)
    p = np.array([0.6, 0.3, 0.1])

    result = project_campaign(
        curves,
        train_count=np.zeros(3),
        target_share=p,
        cycles_per_day=5000,
        reliability_target=0.999,
        budget_per_round=500,
    )
    projection = result.campaign

    r = projection.rounds_to_target
    assert r is not None and r >= 2
    assert projection.episodes[r - 1] < projection.episodes_to_target <= projection.episodes[r]
    # At the interpolated point of the crossing round the expected failure mass is the target's.
    before = np.sum(result.allocations[: r - 1], axis=0)
    last = result.allocations[r - 1]
    t = (projection.episodes_to_target - projection.episodes[r - 1]) / last.sum()
    mass = float(np.dot(p, curves.rate(before + t * last)))
    assert mass == pytest.approx(0.001, rel=1e-6)
    assert projection.interventions_per_day[r] <= 5.0 < projection.interventions_per_day[r - 1]
    assert "reached in about" in projection.sentences()[1]


def test_a_floor_above_the_target_is_reported_as_out_of_reach():
    curves = _curve_set(LearningCurve(f_inf=0.002, a=0.2, b=1.0), 2)

    projection = project_campaign(
        curves,
        train_count=np.zeros(2),
        target_share=np.array([0.5, 0.5]),
        cycles_per_day=5000,
        reliability_target=0.999,
        budget_per_round=10_000,
        max_rounds=5,
    ).campaign

    assert projection.rounds_to_target is None and not projection.reachable
    assert "out of reach" in projection.reason
    assert projection.floor_reliability == pytest.approx(0.998)


def test_each_deployment_is_projected_on_the_campaigns_path():
    curves = _curve_set(CURVE, 2)
    rotterdam = DeploymentProfile(np.array([1.0, 0.0]), 3000.0, 0.999)
    leeds = DeploymentProfile(np.array([0.0, 1.0]), 2000.0, 0.995)

    result = project_campaign(
        curves,
        train_count=np.array([10.0, 10.0]),
        target_share=np.array([0.6, 0.4]),
        cycles_per_day=5000,
        reliability_target=0.999,
        budget_per_round=2000,
        deployments={"Rotterdam": rotterdam, "Leeds": leeds},
    )

    path = np.cumsum([np.zeros(2), *result.allocations], axis=0) + 10.0
    for name, cell, cycles in (("Rotterdam", 0, 3000.0), ("Leeds", 1, 2000.0)):
        projection = result.deployments[name]
        expected = [cycles * float(curves.rate(n)[cell]) for n in path]
        assert projection.interventions_per_day == pytest.approx(expected)
        assert projection.rounds_to_target is not None
    assert result.deployments["Leeds"].rounds_to_target <= result.campaign.rounds_to_target


def test_demonstration_trials_and_pass_chances():
    demo = demonstration(0.999, assumed_reliability=0.9997)

    assert demo.trials == {0: 2995, 1: 4742, 2: 6294}
    assert demo.pass_probability[0] == pytest.approx(0.9997**2995)
    assert demo.pass_probability[1] == pytest.approx(stats.binom.cdf(1, 4742, 0.0003))
    # A policy exactly at the target passes a zero-failure run only about 5% of the time.
    assert demonstration(0.999, 0.999).pass_probability[0] == pytest.approx(0.05, abs=0.001)


def test_projection_rejects_mismatched_inputs():
    curves = _curve_set(CURVE, 2)

    with pytest.raises(ValueError, match="target_share"):
        project_campaign(
            curves,
            train_count=np.zeros(2),
            target_share=np.array([1.0]),
            cycles_per_day=10,
            reliability_target=0.99,
            budget_per_round=10,
        )
    with pytest.raises(ValueError, match="reliability_target"):
        project_campaign(
            curves,
            train_count=np.zeros(2),
            target_share=np.array([0.5, 0.5]),
            cycles_per_day=10,
            reliability_target=1.0,
            budget_per_round=10,
        )


def test_with_transfer_a_rounds_episodes_also_train_the_cells_sharing_their_conditions():
    from analytics.steering.transfer import CellStructure, TransferModel

    structure = CellStructure.of([{"lighting": "dim"}, {"lighting": "bright"}])
    transfer = TransferModel(
        structure=structure,
        strength=np.array([0.25]),
        low=np.array([0.2]),
        high=np.array([0.3]),
        evaluations=3,
    )
    args: dict[str, Any] = {
        "train_count": np.array([100.0, 0.0]),
        "target_share": np.array([0.5, 0.5]),
        "cycles_per_day": 5000,
        "reliability_target": 0.999,
        "budget_per_round": 1000,
        "first_round": np.array([0, 1000]),
    }

    plain = project_campaign(_curve_set(CURVE, 2), **args)
    helped = project_campaign(_curve_set(CURVE, 2), transfer=transfer, **args)

    # 1,000 episodes under bright light count 250 under dim light too.
    assert helped.campaign.interventions_per_day_after_next == pytest.approx(
        5000 * (0.0002 + 0.5 * 0.2 / 351 + 0.5 * 0.2 / 1001)
    )
    assert helped.campaign.interventions_per_day_now == plain.campaign.interventions_per_day_now
    assert helped.campaign.rounds_to_target <= plain.campaign.rounds_to_target
