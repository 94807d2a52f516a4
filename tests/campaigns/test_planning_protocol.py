"""Protocol steps: ordering, calibration only for new setups, instructions."""

from __future__ import annotations

import re

import pytest

from campaigns.planning.protocol import (
    ActionDimension,
    CameraSpec,
    CaptureTargetSpec,
    ConditionSetup,
    build_protocol_steps,
    calibration_needed,
)

CAMERAS = (CameraSpec("wrist", "wrist"), CameraSpec("overhead", "ceiling"))
ACTIONS = (
    ActionDimension("x", "m", -0.5, 0.5),
    ActionDimension("yaw", "rad", -3.14, 3.14),
    ActionDimension("gripper", "mm", 0, 85),
)
DIM = ConditionSetup("lighting", "dim sodium", "Dim the aisle lights to the 'dim sodium' level")
CLUTTER = ConditionSetup("clutter", "dense")
FLOOR = ConditionSetup("floor", "epoxy", staged=False)
LOW_MOUNT = ConditionSetup("camera pose", "low mount", affects_camera_pose=True)


def target(
    key: str, *conditions: ConditionSetup, episodes: int = 40, **kw: object
) -> CaptureTargetSpec:
    return CaptureTargetSpec(key, f"label {key}", episodes, conditions, **kw)  # type: ignore[arg-type]


def test_single_target_steps_run_setup_then_pose_then_calibration_then_capture() -> None:
    steps = build_protocol_steps(
        targets=[target("t1", DIM, CLUTTER, FLOOR)],
        cameras=CAMERAS,
        action_dimensions=ACTIONS,
        needs_calibration=True,
    )

    kinds = [s.kind for s in steps]
    assert kinds == ["setup"] * 3 + ["verify_pose"] * 2 + ["calibration", "capture", "wrap_up"]
    assert [s.order for s in steps] == list(range(1, len(steps) + 1))
    assert steps[0].instructions == "Dim the aisle lights to the 'dim sodium' level"
    assert steps[2].title == "Check floor: epoxy"
    assert steps[-2].episodes == 40
    assert steps[-2].target == "t1"


def test_calibration_step_is_present_only_when_needed() -> None:
    def kinds(needed: bool) -> list[str]:
        steps = build_protocol_steps(
            targets=[target("t1", DIM)],
            cameras=CAMERAS,
            action_dimensions=ACTIONS,
            needs_calibration=needed,
        )
        return [s.kind for s in steps]

    assert kinds(True).count("calibration") == 1
    assert "calibration" not in kinds(False)


def test_calibration_exercises_every_action_dimension_with_unit_and_range() -> None:
    steps = build_protocol_steps(
        targets=[target("t1", DIM)],
        cameras=CAMERAS,
        action_dimensions=ACTIONS,
        needs_calibration=True,
    )

    (calibration,) = [s for s in steps if s.kind == "calibration"]
    for text in ("x (m, -0.5 to 0.5)", "yaw (rad, -3.14 to 3.14)", "gripper (mm, 0 to 85)"):
        assert text in calibration.instructions
    assert calibration.episodes == 1


def test_each_target_block_is_ordered_and_unchanged_conditions_are_not_set_up_again() -> None:
    steps = build_protocol_steps(
        targets=[
            target("t1", DIM, CLUTTER),
            target("t2", DIM, LOW_MOUNT),
            target("t3", DIM, LOW_MOUNT),
        ],
        cameras=CAMERAS,
        action_dimensions=ACTIONS,
        needs_calibration=True,
    )

    rank = {"setup": 0, "verify_pose": 1, "calibration": 2, "capture": 3}
    blocks: list[list[str]] = [[]]
    for s in steps[:-1]:
        blocks[-1].append(s.kind)
        if s.kind == "capture":
            blocks.append([])
    assert all([rank[k] for k in b] == sorted(rank[k] for k in b) for b in blocks[:-1])
    assert blocks[1] == ["setup", "verify_pose", "verify_pose", "capture"]  # pose changed
    assert blocks[2] == ["capture"]  # nothing changed
    assert [s.kind for s in steps].index("calibration") < [s.kind for s in steps].index("capture")


def test_capture_spreads_episodes_across_variations_and_names_the_failure_mode() -> None:
    steps = build_protocol_steps(
        targets=[
            target(
                "t1",
                DIM,
                episodes=10,
                variations=("red tote", "blue tote", "bag"),
                failure_mode="slip on worn packaging",
            )
        ],
        cameras=CAMERAS,
        action_dimensions=ACTIONS,
        needs_calibration=False,
    )

    (capture,) = [s for s in steps if s.kind == "capture"]
    counts = [int(n) for n in re.findall(r"\((\d+)\)", capture.instructions)]
    assert counts == [4, 3, 3]
    assert "slip on worn packaging" in capture.instructions


def test_calibration_is_needed_only_for_a_new_site_embodiment_camera_setup() -> None:
    visited = {("rotterdam-dc", 3, "rig-a")}

    assert calibration_needed(visited, "rotterdam-dc", 3, "rig-b")
    assert calibration_needed(visited, "delft-lab", 3, "rig-a")
    assert not calibration_needed(visited, "rotterdam-dc", 3, "rig-a")


def test_calibration_without_action_dimensions_is_refused() -> None:
    with pytest.raises(ValueError, match="action dimensions"):
        build_protocol_steps(
            targets=[target("t1", DIM)],
            cameras=CAMERAS,
            action_dimensions=(),
            needs_calibration=True,
        )
