"""The demo programme: a realistic, deterministic world for `make run` and the tests.

Everything is keyed by natural keys and written with get-or-create / upserts, so running
``seed_demo`` twice leaves the same database, and running it on a database a person has
been working in adds what is missing without touching their work. The random draws use a
fixed seed; the "true" failure model below exists only here, to make evaluation results
and production failures that behave like a real policy's (worse where training is thin).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.models import Membership, Organization, Role
from analytics.models import EvaluationResult, EvaluationRun, PolicyVersion
from campaigns.models import Campaign, CollectionRound, FieldTeam
from campaigns.services import round_create
from labeling.models import Dataset, Episode
from sites.models import (
    AccessWindow,
    ActionDimension,
    Camera,
    ConditionDimension,
    ConditionSample,
    ConditionShare,
    ConditionValue,
    Deployment,
    Embodiment,
    FailureMode,
    FailureRecord,
    ProductionLog,
    Site,
    Task,
)
from sites.services import condition_sets_intern

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


@dataclass
class Ctx:
    operator: Organization
    northwind: Organization
    brightline: Organization
    rng: np.random.Generator
    values: dict[tuple[str, str], ConditionValue]
    dims: list[ConditionDimension]


def seed_demo() -> dict[str, int]:
    """Build (or complete) the demo programme; return row counts of what it holds."""
    with transaction.atomic():
        ctx = _organizations()
        _users(ctx)
        embodiments = _embodiments(ctx)
        tasks = _tasks(ctx)
        _taxonomy(ctx)
        sites = _sites(ctx)
        deployments = _deployments(ctx, sites, embodiments, tasks)
        modes = _failure_modes(ctx)
        datasets = _inventory(ctx, embodiments, sites, tasks)
        _production(ctx, deployments, modes, datasets)
        _condition_samples(ctx, deployments)
        _evaluations(ctx, deployments, embodiments, tasks, datasets)
        _teams(ctx, embodiments)
        _campaign(ctx, deployments, embodiments, tasks)
    return {
        "episodes": Episode.objects.filter(organization=ctx.operator).count(),
        "sites": Site.objects.filter(organization=ctx.operator).count(),
        "failure_records": FailureRecord.objects.filter(organization=ctx.operator).count(),
    }


def _organizations() -> Ctx:
    operator, _ = Organization.objects.get_or_create(
        slug="fieldcraft-ops", defaults={"name": "Fieldcraft Field Ops", "kind": "operator"}
    )
    northwind, _ = Organization.objects.get_or_create(
        slug="northwind",
        defaults={"name": "Northwind Logistics", "kind": "customer", "operator": operator},
    )
    brightline, _ = Organization.objects.get_or_create(
        slug="brightline",
        defaults={"name": "Brightline Retail", "kind": "customer", "operator": operator},
    )
    return Ctx(operator, northwind, brightline, np.random.default_rng(SEED), {}, [])


def _users(ctx: Ctx) -> None:
    user_model = get_user_model()
    people = [
        ("manager", "Mara", "Visser", ctx.operator, Role.MANAGER, True),
        ("field", "Femi", "Adeyemi", ctx.operator, Role.FIELD, False),
        ("field-2", "Jonas", "Becker", ctx.operator, Role.FIELD, False),
        ("annotator", "Ana", "Lopes", ctx.operator, Role.ANNOTATOR, False),
        ("annotator-2", "Kenji", "Sato", ctx.operator, Role.ANNOTATOR, False),
        ("viewer", "Vera", "Jansen", ctx.northwind, Role.VIEWER, False),
        ("viewer-b", "Ben", "Hughes", ctx.brightline, Role.VIEWER, False),
    ]
    for username, first, last, org, role, staff in people:
        user, created = user_model.objects.get_or_create(
            username=username,
            defaults={
                "first_name": first,
                "last_name": last,
                "is_staff": staff,
                "email": f"{username}@example.com",
            },
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save(update_fields=["password"])
        Membership.objects.get_or_create(user=user, defaults={"organization": org, "role": role})


def _embodiments(ctx: Ctx) -> dict[str, Embodiment]:
    specs: list[dict[str, Any]] = [
        {
            "slug": "mm7",
            "name": "MM-7 mobile manipulator",
            "morphology": "mobile manipulator",
            "end_effector": "parallel gripper",
            "control_rate_hz": 50,
            "robot_type": "mm7",
            "dims": [
                ("base_vx", "m/s", -1.0, 1.0),
                ("base_wz", "rad/s", -1.5, 1.5),
                ("torso_lift", "m", 0.0, 0.4),
                ("shoulder_pan", "rad", -2.6, 2.6),
                ("shoulder_lift", "rad", -2.0, 2.0),
                ("elbow", "rad", -2.5, 2.5),
                ("wrist_flex", "rad", -1.8, 1.8),
                ("wrist_roll", "rad", -3.14, 3.14),
                ("gripper", "m", 0.0, 0.085),
            ],
            "cams": [("head_rgb", "head", 1280, 720, 30), ("wrist_rgb", "wrist", 640, 480, 30)],
        },
        {
            "slug": "fa6",
            "name": "FA-6 suction arm",
            "morphology": "fixed arm",
            "end_effector": "suction cup",
            "control_rate_hz": 125,
            "robot_type": "fa6",
            "dims": [
                ("j1", "rad", -3.1, 3.1),
                ("j2", "rad", -2.2, 2.2),
                ("j3", "rad", -2.6, 2.6),
                ("j4", "rad", -3.1, 3.1),
                ("j5", "rad", -2.1, 2.1),
                ("j6", "rad", -6.2, 6.2),
                ("vacuum", "0-1", 0.0, 1.0),
            ],
            "cams": [
                ("overhead", "fixed overhead", 1920, 1080, 15),
                ("wrist", "wrist", 640, 480, 30),
            ],
        },
    ]
    result = {}
    for spec in specs:
        emb, _ = Embodiment.objects.get_or_create(
            organization=ctx.operator,
            slug=spec["slug"],
            defaults={
                k: spec[k]
                for k in ("name", "morphology", "end_effector", "control_rate_hz", "robot_type")
            },
        )
        for order, (name, unit, lo, hi) in enumerate(spec["dims"]):
            ActionDimension.objects.get_or_create(
                embodiment=emb,
                name=name,
                defaults={"order": order, "unit": unit, "min_value": lo, "max_value": hi},
            )
        for name, mount, w, h, fps in spec["cams"]:
            Camera.objects.get_or_create(
                embodiment=emb,
                name=name,
                defaults={"mount": mount, "width": w, "height": h, "fps": fps},
            )
        result[spec["slug"]] = emb
    return result


def _tasks(ctx: Ctx) -> dict[str, Task]:
    specs = [
        ("tote-picking", "Pick items from rack slots into totes"),
        ("parcel-induction", "Induct parcels onto the sorter belt"),
        ("backroom-replenishment", "Replenish backroom shelves from cages"),
    ]
    return {
        slug: Task.objects.get_or_create(
            organization=ctx.operator, slug=slug, defaults={"name": name}
        )[0]
        for slug, name in specs
    }


def _taxonomy(ctx: Ctx) -> None:
    for order, (slug, name, stageable, values) in enumerate(DIMENSIONS):
        dim, _ = ConditionDimension.objects.get_or_create(
            organization=ctx.operator,
            slug=slug,
            defaults={
                "name": name,
                "stageable": stageable,
                "order": order,
                "kind": "ordinal"
                if slug in {"clutter", "object-wear", "human-activity"}
                else "categorical",
            },
        )
        ctx.dims.append(dim)
        for vorder, (vslug, label, override, instruction) in enumerate(values):
            value, _ = ConditionValue.objects.get_or_create(
                dimension=dim,
                slug=vslug,
                defaults={
                    "label": label,
                    "order": vorder,
                    "stageable": override,
                    "setup_instruction": instruction,
                },
            )
            ctx.values[(slug, vslug)] = value


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


def _sites(ctx: Ctx) -> dict[str, Site]:
    customers = {"northwind": ctx.northwind, "brightline": ctx.brightline, None: None}
    result = {}
    for (
        slug,
        name,
        kind,
        customer,
        address,
        country,
        region,
        lat,
        lon,
        tz,
        capacity,
        profile,
    ) in SITES:
        site, created = Site.objects.get_or_create(
            organization=ctx.operator,
            slug=slug,
            defaults={
                "name": name,
                "kind": kind,
                "customer": customers[customer],
                "address": address,
                "country": country,
                "region": region,
                "latitude": lat,
                "longitude": lon,
                "timezone": tz,
                "capacity_episodes_per_day": capacity,
                "episode_minutes": 1.5 if kind == "lab" else 2.0,
                "setup_hours": 0.5 if kind == "lab" else 1.0,
                "cost_per_hour": 40 if kind == "collection" else 0,
            },
        )
        if created:
            hours = (
                (time(7, 0), time(19, 0)) if kind != "deployment" else (time(20, 0), time(23, 59))
            )
            if slug == "rotterdam-dc":
                hours = (time(6, 0), time(14, 0))  # early shift; the night shift runs production
            days = range(5) if slug != "duisburg-hub" else range(6)
            AccessWindow.objects.bulk_create(
                [
                    AccessWindow(site=site, weekday=d, start_time=hours[0], end_time=hours[1])
                    for d in days
                ]
            )
            if profile:
                present = [
                    ctx.values[(dim, v)]
                    for dim, dist in DEPLOYMENT_PROFILES[profile].items()
                    for v in dist
                ]
            elif kind == "lab":
                present = [
                    ctx.values[(dim, v)] for dim, dist in LAB_MARGINALS.items() for v in dist
                ]
            else:
                present = [
                    ctx.values[key] for key in ctx.values if key[0] in {"floor"} and key[1] != "wet"
                ]
                present += [
                    ctx.values[("human-activity", v)] for v in ("none", "occasional", "busy")
                ]
            site.presents.set(present)
        result[slug] = site
    return result


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


def _deployments(
    ctx: Ctx, sites: dict[str, Site], embodiments: dict[str, Embodiment], tasks: dict[str, Task]
) -> dict[str, Deployment]:
    customers = {"northwind": ctx.northwind, "brightline": ctx.brightline}
    result = {}
    for slug, name, customer, site, emb, task, cycles, target in DEPLOYMENTS:
        dep, created = Deployment.objects.get_or_create(
            organization=ctx.operator,
            slug=slug,
            defaults={
                "name": name,
                "customer": customers[customer],
                "site": sites[site],
                "embodiment": embodiments[emb],
                "task": tasks[task],
                "cycles_per_day": cycles,
                "reliability_target": target,
                "started_on": TODAY - timedelta(days=120),
            },
        )
        if created:
            ConditionShare.objects.bulk_create(
                [
                    ConditionShare(deployment=dep, value=ctx.values[(dim, v)], share=share)
                    for dim, dist in DEPLOYMENT_PROFILES[slug].items()
                    for v, share in dist.items()
                ]
            )
        result[slug] = dep
    return result


def _failure_modes(ctx: Ctx) -> dict[str, FailureMode]:
    result: dict[str, FailureMode] = {}
    for code, name, severity, detectability, description in FAILURE_MODES:
        parent = result.get(code.rsplit(".", 1)[0]) if "." in code else None
        mode, _ = FailureMode.objects.get_or_create(
            organization=ctx.operator,
            code=code,
            defaults={
                "name": name,
                "parent": parent,
                "severity": severity,
                "detectability": detectability,
                "description": description,
            },
        )
        result[code] = mode
    return result


def _sample_combos(
    ctx: Ctx, marginals: dict[str, dict[str, float]], n: int, rng: np.random.Generator
) -> list[tuple[str, ...]]:
    """Draw n combinations (value slugs in DIMENSIONS order), independently per dimension."""
    columns = []
    for slug, _, _, _ in DIMENSIONS:
        dist = marginals[slug]
        names = list(dist)
        probs = np.array([dist[k] for k in names], dtype=float)
        columns.append(np.array(names)[rng.choice(len(names), size=n, p=probs / probs.sum())])
    return [tuple(row) for row in zip(*columns, strict=True)]


def _combo_ids(ctx: Ctx, combos: list[tuple[str, ...]]) -> dict[tuple[str, ...], int]:
    dims = [d[0] for d in DIMENSIONS]
    unique = sorted(set(combos))
    as_ids = {
        c: tuple(sorted(ctx.values[(dims[i], v)].pk for i, v in enumerate(c))) for c in unique
    }
    interned = condition_sets_intern(organization=ctx.operator, combinations=as_ids.values())
    return {c: interned[as_ids[c]] for c in unique}


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


def _inventory(
    ctx: Ctx, embodiments: dict[str, Embodiment], sites: dict[str, Site], tasks: dict[str, Task]
) -> dict[str, Dataset]:
    result = {}
    for index, (slug, name, emb, site, task, marg, rows, per_row) in enumerate(INVENTORY):
        rng = np.random.default_rng(SEED + index)
        dataset, _ = Dataset.objects.get_or_create(
            organization=ctx.operator,
            slug=slug,
            defaults={
                "name": name,
                "embodiment": embodiments[emb],
                "fps": 30.0,
                "format_version": "LeRobot v3.0" if per_row == 1 else "manifest",
            },
        )
        result[slug] = dataset
        if Episode.objects.filter(dataset=dataset).count() == rows:
            continue
        marginals = LAB_MARGINALS if marg == "lab" else PILOT_MARGINALS
        combos = _sample_combos(ctx, marginals, rows, rng)
        ids = _combo_ids(ctx, combos)
        frames = rng.integers(240, 900, size=rows)
        outcomes = rng.random(rows)
        base = datetime(2026, 1, 12, 9, 0, tzinfo=UTC)
        episodes = [
            Episode(
                organization=ctx.operator,
                dataset=dataset,
                key=f"{i:06d}",
                embodiment=embodiments[emb],
                site=sites[site] if site else None,
                task=tasks[task],
                condition_set_id=ids[combo],
                episode_count=per_row,
                frames=int(frames[i]) * per_row,
                duration_s=round(float(frames[i]) * per_row / 30.0, 3),
                outcome="success" if outcomes[i] > 0.08 else "failure",
                storage_uri=f"s3://northwind-robot-data/{slug}/episode_{i:06d}",
                provenance="imported",
                validated=True,
                sync_status="synced",
                recorded_at=base + timedelta(minutes=7 * i),
                features=_features(combo, rng),
            )
            for i, combo in enumerate(combos)
        ]
        Episode.objects.bulk_create(
            episodes,
            batch_size=5000,
            update_conflicts=True,
            unique_fields=["dataset", "key"],
            update_fields=[
                "condition_set",
                "episode_count",
                "frames",
                "duration_s",
                "outcome",
                "features",
            ],
        )
    return result


LUX = {"bright-led": 1000.0, "fluorescent": 450.0, "dim-sodium": 80.0, "glare": 2500.0}
CAM_OFFSET_CM = {"nominal": 0.0, "offset-small": 4.0, "offset-large": 10.0}


def _features(combo: tuple[str, ...], rng: np.random.Generator) -> dict[str, float]:
    """Continuous measurements consistent with the categorical values (light level, camera offset)."""
    lux = LUX[combo[0]] * float(np.exp(rng.normal(0, 0.15)))
    offset = CAM_OFFSET_CM[combo[2]] + float(abs(rng.normal(0, 0.8)))
    return {"light_lux": round(lux, 1), "camera_offset_cm": round(offset, 2)}


def true_failure_rate(combo: tuple[str, ...], train_count: float) -> float:
    """The demo world's hidden failure rate of policy v1 for a cell with ``train_count`` episodes."""
    amplitude = 0.005 + 0.5 * sum(DIFFICULTY.get(v, 0.0) for v in combo)
    return min(0.6, 0.0008 + amplitude * (train_count + 1) ** -0.45)


