"""Run one piece of work on several threads at the same instant, each on its own database
connection, as requests on several workers would."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import connection

T = TypeVar("T")


def at_once(work: Callable[[], T], times: int = 2) -> list[T]:
    """Call ``work`` on ``times`` threads released together and return what each returned,
    in the order they returned. Each thread closes its database connection when done; the
    first exception a thread raised is raised here, after every thread has finished."""
    start = threading.Barrier(times)
    lock = threading.Lock()
    returned: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            start.wait(timeout=60)
            value = work()
            with lock:
                returned.append(value)
        except BaseException as exc:  # raised in the test's thread below
            with lock:
                failed.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, daemon=True) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    if any(thread.is_alive() for thread in threads):
        raise TimeoutError(f"{work.__name__} still running on a thread after 600 s")
    if failed:
        raise failed[0]
    return returned
