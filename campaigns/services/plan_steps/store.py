"""A plan as the checker sees it, and storing it: targets, visits and their protocol steps."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from campaigns.models import (
    CaptureTarget,
    CollectionRound,
    CollectionTask,
    ProtocolStep,
    TaskTarget,
)
from campaigns.planning import protocol as proto
from campaigns.planning.plan_check import CheckTarget, CheckTask
from campaigns.selectors import check_tasks
from campaigns.services.plan_steps.draft import Draft, setup_order
from campaigns.services.plan_steps.inputs import PlanInputs
from sites.services import condition_sets_intern


def _target_key(cell: int) -> str:
    return f"cell-{cell}"


def _wanted(inputs: PlanInputs, draft: Draft) -> dict[int, int]:
    """Episodes each target will want: a locked target its count, any other what is planned."""
    wanted = {c: n for c, n in draft.totals.items() if n > 0}
    for target in inputs.locked_targets:
        wanted[inputs.cell_of(target)] = target.episodes_wanted
    for task in inputs.locked_tasks:
        for tt in task.task_targets.all():
            c = inputs.cell_of(tt.target)
            wanted.setdefault(c, draft.totals.get(c, 0))
    return wanted


def draft_check_tasks(
    *, inputs: PlanInputs, draft: Draft
) -> tuple[list[CheckTask], list[CheckTarget], list[CheckTask], dict[str, int]]:
    """The draft as the checker sees it: (tasks, targets, locked tasks, locked target counts)."""
    round = inputs.round
    number = round.number
    # Locked visits' batches are keyed by cell, as the draft's are.
    cell_key = {
        f"target-{tt.target_id}": _target_key(inputs.cell_of(tt.target))
        for t in inputs.locked_tasks
        for tt in t.task_targets.all()
    }
    locked = [
        replace(t, batches=tuple(sorted((cell_key[k], n) for k, n in t.batches)))
        for t in check_tasks(tasks=inputs.locked_tasks, ours=True, round_numbers={round.pk: number})
    ]
    new = [
        CheckTask(
            key=d.key,
            round=number,
            ours=True,
            site=inputs.sites[d.site].slug,
            embodiment=inputs.embodiment.pk,
            team=d.team,
            start=d.start,
            end=d.end,
            batches=tuple(sorted((_target_key(c), n) for c, n in d.shares.items())),
        )
        for d in draft.tasks
    ]
    wanted = _wanted(inputs, draft)
    locked_cells = {inputs.cell_of(t): t for t in inputs.locked_targets}
    targets = [
        CheckTarget(
            key=_target_key(c),
            label=inputs.cells[c].label,
            episodes_wanted=n,
            locked=c in locked_cells,
        )
        for c, n in sorted(wanted.items())
    ]
    locked_targets = {_target_key(c): t.episodes_wanted for c, t in locked_cells.items()}
    return [*locked, *new], targets, locked, locked_targets


def plan_store(
    *, inputs: PlanInputs, draft: Draft, gains: npt.NDArray[np.float64]
) -> dict[int, CaptureTarget]:
    """Replace everything not locked by the draft: targets, visits, their protocol steps.

    Returns the round's targets per cell. Writes only; the caller holds the transaction.
    """
    round, campaign, cells = inputs.round, inputs.round.campaign, inputs.cells
    ProtocolStep.objects.filter(task__round=round).exclude(task__locked=True).delete()
    TaskTarget.objects.filter(task__round=round).exclude(task__locked=True).delete()
    round.tasks.filter(locked=False).delete()
    round.targets.filter(locked=False).exclude(task_targets__task__locked=True).delete()

    wanted = _wanted(inputs, draft)
    set_ids = condition_sets_intern(
        organization=campaign.organization_id,
        combinations=[cells[c].value_ids for c in wanted],
    )
    existing = {
        tuple(sorted(t.condition_set.value_ids)): t
        for t in round.targets.select_related("condition_set")
    }
    where: dict[int, set[str]] = defaultdict(set)
    for d in draft.tasks:
        for c in d.shares:
            where[c].add(inputs.sites[d.site].name)
    for t in inputs.locked_tasks:
        for tt in t.task_targets.all():
            where[inputs.cell_of(tt.target)].add(t.site.name)
    targets: dict[int, CaptureTarget] = {}
    for c, n in sorted(wanted.items()):
        cell = cells[c]
        key = tuple(sorted(cell.value_ids))
        planned = draft.totals.get(c, 0)
        rationale = (cell.rationale + " " if cell.rationale else "") + (
            f"Plan: {planned:,} episodes at {', '.join(sorted(where[c]))}, expected to avoid "
            f"about {gains[c]:.1f} interventions a day."
            if planned
            else "Plan: no visit could take it (see the plan's constraints)."
        )
        found = existing.get(key)
        if found is None:
            found = CaptureTarget.objects.create(
                round=round,
                condition_set_id=set_ids[key],
                label=cell.label[:300],
                episodes_wanted=n,
                priority=cell.priority,
                expected_avoided_per_day=float(gains[c]),
                rationale=rationale,
            )
        else:
            if not found.locked:
                found.episodes_wanted = n
            found.priority = cell.priority or found.priority
            found.expected_avoided_per_day = float(gains[c])
            found.save(update_fields=["episodes_wanted", "priority", "expected_avoided_per_day"])
        targets[c] = found

    embodiment = inputs.embodiment
    visited = _visited_setups(round, embodiment)
    camera_key = tuple(sorted((c.name, c.mount) for c in embodiment.cameras.all()))
    cameras = [proto.CameraSpec(c.name, c.mount) for c in embodiment.cameras.all()]
    dims = [
        proto.ActionDimension(a.name, a.unit, a.min_value, a.max_value)
        for a in embodiment.action_dimensions.all()
    ]
    values_by_id = {v.pk: v for v in inputs.values}
    teams = inputs.world.teams
    for d in sorted(draft.tasks, key=lambda d: d.start):
        site = inputs.sites[d.site]
        task = CollectionTask.objects.create(
            round=round,
            site=site,
            embodiment=embodiment,
            team=teams[d.team],
            scheduled_date=d.date,
            start_at=d.start,
            end_at=d.end,
            travel_hours=d.travel_hours,
            travel_km=d.travel_km,
        )
        TaskTarget.objects.bulk_create(
            [
                TaskTarget(task=task, target=targets[c], episodes_planned=n)
                for c, n in d.shares.items()
            ]
        )
        needs = proto.calibration_needed(visited, site.pk, embodiment.pk, camera_key)
        visited.add((site.pk, embodiment.pk, camera_key))
        present = {v.pk for v in site.presents.all()}
        specs = [
            proto.CaptureTargetSpec(
                key=str(targets[c].pk),
                label=targets[c].label,
                episodes=n,
                conditions=tuple(
                    proto.ConditionSetup(
                        dimension=values_by_id[v].dimension.name,
                        value=values_by_id[v].label,
                        instructions=values_by_id[v].setup_instruction or None,
                        staged=v not in present,
                        affects_camera_pose="camera" in values_by_id[v].dimension.slug,
                    )
                    for v in cells[c].value_ids
                    if v in values_by_id
                ),
            )
            for c, n in sorted(
                d.shares.items(), key=lambda item: setup_order(cells[item[0]], values_by_id)
            )
        ]
        steps = proto.build_protocol_steps(
            targets=specs, cameras=cameras, action_dimensions=dims, needs_calibration=needs
        )
        ProtocolStep.objects.bulk_create(
            [
                ProtocolStep(
                    task=task,
                    order=s.order,
                    kind=s.kind,
                    title=s.title[:200],
                    instructions=s.instructions,
                    episodes=s.episodes,
                    target_id=int(s.target) if s.target else None,
                )
                for s in steps
            ]
        )
    return targets


def _visited_setups(round: CollectionRound, embodiment: Any) -> set[tuple[Any, Any, Any]]:
    """Site × embodiment × camera setups already visited in this campaign (calibration done)."""
    camera_key = tuple(sorted((c.name, c.mount) for c in embodiment.cameras.all()))
    earlier = CollectionTask.objects.filter(
        round__campaign=round.campaign, steps__kind=ProtocolStep.Kind.CALIBRATION
    ).exclude(status=CollectionTask.Status.CANCELLED)
    return {
        (site_id, emb_id, camera_key)
        for site_id, emb_id in earlier.values_list("site_id", "embodiment_id").distinct()
    }
