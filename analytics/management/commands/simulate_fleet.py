"""simulate_fleet: stream production for an organization's deployments through the ingest API.

Each deployment runs its cycles a day (times ``--scale``) over the last ``--days`` days (ending
at today's midnight, UTC) as it ran before them: each cycle falls in a condition set in
proportion to the deployment's logged cycles there, fails at that set's logged failure rate,
and a failed cycle is an intervention with a failure mode drawn from those recorded there (a
deployment without logged production: its surveyed profile, or the values its site presents,
at 1 − its target). ``--shift MODE@DEPLOYMENT`` injects a shift: for
the last ``--shift-days`` days that failure mode happens at ``--shift-rate`` per cycle there on
top (a new failure mode when it had none). Everything goes through ``POST
/api/production/events/`` in JSON Lines batches of up to 10,000, in-process as the
organization's first manager, or to a running server with ``--url`` and ``--token``.
Event ids are derived from the seed and the day it runs: the same command again that day sends
duplicates, which count nothing; on another day it sends another sample of the window.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count, Sum
from django.utils import timezone

from accounts.commands import operator_organization
from accounts.models import Membership, Organization, Role
from sites.models import (
    ConditionSet,
    ConditionShare,
    ConditionValue,
    Deployment,
    FailureMode,
    FailureRecord,
    ProductionLog,
)

BATCH = 10_000


class Command(BaseCommand):
    help = __doc__.splitlines()[0].split(": ", 1)[1]

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--organization", help="operator slug (default: the only one)")
        parser.add_argument("--days", type=int, default=7)
        parser.add_argument(
            "--scale", type=float, default=0.1, help="share of each deployment's cycles a day"
        )
        parser.add_argument("--shift", help="MODE@DEPLOYMENT: failure-mode code at a deployment")
        parser.add_argument("--shift-days", type=int, default=2)
        parser.add_argument("--shift-rate", type=float, default=0.01, help="per cycle")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--url", help="a running server, e.g. http://127.0.0.1:8000")
        parser.add_argument("--token", help="an API token (with --url)")

    def handle(self, *args: Any, **options: Any) -> None:
        organization = operator_organization(options.get("organization"))
        deployments = list(
            Deployment.objects.filter(organization=organization, active=True).select_related("site")
        )
        if not deployments:
            raise CommandError(f"{organization} has no active deployments.")
        shift = _shift(organization, deployments, options.get("shift"))
        send = (
            _http_sender(options["url"], options.get("token"))
            if options.get("url")
            else _in_process_sender(organization)
        )
        rng = np.random.default_rng(options["seed"])
        events = _events(
            deployments,
            rng=rng,
            days=options["days"],
            scale=options["scale"],
            shift=shift,
            shift_days=options["shift_days"],
            shift_rate=options["shift_rate"],
            seed=options["seed"],
        )
        totals: dict[str, int] = {}
        seconds: list[float] = []
        batch: list[str] = []
        for event in events:
            batch.append(json.dumps(event, separators=(",", ":")))
            if len(batch) == BATCH:
                _post(send, batch, totals, seconds)
                batch = []
        if batch:
            _post(send, batch, totals, seconds)
        p95 = float(np.percentile(seconds, 95)) * 1000 if seconds else 0.0
        self.stdout.write(
            f"Sent {sum(totals.get(k, 0) for k in ('cycles', 'interventions', 'duplicates')):,} "
            f"events in {len(seconds)} batches (p95 {p95:.0f} ms a batch): "
            f"{totals.get('cycles', 0):,} cycles and {totals.get('interventions', 0):,} "
            f"interventions stored, {totals.get('duplicates', 0):,} already received."
        )
        if shift is not None:
            self.stdout.write(
                f"Injected: {shift[0].code} at {shift[1].name} for the last "
                f"{options['shift_days']} days at {options['shift_rate']:.2%} of cycles."
            )


def _shift(
    organization: Organization, deployments: list[Deployment], text: str | None
) -> tuple[FailureMode, Deployment] | None:
    if not text:
        return None
    code, _, slug = text.partition("@")
    mode = FailureMode.objects.filter(organization=organization, code=code).first()
    deployment = next((d for d in deployments if d.slug == slug), None)
    if mode is None or deployment is None:
        raise CommandError(f"--shift {text!r}: give an existing MODE code @ DEPLOYMENT slug.")
    return mode, deployment


def _events(
    deployments: list[Deployment],
    *,
    rng: np.random.Generator,
    days: int,
    scale: float,
    shift: tuple[FailureMode, Deployment] | None,
    shift_days: int,
    shift_rate: float,
    seed: int,
) -> Iterator[dict[str, Any]]:
    """Yield the fleet's events, deployment by deployment and day by day."""
    # Days end at today's midnight (UTC): the same seed on the same day sends the same events.
    now = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    start = now - timedelta(days=days)
    for deployment in deployments:
        # Read from before the window only, so sending the same week again sends the same.
        cells = _history(deployment, before=start) or _surveyed(deployment, before=start)
        weights = np.array([c.cycles for c in cells], dtype=float)
        weights /= weights.sum()
        per_day = max(1, round(deployment.cycles_per_day * scale))
        for day in range(days):
            shifted = (
                shift is not None and shift[1].pk == deployment.pk and day >= days - shift_days
            )
            times = np.sort(rng.uniform(0, 86_400, per_day))
            which = rng.choice(len(cells), size=per_day, p=weights)
            chance = rng.random(per_day)
            extra = rng.random(per_day) < (shift_rate if shifted else 0.0)
            for i in range(per_day):
                at = start + timedelta(days=day, seconds=float(times[i]))
                cell = cells[int(which[i])]
                conditions = cell.conditions or {
                    dim: _pick(rng, choices) for dim, choices in cell.profile.items()
                }
                modes = cell.modes
                # Named by the run's day too: the same command on the same day sends the same
                # events again (counted nothing); a run on another day is another sample.
                key = f"sim{seed}-{now.date().isoformat()}-{deployment.slug}-{day}-{i}"
                failure = bool(chance[i] < cell.rate or extra[i])
                yield {
                    "event_id": f"{key}-c",
                    "deployment": deployment.slug,
                    "kind": "cycle",
                    "occurred_at": at.isoformat(),
                    "outcome": "failure" if failure else "success",
                    "conditions": conditions,
                    "duration_s": round(float(rng.gamma(9.0, 4.0)), 1),
                }
                if not failure or (not modes and not extra[i]):
                    continue
                mode = shift[0].code if extra[i] and shift else _pick(rng, modes)
                yield {
                    "event_id": f"{key}-i",
                    "deployment": deployment.slug,
                    "kind": "intervention",
                    "occurred_at": (at + timedelta(seconds=30)).isoformat(),
                    "failure_mode": mode,
                    "conditions": conditions,
                    "intervened_by": "harness" if rng.random() < 0.6 else "person",
                }