def _train_counts(datasets: list[Dataset]) -> dict[tuple[str, ...], float]:
    """Training episodes per full combination (value slugs in DIMENSIONS order)."""
    from django.db.models import Sum

    from sites.models import ConditionSet

    dims = [d[0] for d in DIMENSIONS]
    rows = (
        Episode.objects.filter(dataset__in=datasets)
        .values("condition_set")
        .annotate(n=Sum("episode_count"))
    )
    sets = {
        cs.pk: cs.value_ids
        for cs in ConditionSet.objects.filter(pk__in=[r["condition_set"] for r in rows])
    }
    value_slug = {
        v.pk: (v.dimension.slug, v.slug) for v in ConditionValue.objects.select_related("dimension")
    }
    counts: dict[tuple[str, ...], float] = {}
    for row in rows:
        by_dim = dict(value_slug[v] for v in sets[row["condition_set"]])
        counts[tuple(by_dim[d] for d in dims)] = float(row["n"])
    return counts


def _production(
    ctx: Ctx,
    deployments: dict[str, Deployment],
    modes: dict[str, FailureMode],
    datasets: dict[str, Dataset],
) -> None:
    train = _train_counts(
        [datasets["lab-mm7-2026"], datasets["pilot-rotterdam-mm7"], datasets["vendor-pretrain-mm7"]]
    )
    fa6_train = _train_counts([datasets["lab-fa6-2026"]])
    plans = [
        ("rotterdam-totes", 14, train),
        ("duisburg-induction", 2, fa6_train),
        ("leeds-backroom", 0, train),
    ]
    for slug, days, counts in plans:
        dep = deployments[slug]
        if days == 0 or ProductionLog.objects.filter(deployment=dep).exists():
            continue
        rng = np.random.default_rng(SEED + 101 + len(slug))
        logs: list[ProductionLog] = []
        records: list[FailureRecord] = []
        for d in range(days):
            day = TODAY - timedelta(days=days - d)
            combos = _sample_correlated(ctx, DEPLOYMENT_PROFILES[slug], dep.cycles_per_day, rng)
            ids = _combo_ids(ctx, combos)
            per_combo: dict[tuple[str, ...], int] = {}
            for combo in combos:
                per_combo[combo] = per_combo.get(combo, 0) + 1
            for combo, cycles in sorted(per_combo.items()):
                rate = true_failure_rate(combo, counts.get(combo, 0.0))
                failures = int(rng.binomial(cycles, rate))
                logs.append(
                    ProductionLog(
                        deployment=dep,
                        condition_set_id=ids[combo],
                        day=day,
                        cycles=cycles,
                        failures=failures,
                    )
                )
                for k in range(failures):
                    mode = _failure_mode_for(combo, rng)
                    minute = int(rng.integers(0, 24 * 60))
                    records.append(
                        FailureRecord(
                            organization=ctx.operator,
                            deployment=dep,
                            failure_mode=modes[mode],
                            condition_set_id=ids[combo],
                            occurred_at=datetime.combine(day, time(0, 0), tzinfo=UTC)
                            + timedelta(minutes=minute),
                            intervention=mode != "navigation.blocked.human" or k % 2 == 0,
                            external_id=f"{slug}-{day:%Y%m%d}-{len(records):06d}",
                        )
                    )
        ProductionLog.objects.bulk_create(logs, batch_size=5000, ignore_conflicts=True)
        FailureRecord.objects.bulk_create(records, batch_size=5000, ignore_conflicts=True)


