"""Random multi-round planning worlds in the database, for the property test and the bench.

A world is an operator with sites (windows, capacities, time zones), teams (hours, days
off, embodiments), a campaign with budgets and several rounds. ``play`` plans its rounds in
turn, then locks counts and visits at random, re-solves, and moves visits by hand — every
path that stores a plan — and reports, for each stored plan, what the checker and an
independent oracle say, and for each refusal whether a real rule was broken.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, time, timedelta
from itertools import product
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.models import Organization
from campaigns.models import (
    Campaign,
    CollectionRound,
    CollectionTask,
    FieldTeam,
    TeamUnavailability,
)
from campaigns.planning.errors import PlanInfeasible
from campaigns.planning.geo import haversine_km
from campaigns.selectors import round_violations
from campaigns.services import round_create
from campaigns.services.plan import PlanCell, PlanRequest, plan_today, round_plan
from campaigns.services.plan_edit import PlanEditRefused, target_update, task_update
from sites.models import (
    AccessWindow,
    ActionDimension,
    Camera,
    ConditionDimension,
    ConditionValue,
    Embodiment,
    Site,
    Task,
)

ZONES = ("Europe/Amsterdam", "Europe/London", "Europe/Berlin")


@dataclass
class Outcome:
    """What one world's play stored and refused, and what was wrong with it."""

    stored: int = 0
    refused: int = 0
    reasons: list[str] = field(default_factory=list)  # what each refusal said
    bad_stored: list[str] = field(default_factory=list)  # stored plans that break a rule
    bad_refusals: list[str] = field(default_factory=list)  # refusals that name nothing real


def build_world(rng: np.random.Generator, tag: str) -> Campaign:
    """Create a random operator, sites, teams and a campaign with budgets (no rounds yet)."""
    operator = Organization.objects.create(slug=f"pw-{tag}", name=f"PW {tag}", kind="operator")
    customer = Organization.objects.create(
        slug=f"pwc-{tag}", name=f"PWC {tag}", kind="customer", operator=operator
    )
    robot = Embodiment.objects.create(
        organization=operator,
        slug="arm",
        name="Arm",
        morphology="fixed arm",
        end_effector="gripper",
        control_rate_hz=50,
    )
    ActionDimension.objects.create(
        embodiment=robot, name="j1", unit="rad", min_value=-1, max_value=1
    )
    Camera.objects.create(
        embodiment=robot, name="front", mount="head", width=640, height=480, fps=30
    )
    values: list[list[ConditionValue]] = []
    for d in range(2):
        dim = ConditionDimension.objects.create(
            organization=operator,
            slug=f"dim{d}",
            name=f"Dim {d}",
            order=d,
            stageable=bool(rng.random() < 0.7),
        )
        values.append(
            [
                ConditionValue.objects.create(
                    dimension=dim, slug=f"v{d}{k}", label=f"V{d}{k}", order=k
                )
                for k in range(3)
            ]
        )
    sites = []
    for s in range(int(rng.integers(2, 6))):
        site = Site.objects.create(
            organization=operator,
            customer=customer if rng.random() < 0.7 else None,
            slug=f"site{s}",
            name=f"Site {s}",
            country="NL",
            latitude=51.0 + float(rng.random()) * 1.5,
            longitude=4.0 + float(rng.random()) * 3.0,
            timezone=str(rng.choice(ZONES)),
            capacity_episodes_per_day=int(rng.integers(30, 300)),
            episode_minutes=float(rng.choice([1.0, 1.5, 2.0, 3.0, 4.0])),
            setup_hours=float(rng.choice([0.5, 1.0, 1.5])),
            cost_per_hour=int(rng.integers(0, 80)),
        )
        for weekday in range(7):
            if rng.random() < 0.6:
                begin = int(rng.integers(5, 14))
                end = min(begin + int(rng.integers(3, 10)), 23)
                AccessWindow.objects.create(
                    site=site, weekday=weekday, start_time=time(begin), end_time=time(end)
                )
        site.presents.set([v for row in values for v in row if rng.random() < 0.5])
        sites.append(site)
    user_model = get_user_model()
    for t in range(int(rng.integers(1, 4))):
        team = FieldTeam.objects.create(
            organization=operator,
            slug=f"team{t}",
            name=f"Team {t}",
            home_base="Base",
            home_latitude=51.0 + float(rng.random()) * 1.5,
            home_longitude=4.0 + float(rng.random()) * 3.0,
            hours_per_day=float(rng.choice([4, 6, 8, 10])),
            travel_speed_kmh=float(rng.choice([50, 70, 90])),
            cost_per_hour=int(rng.integers(20, 120)),
        )
        team.embodiments.set([robot])
        team.members.set([user_model.objects.create(username=f"pw-{tag}-field{t}")])
        for _ in range(int(rng.integers(0, 3))):
            first = plan_today() + timedelta(days=int(rng.integers(0, 30)))
            TeamUnavailability.objects.create(
                team=team,
                start_date=first,
                end_date=first + timedelta(days=int(rng.integers(0, 4))),
            )
    task = Task.objects.create(organization=operator, slug="pick", name="Pick")
    campaign = Campaign.objects.create(
        organization=operator,
        customer=customer,
        slug="camp",
        name=f"Campaign {tag}",
        task=task,
        reliability_goal=0.999,
        budget_episodes=int(rng.integers(300, 4000)),
        budget_hours=float(rng.integers(40, 400)),
        budget_money=int(rng.integers(5_000, 60_000)),
        start_date=plan_today(),
        end_date=plan_today() + timedelta(days=180),
    )
    campaign.embodiments.set([robot])
    return campaign


