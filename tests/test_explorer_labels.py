"""Explorers on a phone (issue 42): labels never overlap, a drop-down shows its text whole, and a finger
can hit every control (WCAG 2.5.5: at least 44 × 44 px).

Without the built book: every chapter explorer's chart, at every control's extreme value (a number's
minimum and maximum, a list's first and last option, every button), drawn by the page's ECharts in
Chromium at a 390 px phone's width and a 360 px one's, at the narrowest desk chart and in the 1280 px
page's column: no two visible texts (axis names, ticks, legend, titles, bar and point labels) overlap
and none leaves the chart. The layout rules themselves (legend rows, label strides, axis tops) hold for
all inputs. In Chromium on the built book (slow): on a 390 px phone every live explorer's controls are
44 px tall (buttons 44 px wide too) and every drop-down is wide enough for its longest option.
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from batchlab.page import web
from batchlab.page.spec import NARROW_PX, PHONE_CHART_PX, axis_top, labelled, legend_rows, text_px
from booktools import browser as chromium, layout, live_page
from tests import explorer_charts as charts

TARGET_PX = 44
"""WCAG 2.5.5 (target size, AAA): a control a finger meets is at least 44 × 44 CSS pixels."""


def _widths(name: str) -> list[tuple[int, int]]:
    phone, desk = charts.HEIGHTS.get(name, charts.DEFAULT_HEIGHTS)
    return [(charts.PHONE_WIDTH, phone), (PHONE_CHART_PX, phone), (NARROW_PX + 1, desk), (charts.DESK_WIDTH, desk)]


@pytest.mark.parametrize("doc", charts.LIVE_DOCS)
def test_no_chart_label_overlaps_at_any_controls_extremes(browser, doc):
    faults, drawn = [], 0
    with charts.chart_page(browser) as draw:
        for page, name, context in charts.chapter_explorers():
            if page != doc:
                continue
            moves = charts.extremes(name, context)
            assert len(moves) >= len(web.EXPLORERS[name].from_context(json.loads(context)).controls(
                json.loads(web.start(name, context))["values"])), (doc, name, "too few extremes accepted")
            for control, value, answer in moves:
                for width, height in _widths(name):
                    ink = draw(answer["chart"], width, height)
                    drawn += 1
                    faults += [f"{name} {control}={value} @{width}px: {f}" for f in charts.overlaps(ink)]
    assert drawn and faults == []


def test_the_overlap_check_sees_the_issues_case(browser):
    """The check can fail: the trade-off chart as it was (its grid's bottom margin 72 px whatever the
    legend's rows) drew its x axis' name 微批次大小 over the wrapped legend on a phone."""
    page, name, context = next(e for e in charts.chapter_explorers() if e[1] == "tradeoff")
    chart = json.loads(web.start(name, context))["chart"]
    chart["media"][0]["option"]["grid"]["bottom"] = 72
    with charts.chart_page(browser) as draw:
        faults = charts.overlaps(draw(chart, charts.PHONE_WIDTH, 360))
    assert any("微批次大小" in f for f in faults), faults


@settings(max_examples=200, deadline=None)
@given(names=st.lists(st.text(alphabet="批大小ab1 （）", min_size=1, max_size=30), min_size=1, max_size=8),
       width=st.integers(200, 1200))
def test_a_legend_row_holds_what_the_estimate_puts_in_it(names, width):
    rows = legend_rows(names, width)
    assert 1 <= rows <= len(names)
    widths = [30 + text_px(n) for n in names]
    if sum(widths) + 10 * (len(names) - 1) <= width - 10:
        assert rows == 1
    else:
        assert rows >= 2 or len(names) == 1
    assert legend_rows(names, width / 2) >= rows  # narrower never takes fewer rows


@settings(max_examples=200, deadline=None)
@given(count=st.integers(1, 200), label=st.floats(5, 80), plot=st.floats(100, 1200), keep=st.integers(0, 199))
def test_shown_labels_never_touch_and_the_kept_one_is_shown(count, label, plot, keep):
    keep %= count
    shown = labelled(count, label, plot, keep)
    assert len(shown) == count and shown[keep]
    band = plot / count
    at = [i for i, s in enumerate(shown) if s]
    assert all((b - a) * band >= label + 4 for a, b in zip(at, at[1:]))
    if (label + 4) <= band:
        assert all(shown)  # room for every one: every one shown


@settings(max_examples=300, deadline=None)
@given(value=st.floats(1e-6, 1e12))
def test_an_axis_top_is_a_whole_number_of_round_steps_above_the_value(value):
    top, interval = axis_top(value)
    steps = top / interval
    assert top >= value * (1 - 1e-9) and abs(steps - round(steps)) < 1e-6 and 1 <= round(steps) <= 5
    assert round(interval / 10 ** math.floor(math.log10(interval)), 6) in (1, 2, 5)


def test_an_axis_with_nothing_to_show_still_has_a_top():
    assert axis_top(0.0) == (1.0, 0.2) and axis_top(float("nan")) == (1.0, 0.2)
    assert axis_top(73.6) == (80, 20) and axis_top(85) == (100, 20)  # 85 is no tick of 0, 20, …, 80


# ----------------------------------------------------------------------------- the built book, in Chromium
@pytest.fixture(scope="module")
def served(built, browser):
    with chromium.launch(loopback=True, beside=browser) as b, chromium.serve(built.html) as origin:
        yield b, origin


def target_faults(controls: list[dict]) -> list[str]:
    """Controls smaller than a finger's target, and drop-downs narrower than their longest option."""
    faults = []
    for c in controls:
        if c["height"] < TARGET_PX - 0.5 or (c["tag"] == "button" and c["width"] < TARGET_PX - 0.5):
            faults.append(f"{c['name']} {c['tag']}「{c['text']}」{c['width']:.0f}×{c['height']:.0f}")
        if c["tag"] == "select" and c["needs"] > c["has"] + 0.5:
            faults.append(f"{c['name']} 下拉框宽 {c['has']:.0f}，最长的选项要 {c['needs']:.0f}")
    return faults


def test_the_target_check_can_fail():
    assert target_faults([{"tag": "button", "name": "schedule", "text": "1F1B", "width": 60, "height": 23}])
    assert target_faults([{"tag": "select", "name": "precision", "text": "", "width": 300, "height": 44,
                           "needs": 320, "has": 270}])
    assert target_faults([{"tag": "input", "name": "m", "text": "", "width": 300, "height": 44}]) == []


@pytest.mark.slow
@pytest.mark.parametrize("doc", charts.LIVE_DOCS)
def test_every_control_is_a_fingers_target_on_a_phone(served, doc):
    b, origin = served
    context = chromium.served_context(b, origin, [], viewport=layout.VIEWPORTS["390"])
    try:
        tab = context.new_page()
        tab.goto(f"{origin}/book/{doc}.html", wait_until="load")
        frozen = tab.locator(".bl-frozen").first.evaluate(chromium.script("control_targets", charts.TESTS_JS))
        assert frozen and target_faults(frozen) == [], doc  # the frozen view, laid out as the live one
        for i, name in enumerate(live_page.explorer_names(tab)):
            live_page.make_live(tab, i)
            controls = tab.locator(".bl-live").nth(i).evaluate(chromium.script("control_targets", charts.TESTS_JS))
            assert controls and target_faults(controls) == [], (doc, name)
    finally:
        context.close()
