"""Field-sync test data: a world's published task moved to today, with targets and a protocol."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.utils import timezone

from campaigns.field.services import task_seen_token
from campaigns.models import CaptureTarget, CollectionTask, ProtocolStep, TaskTarget
from sites.services import condition_set_intern
from tests.factories import World


@dataclass
class FieldSetup:
    world: World
    task: CollectionTask
    bright: CaptureTarget
    dim: CaptureTarget
    steps: list[ProtocolStep]


def field_setup(world: World, *, day: date | None = None) -> FieldSetup:
    """Give the world's collection task two targets and a five-step protocol, scheduled today."""
    task = world.collection_task
    task.scheduled_date = day or timezone.localdate()
    task.save(update_fields=["scheduled_date"])
    bright_set = condition_set_intern(organization=world.operator, value_ids=[world.values[0].pk])
    dim_set = condition_set_intern(organization=world.operator, value_ids=[world.values[1].pk])
    world.values[1].setup_instruction = "Switch off the aisle lights."
    world.values[1].save(update_fields=["setup_instruction"])
    bright = CaptureTarget.objects.create(
        round=world.round, condition_set=bright_set, label="Lighting: Bright", episodes_wanted=8
    )
    dim = CaptureTarget.objects.create(
        round=world.round,
        condition_set=dim_set,
        label="Lighting: Dim",
        episodes_wanted=6,
        failure_mode=world.failure_mode,
        priority=1,
    )
    TaskTarget.objects.create(task=task, target=bright, episodes_planned=5)
    TaskTarget.objects.create(task=task, target=dim, episodes_planned=3)
    specs = [
        ("setup", "Set Lighting: Dim", "Dim the lights.", None, dim),
        ("calibration", "Record the calibration episode", "Move every joint.", 1, None),
        ("capture", "Capture 3 episodes: Lighting: Dim", "Capture.", 3, dim),
        ("capture", "Capture 5 episodes: Lighting: Bright", "Capture.", 5, bright),
        ("wrap_up", "Wrap up", "Restore the site.", None, None),
    ]
    steps = [
        ProtocolStep.objects.create(
            task=task, order=i, kind=kind, title=title, instructions=text, episodes=n, target=t
        )
        for i, (kind, title, text, n, t) in enumerate(specs, start=1)
    ]
    return FieldSetup(world=world, task=task, bright=bright, dim=dim, steps=steps)


def record(
    task: CollectionTask, kind: str = "capture", *, version: int | None = None, **payload: Any
) -> dict[str, Any]:
    """A record as the tablet sends it, with the task's ``seen`` token as the tablet last had it
    (from the task object as it was loaded, not as the database holds it now)."""
    return {
        "uuid": str(uuid.uuid4()),
        "kind": kind,
        "task": task.pk,
        "payload": payload,
        "client_created_at": timezone.now().isoformat(),
        "task_version_seen": task.version if version is None else version,
        "task_seen": task_seen_token(task_id=task.pk, team_id=task.team_id),
    }
