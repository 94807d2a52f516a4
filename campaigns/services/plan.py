"""Round planning: allocate episodes to cells and sites, schedule visits, write tasks and steps.

This module is fed plain numbers per condition cell (``PlanCell``) and knows nothing of how
they were estimated: analytics turns a gap report (or a steering recommendation) into them.
A plan is built in named steps — inputs, fixed items (locks and counts decided upstream),
allocation, schedule and tasks in memory — then checked by the one feasibility checker
(:mod:`campaigns.planning.plan_check`) against every other round, and stored only if it
breaks nothing. Re-planning keeps what the manager locked exactly: locked tasks keep their
team, time and episodes; locked targets are planned at their count or the plan says which
constraint prevents it and by how much; removed targets stay out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
from django.db import transaction
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.services import audit_record
from campaigns.models import CaptureTarget, CollectionRound, CollectionTask
from campaigns.planning.allocation import AllocationResult, Budget, CellSpec, SiteSpec, allocate
from campaigns.planning.errors import PlanInfeasible
from campaigns.planning.gain import gain
from campaigns.planning.plan_check import Amounts, Violation, check_plan, describe
from campaigns.planning.repair import solve_until_placed
from campaigns.selectors import (
    DEFAULT_MIN_BATCH,
    PlanWorld,
    check_tasks,
    plan_world,
    round_check_input,
)
from campaigns.services.plan_steps import (
    Draft,
    FixedItems,
    PlanInputs,
    draft_check_tasks,
    fixed_items,
    in_words,
    plan_draft,
    plan_store,
    site_specs,
)
from campaigns.services.rounds import round_transition
from sites.models import ConditionValue, Site

__all__ = [
    "PlanCell",
    "PlanInfeasible",
    "PlanInputInvalid",
    "PlanRefused",
    "PlanRequest",
    "RoundNotEditable",
    "plan_today",
    "round_plan",
]


@dataclass(frozen=True)
class PlanCell:
    """One condition cell as the planner sees it: plain numbers and a rationale.

    ``episodes`` is a count decided upstream (a recommendation): the planner places it at
    sites instead of deciding the count again, and says why where it cannot.
    """

    value_ids: tuple[int, ...]
    label: str
    weight: float  # production cycles per day in the cell
    n0: float  # current (transfer-weighted) training episodes
    failure_rate: float
    priority: float = 0.0
    rationale: str = ""
    episodes: int | None = None
    spill: float = 0.0  # gain level of what an episode here is worth in the cells it also trains


@dataclass
class PlanRequest:
    cells: list[PlanCell]
    f_inf: float
    b: float
    source: str
    interventions_before: float | None = None
    budget_episodes: int | None = None
    budget_hours: float | None = None
    budget_money: float | None = None
    start: date | None = None
    days: int | None = None
    min_batch: int = DEFAULT_MIN_BATCH
    extra: dict[str, Any] = field(default_factory=dict)


class RoundNotEditable(Exception):
    """The round's plan can no longer change (names its status)."""


class PlanInputInvalid(PlanInfeasible):
    """The plan's inputs are refused before anything is solved or stored (names the field)."""


class PlanRefused(PlanInfeasible):
    """The plan (or a change to it) breaks a rule of the feasibility checker; nothing stored."""

    def __init__(self, message: str, violations: list[Violation]) -> None:
        super().__init__(message)
        self.violations = violations


def plan_today() -> date:
    """The first day a plan may schedule: today in the site-wide time zone (``TIME_ZONE``),
    the same "today" the field app and the calendars use."""
    return timezone.localdate()


_BUDGETS = (
    ("budget_episodes", "episodes", "episodes"),
    ("budget_hours", "hours", "field hours"),
    ("budget_money", "money", "in money"),
)


def _show(value: float) -> str:
    return f"{value:,.0f}" if abs(value - round(value)) < 0.05 else f"{value:,.1f}"


def _others(world: PlanWorld, name: str) -> str:
    held = [
        f"round {r} {_show(getattr(a, name) or 0.0)}"
        for r, a in sorted(world.other_use.items())
        if (getattr(a, name) or 0.0) > 0
    ]
    return f" ({', '.join(held)})" if held else ""


