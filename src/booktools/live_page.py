"""Driving the live explorers of a served page in Playwright, as a reader would: scroll to one, wait
until Pyodide has made it live, move a control, read the summary and the chart. The test
(tests/test_live_explorers.py) and the speed report (benchmarks/bench.py) share these steps.

Explorers are numbered in page order (0, 1, …); a control is the record its explorer declared
(:meth:`batchlab.page.spec.Control.as_record`).
"""
from __future__ import annotations

from booktools.browser import script

READY_TIMEOUT_MS = 120_000
UPDATE_TIMEOUT_MS = 20_000


def _box(tab, index: int):
    return tab.locator(".bl-live").nth(index)


def explorer_names(tab) -> list[str]:
    """The explorers of the loaded page, in order, once the widget manager has drawn their markers."""
    tab.wait_for_selector(".bl-live", state="attached", timeout=60_000)
    return tab.eval_on_selector_all(".bl-live", "els => els.map(e => e.dataset.explorer)")


def make_live(tab, index: int) -> float:
    """Scroll explorer ``index`` into view and wait until it is live; its start time in ms (first touch to
    live, as the page measured it)."""
    status = tab.locator(".bl-live-status").nth(index)
    status.evaluate(script("scroll_into_view"))
    tab.wait_for_function(script("live_settled"), arg=index, timeout=READY_TIMEOUT_MS)
    box = _box(tab, index)
    if box.get_attribute("data-state") != "ready":
        raise AssertionError(f"explorer {index} failed to start: {status.inner_text()}")
    return float(box.get_attribute("data-ready-ms"))


def read(tab, index: int) -> dict:
    """What explorer ``index`` shows: its summary as text, its chart's SVG, how many updates it ran, the
    last update's duration (ms) and each control's value as the page shows it."""
    return _box(tab, index).evaluate(script("live_read"))


def set_control(tab, index: int, control: dict, value) -> None:
    """Move ``control`` of explorer ``index`` to ``value`` (a value of its options for a choice) and wait
    for the page's recomputation."""
    box = _box(tab, index)
    before = read(tab, index)["updates"]
    row = box.locator(f'.bl-live-control[data-name="{control["name"]}"]')
    kind = control["kind"]
    if kind in ("int", "float"):
        field = row.locator("input")
        field.fill(str(value))
        field.dispatch_event("change")
    elif kind in ("slider", "steps"):
        position = value if kind == "slider" else [v for _, v in control["options"]].index(value)
        row.locator("input").evaluate(script("set_range"), position)
    elif kind == "choice":
        row.locator("select").select_option(str([v for _, v in control["options"]].index(value)))
    else:
        label = next(label for label, v in control["options"] if v == value)
        row.get_by_role("radio", name=label, exact=True).click()
    tab.wait_for_function(script("live_updated"), arg=[index, before], timeout=UPDATE_TIMEOUT_MS)
