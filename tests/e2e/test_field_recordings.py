"""Recordings and takes on the field tablet, in a real Chromium at tablet sizes.

Attach two MCAP recordings on a capture step: each shows its progress and comes back
validated. Cut the connection in the middle of an upload, and reload the page in the middle
of another: each resumes from the offset the server confirmed and the server holds the exact
file. "Start take" before a capture: the capture carries when the take started, the episode
its start and end. The tablet's SHA-256 (Web Crypto, and its own for files too big for one
buffer) agrees with hashlib.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from campaigns.models import FieldRecord, TaskRecording
from labeling.capture.synthetic import CameraPlan, RecordingPlan, write_recording
from labeling.models import Episode, Recording
from sites.models import Camera
from tests.browser import needs_chromium, sign_in
from tests.campaigns.field_support import FieldSetup, field_setup
from tests.e2e.test_field_offline import assert_tablet_friendly
from tests.factories import build_world

pytestmark = needs_chromium

ATTACH = 'input[data-action="attach-recordings"]'
# Every progress text an upload row shows, as it changes (to see progress between 0 and 100%).
WATCH_PROGRESS_JS = """() => { window.seenProgress = [];
  new MutationObserver(() => document.querySelectorAll('li.upload[data-upload]').forEach((row) =>
    window.seenProgress.push([row.dataset.name, row.querySelector('.up-progress').textContent])))
  .observe(document.body, { subtree: true, childList: true, characterData: true }); }"""


@dataclass
class Rig:
    setup: FieldSetup
    page: Any
    context: Any
    step_url: str

    def recording(self, path: Path, *, seed: int, duration_s: float = 1.0, **plan: Any) -> Path:
        """An MCAP recording shaped like the task's embodiment (validation passes)."""
        embodiment = self.setup.task.embodiment
        camera = embodiment.cameras.get()
        rate = embodiment.control_rate_hz
        write_recording(
            path,
            RecordingPlan(
                duration_s=duration_s,
                joints=tuple(
                    embodiment.action_dimensions.order_by("order").values_list("name", flat=True)
                ),
                cameras=[CameraPlan(camera.name, width=96, height=64, fps=camera.fps)],
                state_hz=rate,
                action_hz=rate,
                seed=seed,
                **plan,
            ),
        )
        return path


def tablet(width: int, height: int, chunk: int = 16 * 1024) -> Any:
    """Run the test at this viewport, with uploads sent in chunks of ``chunk`` bytes."""
    return pytest.mark.parametrize(
        "rig", [(width, height, chunk)], indirect=True, ids=[f"{width}x{height}"]
    )


@pytest.fixture
def rig(browser, live_server, transactional_db, settings, request) -> Iterator[Rig]:
    width, height, chunk = request.param
    settings.FIELDCRAFT_UPLOAD_CHUNK_BYTES = chunk
    setup = field_setup(build_world(f"qzrec{width}"))
    Camera.objects.filter(embodiment=setup.task.embodiment).update(width=96, height=64)
    # No service worker: the tests watch and hold the page's own requests (page.route).
    context = browser.new_context(
        viewport={"width": width, "height": height}, has_touch=True, service_workers="block"
    )
    page = sign_in(context, live_server.url, setup.world.field.username, "/field/")
    page.wait_for_selector(f'a.task-card[data-task="{setup.task.pk}"]')
    step_url = f"{live_server.url}/field/#/task/{setup.task.pk}/step/3"  # capture: bright
    page.goto(step_url)
    page.wait_for_selector(f'.counter[data-target="{setup.bright.pk}"]')
    yield Rig(setup=setup, page=page, context=context, step_url=step_url)
    context.close()


def row(name: str) -> str:
    return f'li.upload[data-name="{name}"]'


