"""Protocol steps of a collection task, built from plain data (Django-free).

A task's protocol walks the field team through each target in turn: set up the target's
conditions, verify every camera's pose, run a calibration episode (only for a new setup),
capture the target's episodes, and wrap up. Within each target the kinds always come in the
order setup -> verify_pose -> calibration -> capture; calibration appears once, in the
first target's block, before any capture.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

StepKind = Literal["setup", "verify_pose", "calibration", "capture", "wrap_up"]

# ProtocolStep.title is a 200-character column.
_TITLE_MAX = 200


@dataclass(frozen=True)
class ConditionSetup:
    """One condition value a target needs, and how to set it up.

    ``staged`` values are arranged by the team (lamps, clutter); others are checked as
    present. ``affects_camera_pose`` makes camera poses be verified again after it changes.
    """

    dimension: str
    value: str
    instructions: str | None = None
    staged: bool = True
    affects_camera_pose: bool = False


@dataclass(frozen=True)
class CaptureTargetSpec:
    """A target of the task: its conditions, episodes, variations and failure mode."""

    key: str
    label: str
    episodes: int
    conditions: tuple[ConditionSetup, ...]
    variations: tuple[str, ...] = ()
    failure_mode: str | None = None


@dataclass(frozen=True)
class CameraSpec:
    """A camera of the rig: name and where it is mounted."""

    name: str
    mount: str


@dataclass(frozen=True)
class ActionDimension:
    """A controllable degree of freedom of the embodiment, with unit and range."""

    name: str
    unit: str
    low: float
    high: float


@dataclass(frozen=True)
class ProtocolStep:
    """One step for the field tablet; ``target`` is the capture target key or None."""

    order: int
    kind: StepKind
    title: str
    instructions: str
    episodes: int | None
    target: str | None


def calibration_needed(
    visited: Collection[tuple[Hashable, Hashable, Hashable]],
    site: Hashable,
    embodiment: Hashable,
    camera_setup_key: Hashable,
) -> bool:
    """Return whether this site x embodiment x camera setup is new in the campaign."""
    return (site, embodiment, camera_setup_key) not in visited


def build_protocol_steps(
    *,
    targets: Sequence[CaptureTargetSpec],
    cameras: Sequence[CameraSpec],
    action_dimensions: Sequence[ActionDimension],
    needs_calibration: bool,
    calibration_episodes: int = 1,
) -> list[ProtocolStep]:
    """Return the ordered steps of a collection task.

    Conditions unchanged from the previous target are not set up again; camera poses are
    verified for the first target and again after a pose-affecting condition changes.
    Raises ValueError when a target wants a negative number of episodes, or calibration is
    needed but no action dimension is given.
    """
    if needs_calibration and not action_dimensions:
        raise ValueError("a calibration episode needs the embodiment's action dimensions")
    steps: list[tuple[StepKind, str, str, int | None, str | None]] = []
    current: dict[str, str] = {}
    for number, target in enumerate(targets):
        if target.episodes < 0:
            raise ValueError(f"target {target.key!r} wants {target.episodes} episodes")
        changed = [c for c in target.conditions if current.get(c.dimension) != c.value]
        for c in changed:
            steps.append(("setup", _setup_title(c), _setup_text(c), None, target.key))
            current[c.dimension] = c.value
        if number == 0 or any(c.affects_camera_pose for c in changed):
            for cam in cameras:
                steps.append(("verify_pose", *_pose(cam), None, None))
        if number == 0 and needs_calibration:
            steps.append(
                (
                    "calibration",
                    "Record the calibration episode",
                    _calibration_text(action_dimensions, calibration_episodes),
                    calibration_episodes,
                    None,
                )
            )
        steps.append(
            (
                "capture",
                f"Capture {target.episodes} episodes: {target.label}",
                _capture_text(target),
                target.episodes,
                target.key,
            )
        )
    steps.append(
        (
            "wrap_up",
            "Wrap up",
            "Restore the site as you found it (lights, clutter, camera mounts), check that "
            "every episode was recorded and synced, and report anything that blocked capture.",
            None,
            None,
        )
    )
    return [
        ProtocolStep(order, kind, title[:_TITLE_MAX], text, episodes, target)
        for order, (kind, title, text, episodes, target) in enumerate(steps, start=1)
    ]


def _setup_title(c: ConditionSetup) -> str:
    verb = "Set" if c.staged else "Check"
    return f"{verb} {c.dimension}: {c.value}"


def _setup_text(c: ConditionSetup) -> str:
    if c.instructions:
        return c.instructions
    if c.staged:
        return f"Set {c.dimension} to '{c.value}' and keep it so for this target."
    return f"Confirm that {c.dimension} is '{c.value}' here; report a blocker if it is not."


def _pose(cam: CameraSpec) -> tuple[str, str]:
    return (
        f"Verify camera pose: {cam.name}",
        f"Check that camera '{cam.name}' sits on its {cam.mount} mount as specified, firmly "
        "fixed, lens clean, and that its image shows the whole workspace.",
    )


def _calibration_text(dims: Sequence[ActionDimension], episodes: int) -> str:
    listed = "; ".join(f"{d.name} ({d.unit}, {d.low:g} to {d.high:g})" for d in dims)
    plural = "episode" if episodes == 1 else "episodes"
    return (
        f"Record {episodes} calibration {plural} that moves every action dimension through "
        f"its full range, one at a time, slowly, then back to rest: {listed}. This shows a "
        "model how actions look with this camera and robot setup."
    )


def _capture_text(target: CaptureTargetSpec) -> str:
    parts = [f"Capture {target.episodes} episodes of '{target.label}'."]
    if target.variations:
        share, extra = divmod(target.episodes, len(target.variations))
        spread = ", ".join(
            f"{v} ({share + (1 if i < extra else 0)})" for i, v in enumerate(target.variations)
        )
        parts.append(f"Spread them across the variations: {spread}.")
    if target.failure_mode:
        parts.append(
            f"Deliberately provoke '{target.failure_mode}' where it is safe to, and label it."
        )
    return " ".join(parts)