def _budget(
    round: CollectionRound, request: PlanRequest, world: PlanWorld
) -> tuple[Budget, list[str]]:
    """Return the round's budget net of the campaign's other rounds, and notes that say so.

    A budget the request gives that exceeds what the campaign has left is refused by name;
    one the round stored is capped at what is left; none given defaults to what is left.
    Raises PlanInputInvalid for a budget that is not positive or is used up.
    """
    remaining = world.remaining()
    values: dict[str, float | None] = {}
    notes: list[str] = []
    for field_name, name, unit in _BUDGETS:
        asked = getattr(request, field_name)
        stored = getattr(round, field_name)
        given = asked if asked is not None else stored
        given = float(given) if given is not None else None
        left = getattr(remaining, name)
        if given is not None and not given > 0:
            raise PlanInputInvalid(
                f"{field_name}: must be more than 0 to plan field work (round {round.number} "
                f"has {_show(given)} {unit}; set a positive budget)"
            )
        if left is not None and left <= 0:
            raise PlanInputInvalid(
                f"{field_name}: the campaign's budget of {_show(getattr(world.campaign_budget, name))} "
                f"{unit} is used up by its other rounds{_others(world, name)}"
            )
        if asked is not None and left is not None and float(asked) > left + 1e-6:
            others = _others(world, name)
            raise PlanInputInvalid(
                f"{field_name}: {_show(float(asked))} {unit} asked, but the campaign has "
                + (
                    f"{_show(left)} left after its other rounds{others}"
                    if others
                    else f"{_show(left)} in all"
                )
            )
        others = _others(world, name)
        if given is None:
            values[name] = left
            if left is not None:
                total = _show(getattr(world.campaign_budget, name))
                notes.append(
                    f"Budget {unit}: the campaign's remaining {_show(left)} of {total}"
                    + (f" after its other rounds{others}." if others else ".")
                )
        elif left is not None and given > left + 1e-6:
            values[name] = left
            notes.append(
                f"Budget {unit}: round {round.number}'s {_show(given)} capped at the campaign's "
                f"remaining {_show(left)}"
                + (f" after its other rounds{others}." if others else ".")
            )
        else:
            values[name] = given
    episodes = values["episodes"]
    return (
        Budget(
            episodes=int(episodes) if episodes is not None else None,
            hours=values["hours"],
            money=values["money"],
        ),
        notes,
    )


def _start(round: CollectionRound, request: PlanRequest) -> tuple[date, str | None]:
    """Return the plan's first day and, when it was moved, why.

    Never before today; without an explicit start, the round's own start, and not before
    the day after the campaign's earlier rounds' last visit (rounds follow each other).
    """
    today = plan_today()
    if request.start is not None:
        if request.start < today:
            raise PlanInputInvalid(
                f"start: {request.start:%Y-%m-%d} is in the past; a plan starts today "
                f"({today:%Y-%m-%d}) or later"
            )
        return request.start, None
    start = max(round.start_date or today, today)
    if round.start_date is None:
        last = (
            CollectionTask.objects.filter(
                round__campaign_id=round.campaign_id, round__number__lt=round.number
            )
            .exclude(status=CollectionTask.Status.CANCELLED)
            .exclude(scheduled_date__isnull=True)
            .order_by("-scheduled_date")
            .values_list("scheduled_date", "round__number")
            .first()
        )
        last_day = last[0] if last is not None else None
        if last is not None and last_day is not None and last_day + timedelta(days=1) > start:
            start = last_day + timedelta(days=1)
            return start, (
                f"Starts {start:%a %d %b %Y}, the day after round {last[1]}'s last visit."
            )
    return start, None


def _checked_inputs(
    round: CollectionRound, request: PlanRequest, world: PlanWorld
) -> tuple[date, int, Budget, list[str]]:
    """Validate the request against the round before any write.

    Raises PlanInputInvalid naming the field: budgets must be more than 0 where they apply
    (and within what the campaign has left), days at least 1, no negative minimum batch,
    and the start not before today.
    """
    for name in ("budget_episodes", "budget_hours", "budget_money"):
        given = getattr(request, name)
        if given is not None and not given > 0:
            raise PlanInputInvalid(f"{name}: must be more than 0 to plan field work")
    if request.days is not None and request.days < 1:
        raise PlanInputInvalid("days: must be at least 1 to plan field work")
    if request.min_batch < 1:
        raise PlanInputInvalid("min_batch: must be at least 1")
    start, moved = _start(round, request)
    days = request.days or round.days or 14
    budget, notes = _budget(round, request, world)
    return start, days, budget, ([moved] if moved else []) + notes


def _around_locks(
    start: date, days: int, locked: list[CollectionTask], notes: list[str]
) -> tuple[date, int]:
    """Widen the horizon so that it holds every locked visit (never back before today)."""
    dates = [t.scheduled_date for t in locked if t.scheduled_date is not None]
    if not dates:
        return start, days
    first = max(min(min(dates), start), plan_today())
    last = max(max(dates), start + timedelta(days=days - 1))
    if (first, last) != (start, start + timedelta(days=days - 1)):
        notes.append(
            f"Planned from {first:%a %d %b} to {last:%a %d %b} so that the horizon holds every "
            "locked visit."
        )
    return first, (last - first).days + 1


