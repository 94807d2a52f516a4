import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

ROOT = Path(__file__).resolve().parents[2]
UNREACHABLE_DB = "postgres://nobody@127.0.0.1:1/x"

VALID = {
    "budget": 2000,
    "cycles_per_day": 5000,
    "cells": [
        {"id": "c1", "target_share": 0.12, "train_count": 340, "trials": 120, "successes": 113},
        {"id": "c2", "target_share": 0.5, "train_count": 9000, "trials": 600, "successes": 598},
        {
            "id": "c3",
            "target_share": 0.3,
            "train_count": 0,
            "trials": 40,
            "successes": 29,
            "cost_per_episode": 3,
        },
        {"id": "c4", "target_share": 0.08, "train_count": 60, "trials": 10, "successes": 9},
    ],
}


def _manage(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": UNREACHABLE_DB, "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _write(tmp_path: Path, data: object, name: str = "cells.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def test_recommend_works_without_a_database_and_stays_within_budget(tmp_path):
    out = _manage("recommend", "--input", _write(tmp_path, VALID))

    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    cost = {c["id"]: c.get("cost_per_episode", 1) for c in VALID["cells"]}
    spent = sum(a["episodes"] * cost[a["id"]] for a in result["allocations"])
    assert spent <= VALID["budget"]
    assert all(isinstance(a["episodes"], int) and a["episodes"] >= 0 for a in result["allocations"])
    assert [a["id"] for a in result["allocations"]] == ["c1", "c2", "c3", "c4"]
    assert result["interventions_per_day_after"] < result["interventions_per_day_before"]
    first = result["allocations"][0]
    assert {"expected_interventions_avoided_per_day", "rationale"} <= first.keys()
    assert first["rationale"].startswith("12% of production cycles, 340 training episodes")


def test_recommend_reads_stdin_and_is_deterministic_for_a_seed():
    text = json.dumps(VALID)

    runs = [
        _manage("recommend", "--input", "-", "--exploration", "thompson", "--seed", "5", stdin=text)
        for _ in range(2)
    ]

    assert runs[0].returncode == 0, runs[0].stderr
    assert runs[0].stdout == runs[1].stdout


def test_malformed_input_exits_2_with_the_problem_on_stderr(tmp_path):
    data = json.loads(json.dumps(VALID))
    data["cells"][0]["successes"] = 130

    out = _manage("recommend", "--input", _write(tmp_path, data))

    assert out.returncode == 2
    assert "cell 'c1': 'successes' (130) exceeds 'trials' (120)" in out.stderr
    assert out.stdout == ""


def _broken(mutate):
    data = json.loads(json.dumps(VALID))
    mutate(data)
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            _broken(lambda d: d["cells"][1].pop("train_count")),
            "cell 'c2': missing field 'train_count'",
        ),
        (_broken(lambda d: d["cells"][2].update(trials=-4)), "cell 'c3': 'trials' must be >= 0"),
        (
            _broken(lambda d: d["cells"][3].update(target_share="eight")),
            "cell 'c4': 'target_share' must be a number",
        ),
        (_broken(lambda d: d["cells"][0].update(target_share=0.5)), "target shares sum to 1.38"),
        (
            _broken(lambda d: d["cells"][0].update(successes=121)),
            "'successes' (121) exceeds 'trials' (120)",
        ),
        (_broken(lambda d: d.update(budget="lots")), "'budget' must be a number"),
        (_broken(lambda d: d.pop("cells")), "missing field 'cells'"),
        ("{not json", "is not valid JSON"),
    ],
)
def test_each_malformed_case_is_a_command_error_with_exit_code_2(tmp_path, data, message):
    path = _write(tmp_path, data)

    with pytest.raises(CommandError) as excinfo:
        call_command("recommend", "--input", path, stdout=StringIO())

    assert excinfo.value.returncode == 2
    assert message in str(excinfo.value)


def test_a_missing_file_exits_2(tmp_path):
    with pytest.raises(CommandError) as excinfo:
        call_command("recommend", "--input", str(tmp_path / "nope.json"), stdout=StringIO())

    assert excinfo.value.returncode == 2
    assert "cannot read" in str(excinfo.value)


