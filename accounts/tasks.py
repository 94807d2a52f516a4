from celery import shared_task


@shared_task(name="accounts.tasks.jobs_requeue_stale")
def jobs_requeue_stale() -> int:
    from accounts.services import jobs_requeue_stale as requeue

    return requeue()