def random_cells(rng: np.random.Generator, campaign: Campaign, *, counts: bool) -> list[PlanCell]:
    """Random cells over the campaign's condition values (with recommended counts if asked)."""
    dims = [
        list(d.values.order_by("order"))
        for d in ConditionDimension.objects.filter(organization=campaign.organization).order_by(
            "order"
        )
    ]
    cells = []
    for combo in product(*dims):
        if rng.random() < 0.25:
            continue
        cells.append(
            PlanCell(
                value_ids=tuple(sorted(v.pk for v in combo)),
                label=" · ".join(v.label for v in combo),
                weight=float(rng.uniform(1, 400)),
                n0=float(rng.integers(0, 200)),
                failure_rate=float(rng.uniform(0.005, 0.2)),
                priority=float(rng.random()),
                episodes=int(rng.integers(5, 400)) if counts else None,
            )
        )
    return cells


def oracle(campaign: Campaign) -> list[str]:
    """Problems in the campaign's stored visits, found without the feasibility checker."""
    problems: list[str] = []
    tasks = list(
        CollectionTask.objects.filter(round__campaign__organization=campaign.organization)
        .exclude(status=CollectionTask.Status.CANCELLED)
        .exclude(start_at__isnull=True)
        .select_related("site", "team", "round")
        .prefetch_related("task_targets", "site__access_windows", "team__unavailability")
        .order_by("start_at", "pk")
    )
    by_team: dict[int, list[CollectionTask]] = defaultdict(list)
    site_day: dict[tuple[int, date], int] = defaultdict(int)
    for t in tasks:
        zone = ZoneInfo(t.site.timezone)
        begin, end = t.start_at.astimezone(zone), t.end_at.astimezone(zone)
        episodes = sum(tt.episodes_planned for tt in t.task_targets.all())
        site_day[(t.site_id, begin.date())] += episodes
        by_team[t.team_id].append(t)
        if (
            not any(
                w.weekday == begin.weekday()
                and w.start_time <= begin.time()
                and end.time() <= w.end_time
                for w in t.site.access_windows.all()
            )
            or end.date() != begin.date()
        ):
            problems.append(f"task {t.pk} outside windows")
        if any(u.start_date <= begin.date() <= u.end_date for u in t.team.unavailability.all()):
            problems.append(f"task {t.pk}: team unavailable")
        if episodes * t.site.episode_minutes > (t.end_at - t.start_at).total_seconds() / 60 + 1.01:
            problems.append(f"task {t.pk}: too short for {episodes} episodes")
    for (site_id, day), n in site_day.items():
        cap = next(t.site.capacity_episodes_per_day for t in tasks if t.site_id == site_id)
        if n > cap:
            problems.append(f"site {site_id} holds {n} > {cap} on {day}")
    for team_tasks in by_team.values():
        team = team_tasks[0].team
        day_load: dict[date, float] = defaultdict(float)
        for a, b in zip(team_tasks, team_tasks[1:], strict=False):
            if b.start_at < a.end_at - timedelta(seconds=59):
                problems.append(f"team {team.slug} double-booked: tasks {a.pk} and {b.pk}")
            elif a.site_id != b.site_id:
                km = haversine_km(
                    a.site.latitude, a.site.longitude, b.site.latitude, b.site.longitude
                )
                gap_h = (b.start_at - a.end_at).total_seconds() / 3600
                if gap_h + 1 / 60 + 1e-6 < km / team.travel_speed_kmh:
                    problems.append(f"team {team.slug} cannot drive from task {a.pk} to {b.pk}")
        for t in team_tasks:
            day = t.start_at.astimezone(ZoneInfo(t.site.timezone)).date()
            day_load[day] += (t.end_at - t.start_at).total_seconds() / 3600
        for day, load in day_load.items():
            if load > team.hours_per_day + 1 / 60 + 1e-6:
                problems.append(f"team {team.slug} works {load:.2f} h on {day}")
    return problems