def _sample_correlated(
    ctx: Ctx, marginals: dict[str, dict[str, float]], n: int, rng: np.random.Generator
) -> list[tuple[str, ...]]:
    """Production is not a product of marginals: the night shift is dim and busy at once."""
    combos = _sample_combos(ctx, marginals, n, rng)
    out = []
    for combo in combos:
        c = list(combo)
        if c[0] == "dim-sodium" and "busy" in marginals["human-activity"] and rng.random() < 0.5:
            c[5] = "busy"
        out.append(tuple(c))
    return out


def _condition_samples(ctx: Ctx, deployments: dict[str, Deployment]) -> None:
    """Site survey measurements (light level, camera offset) the domain classifier compares."""
    for index, (slug, dep) in enumerate(sorted(deployments.items())):
        if ConditionSample.objects.filter(deployment=dep).exists():
            continue
        rng = np.random.default_rng(SEED + 500 + index)
        combos = _sample_combos(ctx, DEPLOYMENT_PROFILES[slug], 400, rng)
        start = datetime(2026, 9, 1, 6, 0, tzinfo=UTC)
        ConditionSample.objects.bulk_create(
            ConditionSample(
                deployment=dep,
                measured_at=start + timedelta(minutes=97 * i),
                features=_features(combo, rng),
            )
            for i, combo in enumerate(combos)
        )


