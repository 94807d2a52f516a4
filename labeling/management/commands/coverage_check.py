"""python manage.py coverage_check [--organization SLUG] [--fix]"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "Compare the maintained coverage counts (labeling_coveragecount) with a fresh GROUP BY "
        "over the episodes and print every key that differs. Exit 0 when they agree, 1 when "
        "they differ; with --fix, recount them from the episodes instead."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--organization", help="operator organization slug (default: all)")
        parser.add_argument(
            "--fix", action="store_true", help="rebuild the counts from the episodes"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from accounts.models import Organization
        from labeling.selectors import coverage_differences
        from labeling.services import coverage_rebuild

        organization_id = None
        if options.get("organization"):
            org = Organization.objects.filter(slug=options["organization"]).first()
            if org is None:
                raise CommandError(f"organization {options['organization']!r}: not found")
            organization_id = org.pk
        differences = coverage_differences(organization_id=organization_id)
        for difference in differences:
            self.stdout.write(str(difference))
        if not differences:
            self.stdout.write("coverage counts match a fresh GROUP BY")
            return
        if not options["fix"]:
            raise CommandError(
                f"{len(differences)} coverage count(s) differ from a fresh GROUP BY; "
                "run with --fix to rebuild them"
            )
        keys = coverage_rebuild(organization_id=organization_id)
        left = coverage_differences(organization_id=organization_id)
        if left:
            raise CommandError(f"{len(left)} coverage count(s) still differ after the rebuild")
        self.stdout.write(f"rebuilt: {keys} coverage count(s) recounted from the episodes")
