"""python manage.py recommend --input FILE.json [--seed S] [--exploration ucb|thompson|mean]
[--level L]

Pure: reads cells from a JSON file (``-`` for stdin), prints the recommendation as JSON, and
never touches the database (no system checks, no model imports).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

# Exit status for input a person must fix (argparse uses 2 for bad arguments as well).
INPUT_ERROR = 2


class Command(BaseCommand):
    help = (
        "Recommend the next round's episodes per condition cell from a JSON file "
        '{"budget": B, "cycles_per_day": C, "cells": [{"id", "target_share", "train_count", '
        '"trials", "successes", "cost_per_episode"?, "conditions"?: {"<dimension>": "<value>"}}, '
        '...], "history"?: [{"round": r, "cells": [{"id", "trials", "successes", "added"}]}, '
        "...]} (earlier rounds, oldest first: with conditions they teach how much an episode in "
        "one cell helps another) and print JSON allocations (whole episodes, total cost within "
        "budget) with interventions per day before and after, and the transfer learnt. Needs "
        "no database. Exits 2 with a message on malformed input."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--input", required=True, help="JSON file, or - for stdin")
        parser.add_argument("--seed", type=int, default=0, help="seed for Thompson sampling")
        parser.add_argument(
            "--exploration",
            choices=["ucb", "thompson", "mean"],
            default="ucb",
            help="how thin evidence is valued (default: upper-confidence bound)",
        )
        parser.add_argument(
            "--level", type=float, default=None, help="UCB quantile in (0, 1), default 0.8"
        )
        parser.add_argument("--indent", type=int, default=2)

    def handle(self, *args: Any, **options: Any) -> None:
        from analytics.steering.recommend import (
            Exploration,
            RecommendationInputError,
            parse_request,
            recommend,
        )

        path = options["input"]
        try:
            if path == "-":
                data = json.load(sys.stdin)
            else:
                with open(path, encoding="utf-8") as handle:
                    data = json.load(handle)
        except OSError as exc:
            raise CommandError(
                f"cannot read {path}: {exc.strerror}", returncode=INPUT_ERROR
            ) from exc
        except json.JSONDecodeError as exc:
            raise CommandError(
                f"{path} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                returncode=INPUT_ERROR,
            ) from exc
        try:
            exploration = Exploration(
                method=options["exploration"],
                **({"level": options["level"]} if options["level"] is not None else {}),
            )
            request = parse_request(data)
            result = recommend(
                request.cells,
                request.budget,
                request.cycles_per_day,
                seed=options["seed"],
                exploration=exploration,
                history=request.history,
            )
        except RecommendationInputError as exc:
            raise CommandError(f"invalid input: {exc}", returncode=INPUT_ERROR) from exc
        except ValueError as exc:
            raise CommandError(str(exc), returncode=INPUT_ERROR) from exc
        indent = options["indent"] if options["indent"] > 0 else None
        self.stdout.write(json.dumps(result.to_dict(), indent=indent, ensure_ascii=False))