def _failure_mode_for(combo: tuple[str, ...], rng: np.random.Generator) -> str:
    weights = [(VALUE_FAILURE_MODE[v], DIFFICULTY[v]) for v in combo if v in VALUE_FAILURE_MODE]
    if not weights:
        return "grasp.miss"
    probs = np.array([w for _, w in weights])
    return weights[int(rng.choice(len(weights), p=probs / probs.sum()))][0]


def _evaluations(
    ctx: Ctx,
    deployments: dict[str, Deployment],
    embodiments: dict[str, Embodiment],
    tasks: dict[str, Task],
    datasets: dict[str, Dataset],
) -> None:
    policy, created = PolicyVersion.objects.get_or_create(
        organization=ctx.operator,
        slug="pi-mm7-v1",
        defaults={
            "name": "π-MM7 v1",
            "embodiment": embodiments["mm7"],
            "task": tasks["tote-picking"],
            "released_on": TODAY - timedelta(days=60),
            "notes": "Trained on the lab inventory, the Rotterdam pilot week and the vendor mix.",
        },
    )
    if created:
        policy.trained_on_datasets.set(
            [
                datasets["lab-mm7-2026"],
                datasets["pilot-rotterdam-mm7"],
                datasets["vendor-pretrain-mm7"],
            ]
        )
    train = _train_counts(
        [datasets["lab-mm7-2026"], datasets["pilot-rotterdam-mm7"], datasets["vendor-pretrain-mm7"]]
    )
    runs = [
        ("rotterdam-totes", "Rotterdam acceptance test Oct 2026", 2400),
        ("venlo-each-pick", "Venlo acceptance test Oct 2026", 1200),
        (None, "Lab bench regression Oct 2026", 600),
    ]
    for i, (dep_slug, label, trials) in enumerate(runs):
        dep = deployments[dep_slug] if dep_slug else None
        run, created = EvaluationRun.objects.get_or_create(
            organization=ctx.operator,
            policy_version=policy,
            label=label,
            defaults={
                "deployment": dep,
                "site": dep.site if dep else None,
                "evaluated_on": TODAY - timedelta(days=30 - i),
                "source": "seed_demo",
            },
        )
        if not created:
            continue
        rng = np.random.default_rng(SEED + 300 + i)
        marginals = DEPLOYMENT_PROFILES[dep_slug] if dep_slug else LAB_MARGINALS
        combos = _sample_combos(ctx, marginals, trials, rng)
        ids = _combo_ids(ctx, combos)
        per_combo: dict[tuple[str, ...], int] = {}
        for combo in combos:
            per_combo[combo] = per_combo.get(combo, 0) + 1
        results = []
        for combo, n in sorted(per_combo.items()):
            failures = int(rng.binomial(n, true_failure_rate(combo, train.get(combo, 0.0))))
            results.append(
                EvaluationResult(
                    run=run, condition_set_id=ids[combo], trials=n, successes=n - failures
                )
            )
        EvaluationResult.objects.bulk_create(results)


