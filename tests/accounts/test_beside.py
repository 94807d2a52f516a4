"""Work beside the request: long-lived threads with their own connections, outside transactions."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from accounts.beside import Beside


def _backend() -> tuple[int, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0], threading.current_thread().name


@pytest.mark.django_db(transaction=True)
def test_work_runs_on_its_own_connection_which_survives_between_jobs_and_server_drops():
    mine = _backend()[0]
    first_pid, thread = Beside(_backend).start().result()
    assert thread.startswith("beside") and first_pid != mine

    pids = {Beside(_backend).start().result()[0] for _ in range(6)}
    assert len(pids) <= 2  # two threads, each keeping its connection

    with connection.cursor() as cursor:  # the server drops them (as on a restart)
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [list(pids)]
        )
    again, _ = Beside(_backend).start().result()
    assert again not in pids


@pytest.mark.django_db(transaction=True)
def test_an_error_beside_is_raised_to_the_caller():
    def fails() -> None:
        raise ValueError("no such thing")

    job = Beside(fails).start()
    with pytest.raises(ValueError, match="no such thing"):
        job.result()
    assert Beside(lambda: 41 + 1).start().result() == 42


@pytest.mark.django_db
def test_inside_a_transaction_work_runs_inline_and_sees_its_rows():
    pid, thread = Beside(_backend).start().result()
    assert pid == _backend()[0]
    assert thread == threading.current_thread().name


@pytest.mark.django_db
def test_a_caller_in_a_transaction_can_still_ask_for_its_own_connection():
    pid, thread = Beside(_backend).start(inline=False).result()

    assert pid != _backend()[0]
    assert thread.startswith("beside")
