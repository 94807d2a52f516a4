"""The interactive API docs in a real Chromium: Swagger UI starts under the app's content
security policy (its start-up script is a file, not inline) and renders the operations."""

from __future__ import annotations

import re
from typing import Any

from accounts.middleware import CONTENT_SECURITY_POLICY
from tests.browser import chromium, needs_chromium

pytestmark = needs_chromium


def test_api_docs_render_operations_with_no_content_security_policy_violation(
    live_server: Any, transactional_db: None
) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        console: list[str] = []
        page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
        page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
        violations: list[str] = []
        page.expose_function("reportViolation", lambda text: violations.append(text))
        page.add_init_script(
            "document.addEventListener('securitypolicyviolation', e => "
            "window.reportViolation(e.violatedDirective + ' ' + e.blockedURI));"
        )

        # Swagger UI draws the tags near the view only; the deep link scrolls to the rounds.
        response = page.goto(f"{live_server.url}/api/docs/#/rounds")
        rounds_list = page.locator(".opblock.opblock-get").filter(
            has=page.locator(".opblock-summary-path", has_text=re.compile(r"^/api/rounds/$"))
        )
        rounds_list.wait_for(state="visible", timeout=30_000)
        rounds_list.locator(".opblock-summary").click()
        rounds_list.locator(".parameters-container").wait_for(state="visible")

        assert response is not None
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert "status" in rounds_list.locator(".parameters-container").inner_text()
        assert page.locator(".opblock-tag", has_text="rounds").count() == 1
        assert violations == []
        assert [line for line in console if "Content Security Policy" in line] == []
        assert [line for line in console if line.startswith("pageerror")] == []
