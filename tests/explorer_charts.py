"""What tests/test_explorer_labels.py and tests/test_page_dark.py share (a helper module, not a test module):
the chapters' own explorers, every control's extreme values, and an explorer's chart drawn by the page's
ECharts in Chromium and measured (tests/js/chart_draw.js, tests/js/chart_ink.js).

The chapters' explorers are read from the notebooks' saved widget state (the marker each explorer's notice
carries: its name and its context, the data the page sends to Python), so the charts checked are the
ones a reader's page draws, with the chapter's own job, device curve and measured gradients.
"""
from __future__ import annotations

import html
import json
import re
from contextlib import contextmanager

import pytest

from batchlab.page import web
from batchlab.page.colours import contrast
from booktools import ROOT, browser as chromium, live
from booktools.frozen import widget_state

TESTS_JS = ROOT / "tests" / "js"
ECHARTS = live.CACHE / "echarts" / "echarts.common.min.js"
LIVE_DOCS = ("4.1-definition", "4.2-convergence", "4.3-memory", "4.4-efficiency", "4.5-case-study")

PHONE_WIDTH, DESK_WIDTH = 332, 768
"""The chart's width in CSS pixels on a 390 px phone (the column less the explorer box's padding) and in
the 1280 px desk column, as measured on the built pages (book/_static/live.css lays them out)."""
HEIGHTS = {"noise": (640, 420)}
DEFAULT_HEIGHTS = (360, 380)
"""The chart's height (phone, desk) by explorer, as book/_static/live.css sets it."""

ECHARTS_GRID = "#dbdee4"
"""The grid's colour ECharts draws when a chart names none (the light charts: only the dark ones set it)."""

_MARKER = re.compile(r'data-explorer="([a-z]+)" data-context="([^"]*)"')


def chapter_explorers() -> list[tuple[str, str, str]]:
    """Every explorer of the chapters, in page order: (page, explorer name, context as JSON text)."""
    found = []
    for doc in LIVE_DOCS:
        notebook = json.loads((ROOT / "book" / f"{doc}.ipynb").read_text(encoding="utf-8"))
        seen = set()
        for model in widget_state(notebook).values():
            value = model.get("state", {}).get("value")
            if model.get("model_name") == "HTMLModel" and isinstance(value, str):
                for name, context in _MARKER.findall(value):
                    if (name, context) not in seen:
                        seen.add((name, context))
                        found.append((doc, name, html.unescape(context)))
    return found


def extremes(name: str, context: str) -> list[tuple[str, object, dict]]:
    """Each control at each end of its range (a number's minimum and maximum, a list's first and last
    option, every one of a few buttons), moved from the explorer's starting values: (what moved, to which
    value, the page's answer) for every move the explorer accepts (a refused one keeps the last chart)."""
    explorer = web.EXPLORERS[name].from_context(json.loads(context))
    start = explorer.initial_values()
    moves = []
    for control in explorer.controls(start):
        if control.kind == "buttons":
            ends = [v for _, v in control.options]
        elif control.options:
            ends = [control.options[0][1], control.options[-1][1]]
        else:
            ends = [control.minimum, control.maximum]
            if control.kind in ("int", "slider"):
                ends = [int(v) for v in ends]
        for value in ends:
            answer = json.loads(web.update(name, context, json.dumps({**start, control.name: value}), control.name))
            if answer["chart"] is not None:
                moves.append((control.name, value, answer))
    return moves


def rgb(css: str) -> tuple[float, float, float]:
    """A computed CSS colour (``rgb(18, 18, 18)`` or ``rgba(…)``) as red, green and blue in 0–1."""
    parts = [float(p) for p in re.findall(r"[\d.]+", css)[:3]]
    return tuple(p / 255 for p in parts)


def over(colour: str, alpha: float, background: str) -> tuple[float, float, float]:
    """``colour`` drawn at ``alpha`` over ``background``, as the screen shows it."""
    return tuple(alpha * c + (1 - alpha) * b for c, b in zip(rgb(colour), rgb(background)))


def ink_faults(ink: dict, text_ratio: float = 4.5, line_ratio: float = 3.0, grid: str | None = None) -> list[str]:
    """What of a measured chart (chart_ink.js) stands out too little from the page behind it: a text under
    ``text_ratio``:1, a line under ``line_ratio``:1 (the grid, of colour ``grid``, only needs to be seen:
    1.2:1, and not to glare: under 3:1)."""
    faults, back = [], ink["background"]
    for t in ink["texts"]:
        ratio = contrast(over(t["fill"], t["alpha"], back), rgb(back))
        if ratio < text_ratio:
            faults.append(f"文字「{t['text'][:20]}」{t['fill']} 对比度 {ratio:.2f}")
    for line in ink["lines"]:
        ratio = contrast(over(line["stroke"], line["alpha"], back), rgb(back))
        if grid is not None and _hex(rgb(line["stroke"])) == grid.lower():
            if not 1.2 <= ratio < 3.0:
                faults.append(f"网格线 {line['stroke']} 对比度 {ratio:.2f}（应在 1.2 到 3 之间：看得见、不刺眼）")
        elif ratio < line_ratio:
            faults.append(f"线 {line['stroke']}（宽 {line['width']}）对比度 {ratio:.2f}")
    return faults


def _hex(colour: tuple[float, float, float]) -> str:
    return "#" + "".join(f"{round(c * 255):02x}" for c in colour)


def overlaps(ink: dict, slack: float = 1.0) -> list[str]:
    """Pairs of visible texts whose boxes overlap by more than ``slack`` pixels both ways, and texts that
    reach outside the chart."""
    faults, texts = [], ink["texts"]
    for i, a in enumerate(texts):
        if a["x"] < -slack or a["y"] < -slack or a["x"] + a["width"] > ink["width"] + slack \
                or a["y"] + a["height"] > ink["height"] + slack:
            faults.append(f"「{a['text'][:24]}」出了图框")
        for b in texts[i + 1:]:
            dx = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
            if dx > slack and dy > slack:
                faults.append(f"「{a['text'][:24]}」与「{b['text'][:24]}」重叠")
    return faults


@contextmanager
def chart_page(browser):
    """A blank offline page with the page's ECharts loaded: ``draw(option, width, height, background)``
    draws a chart there and answers what it shows (chart_ink.js)."""
    if not ECHARTS.is_file():
        pytest.fail(f"没有 {ECHARTS}：先运行 python -m booktools.live vendor（scripts/setup-env.sh 会运行它）")
    context = chromium.offline_context(browser)
    try:
        tab = context.new_page()
        tab.set_content('<!doctype html><html><head><meta charset="utf-8"></head><body></body></html>')
        tab.add_script_tag(path=str(ECHARTS))

        def draw(option: dict, width: int, height: int, background: str = "#ffffff") -> dict:
            tab.evaluate(chromium.script("chart_draw", TESTS_JS), [option, width, height, background])
            return tab.locator(".bl-live-chart").evaluate(chromium.script("chart_ink", TESTS_JS))

        yield draw
    finally:
        context.close()


def sizes(name: str) -> list[tuple[str, int, int]]:
    """The chart's (where, width, height) on a phone and on a desk."""
    phone, desk = HEIGHTS.get(name, DEFAULT_HEIGHTS)
    return [("phone", PHONE_WIDTH, phone), ("desk", DESK_WIDTH, desk)]
