"""The capture counters stay on screen on the tablet (issue 19, point 10).

At 1024×768 the task's header, status buttons and the step's instructions pushed the counter
of a capture step below the fold: the field user had to scroll for every episode. Opening a
capture step with a protocol's usual instructions must show its total and its +1 buttons
without scrolling, in both tablet orientations, and they stay there after a tap.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from campaigns.models import ProtocolStep
from tests.browser import needs_chromium, sign_in
from tests.campaigns.field_support import field_setup
from tests.factories import build_world

# What a real capture step says: where to stand, what to vary, what counts as a failure.
INSTRUCTIONS = "\n".join(
    [
        "Stand at the tote station with the tablet; the robot starts from its home pose.",
        "Place 6 totes in the pick zone, rotated between 0 and 90 degrees, mixed sizes.",
        "Vary the pick position each episode: near edge, centre, far corner.",
        "A failure is any drop, a missed grasp, or the arm stopping for a protective stop.",
        "After each episode, press +1 success or +1 failure before resetting the totes.",
        "Keep people out of the marked area while the arm moves.",
    ]
)
VIEWPORTS = {"landscape-1024x768": (1024, 768), "portrait-800x1280": (800, 1280)}

pytestmark = needs_chromium

# The parts of the counter a person needs for every episode, and whether each is wholly on screen.
ON_SCREEN_JS = """
(selector) => {
  const counter = document.querySelector(selector);
  const parts = [counter.querySelector('.counter-total'),
                 counter.querySelector('button[data-action="success"]'),
                 counter.querySelector('button[data-action="failure"]')];
  return parts.map((el) => {
    const r = el.getBoundingClientRect();
    const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return {
      what: el.textContent.trim(),
      visible: r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0,
      uncovered: top !== null && (el === top || el.contains(top)),
    };
  });
}
"""


def assert_counter_on_screen(page: Any, selector: str, where: str) -> None:
    shots = os.environ.get("FIELD_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / f"{where.replace(' ', '-')}.png"))
    parts = page.evaluate(ON_SCREEN_JS, selector)
    hidden = [p["what"] for p in parts if not (p["visible"] and p["uncovered"])]
    assert hidden == [], f"{where}: not on screen without scrolling: {hidden}"


@pytest.mark.parametrize("viewport", list(VIEWPORTS), ids=list(VIEWPORTS))
def test_a_capture_step_shows_its_counter_and_buttons_without_scrolling(
    browser, live_server, transactional_db, viewport
):
    width, height = VIEWPORTS[viewport]
    setup = field_setup(build_world("qzfold"))
    task, bright = setup.task, setup.bright
    ProtocolStep.objects.filter(task=task, target=bright).update(instructions=INSTRUCTIONS)
    context = browser.new_context(viewport={"width": width, "height": height}, has_touch=True)
    page = sign_in(context, live_server.url, setup.world.field.username, "/field/")
    counter = f'.counter[data-target="{bright.pk}"]'

    page.goto(f"{live_server.url}/field/#/task/{task.pk}/step/3")
    page.wait_for_selector(counter)

    assert_counter_on_screen(page, counter, f"{viewport} capture step")
    page.click(f'{counter} button[data-action="success"]')
    page.wait_for_function(
        "(s) => document.querySelector(s + ' .counter-total').textContent === '1 / 5'", arg=counter
    )
    assert_counter_on_screen(page, counter, f"{viewport} capture step after a tap")
    # Let the tap's record reach the server before the browser goes: no request may still be
    # writing while the test database is emptied.
    page.wait_for_selector('#outbox[data-count="0"]', timeout=15000)
    context.close()
