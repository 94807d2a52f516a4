"""One real Chromium (Debian's /usr/bin/chromium driven by Playwright) for the browser tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"

needs_chromium = [
    pytest.mark.e2e,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
]


def fair_scheduling() -> None:
    """Run this process (and what it starts) under the ordinary scheduler.

    SVT-AV1 run as root used to leave a test worker SCHED_FIFO at top priority (see
    ``labeling.capture.video._ordinary_scheduling``); the Chromium it launched then inherited
    the policy, and its zygotes spun in the kernel reaping their children while the tasks
    they waited on never got the CPU: the suite stalled. A real-time policy is never what a
    test needs, whatever set it.
    """
    if os.sched_getscheduler(0) in (os.SCHED_FIFO, os.SCHED_RR):
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


@contextmanager
def chromium() -> Iterator[Any]:
    """Launch Chromium; the ORM runs in the test thread beside Playwright's event loop, so
    async-safety is relaxed for exactly as long as the browser lives, then restored (it must
    not leak into other tests, e.g. the subprocess that runs `check --deploy`)."""
    from playwright.sync_api import sync_playwright

    fair_scheduling()
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                ],
            )
            try:
                yield browser
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def log_in(page: Any, base: str, username: str, then: str, *, password: str = "pw") -> Any:
    """Sign ``username`` in on ``page`` through the login form, then wait on ``then`` (a
    path, any query after it)."""
    page.goto(f"{base}/login/?next={then}")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}{then}*")
    return page


def sign_in(context: Any, base: str, username: str, then: str) -> Any:
    """A new page of ``context`` with ``username`` signed in, on ``then``."""
    return log_in(context.new_page(), base, username, then)