def plan_inputs(*, round: CollectionRound, request: PlanRequest) -> PlanInputs:
    """Gather and validate everything a plan needs (reads only)."""
    campaign = round.campaign
    world = plan_world(round=round)
    start, days, budget, notes = _checked_inputs(round, request, world)
    embodiment = campaign.embodiments.order_by("pk").first()
    if embodiment is None:
        raise PlanInfeasible(f"campaign {campaign.name!r} names no embodiment to capture with")
    excluded = {tuple(v) for v in (round.plan_summary or {}).get("excluded", [])}
    locked_targets = list(
        round.targets.filter(locked=True)
        .select_related("condition_set")
        .prefetch_related("task_targets__task")
    )
    locked_tasks = list(
        round.tasks.filter(locked=True)
        .exclude(status=CollectionTask.Status.CANCELLED)
        .select_related("team", "site")
        .prefetch_related("task_targets__target__condition_set")
    )
    start, days = _around_locks(start, days, locked_tasks, notes)
    cells: list[PlanCell] = []
    index: dict[tuple[int, ...], int] = {}
    for cell in request.cells:
        key = tuple(sorted(cell.value_ids))
        if key in excluded or key in index or not key:
            continue
        index[key] = len(cells)
        cells.append(cell)
    # Every cell the manager holds on to (a locked target, a target in a locked task) stays.
    held = [*locked_targets, *(tt.target for t in locked_tasks for tt in t.task_targets.all())]
    for target in held:
        key = tuple(sorted(target.condition_set.value_ids))
        if key not in index:
            index[key] = len(cells)
            cells.append(PlanCell(key, target.label, 0.0, 0.0, 0.0, 0.0, target.rationale))
    sites: list[Site] = [
        s
        for s in world.sites.values()
        if s.customer_id in (None, campaign.customer_id) and s.access_windows.all()
    ]
    values = list(
        ConditionValue.objects.filter(
            dimension__organization_id=campaign.organization_id
        ).select_related("dimension")
    )
    return PlanInputs(
        round=round,
        world=world,
        start=start,
        days=days,
        budget=budget,
        notes=notes,
        min_batch=request.min_batch,
        embodiment=embodiment,
        cells=cells,
        index=index,
        excluded=excluded,
        sites=sites,
        site_index={s.pk: i for i, s in enumerate(sites)},
        specs=site_specs(world=world, sites=sites, start=start, days=days),
        locked_targets=locked_targets,
        locked_tasks=locked_tasks,
        values=values,
        f_inf=request.f_inf,
        b=request.b,
    )


def _check_locks(inputs: PlanInputs) -> None:
    """Refuse, naming the conflict, when a locked visit no longer fits its world.

    A locked visit is planned around, never moved; if it clashes with another round's
    visit, a site's day or the team's calendar, no plan can keep it.
    """
    round = inputs.round
    mine = check_tasks(tasks=inputs.locked_tasks, ours=True, round_numbers={round.pk: round.number})
    violations = check_plan(
        round_check_input(
            world=inputs.world,
            tasks=mine,
            targets=[],
            budget=Amounts(),
            min_batch=1,
            today=plan_today(),
            edit=True,
        )
    )
    if violations:
        raise PlanRefused(
            "A locked visit cannot be kept as it is: "
            + describe(violations)
            + " Move or unlock it, then plan again; nothing was stored.",
            violations,
        )


def _allocate(inputs: PlanInputs, fixed: FixedItems) -> AllocationResult:
    """Run the allocator over the cells whose count is the planner's to decide.

    Cells with a count fixed upstream (locks, a recommendation) enter with no value of
    their own, so the allocator spends the rest of the budget around them, never on them.
    """
    try:
        return _allocate_cells(inputs, fixed)
    except PlanInfeasible as exc:
        raise PlanInfeasible(in_words(str(exc), inputs)) from exc


def _spec(index: int, cell: PlanCell, *, fixed: bool = False) -> CellSpec:
    """The allocator's view of a cell (one whose count is fixed upstream is worth nothing
    more to it: there is nothing to decide)."""
    return CellSpec(
        key=str(index),
        value_ids=tuple(sorted(cell.value_ids)),
        weight=0.0 if fixed else cell.weight,
        n0=cell.n0,
        failure_rate=cell.failure_rate,
        spill=0.0 if fixed else cell.spill,
    )


