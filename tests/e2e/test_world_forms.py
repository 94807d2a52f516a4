"""A manager adds an embodiment through the planner's form in a real Chromium (issue 19,
point 4): two cameras (the second row added with "Add a row") and an action dimension, and
the embodiment's page shows them."""

from __future__ import annotations

from typing import Any

from accounts.models import Organization, Role
from sites.models import Embodiment
from tests.browser import needs_chromium
from tests.factories import member

pytestmark = needs_chromium


def test_a_manager_adds_an_embodiment_with_two_cameras_and_an_action_dimension(
    browser, live_server, transactional_db
):
    operator = Organization.objects.create(slug="ops-qzrig", name="Operator Rig", kind="operator")
    manager = member(operator, Role.MANAGER, "manager-qzrig")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    form_page = "/planner/embodiments/new/"
    page.goto(f"{live_server.url}/login/?next={form_page}")
    page.fill("input[name=username]", manager.username)
    page.fill("input[name=password]", "pw")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}{form_page}")

    page.fill("#id_name", "Rig Arm")
    page.fill("#id_slug", "rig-arm")
    page.fill("#id_morphology", "fixed arm")
    page.fill("#id_end_effector", "parallel gripper")
    page.fill("#id_control_rate_hz", "30")
    page.fill("#id_state_topic", "/rig/joint_states")
    page.fill("#id_action_dimensions-0-name", "shoulder")
    page.fill("#id_action_dimensions-0-unit", "rad")
    page.fill("#id_action_dimensions-0-min_value", "-1.5")
    page.fill("#id_action_dimensions-0-max_value", "1.5")
    for index, (name, mount, size) in enumerate(
        [("wrist", "wrist", ("640", "480")), ("overhead", "fixed", ("1280", "720"))]
    ):
        if index:
            page.click("#cameras [data-add-row]")
        page.fill(f"#id_cameras-{index}-name", name)
        page.fill(f"#id_cameras-{index}-mount", mount)
        page.fill(f"#id_cameras-{index}-width", size[0])
        page.fill(f"#id_cameras-{index}-height", size[1])
        page.fill(f"#id_cameras-{index}-fps", "30")
    page.fill("#id_cameras-1-topic", "/overhead/image_raw")
    page.click("form.world-form button[type=submit]")

    embodiment = _wait_for_embodiment(page, live_server)
    body = page.inner_text("main")
    assert "Embodiment Rig Arm added." in body
    assert "shoulder" in body and "wrist" in body and "overhead" in body
    assert "/overhead/image_raw" in body and "/rig/joint_states" in body
    assert sorted(embodiment.cameras.values_list("name", flat=True)) == ["overhead", "wrist"]
    assert list(embodiment.action_dimensions.values_list("name", flat=True)) == ["shoulder"]
    context.close()


def _wait_for_embodiment(page: Any, live_server: Any) -> Embodiment:
    page.wait_for_url(f"{live_server.url}/planner/embodiments/*/")
    return Embodiment.objects.get(slug="rig-arm")
