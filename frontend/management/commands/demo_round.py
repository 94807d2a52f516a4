from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = (
        "Play the demo campaign's round 1 forward (plan, publish, capture, label) and write the "
        "evaluation of π-MM7 v2, trained on it, as CSV files to import (or import them with --import)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--out", default=str(Path(settings.DATA_DIR) / "demo"), help="folder for the CSV files"
        )
        parser.add_argument(
            "--import", dest="import_results", action="store_true", help="also import the results"
        )
        parser.add_argument(
            "--recordings",
            type=int,
            default=None,
            help="captures that get a robot recording (3 s takes; default "
            "FIELDCRAFT_DEMO_RECORDINGS, 24)",
        )

    def handle(self, *args: object, **options: object) -> None:
        from frontend.demo import demo_round

        result = demo_round(
            write_dir=options["out"],
            import_results=bool(options["import_results"]),
            recordings=None
            if options["recordings"] is None
            else max(0, int(str(options["recordings"]))),
        )
        self.stdout.write(
            f"Round 1 played out: {result['episodes']:,} episodes captured and labelled"
            + (
                f"; {result['recordings']} captures got their robot recording"
                if result["recordings"]
                else ""
            )
            + "."
        )
        for path in result["files"]:
            self.stdout.write(f"  evaluation of {result['policy']}: {path}")
        if not options["import_results"]:
            self.stdout.write(
                "Import them on /planner/evaluations/ (policy pi-mm7-v2, one file per deployment)."
            )
