"""import_production: import a file of production events (cycles, interventions) for the fleet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Organization
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
        organization = self._organization(options.get("organization"), options.get("deployment"))
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

    def _organization(self, slug: str | None, deployment: str | None) -> Organization:
        operators = Organization.objects.filter(kind=Organization.Kind.OPERATOR)
        if slug:
            org = operators.filter(slug=slug).first()
            if org is None:
                raise CommandError(f"No operator organization {slug!r}.")
            return org
        if deployment:
            owners = list(
                operators.filter(
                    pk__in=Deployment.objects.filter(slug=deployment).values("organization_id")
                )[:2]
            )
            if len(owners) == 1:
                return owners[0]
            if not owners:
                raise CommandError(f"No deployment {deployment!r}.")
        found = list(operators[:2])
        if len(found) != 1:
            raise CommandError("Give --organization SLUG: more than one organization fits.")
        return found[0]
