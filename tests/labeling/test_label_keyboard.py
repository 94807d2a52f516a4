"""The labelling page in a real Chromium, from the keyboard alone: number keys pick values,
s/f set the outcome, Enter submits and opens the next episode, Esc skips; no CSP errors."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from labeling.models import Annotation, LabelAssignment
from sites.models import ConditionValue
from tests.browser import chromium, needs_chromium

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def test_an_annotator_labels_with_the_keyboard_alone(
    browser, live_server, transactional_db, settings, tmp_path
):
    from labeling.labels.services import label_job_create
    from tests.factories import build_world, captured_dataset

    settings.MEDIA_ROOT = tmp_path / "media"
    world = build_world("qzkeys")
    dataset, episodes = captured_dataset(world, 3, intended="dim")
    label_job_create(dataset=dataset, actor=world.manager, overlap_share=0, gold_share=0)
    base = live_server.url
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))

    page.goto(f"{base}/login/?next=/label/")
    page.fill("input[name=username]", world.annotator.username)
    page.fill("input[name=password]", "pw")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/label/")
    page.click("text=Start labelling")
    page.wait_for_selector("form[data-keys=ready]")
    first = LabelAssignment.objects.get(annotator=world.annotator, status="assigned")
    page.screenshot(path=str(tmp_path / "label.png"), full_page=True)
    if os.environ.get("LABEL_SCREENSHOTS"):
        page.screenshot(path=os.environ["LABEL_SCREENSHOTS"], full_page=True)

    # Row 1 is lighting (bright, dim): "1" picks bright and moves to clutter; "2" picks high.
    page.keyboard.press("1")
    page.keyboard.press("2")
    page.keyboard.press("f")
    page.keyboard.press("m")
    page.keyboard.press("Escape")  # leaves the failure-mode list without skipping
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: f"/label/assignments/{first.pk}/" not in url)

    answer = Annotation.objects.get(assignment=first)
    bright = ConditionValue.objects.get(dimension__organization=world.operator, slug="bright")
    high = ConditionValue.objects.get(dimension__organization=world.operator, slug="high")
    assert sorted(answer.value_ids) == sorted([bright.pk, high.pk])
    assert answer.outcome == "failure"
    assert answer.seconds_spent is not None and answer.seconds_spent > 0

    second = LabelAssignment.objects.get(annotator=world.annotator, status="assigned")
    page.wait_for_selector("form[data-keys=ready]")
    page.keyboard.press("Escape")  # skip
    page.wait_for_url(lambda url: f"/label/assignments/{second.pk}/" not in url)
    assert LabelAssignment.objects.get(pk=second.pk).status == "skipped"

    page.wait_for_selector("form[data-keys=ready]")
    page.keyboard.press("s")
    page.keyboard.press("Enter")  # confirms the pre-filled intent
    page.wait_for_url(f"{base}/label/")
    third = Annotation.objects.exclude(assignment=first).get(assignment__job__dataset=dataset)
    dim = ConditionValue.objects.get(dimension__organization=world.operator, slug="dim")
    assert dim.pk in third.value_ids and third.outcome == "success"
    assert problems == []