def test_simulate_campaign_works_without_a_database():
    out = _manage(
        "simulate_campaign",
        "--strategy",
        "uniform",
        "--rounds",
        "3",
        "--budget",
        "2000",
        "--seed",
        "2",
        "--json",
    )

    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["strategy"] == "uniform"
    assert len(result["interventions_per_day"]) == 4
    assert result["episodes"] == [0.0, 2000.0, 4000.0, 6000.0]


def test_simulate_campaign_prints_a_table_by_round():
    stdout = StringIO()

    call_command(
        "simulate_campaign",
        "--strategy",
        "all",
        "--rounds",
        "2",
        "--seed",
        "1",
        stdout=stdout,
    )

    text = stdout.getvalue()
    assert "interventions per day" in text
    for name in ("steered", "uniform", "proportional", "more-of-the-same"):
        assert name in text
    assert "does not reach the target within 2 rounds" in text or "reaches the target" in text


def test_simulate_campaign_measures_each_strategy_against_the_oracle():
    from analytics.steering.simulate import excess_failures, simulate, world_config

    stdout = StringIO()
    call_command(
        "simulate_campaign",
        *("--strategy", "all", "--world", "cost", "--rounds", "2", "--seed", "4"),
        stdout=stdout,
    )
    json_out = _simulated("steered", "cost", 4, 2)

    config = world_config("cost")
    best = excess_failures(simulate("oracle", seed=4, rounds=2, config=config))
    steered = excess_failures(simulate("steered", seed=4, rounds=2, config=config))
    text = stdout.getvalue()
    assert "excess failures over the floor, a round counted as a day of production" in text
    assert f"steered: {steered:,.0f} ({steered / best:.3f}×)" in text
    assert f"oracle: {best:,.0f} (1.000×)" in text
    assert json_out["excess_failures"] == round(steered, 3)
    assert steered > best > 0  # no strategy beats the one that knows the truth here


def test_recommend_learns_transfer_from_the_history_in_the_file(tmp_path):
    cells = [
        {**cell, "conditions": {"lighting": light, "clutter": clutter}}
        for cell, (light, clutter) in zip(
            VALID["cells"],
            [("dim", "dense"), ("dim", "sparse"), ("bright", "dense"), ("bright", "sparse")],
            strict=True,
        )
    ]
    history = [
        {
            "round": 1,
            "cells": [
                {"id": c["id"], "trials": c["trials"], "successes": c["successes"], "added": 0}
                for c in cells
            ],
        }
    ]
    data = {**VALID, "cells": cells, "history": history}

    out = _manage("recommend", "--input", _write(tmp_path, data))
    bad = _manage(
        "recommend",
        "--input",
        _write(tmp_path, {**data, "history": [{"round": 1, "cells": [{"id": "zz"}]}]}, "bad.json"),
    )

    assert out.returncode == 0, out.stderr
    transfer = json.loads(out.stdout)["transfer"]
    assert set(transfer["strength_per_dimension"]) == {"lighting", "clutter"}
    assert transfer["evaluations"] == 2
    assert bad.returncode == 2
    assert "history round 1, cell 'zz': not one of the cells" in bad.stderr


@pytest.mark.parametrize(("strategy", "world"), [("oracle", "all"), ("informed", "noise")])
def test_simulate_campaign_plays_a_world_family_with_a_reference_that_reads_the_truth(
    strategy, world
):
    # The oracle knows the hidden truth; the informed reference all of it but each cell's
    # own amplitude and exponent.
    stdout = StringIO()

    call_command(
        "simulate_campaign",
        "--strategy",
        strategy,
        "--world",
        world,
        "--rounds",
        "2",
        "--seed",
        "7",
        "--json",
        stdout=stdout,
    )

    result = json.loads(stdout.getvalue())
    assert result["strategy"] == strategy
    assert result["interventions_per_day"][2] < result["interventions_per_day"][0]
    assert result["episodes"][2] <= 10_000  # the budget caps what it buys


