from celery import shared_task


@shared_task(name="analytics.tasks.gap_report_compute", acks_late=True)
def gap_report_compute(*, job_id: str) -> None:
    from analytics.services.gap import gap_report_compute as compute

    compute(job_id=job_id)


@shared_task(name="analytics.tasks.round_plan_compute", acks_late=True)
def round_plan_compute(*, job_id: str) -> None:
    from analytics.services.planning import round_plan_run

    round_plan_run(job_id=job_id)