def _allocate_cells(inputs: PlanInputs, fixed: FixedItems) -> AllocationResult:
    return allocate(
        cells=[_spec(i, c, fixed=i in fixed.demand) for i, c in enumerate(inputs.cells)],
        sites=inputs.specs,
        budget=inputs.budget,
        f_inf=inputs.f_inf,
        b=inputs.b,
        stageable_values={v.pk for v in inputs.values if v.is_stageable},
        value_labels={v.pk: v.label.lower() for v in inputs.values},
        min_batch=inputs.min_batch,
        locked=fixed.locked_items(),
    )


def _solve(inputs: PlanInputs) -> tuple[FixedItems, AllocationResult, Draft]:
    """Allocate and schedule; where the schedule cannot hold a site's share, re-allocate.

    See :func:`campaigns.planning.repair.solve_until_placed` (three passes at most).
    """

    def solve(
        specs: list[SiteSpec],
    ) -> tuple[tuple[FixedItems, AllocationResult, Draft], dict[int, int]]:
        inputs.specs = specs
        fixed = fixed_items(inputs=inputs)
        result = _allocate(inputs, fixed)
        draft = plan_draft(inputs=inputs, result=result, fixed=fixed)
        short = {
            site_i: draft.placed_by_site.get(site_i, 0)
            for site_i, n in draft.dropped_by_site.items()
            if n > 0
        }
        return (fixed, result, draft), short

    (fixed, result, draft), inputs.specs = solve_until_placed(sites=inputs.specs, solve=solve)
    return fixed, result, draft


def _check_draft(inputs: PlanInputs, draft: Draft) -> None:
    """Run the feasibility checker over the plan as it would be stored; refuse on any breach."""
    tasks, targets, locked_tasks, locked_targets = draft_check_tasks(inputs=inputs, draft=draft)
    violations = check_plan(
        round_check_input(
            world=inputs.world,
            tasks=tasks,
            targets=targets,
            budget=Amounts(
                episodes=inputs.budget.episodes,
                hours=inputs.budget.hours,
                money=inputs.budget.money,
            ),
            min_batch=inputs.min_batch,
            locked_tasks=locked_tasks,
            locked_targets=locked_targets,
            today=plan_today(),
            changed=frozenset(t.key for t in tasks if t.key.startswith("new-")),
        )
    )
    if violations:
        raise PlanRefused(
            "The plan breaks " + describe(violations) + " Nothing was stored.", violations
        )


def _edited_counts(round: CollectionRound) -> dict[int, int]:
    """Targets of this round whose count a manager set (from the audit trail): pk → count."""
    out: dict[int, int] = {}
    events = AuditEvent.objects.filter(
        organization_id=round.campaign.organization_id,
        verb="target.update",
        object_type=CaptureTarget._meta.label,
        object_id__in=[str(pk) for pk in round.targets.values_list("pk", flat=True)],
    ).order_by("at")
    for event in events:
        change = (event.changes or {}).get("episodes_wanted")
        if isinstance(change, list) and len(change) == 2 and isinstance(change[1], int):
            out[int(event.object_id)] = change[1]
    return out


@transaction.atomic
def round_plan(
    *, round: CollectionRound, request: PlanRequest, actor: Any = None
) -> CollectionRound:
    """Propose (or re-solve) the round's plan and store targets, tasks and protocol steps.

    Raises RoundNotEditable unless the round is draft or planned; PlanInputInvalid (before
    any write) for a budget that is not positive or beyond what the campaign has left, a
    start in the past or no days; PlanRefused when a locked visit no longer fits or the plan
    would break a rule of the feasibility checker, naming each; PlanInfeasible (from the
    allocation or scheduling core) when locked items break a hard constraint. Nothing is
    stored unless the whole plan is.
    """
    round = CollectionRound.objects.select_for_update().select_related("campaign").get(pk=round.pk)
    if not round.is_editable:
        raise RoundNotEditable(
            f"Round {round.number} is {round.status}; only draft or planned rounds can be planned."
        )
    edited = _edited_counts(round)
    before = {t.pk: (t.label, t.episodes_wanted) for t in round.targets.filter(locked=False)}
    inputs = plan_inputs(round=round, request=request)
    _check_locks(inputs)
    _, result, draft = _solve(inputs)
    past = sorted({t.date for t in draft.tasks if t.date < plan_today()})
    if past:
        raise PlanInfeasible(
            f"the schedule would put a task on {past[0]:%a %d %b %Y}, before today; "
            "nothing was stored"
        )
    _check_draft(inputs, draft)
    gains = _cell_gains(inputs, draft)
    stored = plan_store(inputs=inputs, draft=draft, gains=gains)
    summary = _summary(
        inputs=inputs,
        request=request,
        result=result,
        draft=draft,
        stored=stored,
        gains=gains,
        edited={pk: before[pk] + (n,) for pk, n in edited.items() if pk in before},
    )
    round.start_date, round.days = inputs.start, inputs.days
    for field_name, _, _ in _BUDGETS:
        given = getattr(request, field_name)
        if given is not None:
            setattr(
                round,
                field_name,
                Decimal(str(given)) if field_name == "budget_money" else given,
            )
    round.plan_summary = summary
    round.save(
        update_fields=[
            "start_date",
            "days",
            "budget_episodes",
            "budget_hours",
            "budget_money",
            "plan_summary",
        ]
    )
    if round.status == CollectionRound.Status.DRAFT:
        round_transition(round=round, to_status=CollectionRound.Status.PLANNED, actor=actor)
    audit_record(
        organization=round.campaign.organization_id,
        actor=actor,
        verb="round.plan",
        obj=round,
        changes={
            "episodes": summary["episodes"],
            "tasks": summary["tasks"],
            "source": request.source,
        },
    )
    return round


