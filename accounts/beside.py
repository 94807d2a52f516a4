"""Work beside the request: run a piece of work on a thread with its own database connection
while the caller goes on, and hand back its result (or its exception).

Used where PostgreSQL and the caller can work at once (a gap report's coverage query and its
domain classifier) and where a job's progress must be written while the caller's own
connection is busy (an import inside a COPY).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections

_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()
_pool_connections: set[Any] = set()  # the threads' Django connection wrappers


def _beside_pool() -> ThreadPoolExecutor:
    """Two long-lived threads per process, each keeping its own database connection between
    pieces of work (opening one cost 3–6 ms of a gap report's critical path). Made per process: a
    forked worker does not inherit its parent's threads."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(2, thread_name_prefix="beside"))
            _pool_connections.clear()  # a forked child's are its parent's: never close those
        return _pool[1]


def beside_close() -> None:
    """Close the side threads' database connections (they reopen on their next job): for
    whoever must drop the database, e.g. the test run's teardown."""
    with _pool_lock:
        for wrapper in _pool_connections:
            if wrapper.connection is not None:
                wrapper.connection.close()  # psycopg's own: closable from any thread


class Beside:
    """Run ``work`` while the caller goes on, and hand back its result (or its exception).

    Outside a transaction it runs on one of two long-lived threads, each with its own
    database connection (autocommit, so it holds nothing between jobs; checked and reopened
    if the server dropped it), so PostgreSQL and the caller work at once; inside one (a
    test, or a caller's transaction) it runs inline at ``start``, on the connection that
    sees the caller's rows (``start(inline=...)`` decides otherwise where the caller knows
    better). ``seconds`` is how long the work took.
    """

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work = work
        self.value: Any = None
        self.error: BaseException | None = None
        self.seconds = 0.0
        self.future: Future[None] | None = None

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            self.value = self.work()
        except BaseException as exc:  # re-raised by result()
            self.error = exc
        finally:
            self.seconds = time.perf_counter() - started

    def _run_beside(self) -> None:
        with _pool_lock:
            _pool_connections.add(connections[DEFAULT_DB_ALIAS])
        if connection.connection is not None and (
            connection.connection.closed or not connection.is_usable()
        ):
            connection.close()  # e.g. the server restarted, or beside_close() ran
        try:
            self._run()
        finally:
            if connection.connection is not None and connection.in_atomic_block:
                connection.close()  # never keep a transaction the work left open

    def __enter__(self) -> Beside:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.wait()  # never leave work running (or its error unseen) past the block

    def start(self, *, inline: bool | None = None) -> Beside:
        """Start the work: inline when ``inline`` says so, else (``None``) when the caller's
        connection is inside a transaction."""
        if connection.in_atomic_block if inline is None else inline:
            self._run()
        else:
            self.future = _beside_pool().submit(self._run_beside)
        return self

    def wait(self) -> None:
        if self.future is not None:
            self.future.result()

    def result(self) -> Any:
        self.wait()
        if self.error is not None:
            raise self.error
        return self.value
