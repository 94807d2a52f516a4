"""Rounds created at the same moment are numbered one after another (issue 15).

Ten identical ``POST /api/rounds/`` once answered four 500s: each computed ``Max(number) + 1``
before any had committed, and all but one met the unique constraint. Every request now waits
for the campaign's row lock, so all are created with consecutive numbers.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from campaigns.models import CollectionRound
from labeling.models import Dataset
from tests.factories import build_world

THREADS = 10


def race(user: Any, url: str, body: dict[str, Any], n: int) -> list[tuple[int, Any]]:
    """POST ``body`` from ``n`` threads, each with its own connection, at the same moment."""
    barrier = threading.Barrier(n)
    answers: list[tuple[int, Any]] = []
    lock = threading.Lock()

    def send() -> None:
        client = Client(raise_request_exception=False)
        client.force_login(user)
        barrier.wait()
        try:
            response = client.post(url, data=json.dumps(body), content_type="application/json")
            answer = response.json() if response.status_code < 500 else response.content
            with lock:
                answers.append((response.status_code, answer))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


@pytest.mark.django_db(transaction=True)
def test_ten_parallel_round_creations_all_succeed_with_consecutive_numbers():
    world = build_world("qzrace")

    answers = race(world.manager, "/api/rounds/", {"campaign": world.campaign.pk}, THREADS)

    assert sorted(code for code, _ in answers) == [201] * THREADS, answers
    numbers = sorted(body["number"] for _, body in answers)
    assert numbers == list(range(2, 2 + THREADS))  # the world's round is number 1
    stored = CollectionRound.objects.filter(campaign=world.campaign)
    assert sorted(stored.values_list("number", flat=True)) == list(range(1, 2 + THREADS))
    # Each round captures into a dataset of its own.
    assert Dataset.objects.filter(collection_round__campaign=world.campaign).count() == 1 + THREADS


@pytest.mark.django_db(transaction=True)
def test_parallel_round_creations_in_two_campaigns_number_each_campaign_on_its_own():
    first, second = build_world("qzraceone"), build_world("qzracetwo")
    answers: list[tuple[int, Any]] = []

    threads = [
        threading.Thread(
            target=lambda w=w: answers.extend(
                race(w.manager, "/api/rounds/", {"campaign": w.campaign.pk}, 4)
            )
        )
        for w in (first, second)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(code for code, _ in answers) == [201] * 8, answers
    for world in (first, second):
        numbers = CollectionRound.objects.filter(campaign=world.campaign).values_list(
            "number", flat=True
        )
        assert sorted(numbers) == [1, 2, 3, 4, 5]
