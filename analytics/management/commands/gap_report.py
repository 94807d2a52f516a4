"""python manage.py gap_report --campaign SLUG [--dimensions a,b,c] [--json]"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Score a campaign's coverage gaps now and print the summary and top gaps (or JSON with every cell)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", required=True, help="campaign slug")
        parser.add_argument(
            "--organization", help="operator organization slug (needed if slugs clash)"
        )
        parser.add_argument(
            "--dimensions", help="comma-separated condition dimension slugs (default: all)"
        )
        parser.add_argument(
            "--json", action="store_true", help="print JSON: summary figures and all cells"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from analytics.models import GapCell, GapReport
        from analytics.services.gap import GapReportFailed, gap_report_build
        from campaigns.models import Campaign

        campaigns = Campaign.objects.filter(slug=options["campaign"])
        if options.get("organization"):
            campaigns = campaigns.filter(organization__slug=options["organization"])
        if campaigns.count() != 1:
            found = campaigns.count()
            raise CommandError(
                f"campaign {options['campaign']!r}: {'not found' if not found else f'{found} match; give --organization'}"
            )
        campaign = campaigns.get()
        dims = [d.strip() for d in (options.get("dimensions") or "").split(",") if d.strip()]
        report = GapReport.objects.create(
            organization_id=campaign.organization_id, campaign=campaign, dimension_slugs=dims
        )
        try:
            report = gap_report_build(report=report)
        except GapReportFailed as exc:
            GapReport.objects.filter(pk=report.pk).update(status=GapReport.Status.FAILED)
            raise CommandError(str(exc)) from exc
        summary = report.summary
        if options["json"]:
            fields = [
                "rank",
                "label",
                "values",
                "target_share",
                "train_count",
                "train_share",
                "coverage",
                "trials",
                "successes",
                "failure_rate",
                "failure_low",
                "failure_high",
                "interventions_per_day",
                "priority",
                "priority_elsewhere",
                "effective_count",
                "explanation",
            ]
            cells = list(GapCell.objects.filter(report=report).order_by("rank").values(*fields))
            out = {
                "report": report.pk,
                "campaign": campaign.slug,
                "dimensions": report.dimension_slugs,
                "summary": {k: v for k, v in summary.items() if k not in {"bars"}},
                "cells": cells,
            }
            self.stdout.write(json.dumps(out, indent=1, default=str))
            return
        self.stdout.write(
            f"Gap report #{report.pk} for {campaign.name} over {', '.join(report.dimension_slugs)}"
        )
        self.stdout.write(
            f"  {summary['n_cells']:,} cells · reliability now {summary['reliability_now']:.2%} "
            f"(target {summary['reliability_target']:.2%}) · {summary['interventions_per_day']:,.0f} interventions/day "
            f"(at target {summary['interventions_at_target']:,.1f})"
        )
        self.stdout.write(
            f"  target mass uncovered {summary['uncovered_mass']:.1%}, thin {summary['thin_mass']:.1%} · "
            f"Jensen–Shannon {summary['js_divergence']:.3f}"
        )
        for src in summary["sources"]:
            self.stdout.write(
                f"  target of {src['deployment']}: {src['source']} ({src['observations']:,} observations)"
            )
        self.stdout.write("Top gaps:")
        for gap in summary["top_gaps"]:
            self.stdout.write(f"  - {gap['sentence']}")
