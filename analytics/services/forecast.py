"""Campaign forecasts: the simulator's strategies compared, computed in a job and stored."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.services import job_create, job_enqueue, job_running, time_left_words
from analytics.models import CampaignForecast
from campaigns.models import Campaign

FORECAST_STRATEGIES: tuple[str, ...] = (
    "steered",
    "uniform",
    "proportional",
    "more-of-the-same",
    "oracle",
)
"""What a forecast plays: the recommender, the usual alternatives, and the oracle that knows
the hidden truth (what each strategy's excess failures are measured against)."""


@dataclasses.dataclass(frozen=True)
class ForecastParameters:
    """What a forecast is of: its rounds and episodes a round, the seed of its world, the
    world's family (:data:`analytics.steering.simulate.WORLD_FAMILIES`) and the record its
    strategies read (days of each policy's production; the release before the campaign,
    trained without the last ``earlier_release`` episodes, or 0 for none), and how many
    worlds of that family (seeds ``seed`` on) its figures are medians of."""

    rounds: int = 20
    budget: int = 5_000
    seed: int = 1
    world: str = "default"
    production_days: int = 0
    earlier_release: int = 0
    worlds: int = 1

    def fields(self) -> dict[str, Any]:
        """The stored forecast's fields (and the page's query) for these parameters."""
        return dataclasses.asdict(self)


def campaign_forecast_request(
    *, campaign: Campaign, parameters: ForecastParameters, actor: Any = None
) -> CampaignForecast:
    """Return the stored forecast for these parameters, queueing its job when there is none.

    A forecast already computed, or one whose job is still queued or running, is returned
    as it is: a second click never starts a second job.
    """
    params: dict[str, Any] = {"campaign": campaign, **parameters.fields()}
    with transaction.atomic():
        try:
            with transaction.atomic():
                forecast, _ = CampaignForecast.objects.get_or_create(**params)
        except IntegrityError:  # a concurrent request created it first
            forecast = CampaignForecast.objects.get(**params)
        # Lock the row: of two concurrent clicks, the second sees the first one's job.
        forecast = (
            CampaignForecast.objects.select_for_update(of=("self",))
            .select_related("job")
            .get(pk=forecast.pk)
        )
        if forecast.computed_at is not None or (forecast.job and forecast.job.is_active):
            return forecast
        job = job_create(
            organization=campaign.organization,
            kind="forecast",
            title=(
                f"Forecast · {campaign.name} ({parameters.rounds} rounds × "
                f"{parameters.budget:,}, seed {parameters.seed}, world {parameters.world} × "
                f"{parameters.worlds})"
            ),
            task_name="analytics.tasks.campaign_forecast_compute",
            task_kwargs={"forecast_id": forecast.pk},
            created_by=actor,
            enqueue=False,
        )
        forecast.job = job
        forecast.save(update_fields=["job"])
        job_enqueue(job=job)
    return forecast


def campaign_forecast_run(*, job_id: str) -> None:
    """Play the forecast's campaign in each of its worlds under every strategy, reporting
    progress per round: the first world's curves, and each strategy's excess failures and
    their ratio to the oracle's in the same world, as medians over the worlds (with the
    ratios' range when there are several).

    Idempotent: a forecast already computed is left as it is.
    """
    from analytics.steering.simulate import ORACLE, excess_failures, simulate, world_config

    with job_running(job_id=job_id) as ctx:
        if ctx is None:
            return
        forecast = CampaignForecast.objects.get(pk=ctx.job.task_kwargs["forecast_id"])
        if forecast.computed_at is not None:
            return
        config = world_config(
            forecast.world,
            production_days=forecast.production_days,
            earlier_release=forecast.earlier_release,
        )
        seeds = range(forecast.seed, forecast.seed + forecast.worlds)
        total = forecast.rounds * len(FORECAST_STRATEGIES) * len(seeds)
        result: dict[str, Any] = {}
        excess: dict[str, list[float]] = {name: [] for name in FORECAST_STRATEGIES}
        played_before = 0
        # Each world costs about the same (the same strategies, rounds and record), but
        # within one the steered rounds cost ten times the others': the time left is told
        # by whole worlds, once the first is played.
        started = time.monotonic()
        for done_worlds, seed in enumerate(seeds):
            per_world = (time.monotonic() - started) / done_worlds if done_worlds else None
            for name in FORECAST_STRATEGIES:
                base = played_before * forecast.rounds
                where = f"{name}, world {seed - forecast.seed + 1} of {len(seeds)}"

                def said(r: int, where: str = where, per_world: float | None = per_world) -> str:
                    message = f"{where}: round {r} of {forecast.rounds}"
                    if per_world is None:
                        return message
                    # Every world at the pace of those played, less the time run so far.
                    left = per_world * len(seeds) - (time.monotonic() - started)
                    return f"{message} · {time_left_words(left)}"

                def played(r: int, base: int = base, said: Callable[[int], str] = said) -> None:
                    ctx.progress(base + r, total, said(r))

                ctx.progress(base, total, said(0), force=True)
                run = simulate(
                    name,
                    seed=seed,
                    rounds=forecast.rounds,
                    budget=float(forecast.budget),
                    config=config,
                    on_round=played,
                )
                played_before += 1
                excess[name].append(excess_failures(run))
                if seed == forecast.seed:  # the curves shown are the first world's
                    result[name] = {
                        "interventions_per_day": [float(x) for x in run.interventions_per_day],
                        "reliability": [float(x) for x in run.reliability],
                        "episodes": [float(x) for x in run.episodes],
                        "episodes_to_target": run.episodes_to_target,
                        "rounds_to_target": run.rounds_to_target,
                        "reachable": run.reachable,
                    }
        best = np.array(excess[ORACLE])
        for name, figures in result.items():
            mine = np.array(excess[name])
            figures["excess_failures"] = float(np.median(mine))
            ratios = mine[best > 0] / best[best > 0]
            figures["versus_oracle"] = float(np.median(ratios)) if ratios.size else None
            figures["versus_oracle_range"] = (
                [float(ratios.min()), float(ratios.max())]
                if ratios.size > 1 and name != ORACLE
                else None
            )
        CampaignForecast.objects.filter(pk=forecast.pk).update(
            result=result, computed_at=timezone.now()
        )
        ctx.progress(total, total, "Done", force=True)
