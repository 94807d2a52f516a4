"""python manage.py simulate_campaign --strategy steered|uniform|proportional|more-of-the-same|oracle|informed|all
--rounds R --budget B --seed S [--world FAMILY] [--production DAYS] [--earlier-release EPISODES] [--json]

Pure: runs the synthetic campaign of :mod:`analytics.steering.simulate` and prints
interventions per day by round and the episodes needed to reach the reliability target.
Never touches the database.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

if TYPE_CHECKING:
    from analytics.steering.simulate import CampaignResult, WorldConfig

STRATEGIES = ("steered", "uniform", "proportional", "more-of-the-same", "oracle", "informed")


class Command(BaseCommand):
    help = (
        "Forecast a campaign in a synthetic world whose per-cell learning curves are hidden "
        "from the strategy: rounds of capture, training and evaluation with sampling noise. "
        "Prints interventions per day by round and the episodes needed to reach the target. "
        "The oracle knows the hidden truth (the best a strategy could do); the informed "
        "reference knows all of it but each cell's own amplitude and exponent, which it learns "
        "under the world's true priors (the least learning must cost). Needs no database."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--strategy", choices=[*STRATEGIES, "all"], default="steered")
        parser.add_argument("--rounds", type=int, default=30)
        parser.add_argument("--budget", type=float, default=5_000.0, help="episodes per round")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--target", type=float, default=None, help="reliability target (default 0.999)"
        )
        from analytics.steering.simulate import WORLD_FAMILIES

        parser.add_argument(
            "--world",
            choices=list(WORLD_FAMILIES),
            default="default",
            help="the benchmark's world, or one with a hardship (transfer between cells "
            "sharing conditions, costs 5x apart, noisy evaluations, drift) or all of them",
        )
        parser.add_argument(
            "--production",
            type=float,
            default=0.0,
            help="days of each policy's production the fleet logs beside its evaluation, as "
            "outcomes a strategy reads (default 0: evaluations only)",
        )
        parser.add_argument(
            "--earlier-release",
            type=int,
            default=0,
            metavar="EPISODES",
            help="start the record with the release before the campaign's first policy, "
            "trained without the last collection's EPISODES (default 0: none)",
        )
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        import dataclasses

        from analytics.steering.simulate import excess_failures, simulate, world_config

        rounds, budget = options["rounds"], options["budget"]
        if rounds < 1:
            raise CommandError("--rounds must be at least 1", returncode=2)
        if not budget > 0:
            raise CommandError("--budget must be > 0", returncode=2)
        production = options["production"]
        if not (production >= 0 and production != float("inf")):
            raise CommandError("--production must be a number of days >= 0", returncode=2)
        earlier = options["earlier_release"]
        if earlier < 0:
            raise CommandError("--earlier-release must be a number of episodes >= 0", returncode=2)
        config = world_config(options["world"], production_days=production, earlier_release=earlier)
        if options["target"] is not None:
            if not 0 < options["target"] < 1:
                raise CommandError("--target must be between 0 and 1", returncode=2)
            config = dataclasses.replace(config, reliability_target=options["target"])
        names = STRATEGIES if options["strategy"] == "all" else (options["strategy"],)
        results = [
            simulate(name, seed=options["seed"], rounds=rounds, budget=budget, config=config)
            for name in names
        ]
        if options["json"]:
            payload = [
                {
                    "strategy": r.strategy,
                    "seed": r.seed,
                    "budget_per_round": r.budget,
                    "cycles_per_day": r.cycles_per_day,
                    "rounds": r.rounds,
                    "reliability_target": r.reliability_target,
                    "interventions_per_day": [round(x, 3) for x in r.interventions_per_day],
                    "reliability": [round(x, 6) for x in r.reliability],
                    "episodes": r.episodes,
                    "episodes_to_target": (
                        None if r.episodes_to_target is None else round(r.episodes_to_target)
                    ),
                    "rounds_to_target": r.rounds_to_target,
                    "excess_failures": round(excess_failures(r), 3),
                }
                for r in results
            ]
            self.stdout.write(json.dumps(payload if len(payload) > 1 else payload[0], indent=2))
            return
        self._table(results, config)

    def _table(self, results: list[CampaignResult], config: WorldConfig) -> None:
        from analytics.steering.simulate import ORACLE, describe_record, excess_failures

        first = results[0]
        self.stdout.write(
            f"Synthetic campaign, seed {first.seed}: {first.budget:,.0f} episodes a round, "
            f"target {first.reliability_target:.1%} success = "
            f"{first.cycles_per_day * (1 - first.reliability_target):,.1f} interventions a day "
            f"at {first.cycles_per_day:,.0f} cycles a day"
        )
        self.stdout.write(f"the record strategies read: {describe_record(config)}")
        header = "round  episodes  " + "  ".join(f"{r.strategy:>16}" for r in results)
        self.stdout.write("interventions per day (true, hidden from the strategies)")
        self.stdout.write(header)
        for i in range(len(first.interventions_per_day)):
            cells = "  ".join(f"{r.interventions_per_day[i]:>16,.1f}" for r in results)
            self.stdout.write(f"{i:>5}  {first.episodes[i]:>8,.0f}  {cells}")
        for r in results:
            if r.episodes_to_target is not None:
                reach = (
                    f"reaches the target after {r.episodes_to_target:,.0f} episodes "
                    f"(in round {r.rounds_to_target})"
                )
            else:
                reach = f"does not reach the target within {r.rounds} rounds"
            self.stdout.write(f"{r.strategy}: {reach}")
        oracle = next((r for r in results if r.strategy == ORACLE), None)
        self.stdout.write(
            "excess failures over the floor, a round counted as a day of production"
            + (" (× the oracle's)" if oracle is not None else "")
        )
        best = excess_failures(oracle) if oracle is not None else 0.0
        for r in results:
            excess = excess_failures(r)
            ratio = f" ({excess / best:.3f}×)" if best > 0 else ""
            self.stdout.write(f"{r.strategy}: {excess:,.0f}{ratio}")
