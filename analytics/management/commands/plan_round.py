"""python manage.py plan_round --campaign SLUG [--budget-episodes N] [--budget-hours H]
[--budget-money M] [--start YYYY-MM-DD] [--days D] [--json]"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction


class Command(BaseCommand):
    help = (
        "Plan the campaign's draft (or re-solve its planned) round from its latest gap report, computing "
        "one first if there is none, and print the plan. Exits 1 naming the binding constraint when the "
        "plan cannot be met (infeasible locks, demand no site can present, visits no team can make)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", required=True)
        parser.add_argument(
            "--organization", help="operator organization slug (if campaign slugs clash)"
        )
        parser.add_argument("--budget-episodes", type=int)
        parser.add_argument("--budget-hours", type=float)
        parser.add_argument("--budget-money", type=float)
        parser.add_argument("--start", type=date.fromisoformat, help="first day, YYYY-MM-DD")
        parser.add_argument("--days", type=int)
        parser.add_argument("--min-batch", type=int, default=20)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        from campaigns.models import Campaign
        from campaigns.planning.errors import PlanInfeasible
        from campaigns.services.plan import RoundNotEditable

        campaigns = Campaign.objects.filter(slug=options["campaign"])
        if options.get("organization"):
            campaigns = campaigns.filter(organization__slug=options["organization"])
        if campaigns.count() != 1:
            raise CommandError(
                f"campaign {options['campaign']!r}: {'not found' if not campaigns.exists() else 'ambiguous; give --organization'}"
            )
        campaign = campaigns.get()
        try:
            # One transaction: a refusal (here or below, "cannot be fully met") stores nothing,
            # not even the round created for the plan or the gap report computed for it.
            with transaction.atomic():
                self._plan(campaign, options)
        except (PlanInfeasible, RoundNotEditable) as exc:
            raise CommandError(f"plan cannot be met: {exc}") from exc

    def _plan(self, campaign: Any, options: dict[str, Any]) -> None:
        from analytics.models import GapReport
        from analytics.selectors import gap_report_latest
        from analytics.services.gap import gap_report_build
        from analytics.services.planning import round_plan_from_gap
        from campaigns.models import CollectionRound
        from campaigns.services import round_create

        round = (
            campaign.rounds.filter(
                status__in=[CollectionRound.Status.DRAFT, CollectionRound.Status.PLANNED]
            )
            .order_by("-number")
            .first()
        ) or round_create(campaign=campaign)
        report = gap_report_latest(campaign=campaign) or gap_report_build(
            report=GapReport.objects.create(
                organization_id=campaign.organization_id, campaign=campaign
            )
        )
        round = round_plan_from_gap(
            round=round,
            report=report,
            budget_episodes=options.get("budget_episodes"),
            budget_hours=options.get("budget_hours"),
            budget_money=options.get("budget_money"),
            start=options.get("start"),
            days=options.get("days"),
            min_batch=options["min_batch"],
        )

        summary = round.plan_summary
        blocking = [
            u["message"]
            for u in summary["unplaced"]
            if u["reason"] in {"no_feasible_site", "site_capacity"}
        ]
        blocking += [
            f"{u['site']}: {u['hours']:.1f} h not scheduled ({u['reason']})"
            for u in summary["unscheduled"]
        ]
        if options["json"]:
            tasks = [
                {
                    "site": t.site.name,
                    "team": t.team.name if t.team else None,
                    "date": str(t.scheduled_date),
                    "start": t.start_at.isoformat() if t.start_at else None,
                    "end": t.end_at.isoformat() if t.end_at else None,
                    "episodes": sum(tt.episodes_planned for tt in t.task_targets.all()),
                    "calibration": any(s.kind == "calibration" for s in t.steps.all()),
                }
                for t in round.tasks.select_related("site", "team").prefetch_related(
                    "task_targets", "steps"
                )
            ]
            targets = [
                {
                    "label": t.label,
                    "episodes": t.episodes_wanted,
                    "expected_avoided_per_day": t.expected_avoided_per_day,
                    "rationale": t.rationale,
                    "locked": t.locked,
                }
                for t in round.targets.order_by("-expected_avoided_per_day")
            ]
            self.stdout.write(
                json.dumps(
                    {
                        "round": round.pk,
                        "status": round.status,
                        "summary": summary,
                        "targets": targets,
                        "tasks": tasks,
                    },
                    indent=1,
                    default=str,
                )
            )
        else:
            self._print(round, summary)
        if blocking or not summary.get("episodes"):
            # Raised inside the transaction: the partial plan printed above is not stored.
            raise CommandError(
                "plan cannot be fully met: "
                + ("; ".join(blocking) or "no episodes could be planned")
                + "; nothing was stored"
            )

    def _print(self, round: Any, s: dict[str, Any]) -> None:
        self.stdout.write(
            f"Round {round.number} of {round.campaign.name}: {round.status}, from {s['source']}"
        )
        self.stdout.write(
            f"  {s['episodes']:,} episodes in {s['targets']} targets and {s['tasks']} tasks, "
            f"{s['start']} for {s['days']} days"
        )
        self.stdout.write(
            f"  interventions/day {s['interventions_before']:,.1f} → {s['interventions_after']:,.1f} "
            f"(avoids {s['objective']:,.1f}; LP bound {s['upper_bound']:,.1f}, gap {s['bound_gap']:.2%})"
        )
        use = s["use"]
        self.stdout.write(
            f"  uses {use['episodes']:,} episodes, {use['hours']:,.1f} field hours, {use['money']:,.0f} in money"
        )
        for line in s["binding"]:
            self.stdout.write(f"  binding: {line}")
        for u in s["unplaced"]:
            self.stdout.write(f"  unplaced: {u['message']}")
        for t in round.targets.order_by("-expected_avoided_per_day")[:10]:
            self.stdout.write(
                f"  - {t.episodes_wanted:>5,} × {t.label} (avoids ~{t.expected_avoided_per_day:.1f}/day)"
            )
