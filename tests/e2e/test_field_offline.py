"""The field tablet flow in a real Chromium, at tablet sizes, with the network cut.

Sign in as the field user, open today's task, go offline, record five episodes and a note,
reload while still offline (the service worker serves the app, IndexedDB still holds the
records), come back online and sync: the database holds exactly those five episodes and the
note, and the manager's live progress page shows them. Along the way: no horizontal scroll,
every tap target at least 44 px, and what the first load costs (JS+CSS bytes, load time).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from campaigns.models import FieldRecord
from labeling.models import Episode
from tests.browser import needs_chromium, sign_in
from tests.campaigns.field_support import field_setup
from tests.factories import build_world

VIEWPORTS = {"landscape-1024x768": (1024, 768), "portrait-800x1280": (800, 1280)}
BUDGET_BYTES = 150 * 1024
LOAD_BUDGET_MS = 1000
PNG = bytes.fromhex(  # 1x1 pixel
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a5dd5bb40000000049454e44ae426082"
)

pytestmark = needs_chromium

# Every visible control in the field UI, with its size; hidden ones have no box.
TAP_TARGETS_JS = """
() => Array.from(document.querySelectorAll('button, a, input, select, textarea, label.tap'))
  .map((el) => ({ el, r: el.getBoundingClientRect(), s: getComputedStyle(el) }))
  .filter(({ r, s }) => r.width > 0 && r.height > 0 && s.visibility !== 'hidden')
  .filter(({ r }) => r.width < 44 || r.height < 44)
  .map(({ el, r }) => `${el.outerHTML.slice(0, 90)} is ${Math.round(r.width)}x${Math.round(r.height)}`)