def wait_until(page: Any, condition: Callable[[], Any], timeout_s: float = 10) -> None:
    """Let Playwright deliver events (route handlers run meanwhile) until condition holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        page.wait_for_timeout(25)


def watch_puts(page: Any) -> list[str]:
    ranges: list[str] = []
    page.on(
        "request",
        lambda r: ranges.append(r.headers.get("content-range", "")) if r.method == "PUT" else None,
    )
    return ranges


def hold_third_put(page: Any) -> list[Any]:
    """Chunks go through, except the third PUT: held unanswered (a link that went silent)."""
    held: list[Any] = []
    seen = [0]

    def handle(route: Any) -> None:
        if route.request.method == "PUT":
            seen[0] += 1
            if seen[0] == 3:
                held.append(route)
                return
        route.continue_()

    page.route("**/api/recording-uploads/**", handle)
    return held


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stored_once(rig: Rig, path: Path) -> Recording:
    recording = Recording.objects.get(sha256=sha256(path))
    assert hashlib.sha256(Path(recording.storage_path).read_bytes()).hexdigest() == sha256(path)
    assert TaskRecording.objects.filter(task=rig.setup.task, recording=recording).count() == 1
    return recording


@tablet(1024, 768, chunk=16 * 1024)
def test_two_recordings_upload_with_progress_and_come_back_validated(rig, tmp_path):
    one = rig.recording(tmp_path / "take-one.mcap", seed=1)
    two = rig.recording(tmp_path / "take-two.mcap", seed=2)
    page = rig.page
    puts = watch_puts(page)
    page.evaluate(WATCH_PROGRESS_JS)

    page.set_input_files(ATTACH, files=[str(one), str(two)])

    for path in (one, two):
        page.wait_for_selector(f'{row(path.name)} [data-verdict="passed"]', timeout=15000)
        text = page.text_content(f"{row(path.name)} .verdict")
        assert "✓ Passed" in text
        size = path.stat().st_size
        assert "· 100%" in page.text_content(f"{row(path.name)} .up-progress")
        seen = page.evaluate("() => window.seenProgress")
        between = [t for n, t in seen if n == path.name and "Uploading" in t and "· 100%" not in t]
        assert between, f"{path.name}: no progress seen between 0 and 100% ({size} bytes)"
        assert stored_once(rig, path).status == "passed"
    assert len(puts) >= 2 * 3  # ~39 kB each in 16 kB chunks
    assert TaskRecording.objects.filter(task=rig.setup.task).count() == 2
    assert_tablet_friendly(page, "1024x768 recordings validated")

    # A verdict that comes later (validation re-run on the server) reaches the tablet by
    # polling, failed checks and all.
    later = Recording.objects.filter(sha256=sha256(two))
    later.update(status="validating")
    page.reload()
    page.wait_for_selector(f'{row(one.name)} [data-verdict="passed"]')
    page.wait_for_selector(f'{row(two.name)} [data-verdict="validating"]')
    check = {"name": "camera_rate", "passed": False, "message": "front: 12.0 fps, expected 30"}
    later.update(status="failed", report={"checks": [check]}, message="1 check failed")
    page.wait_for_selector(f'{row(two.name)} [data-verdict="failed"]', timeout=8000)
    text = page.text_content(f"{row(two.name)} .verdict")
    assert "✕ Failed" in text
    assert "camera_rate: front: 12.0 fps, expected 30" in text


@tablet(800, 1280, chunk=64 * 1024)
def test_a_dropped_connection_resumes_from_the_confirmed_offset(rig, tmp_path):
    path = rig.recording(tmp_path / "long-take.mcap", seed=3, duration_s=4.0, compression="none")
    size = path.stat().st_size
    assert size > 5 * 64 * 1024
    page, context = rig.page, rig.context
    puts = watch_puts(page)
    held = hold_third_put(page)

    page.set_input_files(ATTACH, files=[str(path)])
    page.wait_for_selector(f'{row(path.name)}[data-offset="{2 * 64 * 1024}"]')
    wait_until(page, lambda: held)
    assert f"· {2 * 64 * 1024 * 100 // size}%" in page.text_content(
        f"{row(path.name)} .up-progress"
    )
    context.set_offline(True)
    held[0].abort("internetdisconnected")
    page.wait_for_selector(f'{row(path.name)}[data-waiting="offline"]')
    assert "Offline" in page.text_content(f"{row(path.name)} .up-progress")
    context.set_offline(False)

    page.wait_for_selector(f'{row(path.name)}[data-state="done"]', timeout=15000)
    stored_once(rig, path)
    assert puts[0].startswith("bytes 0-")
    assert not [r for r in puts[1:] if r.startswith("bytes 0-")], puts
    # The held chunk is sent again from where the server stood, not from the start.
    assert puts[3].startswith(f"bytes {2 * 64 * 1024}-"), puts
    page.wait_for_selector(f'{row(path.name)} [data-verdict="passed"]')
    assert_tablet_friendly(page, "800x1280 upload resumed")


@tablet(1024, 768, chunk=64 * 1024)
def test_a_reload_in_the_middle_of_an_upload_resumes_it_by_itself(rig, tmp_path):
    path = rig.recording(tmp_path / "reloaded.mcap", seed=4, duration_s=4.0, compression="none")
    page = rig.page
    puts = watch_puts(page)
    held = hold_third_put(page)
    page.set_input_files(ATTACH, files=[str(path)])
    page.wait_for_selector(f'{row(path.name)}[data-offset="{2 * 64 * 1024}"]')
    wait_until(page, lambda: held)
    before = len(puts)

    page.reload()
    with contextlib.suppress(Exception):  # the reload may have cancelled it already
        held[0].abort("connectionaborted")

    page.wait_for_selector(f'{row(path.name)}[data-state="done"]', timeout=15000)
    stored_once(rig, path)
    after = puts[before:]
    assert after and not [r for r in after if r.startswith("bytes 0-")], puts
    assert after[0].startswith(f"bytes {2 * 64 * 1024}-"), puts


@tablet(800, 1280)
def test_a_started_take_is_kept_over_a_reload_and_carried_by_the_capture(rig):
    page, bright = rig.page, rig.setup.bright
    counter = f'.counter[data-target="{bright.pk}"]'

    page.click(f'{counter} button[data-action="start-take"]')
    page.wait_for_selector(f"{counter} .take-timer")
    page.reload()
    page.wait_for_selector(f"{counter} .take-timer")
    assert_tablet_friendly(page, "800x1280 take running")
    page.wait_for_timeout(1000)
    page.click(f'{counter} button[data-action="success"]')
    page.wait_for_selector(f"{counter} .take-last")
    page.wait_for_selector('#outbox[data-count="0"]', timeout=10000)

    record = FieldRecord.objects.get(task=rig.setup.task, kind="capture")
    started = datetime.fromisoformat(record.payload["take_started_at"])
    took = (record.client_created_at - started).total_seconds()
    assert 1.0 <= took < 5.0, took
    assert "Last take" in page.text_content(f"{counter} .take-last")
    episode = Episode.objects.get(field_record=record)
    assert episode.extra["take"] == {
        "started_at": record.payload["take_started_at"],
        "ended_at": record.client_created_at.isoformat(),
    }

    # A failure ends its take when it is tapped, not when the mode is picked.
    page.click(f'{counter} button[data-action="start-take"]')
    page.click(f'{counter} button[data-action="failure"]')
    tapped = datetime.now(UTC)
    page.wait_for_timeout(800)
    page.click('.overlay button[data-mode="grasp"]')
    # Without a started take the next capture carries none.
    page.click(f'{counter} button[data-action="success"]')
    page.wait_for_selector(f"{counter} .counter-total >> text=3 / 5")
    page.wait_for_selector('#outbox[data-count="0"]', timeout=10000)
    failure = FieldRecord.objects.get(task=rig.setup.task, payload__outcome="failure")
    assert "take_started_at" in failure.payload
    assert abs((failure.client_created_at - tapped).total_seconds()) < 0.5
    plain = FieldRecord.objects.get(
        task=rig.setup.task,
        kind="capture",
        payload__outcome="success",
        client_created_at__gt=tapped,
    )
    assert "take_started_at" not in plain.payload


@tablet(1024, 768)
def test_the_tablet_sha256_matches_hashlib_at_every_slice_boundary(rig):
    page = rig.page
    samples = [b"", b"abc", b"a" * 55, b"a" * 56, b"a" * 64, bytes(range(256)) * 300]
    samples.append(hashlib.sha256(b"seed").digest() * 4099)  # 131,168 bytes
    cases = [base64.b64encode(s).decode() for s in samples]

    got = page.evaluate(
        """async (cases) => {
          const out = [];
          for (const c of cases) {
            const bytes = Uint8Array.from(atob(c), (ch) => ch.charCodeAt(0));
            const blob = new Blob([bytes]);
            const small = bytes.length < 2000;
            out.push([
              await FieldSync.sha256Blob(blob),
              await FieldSync.sha256Blob(blob, { subtle: false }),
              await FieldSync.sha256Blob(blob, { subtle: false, slice: 1000, step: 333 }),
              await FieldSync.sha256Blob(blob, { subtle: false, slice: small ? 64 : 4096, step: small ? 7 : 1001 }),
            ]);
          }
          return out;
        }""",
        cases,
    )
    lengths = page.evaluate(
        "(ns) => ns.map((n) => FieldSync.lengthBytes(n))", [0, 3, 2**29, 2**32 + 5, 5 * 2**30 + 3]
    )

    for sample, digests in zip(samples, got, strict=True):
        assert digests == [hashlib.sha256(sample).hexdigest()] * 4
    for n, encoded in zip([0, 3, 2**29, 2**32 + 5, 5 * 2**30 + 3], lengths, strict=True):
        assert bytes(encoded) == (n * 8).to_bytes(8, "big")