def _cell_gains(inputs: PlanInputs, draft: Draft) -> np.ndarray:
    """Interventions a day each cell's planned episodes avoid (the one gain curve)."""
    cells = inputs.cells
    if not cells:
        return np.zeros(0)
    amp = np.array([_spec(i, c).level(inputs.f_inf) for i, c in enumerate(cells)])
    n0 = np.array([c.n0 for c in cells], dtype=np.float64)
    totals = np.array([draft.totals.get(i, 0) for i in range(len(cells))], dtype=np.float64)
    return np.asarray(gain(amp, n0, inputs.b, totals), dtype=np.float64)


def _summary(
    *,
    inputs: PlanInputs,
    request: PlanRequest,
    result: AllocationResult,
    draft: Draft,
    stored: dict[int, CaptureTarget],
    gains: np.ndarray,
    edited: dict[int, tuple[str, int, int]],
) -> dict[str, Any]:
    """What the plan is expected to do, what it uses, and what binds it — said for a person."""
    cells = inputs.cells
    totals = np.array([draft.totals.get(i, 0) for i in range(len(cells))], dtype=np.float64)
    objective = float(gains.sum())
    fixed_gain = float(sum(gains[i] for i in draft.fixed_cells))
    upper = max(result.upper_bound + fixed_gain, objective)
    before = request.interventions_before
    if before is None:
        before = sum(c.weight * c.failure_rate for c in cells)
    changes = []
    for pk, (label, _old, manager_set) in edited.items():
        now = next((t for t in stored.values() if t.pk == pk), None)
        new = now.episodes_wanted if now is not None else 0
        if new != manager_set:
            changes.append(
                f"'{label}': you set {manager_set:,} episodes but left it unlocked; the plan now "
                f"has {new:,}. Lock the target to keep a count."
            )
    binding = list(result.binding_constraints)
    binding += draft.shortfalls
    return {
        "source": request.source,
        "planned_at": timezone.now().isoformat(),
        "start": inputs.start.isoformat(),
        "days": inputs.days,
        "min_batch": inputs.min_batch,
        "budget": asdict(inputs.budget),
        "budget_notes": inputs.notes,
        "use": asdict(draft.use),
        "objective": objective,
        "upper_bound": upper,
        "bound_gap": max(upper - objective, 0.0) / upper if upper > 0 else 0.0,
        "interventions_before": before,
        "interventions_after": max(0.0, before - objective),
        "episodes": int(totals.sum()),
        "targets": len(stored),
        "tasks": len(draft.tasks) + len(inputs.locked_tasks),
        "scheduled_hours": draft.scheduled_hours,
        "travel_hours": draft.travel_hours,
        "travel_days": draft.travel_days,
        "binding": binding,
        "locked_shortfall": draft.shortfalls,
        "target_changes": changes,
        "unplaced": [
            {"reason": u.reason, "message": u.message, "episodes": u.episodes}
            for u in result.unplaced
        ],
        "unscheduled": draft.unscheduled,
        "teams": draft.teams,
        "solve_seconds": {"allocation": result.solve_seconds, "schedule": draft.solve_seconds},
        "excluded": [list(k) for k in sorted(inputs.excluded)],
        "check": {"violations": 0},
        **request.extra,
    }
