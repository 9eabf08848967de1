"""Dark mode (issue 42): the theme follows the phone's setting (or the reader's switch), and the explorers'
charts follow the page. Dark titles on black, an invisible dashed theory line and a glaring white grid
were what a phone in dark mode showed.

Without the built book: every chapter explorer's chart, at every control's extreme value, drawn by the
page's ECharts in Chromium for each scheme on that scheme's page colour, has text of at least 4.5:1 and
lines of at least 3:1 against the page, and a grid that is seen but does not glare; the light chart on
the dark page fails the same check (the check can fail). The summaries' coloured words take their dark
colours from the page's style sheet, which holds the colours batchlab.page.colours declares.
In Chromium on the built book (slow): each chapter page opened with ``prefers-color-scheme: dark``, every
explorer made live, its chart drawn dark and checked on the page's own background; the reader's switch to
the light theme (the theme's ``data-theme``, which wins over the phone's setting) redraws it light. A static
figure (drawn on white for the light page, the PDF and Jupyter) is shown dark on the dark page: on average
as dark as a dark page's text is light, and bright again on the light page.
"""
from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from batchlab.page import colours, web
from batchlab.page.colours import BACKGROUNDS, DARK, DARK_INK, TEXT_ROLES, contrast, css_ink, in_scheme
from booktools import ROOT, browser as chromium, layout, live_page
from tests import explorer_charts as charts

LIVE_CSS = ROOT / "book" / "_static" / "live.css"


@pytest.fixture(scope="module")
def chapter_charts() -> list[tuple[str, str, str, dict]]:
    """(page, explorer, what moved, the light chart) for every chapter explorer at every control's ends."""
    out = []
    for doc, name, context in charts.chapter_explorers():
        for control, value, answer in charts.extremes(name, context):
            out.append((doc, name, f"{control}={value}", answer["chart"]))
    return out


def test_every_chapter_explorer_is_found():
    found = charts.chapter_explorers()
    assert {name for _, name, _ in found} == set(web.EXPLORERS)
    assert {doc for doc, _, _ in found} == set(charts.LIVE_DOCS)


def test_the_dark_colours_stand_out_from_the_dark_page():
    """Each colour's dark counterpart: text colours 4.5:1 on the dark page; the grid faint."""
    back = BACKGROUNDS["dark"]
    assert {k: round(contrast(v, back), 1) for k, v in DARK.items() if contrast(v, back) < 4.5} == {}
    assert contrast(DARK_INK["text"], back) >= 4.5 and contrast(DARK_INK["axis"], back) >= 4.5
    assert 1.2 <= contrast(DARK_INK["grid"], back) < 3
    # a contrary case: the light colours on the dark page are what the issue saw
    assert contrast(colours.MEASURED_COLOUR, back) < 1.5 and contrast(colours.ERROR_COLOUR, back) < 3


def test_in_scheme_recolours_base_and_media_and_keeps_the_light_chart():
    option = {"baseOption": {"textStyle": {"fontSize": 13}, "title": [{"text": "a"}], "legend": {"bottom": 0},
                             "xAxis": {"type": "value"}, "yAxis": [{"type": "log"}],
                             "series": [{"type": "line", "color": "#000000", "lineStyle": {"color": "#1F77B4"}}]},
              "media": [{"query": {"maxWidth": 520}, "option": {"title": {"textStyle": {"fontSize": 12}}}}]}
    before = json.dumps(option)
    dark = in_scheme(option, "dark")
    assert json.dumps(option) == before and in_scheme(option, "light") is option  # nothing changed in place
    base = dark["baseOption"]
    assert base["series"][0]["color"] == DARK["#000000"] and base["series"][0]["lineStyle"]["color"] == DARK["#1f77b4"]
    assert base["title"][0]["textStyle"]["color"] == DARK_INK["text"] == base["textStyle"]["color"]
    assert base["yAxis"][0]["splitLine"]["lineStyle"]["color"] == DARK_INK["grid"]
    assert base["backgroundColor"] == "transparent"
    assert dark["media"][0]["option"]["title"]["textStyle"] == {"fontSize": 12, "color": DARK_INK["text"]}
    assert in_scheme(None, "dark") is None
    with pytest.raises(ValueError, match="scheme"):
        in_scheme(option, "sepia")


