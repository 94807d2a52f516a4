from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


def _broker_status() -> str:
    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem://"):
        folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("data_folder_in", "")
        import os

        return "ok" if folder and os.access(str(folder), os.W_OK) else "unwritable broker folder"
    from kombu import Connection

    try:
        with Connection(url, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:  # any broker failure is reported, not raised
        return f"error: {type(exc).__name__}"
    return "ok"


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Report database and broker status; 503 when either is down."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        database = "ok"
    except Exception as exc:  # report, don't raise: this is the health endpoint
        database = f"error: {type(exc).__name__}"
    broker = _broker_status()
    healthy = database == "ok" and broker == "ok"
    return JsonResponse(
        {"status": "ok" if healthy else "degraded", "database": database, "broker": broker},
        status=200 if healthy else 503,
    )
