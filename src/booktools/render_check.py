"""Load built book pages in headless Chromium, OFFLINE, and report what rendered.

    .venv/bin/python -m booktools.render_check _build/html/book/4.1-definition.html [more pages ...] \
        [--screenshots DIR] [--width 1280|390 ...] [--chromium PATH]

The browser comes from `booktools.browser.launch()`, the project's one way of launching Chromium
(Playwright on the Debian browser, the network off twice over: see that module); the HTML tests use
`check_page()` from here.  A page that still shows its widgets and formulas loads everything from
the book.

Per page the report holds: console errors and uncaught page errors (minus KNOWN_NOISE, each entry
explained below), requests that tried to leave the machine, local files that failed to load, every
`<img>` (loaded and decoded?), each frozen explorer (`booktools.frozen` writes them as HTML at build
time: its controls, inert, its default figures decoded, its text; no page loads a widget manager), math (`.math` nodes vs MathJax containers and errors), the page's layout at
that width (`booktools.layout`: overflow, equations, code line length, spaces between Chinese
characters; reported in `layout`), its tables (`booktools.tables_check`: characters per rendered line,
words and commands kept whole, columns on the screen; reported in `tables`; both judged by the tests, not
by `problems()`), and a full-page screenshot (its first SCREENSHOT_MAX_PX of height on a longer page).

Prints one JSON report per page; exit status 0 ok, 1 a page has problems, 2 Chromium missing.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from booktools import layout, tables_check
from booktools.browser import DEFAULT_CHROMIUM, LOCAL_SCHEMES, VIEWPORT, launch, offline_context, script
from booktools.toc import WIDGET_STATE, WIDGET_VIEW

# Console/page errors that are understood and do not change what a reader sees.  Each entry is
# (regex, why).  Anything else is a failure.  Remove an entry when its cause is fixed.
KNOWN_NOISE: list[tuple[re.Pattern, str]] = [
    # none left: sphinx-thebe's `const THEBE_JS_URL` written twice and pydata's "Got invalid theme mode" are
    # fixed where they came from (booktools.sphinxext: one_script_each, theme_options; issue 29)
]
SCREENSHOT_MAX_PX = 40_000
"""The tallest screenshot taken, in CSS pixels (the longest chapter is ~31,000 at 390 px). The API page runs to
~145,000 at 1280: Chromium held over 4 GiB for that one picture (186 M pixels, past PIL's decompression-bomb
guard), and a picture that tall shows a reader nothing."""


@dataclass
class PageReport:
    """What one page did in the browser (see the module docstring)."""
    url: str
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    noise: list[str] = field(default_factory=list)          # matched KNOWN_NOISE
    blocked: list[str] = field(default_factory=list)        # tried to leave the machine
    missing: list[str] = field(default_factory=list)        # local files that failed to load
    cancelled: list[str] = field(default_factory=list)      # fetches of files that exist, cancelled by the browser
    broken_images: list[str] = field(default_factory=list)
    images: int = 0
    frozen: list[dict] = field(default_factory=list)        # each frozen explorer (js/frozen_read.js)
    math_nodes: int = 0
    math_unrendered: int = 0
    mathjax: int = 0
    mathjax_errors: int = 0
    fa5_elements: int = 0
    screenshot: str | None = None
    layout: layout.LayoutReport | None = None
    tables: tables_check.TablesReport | None = None

    def problems(self) -> list[str]:
        """Every failed check, in Chinese, naming the value (empty: the page is fine)."""
        out = [f"控制台错误：{m}" for m in self.console_errors]
        out += [f"页面脚本错误：{m}" for m in self.page_errors]
        out += [f"试图访问网络（已拦截）：{u}" for u in self.blocked]
        out += [f"本地文件加载失败：{u}" for u in self.missing]
        out += [f"图片未加载或无法解码：{u}" for u in self.broken_images]
        if self.fa5_elements:
            out.append(f"{self.fa5_elements} 个元素使用未随书提供的 Font Awesome 5 字体（图标会显示为空白）")
        for i, view in enumerate(self.frozen):
            where = f"第 {i + 1} 个探索器（冻结视图）"
            if not view["controls"]:
                out.append(f"{where}没有显示任何控件")
            if not view["inert"]:
                out.append(f"{where}的控件可以操作，却不会重新计算")
            if view["images_shown"] < view["images"]:
                out.append(f"{where}只显示了 {view['images_shown']} 张默认图，HTML 中有 {view['images']} 张")
            if not view["text"]:
                out.append(f"{where}没有显示默认输出文字")
            if view["raw_latex"]:
                out.append(f"{where}的文字里有未排版的 LaTeX：{view['raw_latex']}")
        if self.math_unrendered:
            out.append(f"{self.math_nodes} 个公式中有 {self.math_unrendered} 个没有被 MathJax 渲染")
        if self.mathjax_errors:
            out.append(f"MathJax 报告 {self.mathjax_errors} 个公式错误（mjx-merror）")
        return out


def expected_frozen(state: dict, model_id: str) -> dict:
    """What the frozen view of the saved widget ``model_id`` must show: its controls (the models reachable
    through ``children`` that have a description and a value or options) and its figures (PNGs saved in
    Output widgets), read from the notebook's saved widget ``state``."""
    controls = images = 0
    todo, seen = [model_id], set()
    while todo:
        mid = todo.pop()
        if mid in seen or mid not in state:
            continue
        seen.add(mid)
        s = state[mid].get("state", {})
        todo += [str(child).removeprefix("IPY_MODEL_") for child in s.get("children", []) or []]
        images += sum("image/png" in o.get("data", {}) for o in s.get("outputs", []) or [])
        controls += bool(s.get("description")) and ("value" in s or "_options_labels" in s) and \
            state[mid].get("model_name") not in ("HTMLModel", "HTMLMathModel", "LabelModel")
    return {"controls": controls, "images": images}