def test_the_page_asks_for_its_scheme_and_can_switch_it():
    """web.start/update draw for the scheme sent (any other value: light, the declared chart) and carry
    the light chart beside a dark one; recolour redraws it for a switched page."""
    doc, name, context = charts.chapter_explorers()[0]
    light = json.loads(web.start(name, context))
    dark = json.loads(web.start(name, context, "dark"))
    assert "light_chart" not in light and dark["light_chart"] == light["chart"]
    assert dark["chart"] == json.loads(json.dumps(in_scheme(light["chart"], "dark"))) != light["chart"]
    assert json.loads(web.start(name, context, "neon"))["chart"] == light["chart"]
    assert json.loads(web.recolour(json.dumps(light["chart"]), "dark")) == dark["chart"]
    assert json.loads(web.recolour(json.dumps(light["chart"]), "light")) == light["chart"]
    assert web.recolour("not json", "dark") == "null" and web.recolour("[1]", "dark") == "null"
    values = json.loads(web.start(name, context))["values"]
    moved = json.loads(web.update(name, context, json.dumps(values), next(iter(values)), "dark"))
    assert moved["chart"] == dark["chart"]


def test_the_style_sheet_holds_the_summaries_dark_colours():
    """Each role of css_ink has its dark colour in live.css, the one colours.DARK gives its light colour."""
    css = LIVE_CSS.read_text(encoding="utf-8")
    block = re.search(r'html\[data-theme="dark"\]\s*\{([^}]*)\}', css).group(1)
    declared = dict(re.findall(r"--bl-([a-z]+):\s*(#[0-9a-f]{6})", block))
    assert declared == {role: DARK[light.lower()] for role, light in TEXT_ROLES.items()}
    assert css_ink("fit") == f"var(--bl-fit, {colours.FIT_COLOUR})"
    for role in TEXT_ROLES:  # every summary word in a role's colour reads on the dark page
        assert contrast(declared[role], BACKGROUNDS["dark"]) >= 4.5, role


@pytest.mark.parametrize("scheme", colours.SCHEMES)
def test_every_chart_reads_on_its_page(browser, chapter_charts, scheme):
    grid = DARK_INK["grid"] if scheme == "dark" else charts.ECHARTS_GRID
    faults = []
    with charts.chart_page(browser) as draw:
        for doc, name, moved, chart in chapter_charts:
            for where, width, height in charts.sizes(name)[:1]:  # the colours do not depend on the size
                ink = draw(in_scheme(chart, scheme), width, height, BACKGROUNDS[scheme])
                assert ink["texts"] and ink["lines"], (doc, name, moved)
                faults += [f"{doc} {name} {moved}: {f}" for f in charts.ink_faults(ink, grid=grid)]
    assert faults == []