def _simulated(strategy: str, world: str, seed: int, rounds: int, *extra: str) -> dict:
    """What ``simulate_campaign --json`` prints for one strategy, parsed."""
    stdout = StringIO()
    call_command(
        "simulate_campaign",
        *("--strategy", strategy, "--world", world),
        *("--rounds", str(rounds), "--seed", str(seed)),
        *extra,
        "--json",
        stdout=stdout,
    )
    return json.loads(stdout.getvalue())


def test_simulate_campaign_plays_a_world_whose_fleet_logs_production_and_refuses_a_bad_span():
    # The informed reference reads its cells from their outcomes: a day of production a
    # policy beside 300 evaluation trials changes what it reads, and so what it buys.
    alone = _simulated("informed", "noise", 7, 3)
    logged = _simulated("informed", "noise", 7, 3, "--production", "1")
    assert alone["interventions_per_day"][0] == logged["interventions_per_day"][0]
    assert alone["interventions_per_day"][1:] != logged["interventions_per_day"][1:]
    with pytest.raises(CommandError, match="--production must be a number of days >= 0"):
        call_command("simulate_campaign", "--production", "-1", stdout=StringIO())


def test_simulate_campaign_starts_a_record_with_the_release_before_and_refuses_a_bad_size():
    # The same world and policy; the release before it shows the transfer, and the first
    # round buys differently.
    alone = _simulated("steered", "transfer", 1003, 2)
    earlier = _simulated("steered", "transfer", 1003, 2, "--earlier-release", "5000")
    assert alone["interventions_per_day"][0] == earlier["interventions_per_day"][0]
    assert alone["interventions_per_day"][1] != earlier["interventions_per_day"][1]
    # The table says what record the strategies read.
    stdout = StringIO()
    call_command(
        "simulate_campaign",
        *("--rounds", "1", "--production", "1.5", "--earlier-release", "5000"),
        stdout=stdout,
    )
    assert (
        "the record strategies read: each policy's evaluation and 1.5 days of its "
        "production, from the release before the campaign's first policy (trained without "
        "the last 5,000 episodes collected)"
    ) in stdout.getvalue()
    with pytest.raises(CommandError, match="--earlier-release must be a number of episodes"):
        call_command("simulate_campaign", "--earlier-release", "-1", stdout=StringIO())


def test_the_simulated_steered_strategy_is_what_manage_py_recommend_does(tmp_path):
    # bench/steering.py measures the steered strategy; what it measures must be the
    # recommendation a person gets from the same record written as the command's input
    # (cells with costs and conditions, the earlier evaluations as history).
    from analytics.steering.simulate import WORLDS, make_world
    from analytics.steering.strategies import history_of, make_steered

    world = make_world(7, config=WORLDS["all"])
    steered = make_steered(seed=3)
    for _ in range(3):
        world.train(steered(world.observe()))
        world.evaluate()
    seen = world.observe()
    data = {
        "budget": seen.budget,
        "cycles_per_day": seen.cycles_per_day,
        "cells": [
            {
                "id": label,
                "target_share": float(seen.target_share[i]),
                "train_count": float(seen.train_count[i]),
                "trials": int(seen.latest_trials[i]),
                "successes": int(seen.latest_successes[i]),
                "cost_per_episode": float(seen.cost_per_episode[i]),
                "conditions": dict(seen.conditions[i]),
            }
            for i, label in enumerate(seen.labels)
        ],
        "history": [
            {
                "round": past.round,
                "cells": [
                    {"id": cell, "trials": t, "successes": s, "added": added}
                    for cell, (t, s, added) in past.cells.items()
                ],
            }
            for past in history_of(seen)
        ],
    }
    stdout = StringIO()

    call_command("recommend", "--input", _write(tmp_path, data), "--seed", "6", stdout=stdout)

    printed = json.loads(stdout.getvalue())
    episodes = {row["id"]: row["episodes"] for row in printed["allocations"]}
    expected = steered(seen)
    assert len(data["history"]) == 3 and printed["transfer"]["evaluations"] == 4
    assert expected.sum() > 0
    assert [episodes.get(label, 0) for label in seen.labels] == expected.tolist()