def cancelled_fetch(url: str, failure: str | None) -> bool:
    """Did the browser cancel (net::ERR_ABORTED) a fetch of a local file that exists? That is not a missing
    file: Chromium may start fetching a ``<picture>``'s phone source and drop it once the layout picks the
    desk one (seen once, at 1280 px, on a loaded machine). A file that is not there fails otherwise
    (net::ERR_FILE_NOT_FOUND) and stays a fault."""
    if not url.startswith("file:") or "ERR_ABORTED" not in (failure or ""):
        return False
    from urllib.parse import unquote, urlparse
    return Path(unquote(urlparse(url).path)).is_file()


def is_noise(message: str) -> bool:
    """Does ``message`` match KNOWN_NOISE (a known, explained error that is not the page's fault)?"""
    return any(rx.search(message) for rx, _why in KNOWN_NOISE)


def check_page(browser, page: str | Path, screenshot: str | Path | None = None,
               query: str = "", timeout_ms: int = 20_000, viewport: dict | None = None) -> PageReport:
    """Open `page` (a built .html file, `query` appended to its URL) in a fresh context of
    `browser` (`viewport`, default browser.VIEWPORT) with the network blocked, wait for MathJax and
    widgets, measure (the layout too: `rep.layout`), screenshot."""
    path = Path(page).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"页面不存在：{path}")
    url = path.as_uri() + query
    rep = PageReport(url=url)
    missing_urls: list[str] = []
    context = offline_context(browser, rep.blocked, viewport)
    try:
        tab = context.new_page()

        def on_console(msg) -> None:
            if msg.type != "error":
                return
            text = msg.text
            # "Failed to load resource" names no URL in its text; requestfailed below does.
            if text.startswith("Failed to load resource"):
                return
            (rep.noise if is_noise(text) else rep.console_errors).append(text)

        def on_failed(req) -> None:
            u = req.url
            if not u.startswith(LOCAL_SCHEMES) or u in rep.blocked:
                return  # blocked requests are reported as such
            (rep.cancelled if cancelled_fetch(u, req.failure) else missing_urls).append(f"{u} ({req.failure})")

        def on_pageerror(err) -> None:
            text = str(err.message if hasattr(err, "message") else err)
            (rep.noise if is_noise(text) else rep.page_errors).append(text)

        tab.on("console", on_console)
        tab.on("requestfailed", on_failed)
        tab.on("pageerror", on_pageerror)
        tab.goto(url, wait_until="load", timeout=timeout_ms)
        m = tab.evaluate(script("await_render"), [WIDGET_VIEW, WIDGET_STATE, timeout_ms])
        rep.missing = missing_urls
        rep.images = len(m["images"])
        rep.broken_images = [src for src, ok in m["images"] if not ok]
        rep.frozen = tab.evaluate(script("frozen_read"))
        rep.math_nodes, rep.math_unrendered = m["math"], m["math_unrendered"]
        rep.mathjax, rep.mathjax_errors = m["mathjax"], m["mathjax_errors"]
        rep.fa5_elements = m["fa5"]
        rep.layout = layout.measure(tab, (viewport or VIEWPORT)["width"])
        rep.tables = tables_check.measure(tab, (viewport or VIEWPORT)["width"])
        if screenshot is not None:
            png = Path(screenshot)
            png.parent.mkdir(parents=True, exist_ok=True)
            # written beside and renamed into place: test workers that each render the book write the
            # same files, and one deleting its old shot must not leave another's check without one
            partial = png.with_name(f".{png.stem}.{os.getpid()}.png")
            height = tab.evaluate("document.documentElement.scrollHeight")
            clip = None if height <= SCREENSHOT_MAX_PX else {
                "x": 0, "y": 0, "width": (viewport or VIEWPORT)["width"], "height": SCREENSHOT_MAX_PX}
            tab.screenshot(path=str(partial), full_page=True, clip=clip)
            os.replace(partial, png)
            rep.screenshot = str(png)
    finally:
        context.close()
    return rep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m booktools.render_check",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="+", help="built HTML pages, e.g. _build/html/book/4.1-definition.html")
    ap.add_argument("--screenshots", help="write a full-page PNG of each page into this folder")
    ap.add_argument("--width", action="append", choices=sorted(layout.VIEWPORTS),
                    help="viewport width (repeat for several; default 1280); the layout is measured at each")
    ap.add_argument("--chromium", help=f"browser binary (default {DEFAULT_CHROMIUM})")
    args = ap.parse_args(argv)
    bad = 0
    try:
        with launch(args.chromium) as browser:
            for page in args.pages:
                for width in args.width or ["1280"]:
                    png = (Path(args.screenshots) / f"{Path(page).stem}-{width}.png"
                           if args.screenshots else None)
                    rep = check_page(browser, page, png, viewport=layout.VIEWPORTS[width])
                    problems = rep.problems() + rep.layout.problems() + rep.tables.problems()
                    bad += bool(problems)
                    print(json.dumps({**asdict(rep), "problems": problems}, ensure_ascii=False))
    except FileNotFoundError as exc:
        print(f"render_check: {exc}", file=sys.stderr)
        return 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