def test_the_light_chart_on_the_dark_page_fails_the_check(browser, chapter_charts):
    """The check can fail: the declared (light) charts on the dark page, as the issue saw them."""
    with charts.chart_page(browser) as draw:
        for doc, name, moved, chart in chapter_charts[:: max(1, len(chapter_charts) // 6)]:
            ink = draw(chart, charts.PHONE_WIDTH, 360, BACKGROUNDS["dark"])
            assert charts.ink_faults(ink), (doc, name, moved)


# ----------------------------------------------------------------------------- the built book, in Chromium
@pytest.fixture(scope="module")
def served(built, browser):
    # a second browser on the first one's Playwright driver (the sync API allows one per thread)
    with chromium.launch(loopback=True, beside=browser) as b, chromium.serve(built.html) as origin:
        yield b, origin


def _ink(tab, index: int) -> dict:
    tab.wait_for_timeout(1200)  # the chart's entry animation (≈ 1 s) has ended
    return tab.locator(".bl-live-chart").nth(index).evaluate(chromium.script("chart_ink", charts.TESTS_JS))


@pytest.mark.slow
@pytest.mark.parametrize("doc", charts.LIVE_DOCS)
def test_a_dark_phone_draws_every_explorer_dark(served, doc):
    b, origin = served
    context = chromium.served_context(b, origin, [], viewport=layout.VIEWPORTS["390"])
    try:
        tab = context.new_page()
        tab.emulate_media(color_scheme="dark")  # the phone's setting; the theme's "auto" mode follows it
        tab.goto(f"{origin}/book/{doc}.html", wait_until="load")
        assert tab.evaluate("document.documentElement.dataset.theme") == "dark"
        names = live_page.explorer_names(tab)
        for i, name in enumerate(names):
            live_page.make_live(tab, i)
            chart = tab.locator(".bl-live-chart").nth(i)
            assert chart.get_attribute("data-scheme") == "dark", (doc, name)
            ink = _ink(tab, i)
            assert contrast(charts.rgb(ink["background"]), "#ffffff") > 10, ink["background"]  # a dark page
            assert ink["texts"] and charts.ink_faults(ink, grid=DARK_INK["grid"]) == [], (doc, name)
            words = tab.locator(".bl-live-summary").nth(i).evaluate(chromium.script("coloured_words", charts.TESTS_JS))
            low = [w for w in words if contrast(charts.rgb(w["color"]), charts.rgb(ink["background"])) < 4.5]
            assert low == [], (doc, name)
        # the reader switches the theme to light: the theme's choice wins over the phone's setting
        tab.evaluate("document.documentElement.dataset.theme = 'light'")
        for i, name in enumerate(names):
            tab.wait_for_function(chromium.script("chart_scheme", charts.TESTS_JS), arg=[i, "light"], timeout=10_000)
            ink = _ink(tab, i)
            assert charts.rgb(ink["background"]) == (1.0, 1.0, 1.0), ink["background"]
            assert charts.ink_faults(ink, grid=charts.ECHARTS_GRID) == [], (doc, name)
    finally:
        context.close()


def mean_luminance(png: bytes) -> float:
    """The average relative luminance of a screenshot's pixels."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        grey = image.convert("L").resize((64, 64))
        return sum(colours.luminance((v / 255,) * 3) for v in grey.tobytes()) / (64 * 64)


@contextlib.contextmanager
def _dark_tab(served, width: str, doc: str):
    """A tab on ``doc`` at ``width`` px, the phone or desk set to its dark scheme (the theme follows it)."""
    b, origin = served
    context = chromium.served_context(b, origin, [], viewport=layout.VIEWPORTS[width])
    try:
        tab = context.new_page()
        tab.emulate_media(color_scheme="dark")
        tab.goto(f"{origin}/{doc}.html", wait_until="load")
        yield tab
    finally:
        context.close()


@pytest.mark.slow
@pytest.mark.parametrize("width", ["390", "1280"])
def test_a_static_figure_does_not_glare_on_the_dark_page(served, width):
    with _dark_tab(served, width, "book/4.4-efficiency") as tab:
        figure = tab.locator(".cell_output figure img").first
        figure.evaluate(chromium.script("scroll_into_view"))
        dark = mean_luminance(figure.screenshot())
        tab.evaluate("document.documentElement.dataset.theme = 'light'")
        light = mean_luminance(figure.screenshot())
        assert dark < 0.2 and light > 0.6, (dark, light)  # a dark sheet on the dark page; white on the light one


def _output_faults(tab) -> tuple[list, int]:
    cells = tab.evaluate(chromium.script("output_ink", charts.TESTS_JS))
    faults = [c for c in cells if contrast(charts.rgb(c["color"]), charts.rgb(c["background"])) < 4.5
              or contrast(charts.rgb(c["background"]), "#ffffff") < 10]  # dark text, or a glaring light box
    return faults, len(cells)


@pytest.mark.slow
@pytest.mark.parametrize("width", ["390", "1280"])
def test_result_tables_and_verdict_cards_read_on_the_dark_page(served, width):
    """The book's own outputs (result tables with their fixed first column on a phone, verdict cards) sit on
    the dark page with light text, in a chapter with both; the theme's light box for HTML outputs, put back,
    fails the same check."""
    with _dark_tab(served, width, "book/4.2-convergence") as tab:
        faults, cells = _output_faults(tab)
        assert cells > 20 and faults == [], faults[:5]
        tab.add_style_tag(content="html[data-theme=dark] .bd-content div.cell_output .output.text_html.text_html"
                                  "{background-color: var(--pst-color-text-base) !important;"
                                  " color: var(--pst-color-on-background) !important}")
        assert len(_output_faults(tab)[0]) > cells // 2
