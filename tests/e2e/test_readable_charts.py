"""The gap report's charts in a real Chromium: long condition labels and axis titles are drawn
inside the figure, never cut off at its edge, and the heatmap never puts one dimension on
both axes."""

from __future__ import annotations

from tests.browser import log_in, needs_chromium

pytestmark = needs_chromium

LONG = "Shrink-wrapped totes stacked three high on the lower shelves next to dock four"

# Every tick label and axis title of each plot whose box leaves the plot's own svg.
OUTSIDE_JS = """() => Array.from(document.querySelectorAll('.plot')).flatMap((plot) => {
    const svg = plot.querySelector('svg.main-svg');
    if (!svg) return [];
    const box = svg.getBoundingClientRect();
    const texts = plot.querySelectorAll(
        '.xtick text, .ytick text, .g-xtitle text, .g-ytitle text, .g-y2title text'
    );
    return Array.from(texts).flatMap((t) => {
        const r = t.getBoundingClientRect();
        if (r.width === 0) return [];
        const inside = r.left >= box.left - 1 && r.right <= box.right + 1
            && r.top >= box.top - 1 && r.bottom <= box.bottom + 1;
        return inside ? [] : [plot.dataset.plot + ': ' + t.textContent];
    });
})"""


def test_gap_report_charts_draw_long_labels_and_axis_titles_inside_the_figure(
    browser, live_server, transactional_db
):
    from analytics.models import GapReport
    from analytics.services.gap import gap_report_build
    from sites.models import ConditionDimension, ConditionValue
    from tests.factories import build_world

    world = build_world("qzreadable")
    clutter = ConditionDimension.objects.create(
        organization=world.operator, slug="shelf-clutter", name="Shelf clutter"
    )
    for i, label in enumerate(["Clear", LONG, "Loose items on the floor between the racks"]):
        ConditionValue.objects.create(dimension=clutter, slug=f"c{i}", label=label, order=i)
    report = gap_report_build(
        report=GapReport.objects.create(
            organization=world.operator,
            campaign=world.campaign,
            dimension_slugs=["lighting", "shelf-clutter"],
        )
    )
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    url = f"/planner/gap/{report.pk}/"
    log_in(page, live_server.url, world.manager.username, url)
    page.wait_for_selector("#heatmap .main-svg .ytick text")
    page.wait_for_selector('[data-plot="bars-1"] .main-svg .ytick text')

    outside = page.evaluate(OUTSIDE_JS)
    heat_ticks = page.locator("#heatmap .ytick text").all_text_contents()
    heat_titles = page.locator("#heatmap .g-xtitle text, #heatmap .g-ytitle text")

    assert problems == []
    assert outside == []
    assert any(t.startswith("Shrink-wrapped") and t.endswith("…") for t in heat_ticks)
    assert sorted(heat_titles.all_text_contents()) == ["Lighting", "Shelf clutter"]

    # Rows set to the columns' dimension: the columns move to the other one.
    page.select_option("[data-target=heatmap] select[name=y]", "lighting")
    page.wait_for_function(
        "() => document.querySelector('#heatmap .g-ytitle text')?.textContent === 'Lighting'"
    )

    assert page.input_value("[data-target=heatmap] select[name=x]") == "shelf-clutter"
    assert page.locator("#heatmap .g-xtitle text").text_content() == "Shelf clutter"
    assert page.evaluate(OUTSIDE_JS) == []
    page.close()