def _budget_problems(campaign: Campaign) -> list[str]:
    from campaigns.selectors import rounds_use

    use = rounds_use(campaign=campaign)
    out = []
    for name, limit in (
        ("episodes", campaign.budget_episodes),
        ("hours", campaign.budget_hours),
        ("money", campaign.budget_money),
    ):
        total = sum(getattr(a, name) or 0.0 for a in use.values())
        if limit is not None and total > float(limit) + 1e-6:
            out.append(f"campaign {name}: {total:.1f} > {limit}")
    return out


def play(rng: np.random.Generator, tag: str) -> Outcome:
    """Build a world, plan its rounds, lock, re-solve and move visits; judge what happened."""
    out = Outcome()
    campaign = build_world(rng, tag)
    rounds: list[CollectionRound] = []

    def attempt(what: str, action: Any, *, plan: CollectionRound | None = None) -> None:
        before = oracle(campaign)
        try:
            with transaction.atomic():
                action()
        except (PlanInfeasible, PlanEditRefused) as exc:
            out.refused += 1
            out.reasons.append(f"{what}: {exc}")
            if not str(exc).strip():
                out.bad_refusals.append(f"{what}: refused with no reason")
            return
        out.stored += 1
        after = [p for p in oracle(campaign) if p not in before]
        after += _budget_problems(campaign)
        for r in rounds:
            found = round_violations(round=CollectionRound.objects.get(pk=r.pk))
            # A count edited by hand waits for the next re-solve to reach the visits.
            skip = {"past"} if plan is not None and plan.pk == r.pk else {"past", "target_over"}
            after += [f"round {r.number}: {v.message}" for v in found if v.rule not in skip]
        if after:
            out.bad_stored.append(f"{what}: " + "; ".join(after[:5]))

    for number in range(int(rng.integers(2, 4))):
        round = round_create(campaign=campaign)
        rounds.append(round)
        counts = bool(rng.random() < 0.3)
        cells = random_cells(rng, campaign, counts=counts)
        start = plan_today() + timedelta(days=int(rng.integers(0, 10)))
        request = PlanRequest(
            cells=cells,
            f_inf=0.002,
            b=0.45,
            source="random world",
            budget_episodes=int(rng.integers(100, 1500)) if rng.random() < 0.5 else None,
            start=start if rng.random() < 0.5 else None,
            days=int(rng.integers(3, 21)),
            min_batch=int(rng.choice([5, 10, 20])),
        )

        def plan(round: CollectionRound = round, request: PlanRequest = request) -> None:
            round_plan(round=round, request=request)

        attempt(f"plan round {number + 1}", plan, plan=round)
        round.refresh_from_db()
        if not round.tasks.exists():
            continue
        # Random locks and manual moves, then a re-solve around them.
        for target in list(round.targets.all()[:2]):
            if rng.random() < 0.5:
                wanted = target.episodes_wanted + int(rng.integers(-10, 60))

                def edit(target: Any = target, wanted: int = wanted) -> None:
                    target_update(target=target, episodes=max(wanted, 0))

                attempt("lock a count", edit)
        tasks = list(round.tasks.select_related("site", "team").order_by("?")[:3])
        teams = list(FieldTeam.objects.filter(organization=campaign.organization))
        for task in tasks:
            roll = rng.random()
            if roll < 0.4:

                def lock(task: Any = task) -> None:
                    task_update(task=task, locked=True)

                attempt("lock a visit", lock)
            elif roll < 0.8:
                team = teams[int(rng.integers(0, len(teams)))]
                local = task.start_at.astimezone(ZoneInfo(task.site.timezone))
                day = local.date() + timedelta(days=int(rng.integers(-2, 4)))
                start_at = time(int(rng.integers(5, 16)), int(rng.choice([0, 30])))

                def move(
                    task: Any = task, team: Any = team, day: date = day, at: time = start_at
                ) -> None:
                    task_update(task=task, team=team, day=day, start=at)

                attempt("move a visit", move)
        resolve = PlanRequest(
            cells=random_cells(rng, campaign, counts=counts),
            f_inf=0.002,
            b=0.45,
            source="random world, re-solve",
            days=int(rng.integers(3, 21)),
            min_batch=request.min_batch,
        )

        def replan(round: CollectionRound = round, request: PlanRequest = resolve) -> None:
            round_plan(round=round, request=request)

        attempt(f"re-solve round {number + 1}", replan, plan=round)
    return out
