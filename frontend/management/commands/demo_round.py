from pathlib import Path

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.core.management.base import BaseCommand, CommandError, CommandParser


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
        from analytics.services.planning import NoGapReport
        from campaigns.models import Campaign
        from campaigns.planning.errors import PlanInfeasible
        from campaigns.services.plan import RoundNotEditable
        from campaigns.services.plan_edit import PlanEditRefused
        from frontend.demo import demo_round

        if not Campaign.objects.filter(
            organization__slug="fieldcraft-ops", slug="northwind-2027-h1"
        ).exists():
            raise CommandError(
                "the demo campaign northwind-2027-h1 is missing: run `manage.py seed_demo` first"
            )
        try:
            result = demo_round(
                write_dir=options["out"],
                import_results=bool(options["import_results"]),
                recordings=None
                if options["recordings"] is None
                else max(0, int(str(options["recordings"]))),
            )
        except ObjectDoesNotExist as exc:
            raise CommandError(
                f"the demo is incomplete ({exc}): run `manage.py seed_demo` first"
            ) from exc
        except (PlanInfeasible, RoundNotEditable, NoGapReport) as exc:
            raise CommandError(f"round 1 cannot be planned: {exc}") from exc
        except PlanEditRefused as exc:
            raise CommandError(f"round 1 cannot be published: {exc}") from exc
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
