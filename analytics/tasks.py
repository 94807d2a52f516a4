from celery import shared_task


@shared_task(name="analytics.tasks.gap_report_compute", acks_late=True)
def gap_report_compute(*, job_id: str) -> None:
    from analytics.services.gap import gap_report_compute as compute

    compute(job_id=job_id)


@shared_task(name="analytics.tasks.round_plan_compute", acks_late=True)
def round_plan_compute(*, job_id: str) -> None:
    from analytics.services.planning import round_plan_run

    round_plan_run(job_id=job_id)


@shared_task(name="analytics.tasks.campaign_forecast_compute", acks_late=True)
def campaign_forecast_compute(*, job_id: str) -> None:
    from analytics.services.forecast import campaign_forecast_run

    campaign_forecast_run(job_id=job_id)


@shared_task(name="analytics.tasks.round_impact_measure", acks_late=True)
def round_impact_measure(*, job_id: str) -> None:
    from analytics.services.steering_jobs import round_impact_run

    round_impact_run(job_id=job_id)


@shared_task(name="analytics.tasks.round_recommendation_compute", acks_late=True)
def round_recommendation_compute(*, job_id: str) -> None:
    from analytics.services.steering_jobs import round_recommendation_run

    round_recommendation_run(job_id=job_id)


@shared_task(name="analytics.tasks.production_import", acks_late=True)
def production_import(*, job_id: str) -> None:
    from analytics.services.production_files import production_import_run

    production_import_run(job_id=job_id)


@shared_task(name="analytics.tasks.curves_refit_stale")
def curves_refit_stale() -> int:
    """Queue the refits new outcomes call for (Celery beat); returns how many."""
    from analytics.services.steering.curves import curves_refit_stale as sweep

    return len(sweep())


@shared_task(name="analytics.tasks.curves_refit_compute", acks_late=True)
def curves_refit_compute(*, job_id: str) -> None:
    from analytics.services.steering.curves import curves_refit_compute as compute

    compute(job_id=job_id)
