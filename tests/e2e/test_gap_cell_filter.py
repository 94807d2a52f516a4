"""The gap report's cell filter in a real Chromium (issue 19, point 10).

Pressing Enter in the filter submitted the form the browser's way: the page reloaded, and the
cell table, loaded afresh, had forgotten the filter. Enter must filter the table in place,
and the filter must live in the page's address, so that a reload shows the same cells.
"""

from __future__ import annotations

from tests.browser import needs_chromium, sign_in
from tests.factories import build_world

pytestmark = needs_chromium

ROW_LABELS_JS = (
    "() => Array.from(document.querySelectorAll('#cells tbody tr td:nth-child(2)'))"
    ".map((td) => td.textContent.trim())"
)


def test_enter_in_the_cell_filter_filters_in_place_and_a_reload_keeps_it(
    browser, live_server, transactional_db
):
    world = build_world("qzfilter")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    report_page = f"/planner/gap/{world.gap_report.pk}/"
    page = sign_in(context, live_server.url, world.manager.username, report_page)
    page.wait_for_selector("#cells input[name=q]")
    every_cell = page.evaluate(ROW_LABELS_JS)
    dim_cells = [label for label in every_cell if "dim" in label.lower()]
    assert 0 < len(dim_cells) < len(every_cell)
    page.evaluate("() => { window.notReloaded = true; }")

    page.fill("#cells input[name=q]", "dim")
    page.press("#cells input[name=q]", "Enter")
    page.wait_for_function("() => location.search.includes('q=dim')")
    page.wait_for_function(
        f"(n) => ({ROW_LABELS_JS})().length === n", arg=len(dim_cells), timeout=5000
    )

    assert page.evaluate("() => window.notReloaded === true"), "Enter reloaded the page"
    assert page.evaluate(ROW_LABELS_JS) == dim_cells
    assert page.url == f"{live_server.url}{report_page}?q=dim&sort=rank"
    page.reload()
    page.wait_for_selector("#cells input[name=q]")
    assert page.input_value("#cells input[name=q]") == "dim"
    assert page.evaluate(ROW_LABELS_JS) == dim_cells
    context.close()