"""
NO_HSCROLL_JS = "() => document.documentElement.scrollWidth <= window.innerWidth"


def assert_tablet_friendly(page: Any, where: str) -> None:
    shots = os.environ.get("FIELD_SCREENSHOTS")  # a folder: keep a picture of each view
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / f"{where.replace(' ', '-')}.png"), full_page=True)
    assert page.evaluate(NO_HSCROLL_JS), f"{where}: the page scrolls sideways"
    small = page.evaluate(TAP_TARGETS_JS)
    assert small == [], f"{where}: tap targets under 44 px: {small}"


@pytest.mark.parametrize("viewport", list(VIEWPORTS), ids=list(VIEWPORTS))
def test_a_field_day_offline_loses_nothing_and_reaches_the_manager(
    browser, live_server, transactional_db, viewport, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path  # the setup photo lands here
    width, height = VIEWPORTS[viewport]
    setup = field_setup(build_world("qzfield"))
    task, bright = setup.task, setup.bright
    base = live_server.url
    size = {"viewport": {"width": width, "height": height}, "has_touch": True}

    # Sign in through the form; keep the session for a fresh, empty-cache tablet context.
    login = browser.new_context(**size)
    sign_in(login, base, setup.world.field.username, "/field/")
    state = login.storage_state()
    login.close()
    context = browser.new_context(storage_state=state, **size)
    page = context.new_page()
    assets: dict[str, int] = {}

    def count(response: Any) -> None:
        if response.request.resource_type in ("script", "stylesheet"):
            assets[response.url] = len(response.body())

    page.on("response", count)
    page.goto(f"{base}/field/")
    page.wait_for_selector(f'a.task-card[data-task="{task.pk}"]')
    load_ms = page.evaluate(
        "() => { const n = performance.getEntriesByType('navigation')[0];"
        " return Math.round(n.loadEventEnd - n.startTime); }"
    )
    page.remove_listener("response", count)
    total = sum(assets.values())
    print(
        f"\n[{viewport}] first load of /field/: {total} bytes JS+CSS "
        f"({total / 1024:.1f} KiB in {len(assets)} files), load event at {load_ms} ms"
    )
    assert total < BUDGET_BYTES
    assert load_ms < LOAD_BUDGET_MS
    page.evaluate("() => navigator.serviceWorker.ready")
    page.wait_for_function("() => navigator.serviceWorker.controller !== null")
    assert_tablet_friendly(page, f"{viewport} task list")

    # Open today's task and walk to the capture step for the bright target, offline.
    page.click(f'a.task-card[data-task="{task.pk}"]')
    page.wait_for_selector(".step")
    assert_tablet_friendly(page, f"{viewport} protocol step")
    context.set_offline(True)
    page.wait_for_selector('#net[data-state="offline"]')
    for _ in range(3):  # set up, calibration, the dim capture step
        page.click('button[data-action="step-done"]')
        page.wait_for_function(
            "(n) => document.querySelector('.step-head .muted').textContent.startsWith('Step ' + n)",
            arg=_ + 2,
        )
    counter = f'.counter[data-target="{bright.pk}"]'
    for _ in range(4):
        page.click(f'{counter} button[data-action="success"]')
    page.click(f'{counter} button[data-action="failure"]')
    page.wait_for_selector(".overlay")
    assert_tablet_friendly(page, f"{viewport} failure pick")
    page.click('.overlay button[data-mode="grasp"]')
    page.fill("#note-text", "Dock door 3 open: draught moves the totes")
    page.click('button[data-action="note"]')
    page.set_input_files(
        "#photo-input", files=[{"name": "rig.png", "mimeType": "image/png", "buffer": PNG}]
    )
    pending = 3 + 5 + 1 + 1  # steps done, captures, note, photo
    page.wait_for_selector(f'#outbox[data-count="{pending}"]')
    assert page.text_content(f"{counter} .counter-total") == "5 / 5"

    # Reload while still offline: the service worker serves the app, IndexedDB the records.
    reloaded = page.reload()
    assert reloaded is not None and reloaded.from_service_worker
    page.wait_for_selector(f'#outbox[data-count="{pending}"]')
    page.wait_for_selector(counter)
    assert page.text_content(f"{counter} .counter-total") == "5 / 5"
    assert page.text_content("#net") == "Offline"
    assert page.locator(".notes li").count() == 1
    assert not FieldRecord.objects.filter(task=task).exists()
    assert_tablet_friendly(page, f"{viewport} task offline after reload")

    # Back online: the outbox drains and the server has exactly what was recorded.
    context.set_offline(False)
    page.click("#sync-now")
    page.wait_for_selector('#outbox[data-count="0"]', timeout=15000)
    captures = FieldRecord.objects.filter(task=task, kind="capture")
    assert captures.count() == 5
    assert Episode.objects.filter(field_record__task=task).count() == 5
    assert set(captures.values_list("target_id", flat=True)) == {bright.pk}
    assert (
        sorted(captures.values_list("episode__outcome", flat=True)) == ["failure"] + ["success"] * 4
    )
    notes = FieldRecord.objects.filter(task=task, kind="note")
    assert [n.payload["text"] for n in notes] == ["Dock door 3 open: draught moves the totes"]
    assert FieldRecord.objects.filter(task=task, kind="step_done").count() == 3
    photo = FieldRecord.objects.get(task=task, kind="photo")
    assert photo.photo.read() == PNG
    assert not FieldRecord.objects.filter(task=task, stale=True).exists()
    context.close()

    # The manager's live progress shows the five.
    manager = browser.new_context(viewport={"width": 1280, "height": 900})
    progress = f"/planner/rounds/{setup.world.round.pk}/progress/"
    mpage = sign_in(manager, base, setup.world.manager.username, progress)
    assert mpage.text_content("#captured-total").strip() == "5"
    row = mpage.locator(f'#progress-targets tr[data-target="{bright.pk}"] td.captured')
    assert row.text_content().strip() == "5"
    manager.close()


def test_manager_changes_reach_the_tablet_and_its_records_are_kept(
    browser, live_server, transactional_db
):
    from django.db.models import F

    from campaigns.field.services import field_record_submit
    from campaigns.models import CollectionTask, FieldTeam, TaskTarget

    setup = field_setup(build_world("qzchange"))
    task, bright = setup.task, setup.bright
    moved = CollectionTask.objects.create(
        round=task.round,
        site=task.site,
        embodiment=task.embodiment,
        team=task.team,
        scheduled_date=task.scheduled_date,
        status="published",
    )
    base = live_server.url
    context = browser.new_context(viewport={"width": 1024, "height": 768}, has_touch=True)
    page = sign_in(context, base, setup.world.field.username, "/field/")
    page.wait_for_selector(f'a.task-card[data-task="{moved.pk}"]')
    page.evaluate("() => navigator.serviceWorker.ready")
    page.goto(f"{base}/field/#/task/{task.pk}/step/3")
    page.wait_for_selector(f'.counter[data-target="{bright.pk}"]')

    # Offline, the team captures; meanwhile the manager cancels this task, changes its
    # targets, and gives the other task to another team.
    context.set_offline(True)
    for _ in range(2):
        page.click(f'.counter[data-target="{bright.pk}"] button[data-action="success"]')
    page.wait_for_selector('#outbox[data-count="2"]')
    TaskTarget.objects.filter(task=task, target=bright).update(episodes_planned=9)
    CollectionTask.objects.filter(pk=task.pk).update(status="cancelled", version=F("version") + 1)
    other = FieldTeam.objects.create(
        organization=setup.world.operator,
        slug="rhine",
        name="Team Rhine",
        home_base="x",
        home_latitude=0,
        home_longitude=0,
    )
    CollectionTask.objects.filter(pk=moved.pk).update(team=other, version=F("version") + 1)

    # A record whose UUID the server already holds with other content (say, restored from an
    # old backup of the tablet): refused with 409 and shown, not resent.
    taken = str(uuid.uuid4())
    field_record_submit(
        user=setup.world.field,
        uuid=taken,
        kind="note",
        task_id=task.pk,
        payload={"text": "the original"},
        client_created_at="2026-11-29T08:00:00Z",
        task_version_seen=1,
    )
    page.evaluate(
        """([uuid, task]) => window.fieldApp.sync.enqueue({uuid, kind: 'note', task,
            payload: {text: 'another text'}, client_created_at: new Date().toISOString(),
            task_version_seen: 1})""",
        [taken, task.pk],
    )
    page.wait_for_selector('#outbox[data-count="3"]')

    context.set_offline(False)
    page.click("#sync-now")
    page.wait_for_selector('#outbox[data-count="0"]', timeout=15000)
    refused = page.locator(".banner.conflicts")
    refused.wait_for()
    assert "1 record was refused" in refused.text_content()
    assert "already used for different content" in refused.text_content()
    assert FieldRecord.objects.get(uuid=taken).payload["text"] == "the original"
    banner = page.locator(".banner.warn")
    banner.wait_for()

    text = banner.text_content()
    assert "The manager changed this task" in text
    assert "Published → Cancelled" in text
    assert "Lighting: Bright: 5 → 9 episodes" in text
    assert "The manager cancelled this task" in page.text_content(".task-view")
    assert page.text_content(f'.counter[data-target="{bright.pk}"] .counter-total') == "2 / 9"
    stored = FieldRecord.objects.filter(task=task, kind="capture")
    assert stored.count() == 2
    assert set(stored.values_list("stale_reason", flat=True)) == {"cancelled"}
    assert_tablet_friendly(page, "manager change banner")
    page.click(".banner.conflicts button")
    page.wait_for_selector(".banner.conflicts", state="detached")
    page.click(".banner.warn button")
    page.wait_for_selector(".banner.warn", state="detached")
    page.click("a.back")
    card = page.locator(f'a.task-card[data-task="{moved.pk}"]')
    assert "No longer yours" in card.text_content()
    context.close()