@dataclass
class _Cell:
    """Where cycles happen: a logged condition set (or the surveyed profile), with its share
    of cycles, failure rate and failure modes."""

    cycles: float
    rate: float
    modes: list[tuple[str, float]]
    conditions: dict[str, str] = field(default_factory=dict)
    profile: dict[str, list[tuple[str, float]]] = field(default_factory=dict)


def _history(deployment: Deployment, *, before: datetime) -> list[_Cell]:
    """The deployment's logged production before ``before``, per condition set: the fleet
    goes on as it was (so only an injected shift is a change)."""
    logs = (
        ProductionLog.objects.filter(deployment=deployment, day__lt=before.date())
        .values("condition_set_id")
        .annotate(cycles=Sum("cycles"), failures=Sum("failures"))
    )
    rows = {r["condition_set_id"]: r for r in logs if r["cycles"]}
    if not rows:
        return []
    slugs = dict(
        ConditionValue.objects.filter(
            dimension__organization_id=deployment.organization_id
        ).values_list("pk", "dimension__slug")
    )
    value_slugs = dict(
        ConditionValue.objects.filter(
            dimension__organization_id=deployment.organization_id
        ).values_list("pk", "slug")
    )
    sets = dict(ConditionSet.objects.filter(pk__in=rows).values_list("pk", "value_ids"))
    modes: dict[int | None, list[tuple[str, float]]] = {}
    for r in (
        FailureRecord.objects.filter(deployment=deployment, occurred_at__lt=before)
        .values("condition_set_id", "failure_mode__code")
        .annotate(n=Count("id"))
    ):
        modes.setdefault(r["condition_set_id"], []).append((r["failure_mode__code"], float(r["n"])))
    everywhere: dict[str, float] = {}
    for listed in modes.values():
        for code, n in listed:
            everywhere[code] = everywhere.get(code, 0.0) + n
    return [
        _Cell(
            cycles=float(r["cycles"]),
            rate=float(r["failures"] or 0) / float(r["cycles"]),
            modes=modes.get(pk) or sorted(everywhere.items()),
            conditions={slugs[v]: value_slugs[v] for v in sets.get(pk) or () if v in slugs},
        )
        for pk, r in sorted(rows.items())
        if sets.get(pk)
    ]


