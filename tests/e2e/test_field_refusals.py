"""Per-record refusals in a real Chromium at tablet size: final, shown, and holding up nothing.

Offline, the tablet queues a good note (typed), a note with a real NUL character, and a
record for another team's task. Back online, one sync stores the good note; the other two
are refused with their reasons, leave the outbox, stay listed (with their content) after a
reload, and are never sent again.
"""

from __future__ import annotations

import json
from typing import Any

from campaigns.models import CollectionTask, FieldRecord, FieldTeam
from tests.browser import needs_chromium, sign_in
from tests.campaigns.field_support import field_setup
from tests.e2e.test_field_offline import assert_tablet_friendly
from tests.factories import build_world

pytestmark = needs_chromium

ENQUEUE_JS = """([uuid, task, text]) => window.fieldApp.sync.enqueue({uuid, kind: 'note', task,
    payload: {text}, client_created_at: new Date().toISOString(), task_version_seen: 1})"""


def test_refused_records_are_final_and_shown_while_the_rest_syncs(
    browser, live_server, transactional_db
):
    setup = field_setup(build_world("qzrefuse"))
    task = setup.task
    rhine = FieldTeam.objects.create(
        organization=setup.world.operator,
        slug="rhine",
        name="Team Rhine",
        home_base="x",
        home_latitude=0,
        home_longitude=0,
    )
    theirs = CollectionTask.objects.create(
        round=task.round,
        site=task.site,
        embodiment=task.embodiment,
        team=rhine,
        scheduled_date=task.scheduled_date,
        status="published",
    )
    base = live_server.url
    context = browser.new_context(viewport={"width": 800, "height": 1280}, has_touch=True)
    page = sign_in(context, base, setup.world.field.username, "/field/")
    page.wait_for_selector(f'a.task-card[data-task="{task.pk}"]')
    sent: list[Any] = []
    page.on(
        "request",
        lambda r: (
            sent.append(json.loads(r.post_data))
            if r.method == "POST" and r.url.endswith("/api/field/records/")
            else None
        ),
    )
    page.goto(f"{base}/field/#/task/{task.pk}/step/0")
    page.wait_for_selector(".step")

    context.set_offline(True)
    page.wait_for_selector('#net[data-state="offline"]')
    page.fill("#note-text", "Valve %00 is the one by dock 3")
    page.click('button[data-action="note"]')
    nul_uuid = "7d0c2a8e-5b1f-4f7e-9a51-0c6c1d9e0001"
    other_uuid = "7d0c2a8e-5b1f-4f7e-9a51-0c6c1d9e0002"
    page.evaluate(ENQUEUE_JS, [nul_uuid, task.pk, "pressure\u0000 reading 4 bar"])
    page.evaluate(ENQUEUE_JS, [other_uuid, theirs.pk, "their rig looks fine"])
    page.wait_for_selector('#outbox[data-count="3"]')

    context.set_offline(False)
    page.click("#sync-now")
    page.wait_for_selector('#outbox[data-count="0"]', timeout=15000)
    refused = page.locator(".banner.conflicts")
    refused.wait_for()

    assert [n.payload["text"] for n in FieldRecord.objects.filter(kind="note")] == [
        "Valve %00 is the one by dock 3"
    ]
    assert "2 records were refused" in refused.text_content()
    nul_item = page.locator(f'.refused-record[data-uuid="{nul_uuid}"]')
    assert (
        "payload.text contains a NUL character"
        in nul_item.locator(".refused-reason").text_content()
    )
    assert "reading 4 bar" in nul_item.locator(".refused-content").text_content()
    other_item = page.locator(f'.refused-record[data-uuid="{other_uuid}"]')
    assert other_item.get_attribute("data-status") == "403"
    assert "not with a team you belong to" in other_item.locator(".refused-reason").text_content()
    assert "their rig looks fine" in other_item.locator(".refused-content").text_content()
    assert_tablet_friendly(page, "refused records")

    # Final: more syncs and a reload send neither again, and the list is still there.
    attempts = len(sent)
    page.evaluate("() => window.fieldApp.sync.run(true)")
    page.reload()
    page.wait_for_selector(f'.refused-record[data-uuid="{nul_uuid}"]')
    page.wait_for_selector('#outbox[data-count="0"]')
    page.evaluate("() => window.fieldApp.sync.run(true)")
    resent = [
        r["uuid"] for body in sent[attempts:] for r in (body if isinstance(body, list) else [body])
    ]
    assert nul_uuid not in resent and other_uuid not in resent
    assert page.locator(".refused-record").count() == 2
    assert not FieldRecord.objects.filter(task=theirs).exists()

    # Dismissing is the person's choice, one record at a time.
    nul_item.locator('button[data-action="dismiss-refused"]').click()
    page.wait_for_selector(f'.refused-record[data-uuid="{nul_uuid}"]', state="detached")
    assert "1 record was refused" in page.text_content(".banner.conflicts")
    context.close()


def test_a_batch_refused_as_a_whole_is_resent_record_by_record(
    browser, live_server, transactional_db
):
    from campaigns.field.apis import BATCH_MAX

    setup = field_setup(build_world("qzwhole"))
    task = setup.task
    base = live_server.url
    context = browser.new_context(viewport={"width": 1024, "height": 768}, has_touch=True)
    page = sign_in(context, base, setup.world.field.username, "/field/")
    page.wait_for_selector(f'a.task-card[data-task="{task.pk}"]')
    # Hold the sync loop, fill the outbox past what one batch may carry (the server refuses
    # such a batch as a whole, 400 without per-record answers), then send it as one batch.
    page.evaluate(
        """async ([task, n]) => {
          const app = window.fieldApp;
          app.sync.running = true;
          for (let i = 0; i < n; i++) {
            await app.store.put("outbox", {uuid: window.FieldStore.uuid4(), kind: "note", task,
              payload: {text: i === 7 ? "bad\\u0000" : "note " + i}, seq: i, attempts: 0,
              client_created_at: new Date().toISOString(), task_version_seen: 1});
          }
          const rows = await app.store.outbox();
          const confirmed = await app.sync.sendBatch(rows);
          app.sync.running = false;
          await app.reload();
          return confirmed;
        }""",
        [task.pk, BATCH_MAX + 1],
    )

    page.wait_for_selector('#outbox[data-count="0"]')
    assert FieldRecord.objects.filter(kind="note").count() == BATCH_MAX
    refused = page.locator(".refused-record")
    assert refused.count() == 1
    assert "payload.text contains a NUL character" in refused.text_content()
    context.close()
