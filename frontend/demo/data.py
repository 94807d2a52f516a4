"""The demo's world as data: condition taxonomy, failure modes, sites, deployments, inventory."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import numpy as np

from accounts.models import Organization
from sites.models import ConditionDimension, ConditionValue

SEED = 20261129

DEMO_PASSWORD = "demo"


TODAY = date(2026, 11, 2)


# ---------------------------------------------------------------- the condition taxonomy
# (slug, name, stageable, [(slug, label, stageable override, setup instruction)])
DIMENSIONS: list[tuple[str, str, bool, list[tuple[str, str, bool | None, str]]]] = [
    (
        "lighting",
        "Lighting",
        True,
        [
            (
                "bright-led",
                "Bright LED",
                None,
                "Switch on the portable LED panels at full output (≈1,000 lux at the shelf face).",
            ),
            (
                "fluorescent",
                "Fluorescent",
                None,
                "Use the aisle's fluorescent tubes only; LED panels off.",
            ),
            (
                "dim-sodium",
                "Dim sodium",
                None,
                "Dim the aisle lights to the 'dim sodium' level: sodium lamps only, ≈80 lux at the shelf face.",
            ),
            (
                "glare",
                "Daylight glare",
                None,
                "Open the dock door or aim the glare lamp at the shelf so reflections hit the packaging.",
            ),
        ],
    ),
    (
        "clutter",
        "Clutter density",
        True,
        [
            ("sparse", "Sparse", None, "Clear the shelf: one item per slot, gaps between items."),
            ("moderate", "Moderate", None, "Fill slots to about half with mixed items."),
            (
                "dense",
                "Dense",
                None,
                "Pack the slots full, items touching, some overhanging the lip.",
            ),
        ],
    ),
    (
        "camera-pose",
        "Camera pose",
        True,
        [
            ("nominal", "Nominal", None, "Mount the head camera at the calibrated nominal pose."),
            (
                "offset-small",
                "Offset ≤5 cm / 3°",
                None,
                "Shift the camera mount 5 cm left and tilt 3° down.",
            ),
            (
                "offset-large",
                "Offset >5 cm / 8°",
                None,
                "Shift the camera mount 10 cm left and tilt 8° down.",
            ),
        ],
    ),
    (
        "packaging",
        "Packaging",
        True,
        [
            ("cardboard", "Cardboard box", None, "Use cardboard-boxed items from the sample kit."),
            ("tote", "Plastic tote", None, "Use the blue plastic totes."),
            (
                "shrink-wrap",
                "Shrink-wrapped",
                None,
                "Use shrink-wrapped multipacks from the sample kit.",
            ),
            ("polybag", "Polybag", None, "Use polybagged soft goods from the sample kit."),
        ],
    ),
    (
        "object-wear",
        "Object wear",
        True,
        [
            ("new", "New", None, "Use new, undamaged items."),
            ("worn", "Worn", None, "Use worn items: scuffed boxes, creased labels."),
            ("damaged", "Damaged", None, "Use damaged items: dented corners, torn wrap."),
        ],
    ),
    (
        "human-activity",
        "Human activity",
        False,
        [
            ("none", "None", None, "Keep the aisle clear of people."),
            (
                "occasional",
                "Occasional",
                True,
                "Have one colleague walk through the cell every few minutes.",
            ),
            ("busy", "Busy", None, ""),
        ],
    ),
    (
        "floor",
        "Floor",
        False,
        [
            ("epoxy", "Epoxy coated", None, ""),
            ("concrete", "Polished concrete", None, ""),
            ("wet", "Wet floor", None, ""),
        ],
    ),
]


# The lab's skew: the very problem the product exists for.
LAB_MARGINALS = {
    "lighting": {"bright-led": 0.86, "fluorescent": 0.12, "glare": 0.02},
    "clutter": {"sparse": 0.74, "moderate": 0.23, "dense": 0.03},
    "camera-pose": {"nominal": 0.93, "offset-small": 0.07},
    "packaging": {"cardboard": 0.48, "tote": 0.42, "shrink-wrap": 0.08, "polybag": 0.02},
    "object-wear": {"new": 0.9, "worn": 0.1},
    "human-activity": {"none": 0.96, "occasional": 0.04},
    "floor": {"epoxy": 0.97, "concrete": 0.03},
}


PILOT_MARGINALS = {
    "lighting": {"fluorescent": 0.7, "glare": 0.25, "dim-sodium": 0.05},
    "clutter": {"sparse": 0.3, "moderate": 0.55, "dense": 0.15},
    "camera-pose": {"nominal": 0.5, "offset-small": 0.5},
    "packaging": {"cardboard": 0.3, "tote": 0.6, "shrink-wrap": 0.1},
    "object-wear": {"new": 0.6, "worn": 0.4},
    "human-activity": {"none": 0.5, "occasional": 0.5},
    "floor": {"concrete": 1.0},
}


DEPLOYMENT_PROFILES = {
    "rotterdam-totes": {
        "lighting": {"dim-sodium": 0.42, "fluorescent": 0.38, "glare": 0.12, "bright-led": 0.08},
        "clutter": {"dense": 0.45, "moderate": 0.4, "sparse": 0.15},
        "camera-pose": {"offset-small": 0.55, "nominal": 0.35, "offset-large": 0.1},
        "packaging": {"tote": 0.45, "cardboard": 0.3, "shrink-wrap": 0.2, "polybag": 0.05},
        "object-wear": {"worn": 0.45, "new": 0.45, "damaged": 0.1},
        "human-activity": {"occasional": 0.5, "busy": 0.3, "none": 0.2},
        "floor": {"concrete": 0.85, "wet": 0.15},
    },
    "venlo-each-pick": {
        "lighting": {"fluorescent": 0.7, "glare": 0.2, "bright-led": 0.1},
        "clutter": {"moderate": 0.5, "dense": 0.35, "sparse": 0.15},
        "camera-pose": {"nominal": 0.6, "offset-small": 0.4},
        "packaging": {"polybag": 0.4, "cardboard": 0.4, "tote": 0.2},
        "object-wear": {"new": 0.7, "worn": 0.3},
        "human-activity": {"occasional": 0.6, "none": 0.3, "busy": 0.1},
        "floor": {"epoxy": 0.6, "concrete": 0.4},
    },
    "duisburg-induction": {
        "lighting": {"fluorescent": 0.8, "dim-sodium": 0.2},
        "clutter": {"moderate": 0.6, "dense": 0.4},
        "camera-pose": {"nominal": 0.8, "offset-small": 0.2},
        "packaging": {"cardboard": 0.6, "shrink-wrap": 0.3, "polybag": 0.1},
        "object-wear": {"new": 0.5, "worn": 0.4, "damaged": 0.1},
        "human-activity": {"none": 0.7, "occasional": 0.3},
        "floor": {"concrete": 1.0},
    },
    "leeds-backroom": {
        "lighting": {"fluorescent": 0.6, "dim-sodium": 0.4},
        "clutter": {"dense": 0.7, "moderate": 0.3},
        "camera-pose": {"nominal": 0.7, "offset-small": 0.3},
        "packaging": {"cardboard": 0.7, "tote": 0.3},
        "object-wear": {"worn": 0.6, "new": 0.4},
        "human-activity": {"busy": 0.5, "occasional": 0.5},
        "floor": {"concrete": 0.9, "wet": 0.1},
    },
}


# Extra failure rate (before training helps) that each off-lab value adds.
DIFFICULTY = {
    "dim-sodium": 0.06,
    "glare": 0.035,
    "fluorescent": 0.008,
    "dense": 0.03,
    "moderate": 0.006,
    "offset-large": 0.05,
    "offset-small": 0.015,
    "shrink-wrap": 0.02,
    "polybag": 0.012,
    "worn": 0.015,
    "damaged": 0.03,
    "busy": 0.02,
    "occasional": 0.004,
    "wet": 0.03,
    "concrete": 0.002,
}


# (code, name, severity, detectability, description)
FAILURE_MODES: list[tuple[str, str, int, int, str]] = [
    ("grasp", "Grasp failure", 6, 3, "The end effector does not secure the item."),
    ("grasp.slip", "Slip", 6, 4, "Item slips out after the grasp closes."),
    (
        "grasp.slip.worn-packaging",
        "Slip on worn packaging",
        6,
        5,
        "Scuffed or creased packaging gives no purchase.",
    ),
    (
        "grasp.slip.shrink-wrap",
        "Slip on shrink-wrap",
        6,
        5,
        "Shrink-wrap deforms under the gripper or suction cup.",
    ),
    ("grasp.miss", "Missed grasp", 5, 2, "Gripper closes on nothing."),
    (
        "grasp.miss.pose-error",
        "Missed grasp from pose error",
        5,
        3,
        "Target pose is off because the camera is not where the policy expects.",
    ),
    (
        "grasp.miss.occluded",
        "Missed grasp on occluded item",
        5,
        3,
        "Neighbouring items hide the grasp point.",
    ),
    (
        "grasp.collision",
        "Collision with neighbour",
        7,
        3,
        "Arm hits adjacent items in dense slots.",
    ),
    (
        "grasp.collision.overhang",
        "Collision with overhanging item",
        7,
        4,
        "Items overhanging the shelf lip are struck.",
    ),
    ("perception", "Perception failure", 7, 6, "The policy misreads the scene."),
    (
        "perception.detection",
        "Detection failure",
        7,
        6,
        "Item not found or found in the wrong place.",
    ),
    (
        "perception.detection.low-light",
        "Detection failure in low light",
        7,
        6,
        "Dim lighting drowns the item's edges.",
    ),
    (
        "perception.detection.glare",
        "Detection failure under glare",
        7,
        7,
        "Specular reflections on packaging.",
    ),
    (
        "perception.localization",
        "Localization error",
        6,
        7,
        "Camera-to-robot transform drifts from the trained one.",
    ),
    (
        "perception.localization.camera-offset",
        "Camera offset",
        6,
        7,
        "Camera mounted away from the training pose.",
    ),
    ("navigation", "Navigation failure", 8, 2, "The mobile base cannot reach or hold its pose."),
    ("navigation.blocked", "Path blocked", 4, 1, "Something stands in the planned path."),
    (
        "navigation.blocked.human",
        "Blocked by a person",
        4,
        1,
        "A person stands in the path or the cell.",
    ),
    ("navigation.traction", "Traction loss", 8, 3, "Wheels slip."),
    (
        "navigation.traction.wet-floor",
        "Traction loss on wet floor",
        8,
        3,
        "Wet floor under the base.",
    ),
    ("placement", "Placement failure", 5, 2, "Item is not placed where it should be."),
    ("placement.drop", "Dropped item", 6, 2, "Item falls during transport or placement."),
    ("placement.drop.tote-edge", "Drop on tote edge", 5, 2, "Item catches the tote's edge."),
    ("safety", "Safety stop", 9, 1, "The safety system stops the robot."),
    (
        "safety.stop.human-proximity",
        "Human too close",
        9,
        1,
        "A person enters the protective field.",
    ),
]


# Which leaf mode a failure under a given off-lab value most likely is.
VALUE_FAILURE_MODE = {
    "dim-sodium": "perception.detection.low-light",
    "glare": "perception.detection.glare",
    "fluorescent": "perception.detection",
    "dense": "grasp.collision.overhang",
    "moderate": "grasp.miss.occluded",
    "offset-large": "perception.localization.camera-offset",
    "offset-small": "grasp.miss.pose-error",
    "shrink-wrap": "grasp.slip.shrink-wrap",
    "polybag": "grasp.slip",
    "worn": "grasp.slip.worn-packaging",
    "damaged": "placement.drop",
    "busy": "safety.stop.human-proximity",
    "occasional": "navigation.blocked.human",
    "wet": "navigation.traction.wet-floor",
    "concrete": "placement.drop.tote-edge",
}


SITES = [
    # slug, name, kind, customer, address, country, region, lat, lon, tz, capacity, presents-from
    (
        "rotterdam-dc",
        "Rotterdam DC",
        "deployment",
        "northwind",
        "Waalhaven Z.z. 48, 3089 JH Rotterdam",
        "NL",
        "South Holland",
        51.8846,
        4.4419,
        "Europe/Amsterdam",
        180,
        "rotterdam-totes",
    ),
    (
        "venlo-fc",
        "Venlo Fulfilment Centre",
        "deployment",
        "northwind",
        "Celsiusweg 33, 5928 PR Venlo",
        "NL",
        "Limburg",
        51.3947,
        6.1430,
        "Europe/Amsterdam",
        220,
        "venlo-each-pick",
    ),
    (
        "duisburg-hub",
        "Duisburg Parcel Hub",
        "deployment",
        "northwind",
        "Hafenstraße 10, 47119 Duisburg",
        "DE",
        "North Rhine-Westphalia",
        51.4538,
        6.7333,
        "Europe/Berlin",
        250,
        "duisburg-induction",
    ),
    (
        "leeds-backroom",
        "Leeds Store Backroom",
        "deployment",
        "brightline",
        "Albion St 12, Leeds LS1 6HX",
        "GB",
        "West Yorkshire",
        53.7986,
        -1.5456,
        "Europe/London",
        120,
        "leeds-backroom",
    ),
    (
        "eindhoven-lab",
        "Eindhoven Robot Lab",
        "lab",
        None,
        "High Tech Campus 5, 5656 AE Eindhoven",
        "NL",
        "North Brabant",
        51.4112,
        5.4586,
        "Europe/Amsterdam",
        300,
        None,
    ),
    (
        "antwerp-testhall",
        "Antwerp Test Warehouse",
        "collection",
        None,
        "Noorderlaan 133, 2030 Antwerpen",
        "BE",
        "Antwerp",
        51.2475,
        4.4174,
        "Europe/Brussels",
        260,
        None,
    ),
]


DEPLOYMENTS = [
    (
        "rotterdam-totes",
        "Rotterdam tote picking",
        "northwind",
        "rotterdam-dc",
        "mm7",
        "tote-picking",
        5000,
        0.999,
    ),
    (
        "venlo-each-pick",
        "Venlo each picking",
        "northwind",
        "venlo-fc",
        "mm7",
        "tote-picking",
        3000,
        0.999,
    ),
    (
        "duisburg-induction",
        "Duisburg parcel induction",
        "northwind",
        "duisburg-hub",
        "fa6",
        "parcel-induction",
        8000,
        0.9995,
    ),
    (
        "leeds-backroom",
        "Leeds backroom replenishment",
        "brightline",
        "leeds-backroom",
        "mm7",
        "backroom-replenishment",
        1200,
        0.995,
    ),
]


INVENTORY = [
    # slug, name, embodiment, site, task, marginals, episodes (rows), episode_count per row
    (
        "lab-mm7-2026",
        "MM-7 lab tote picking 2026",
        "mm7",
        "eindhoven-lab",
        "tote-picking",
        "lab",
        15000,
        1,
    ),
    (
        "pilot-rotterdam-mm7",
        "Rotterdam pilot week (day shift)",
        "mm7",
        "rotterdam-dc",
        "tote-picking",
        "pilot",
        1200,
        1,
    ),
    (
        "lab-fa6-2026",
        "FA-6 lab picking 2026",
        "fa6",
        "eindhoven-lab",
        "tote-picking",
        "lab",
        5000,
        1,
    ),
    (
        "vendor-pretrain-mm7",
        "Vendor pre-training mix (manifest)",
        "mm7",
        None,
        "tote-picking",
        "lab",
        3,
        1500,
    ),
]


LUX = {"bright-led": 1000.0, "fluorescent": 450.0, "dim-sodium": 80.0, "glare": 2500.0}


CAM_OFFSET_CM = {"nominal": 0.0, "offset-small": 4.0, "offset-large": 10.0}


@dataclass
class Ctx:
    """What the seed steps share: the organizations, the random draws and the taxonomy."""

    operator: Organization
    northwind: Organization
    brightline: Organization
    rng: np.random.Generator
    values: dict[tuple[str, str], ConditionValue]
    dims: list[ConditionDimension]
