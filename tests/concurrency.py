"""Run one piece of work on several threads at the same instant, each on its own database
connection, as requests on several workers would."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db import connection

T = TypeVar("T")


def at_once(
    work: Callable[..., T], times: int = 2, *, args: Sequence[tuple[Any, ...]] | None = None
) -> list[T]:
    """Call ``work`` on ``times`` threads released together (``args[i]`` for the i-th) and
    return what each returned, in the order they returned. Each thread closes its database
    connection when done; the first exception a thread raised is raised here, after every
    thread has finished."""
    calls = list(args) if args is not None else [()] * times
    start = threading.Barrier(len(calls))
    lock = threading.Lock()
    returned: list[T] = []
    failed: list[BaseException] = []

    def run(call: tuple[Any, ...]) -> None:
        try:
            start.wait(timeout=60)
            value = work(*call)
            with lock:
                returned.append(value)
        except BaseException as exc:  # raised in the test's thread below
            with lock:
                failed.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(call,), daemon=True) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    if any(thread.is_alive() for thread in threads):
        raise TimeoutError(f"{work.__name__} still running on a thread after 600 s")
    if failed:
        raise failed[0]
    return returned
