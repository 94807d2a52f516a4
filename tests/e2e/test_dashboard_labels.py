"""The customer dashboard in a real Chromium: labels from user data render as text in the
plotly figures, never as live links."""

from __future__ import annotations

from tests.browser import log_in, needs_chromium

pytestmark = needs_chromium

EVIL = '<a href="https://evil.example">x</a>'


def test_customer_dashboard_shows_a_link_label_as_text_not_as_a_link(
    browser, live_server, transactional_db
):
    from analytics.models import GapReport
    from analytics.services.gap import gap_report_build
    from sites.models import ConditionDimension, ConditionValue, Site
    from tests.factories import build_world

    world = build_world("qzlinks")
    clutter = ConditionDimension.objects.create(
        organization=world.operator, slug="clutter", name="Clutter"
    )
    ConditionValue.objects.create(dimension=clutter, slug="low", label="Low", order=0)
    ConditionValue.objects.create(dimension=clutter, slug="evil", label=EVIL, order=1)
    Site.objects.filter(pk=world.site.pk).update(name=EVIL)
    gap_report_build(
        report=GapReport.objects.create(
            organization=world.operator,
            campaign=world.campaign,
            dimension_slugs=["lighting", "clutter"],
        )
    )
    base = live_server.url
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))

    log_in(page, base, world.viewer.username, "/dashboard/")
    page.wait_for_selector('[data-plot="site-map"] .main-svg')
    page.wait_for_selector(f'[data-plot="heat-{world.campaign.pk}"] .main-svg')
    # plotly draws its links as SVG anchors with xlink:href: match the attribute in any namespace.
    links = page.evaluate(
        """() => document.querySelectorAll(
            '.plot a[href*="evil"], .plot a[*|href*="evil"]'
        ).length"""
    )
    drawn = page.locator(".plot").evaluate_all(
        "els => els.map(el => Array.from(el.querySelectorAll('text')).map(t => t.textContent))"
    )

    assert problems == []
    assert links == 0
    texts = [t for plot in drawn for t in plot]
    assert EVIL in texts  # the site's name on the map, as typed
    # The heatmap's tick shows the long label shortened (whole in its hover), still as text.
    heat = page.locator(f'[data-plot="heat-{world.campaign.pk}"] .ytick text').all_text_contents()
    assert any(t.startswith("<a") and t.endswith("…") for t in heat)
