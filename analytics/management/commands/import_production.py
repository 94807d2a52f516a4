"""import_production: import a file of production events (cycles, interventions) for the fleet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.commands import operator_organization
from analytics.services.production_files import production_import_file
from labeling.importers.errors import ImportFailed
from sites.models import Deployment


class Command(BaseCommand):
    help = (
        "Import production events — cycles and interventions — from CSV, TSV, Parquet or JSON "
        "Lines (the API's event objects, a line each). Columns: event_id, occurred_at, kind, "
        "outcome, failure_mode, intervened_by, duration_s, policy, note, recording, op; every "
        "other column is a condition dimension. Events are known by their ids: importing a file "
        "again counts nothing twice. Exits 1 naming file, row and column of each problem."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the events file")
        parser.add_argument(
            "--deployment",
            help="deployment slug for every event (else each row names its deployment)",
        )
        parser.add_argument(
            "--organization", help="operator organization slug (default: the deployment's)"
        )
        parser.add_argument(
            "--create-values",
            action="store_true",
            help="create unknown condition values of known dimensions instead of failing",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options.get("deployment")
        owners = Deployment.objects.filter(slug=slug).values("organization_id") if slug else None
        if owners is not None and not options.get("organization") and not owners.exists():
            raise CommandError(f"No deployment {slug!r}.")
        organization = operator_organization(options.get("organization"), among=owners)
        path = Path(options["path"])
        try:
            result = production_import_file(
                organization=organization,
                path=path,
                actor=None,
                deployment=options.get("deployment"),
                create_values=options["create_values"],
            )
        except ImportFailed as exc:
            lines = ["Import failed:"] + [f"  - {p}" for p in exc.problems]
            if exc.total > len(exc.problems):
                lines.append(f"  … and {exc.total - len(exc.problems)} more")
            raise CommandError("\n".join(lines)) from None
        self.stdout.write(
            f"Imported {path.name}: {result.cycles:,} cycle{'' if result.cycles == 1 else 's'}, "
            f"{result.interventions:,} intervention{'' if result.interventions == 1 else 's'}, "
            f"{result.duplicates:,} already received, {result.retracted:,} retracted, "
            f"{result.corrected:,} corrected."
            + (
                f" Created condition values: {', '.join(result.created_values)}."
                if result.created_values
                else ""
            )
        )