def _teams(ctx: Ctx, embodiments: dict[str, Embodiment]) -> None:
    user_model = get_user_model()
    specs = [
        (
            "benelux",
            "Team Benelux",
            "Breda",
            51.5719,
            4.7683,
            "Europe/Amsterdam",
            ["field"],
            ["mm7", "fa6"],
        ),
        (
            "rhine",
            "Team Rhine",
            "Düsseldorf",
            51.2277,
            6.7735,
            "Europe/Berlin",
            ["field-2"],
            ["fa6", "mm7"],
        ),
    ]
    for slug, name, base, lat, lon, tz, members, embs in specs:
        team, created = FieldTeam.objects.get_or_create(
            organization=ctx.operator,
            slug=slug,
            defaults={
                "name": name,
                "home_base": base,
                "home_latitude": lat,
                "home_longitude": lon,
                "home_timezone": tz,
                "hours_per_day": 8,
                "travel_speed_kmh": 75,
                "cost_per_hour": 95,
            },
        )
        if created:
            team.members.set(user_model.objects.filter(username__in=members))
            team.embodiments.set([embodiments[e] for e in embs])


def _campaign(
    ctx: Ctx,
    deployments: dict[str, Deployment],
    embodiments: dict[str, Embodiment],
    tasks: dict[str, Task],
) -> None:
    campaign, created = Campaign.objects.get_or_create(
        organization=ctx.operator,
        slug="northwind-2027-h1",
        defaults={
            "name": "Northwind reliability 2027 H1",
            "customer": ctx.northwind,
            "task": tasks["tote-picking"],
            "reliability_goal": 0.999,
            "budget_episodes": 12000,
            "budget_hours": 600,
            "budget_money": 90000,
            "start_date": date(2026, 11, 16),
            "end_date": date(2027, 6, 30),
            "transfer_weight": 0.3,
        },
    )
    if created:
        campaign.embodiments.set([embodiments["mm7"]])
        campaign.deployments.set([deployments["rotterdam-totes"], deployments["venlo-each-pick"]])
    if not CollectionRound.objects.filter(campaign=campaign).exists():
        round_create(
            campaign=campaign,
            budget_episodes=3000,
            budget_hours=160,
            budget_money=25000,
            start_date=date(2026, 11, 30),
            days=21,
        )
    # Brightline's campaign, so the second customer has something of its own.
    other, created = Campaign.objects.get_or_create(
        organization=ctx.operator,
        slug="brightline-backroom-pilot",
        defaults={
            "name": "Brightline backroom pilot",
            "customer": ctx.brightline,
            "task": tasks["backroom-replenishment"],
            "reliability_goal": 0.995,
            "budget_episodes": 3000,
            "start_date": date(2026, 12, 1),
            "end_date": date(2027, 3, 31),
        },
    )
    if created:
        other.embodiments.set([embodiments["mm7"]])
        other.deployments.set([deployments["leeds-backroom"]])


