"""Build (or complete) the demo programme: organizations, people, robots, sites, taxonomy, teams, campaign."""

from __future__ import annotations

from datetime import date, time, timedelta
from typing import Any

import numpy as np
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from accounts.models import Membership, Organization, Role
from campaigns.models import Campaign, CollectionRound, FieldTeam
from campaigns.services import round_create
from frontend.demo.data import (
    DEMO_PASSWORD,
    DEPLOYMENT_PROFILES,
    DEPLOYMENTS,
    DIMENSIONS,
    FAILURE_MODES,
    LAB_MARGINALS,
    SEED,
    SITES,
    TODAY,
    Ctx,
)
from frontend.demo.generate import condition_samples, evaluations, inventory, production
from labeling.models import Episode
from sites.models import (
    AccessWindow,
    ActionDimension,
    Camera,
    ConditionDimension,
    ConditionShare,
    ConditionValue,
    Deployment,
    Embodiment,
    FailureMode,
    FailureRecord,
    Site,
    Task,
)


def seed_demo() -> dict[str, int]:
    """Build (or complete) the demo programme; return row counts of what it holds."""
    with transaction.atomic():
        ctx = organizations()
        _users(ctx)
        embodiments = _embodiments(ctx)
        tasks = _tasks(ctx)
        _taxonomy(ctx)
        sites = _sites(ctx)
        deployments = _deployments(ctx, sites, embodiments, tasks)
        modes = _failure_modes(ctx)
        datasets = inventory(ctx, embodiments, sites, tasks)
        production(ctx, deployments, modes, datasets)
        condition_samples(ctx, deployments)
        evaluations(ctx, deployments, embodiments, tasks, datasets)
        _teams(ctx, embodiments)
        _campaign(ctx, deployments, embodiments, tasks)
    refresh_statistics()
    return {
        "episodes": Episode.objects.filter(organization=ctx.operator).count(),
        "sites": Site.objects.filter(organization=ctx.operator).count(),
        "failure_records": FailureRecord.objects.filter(organization=ctx.operator).count(),
    }


DEMO_APPS: tuple[str, ...] = ("auth", "accounts", "sites", "labeling", "campaigns", "analytics")
"""The apps whose tables the demo writes."""


def refresh_statistics() -> None:
    """``ANALYZE`` the tables of :data:`DEMO_APPS`: the demo has just written tens of
    thousands of rows that autovacuum has not looked at yet, and with the planner's guess of
    near-empty tables a join over episodes and label items becomes nested loops over every
    row (minutes, not milliseconds). Inside a transaction it counts that transaction's own
    rows too. Only these tables: re-seeding a large working database should not pay for
    analysing everything else in it."""
    tables = sorted(
        {
            model._meta.db_table
            for label in DEMO_APPS
            for model in django_apps.get_app_config(label).get_models(include_auto_created=True)
        }
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE " + ", ".join(connection.ops.quote_name(t) for t in tables))


def organizations() -> Ctx:
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