def _surveyed(deployment: Deployment, *, before: datetime) -> list[_Cell]:
    """No logged production: the surveyed profile at the target's failure rate."""
    return [
        _Cell(
            cycles=1.0,
            rate=_failure_rate(deployment, before=before),
            modes=_modes(deployment, before=before),
            profile=_profile(deployment),
        )
    ]


def _pick(rng: np.random.Generator, choices: list[tuple[str, float]]) -> str:
    weights = np.array([w for _, w in choices], dtype=float)
    weights = (
        weights / weights.sum() if weights.sum() > 0 else np.full(len(choices), 1 / len(choices))
    )
    return choices[int(rng.choice(len(choices), p=weights))][0]


def _profile(deployment: Deployment) -> dict[str, list[tuple[str, float]]]:
    profile: dict[str, list[tuple[str, float]]] = {}
    for share in ConditionShare.objects.filter(deployment=deployment).select_related(
        "value__dimension"
    ):
        profile.setdefault(share.value.dimension.slug, []).append((share.value.slug, share.share))
    if not profile:
        # No surveyed profile: the values the site presents, equally likely.
        for value in deployment.site.presents.select_related("dimension"):
            profile.setdefault(value.dimension.slug, []).append((value.slug, 1.0))
    return {dim: choices for dim, choices in profile.items() if sum(w for _, w in choices) > 0}


def _failure_rate(deployment: Deployment, *, before: datetime) -> float:
    logged = ProductionLog.objects.filter(deployment=deployment, day__lt=before.date()).aggregate(
        cycles=Sum("cycles"), failures=Sum("failures")
    )
    if logged["cycles"]:
        return max(float(logged["failures"] or 0) / float(logged["cycles"]), 1e-4)
    return 1.0 - deployment.reliability_target


def _modes(deployment: Deployment, *, before: datetime) -> list[tuple[str, float]]:
    rows = (
        FailureRecord.objects.filter(deployment=deployment, occurred_at__lt=before)
        .values("failure_mode__code")
        .annotate(n=Count("id"))
    )
    return [(r["failure_mode__code"], float(r["n"])) for r in rows]


def _post(send: Any, batch: list[str], totals: dict[str, int], seconds: list[float]) -> None:
    body = ("\n".join(batch) + "\n").encode()
    started = time.perf_counter()
    status, answer = send(body)
    seconds.append(time.perf_counter() - started)
    if status not in (200, 201):
        raise CommandError(f"The API answered {status}: {json.dumps(answer)[:2000]}")
    for key in ("cycles", "interventions", "duplicates", "retracted", "corrected"):
        totals[key] = totals.get(key, 0) + int(answer.get(key, 0))


def _in_process_sender(organization: Organization) -> Any:
    from rest_framework.test import APIClient

    membership = (
        Membership.objects.filter(organization=organization, role=Role.MANAGER)
        .select_related("user")
        .first()
    )
    if membership is None:
        raise CommandError(f"{organization} has no manager to send as.")
    client = APIClient()
    client.force_authenticate(membership.user)

    def send(body: bytes) -> tuple[int, dict[str, Any]]:
        response = client.post("/api/production/events/", body, content_type="application/x-ndjson")
        return response.status_code, _answer(response.content)

    return send


def _http_sender(url: str, token: str | None) -> Any:
    if not token:
        raise CommandError("--url needs --token (an API token of a manager).")
    if not url.startswith(("http://", "https://")):
        raise CommandError("--url must start with http:// or https://.")

    def send(body: bytes) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(  # noqa: S310 (http/https checked above)
            url.rstrip("/") + "/api/production/events/",
            data=body,
            headers={"Content-Type": "application/x-ndjson", "Authorization": f"Token {token}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
                return response.status, _answer(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _answer(exc.read())
        except OSError as exc:  # refused, reset, timed out: said, not a traceback
            raise CommandError(f"Cannot reach {url}: {exc}") from None

    return send


def _answer(body: bytes) -> dict[str, Any]:
    """The API's JSON answer, or what the server said instead (an error page, a proxy)."""
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        return {"detail": body[:500].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"detail": value}