# ------------------------------------------------------------------ the demo's first round, played out


def demo_round(
    *, write_dir: Any, import_results: bool = False, recordings: int | None = None
) -> dict[str, Any]:
    """Play round 1 of the demo campaign forward: plan, publish, capture, label; then write
    the evaluation of a policy trained on it (π-MM7 v2) as CSV files a manager can import.

    Captured episodes follow the same hidden failure model as the seed, so the measured
    impact is what the data really did in this synthetic world.
    """
    import csv
    from pathlib import Path

    from analytics.models import GapReport
    from analytics.selectors import gap_report_latest
    from analytics.services.gap import gap_report_build
    from analytics.services.planning import round_plan_from_gap
    from campaigns.models import CollectionTask
    from campaigns.services import round_transition
    from campaigns.services.plan_edit import round_publish

    ctx = _organizations()
    ctx.dims = list(ConditionDimension.objects.filter(organization=ctx.operator).order_by("order"))
    ctx.values = {
        (v.dimension.slug, v.slug): v
        for v in ConditionValue.objects.filter(dimension__organization=ctx.operator).select_related(
            "dimension"
        )
    }
    campaign = Campaign.objects.get(organization=ctx.operator, slug="northwind-2027-h1")
    round = campaign.rounds.get(number=1)
    rng = np.random.default_rng(SEED + 900)
    with transaction.atomic():
        if round.status in ("draft", "planned"):
            report = gap_report_latest(campaign=campaign) or gap_report_build(
                report=GapReport.objects.create(organization=ctx.operator, campaign=campaign)
            )
            # Start on the round's day, or today if that has passed: never plan into the past.
            round = round_plan_from_gap(round=round, report=report, days=21)
            round = round_publish(round=round)
        dims = [d[0] for d in DIMENSIONS]
        slug_of = {v.pk: (v.dimension.slug, v.slug) for v in ctx.values.values()}
        profile = DEPLOYMENT_PROFILES["rotterdam-totes"]
        episodes = []
        if round.dataset and not Episode.objects.filter(dataset=round.dataset).exists():
            tasks = (
                CollectionTask.objects.filter(round=round)
                .select_related("site", "embodiment")
                .prefetch_related("task_targets__target__condition_set")
            )
            for task in tasks:
                for tt in task.task_targets.all():
                    fixed = dict(
                        slug_of[v] for v in tt.target.condition_set.value_ids if v in slug_of
                    )
                    for i in range(tt.episodes_planned):
                        combo = tuple(
                            fixed.get(d)
                            or str(
                                rng.choice(
                                    list(profile[d]),
                                    p=np.array(list(profile[d].values()))
                                    / sum(profile[d].values()),
                                )
                            )
                            for d in dims
                        )
                        episodes.append((task, combo, f"demo-{task.pk}-{tt.target_id}-{i:04d}"))
            ids = _combo_ids(ctx, [e[1] for e in episodes])
            Episode.objects.bulk_create(
                [
                    Episode(
                        organization=ctx.operator,
                        dataset=round.dataset,
                        key=key,
                        embodiment=task.embodiment,
                        site=task.site,
                        task=campaign.task,
                        condition_set_id=ids[combo],
                        frames=600,
                        duration_s=20.0,
                        outcome="success",
                        provenance="captured",
                        validated=True,
                        sync_status="synced",
                        label_status="accepted",
                        features=_features(combo, rng),
                    )
                    for task, combo, key in episodes
                ],
                batch_size=5000,
            )
            CollectionTask.objects.filter(round=round).update(status=CollectionTask.Status.DONE)
        for to in ("collecting", "labelling"):
            if CollectionRound.can_move(round.status, to):
                round = round_transition(round=round, to_status=to)
        policy, created = PolicyVersion.objects.get_or_create(
            organization=ctx.operator,
            slug="pi-mm7-v2",
            defaults={
                "name": "π-MM7 v2",
                "embodiment": Embodiment.objects.get(organization=ctx.operator, slug="mm7"),
                "task": campaign.task,
                "released_on": date(2027, 1, 8),
                "notes": "v1's data plus round 1 of the Northwind campaign.",
            },
        )
        if created:
            v1 = PolicyVersion.objects.get(organization=ctx.operator, slug="pi-mm7-v1")
            policy.trained_on_datasets.set(v1.trained_on_datasets.all())
            policy.trained_on_rounds.set([round])
    attached = 0
    if recordings is None:
        recordings = int(settings.FIELDCRAFT.get("DEMO_RECORDINGS", 24))
    if round.dataset and recordings > 0:
        from frontend.demo_recordings import attach_demo_recordings

        attached = attach_demo_recordings(dataset=round.dataset, count=recordings)
    datasets = [*policy.trained_on_datasets.all(), *([round.dataset] if round.dataset else [])]
    train = _train_counts(datasets)
    out = Path(write_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for slug, label, trials in (
        ("rotterdam-totes", "Rotterdam acceptance test Jan 2027", 2400),
        ("venlo-each-pick", "Venlo acceptance test Jan 2027", 1200),
    ):
        combos = _sample_combos(
            ctx, DEPLOYMENT_PROFILES[slug], trials, np.random.default_rng(SEED + 950 + len(slug))
        )
        per_combo: dict[tuple[str, ...], int] = {}
        for combo in combos:
            per_combo[combo] = per_combo.get(combo, 0) + 1
        path = out / f"pi-mm7-v2-{slug}.csv"
        with path.open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow([*dims, "trials", "successes"])
            for combo, n in sorted(per_combo.items()):
                failures = int(rng.binomial(n, true_failure_rate(combo, train.get(combo, 0.0))))
                writer.writerow([*combo, n, n - failures])
        files.append((path, slug, label))
    if import_results:
        from analytics.services.evaluations import evaluation_import_file

        for path, slug, label in files:
            if EvaluationRun.objects.filter(
                organization=ctx.operator, policy_version=policy, label=label
            ).exists():
                continue  # played before: the evaluation is in already
            evaluation_import_file(
                organization=ctx.operator,
                name=path.name,
                content=path.read_bytes(),
                policy="pi-mm7-v2",
                deployment=slug,
                label=label,
                evaluated_on=date(2027, 1, 12),
            )

    return {
        "round": round.pk,
        "episodes": len(episodes),
        "recordings": attached,
        "files": [str(f[0]) for f in files],
        "policy": policy.slug,
    }
