#!/usr/bin/env python3
"""Load built book pages in headless Chromium, OFFLINE, and report what rendered.

    python scripts/render_check.py _build/html/book/4.1-definition.html [more pages ...] \
        [--screenshots DIR] [--chromium PATH]

The project's one way of launching Chromium (the HTML tests use `launch()` and `check_page()`
from here).  Playwright drives the Debian browser (/usr/bin/chromium; never `playwright install`).
The network is off twice over: every request that is not a `file://` (or inline `data:`/`blob:`)
URL is aborted and recorded by a Playwright route, and Chromium itself sends anything left to a
proxy at 127.0.0.1:9 (the discard port, nothing listens; `<-loopback>` removes the implicit
loopback bypass).  A page that still shows its widgets and formulas loads everything from the book.

Per page the report holds: console errors and uncaught page errors (minus KNOWN_NOISE, each entry
explained below), requests that tried to leave the machine, local files that failed to load, every
`<img>` (loaded and decoded?), each widget output area (controls and images rendered against the
embedded widget state), math (`.math` nodes vs MathJax containers and errors), and a full-page
screenshot.  `cjk_glyphs()` checks in a screenshot that Chinese text is drawn with real glyphs.

Prints one JSON report per page; exit status 0 ok, 1 a page has problems, 2 Chromium missing.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

DEFAULT_CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps trying to reach Google's services.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
]
# network off: what the route does not catch goes to a dead proxy, loopback included
OFFLINE_ARGS = ["--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
VIEWPORT = {"width": 1280, "height": 900}
LOCAL_SCHEMES = ("file:", "data:", "blob:")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

# Console/page errors that are understood and do not change what a reader sees.  Each entry is
# (regex, why).  Anything else is a failure.  Remove an entry when its cause is fixed.
KNOWN_NOISE: list[tuple[re.Pattern, str]] = [
    (re.compile(r"^Identifier 'THEBE_JS_URL' has already been declared$"),
     "Jupyter Book 1 writes sphinx-thebe's inline config <script> twice into every page; the second, "
     "identical `const` declaration throws. Thebe (live code) is not enabled in this book."),
    (re.compile(r"^Got invalid theme mode: \. Resetting to auto\.$"),
     "pydata-sphinx-theme on a first visit (empty localStorage, no default mode in the page): it logs "
     "this and uses the auto theme, the default anyway. sphinx-book-theme rejects the `default_mode` "
     "option that would set one (tried: 'unsupported theme option', and -W fails the build)."),
]
# The widget manager's bundled CSS declares Font Awesome 5 faces relative to where require.js
# believes embed-amd.js lives (<page dir>/@jupyter-widgets/html-manager/dist/); they are not
# vendored. The browser requests them, gets file-not-found, and nothing visible uses them: the book's
# widgets have no icons, and check_page() counts elements drawn in a Font Awesome 5 face
# (`fa5_elements`) so an icon that would show as a blank square fails the check.
KNOWN_MISSING = re.compile(r"/@jupyter-widgets/html-manager/dist/[0-9a-f]{20}\.(?:woff2?|ttf|eot|svg)$")


def find_chromium(explicit: str | None = None) -> str | None:
    """The browser to use: `explicit` if given (no fallback), else $CHROMIUM,
    /usr/bin/chromium, then `chromium`/`chromium-browser` on PATH."""
    cands = [explicit] if explicit else [
        os.environ.get("CHROMIUM"), DEFAULT_CHROMIUM,
        shutil.which("chromium"), shutil.which("chromium-browser")]
    for cand in cands:
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    return None


@contextmanager
def launch(chromium: str | None = None, env: dict[str, str] | None = None,
           offline: bool = True, beside=None) -> Iterator:
    """A Playwright Browser on Debian's Chromium with CHROMIUM_ARGS (and OFFLINE_ARGS unless
    `offline=False`, e.g. for a page served from localhost).

    `env` replaces the browser's environment (e.g. a FONTCONFIG_FILE for a font-less check).
    `beside`: an open Browser whose Playwright driver to reuse (the sync API allows one per thread)."""
    exe = find_chromium(chromium)
    if exe is None:
        raise FileNotFoundError(
            f"找不到 Chromium（查找了 {chromium or DEFAULT_CHROMIUM + '、$CHROMIUM、PATH'}）；"
            "请安装 Debian 软件包 chromium")
    options = dict(executable_path=exe, headless=True, env=env,
                   args=CHROMIUM_ARGS + (OFFLINE_ARGS if offline else []))
    if beside is not None:
        browser = beside.browser_type.launch(**options)
        try:
            yield browser
        finally:
            browser.close()
        return
    from playwright.sync_api import sync_playwright  # imported here: the CLI's --help needs no browser

    with sync_playwright() as p:
        browser = p.chromium.launch(**options)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class PageReport:
    """What one page did in the browser (see the module docstring)."""
    url: str
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    noise: list[str] = field(default_factory=list)          # matched KNOWN_NOISE / KNOWN_MISSING
    blocked: list[str] = field(default_factory=list)        # tried to leave the machine
    missing: list[str] = field(default_factory=list)        # local files that failed to load
    broken_images: list[str] = field(default_factory=list)
    images: int = 0
    widget_areas: list[dict] = field(default_factory=list)
    math_nodes: int = 0
    math_unrendered: int = 0
    mathjax: int = 0
    mathjax_errors: int = 0
    fa5_elements: int = 0
    screenshot: str | None = None

    def problems(self) -> list[str]:
        """Every failed check, in Chinese, naming the value (empty: the page is fine)."""
        out = [f"控制台错误：{m}" for m in self.console_errors]
        out += [f"页面脚本错误：{m}" for m in self.page_errors]
        out += [f"试图访问网络（已拦截）：{u}" for u in self.blocked]
        out += [f"本地文件加载失败：{u}" for u in self.missing]
        out += [f"图片未加载或无法解码：{u}" for u in self.broken_images]
        if self.fa5_elements:
            out.append(f"{self.fa5_elements} 个元素使用未随书提供的 Font Awesome 5 字体（图标会显示为空白）")
        for i, area in enumerate(self.widget_areas):
            where = f"第 {i + 1} 个交互控件区"
            if not area["views"]:
                out.append(f"{where}是空白：一个控件也没有渲染")
            if area["errors"]:
                out.append(f"{where}显示 “Error displaying widget”")
            if area["views"] < area["expected_views"]:
                out.append(f"{where}只渲染了 {area['views']} 个控件，组件状态中有 {area['expected_views']} 个")
            if area["images"] < area["expected_images"]:
                out.append(f"{where}只显示了 {area['images']} 张默认输出图，组件状态中有 {area['expected_images']} 张")
            if area["expected_text"] and not area["text"]:
                out.append(f"{where}没有显示默认输出文字")
            if area["raw_latex"]:
                out.append(f"{where}的说明文字里有未排版的 LaTeX：{area['raw_latex']}")
        if self.math_unrendered:
            out.append(f"{self.math_nodes} 个公式中有 {self.math_unrendered} 个没有被 MathJax 渲染")
        if self.mathjax_errors:
            out.append(f"MathJax 报告 {self.mathjax_errors} 个公式错误（mjx-merror）")
        return out


def _expected_widgets(state: dict, model_id: str) -> tuple[int, int, bool]:
    """(views, PNG outputs, has text output) that the view `model_id` should render: the model and
    every model reachable through `children`, with the PNGs/text saved in Output widgets' state."""
    views = images = 0
    text = False
    todo, seen = [model_id], set()
    while todo:
        mid = todo.pop()
        if mid in seen or mid not in state:
            continue
        seen.add(mid)
        s = state[mid].get("state", {})
        views += 1
        for child in s.get("children", []) or []:
            todo.append(str(child).removeprefix("IPY_MODEL_"))
        for o in s.get("outputs", []) or []:
            data = o.get("data", {})
            images += "image/png" in data
            text = text or bool(o.get("text") or data.get("text/html") or
                                (data.get("text/plain") and "image/png" not in data))
        if state[mid].get("model_name") in ("HTMLModel", "LabelModel", "HTMLMathModel") and s.get("value"):
            text = True
    return views, images, text


# Runs in the page once it has loaded: waits for MathJax and the widget manager, then measures.
_MEASURE_JS = r"""
async ([viewType, stateType, timeoutMs]) => {
  const deadline = performance.now() + timeoutMs;
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await Promise.race([MathJax.startup.promise, sleep(timeoutMs)]);
  }
  const views = [...document.querySelectorAll(`script[type="${viewType}"]`)];
  const area = s => s.previousElementSibling && s.previousElementSibling.classList.contains('widget-subarea')
                    ? s.previousElementSibling : null;
  // the HTML manager inserts a .widget-subarea before each view script and renders into it
  while (performance.now() < deadline &&
         views.some(s => !area(s) || !area(s).querySelector('.lm-Widget'))) {
    await sleep(50);
  }
  await Promise.all([...document.images].map(img => img.complete ? null :
      new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r); })));
  await document.fonts.ready;
  const isFa5 = el => [null, '::before', '::after'].some(p => {
    const cs = getComputedStyle(el, p);
    return /Font Awesome 5/.test(cs.fontFamily) &&
           (p === null ? el.textContent.trim() !== '' : !['none', 'normal'].includes(cs.content));
  });
  const state = document.querySelector(`script[type="${stateType}"]`);
  return {
    views: views.map(s => {
      const a = area(s);
      return {
        model_id: JSON.parse(s.textContent).model_id,
        // every widget view is a Lumino widget; an Output widget's own output area is one too
        views: a ? [...a.querySelectorAll('.lm-Widget')].filter(e => !e.parentElement.closest('.widget-output')).length : 0,
        errors: a ? (a.textContent.match(/Error displaying widget/g) || []).length : 0,
        images: a ? [...a.querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0).length : 0,
        text: a ? [...a.querySelectorAll('.widget-output, .widget-html, .widget-label, .widget-htmlmath')]
                   .some(e => e.innerText.trim() !== '') : false,
        // LaTeX left as source in labels, HTML and buttons (ipywidgets typesets them through
        // MathJax.Hub.Queue, which book/_js/mathjax2-hub.js forwards to MathJax 3)
        raw_latex: a ? [...a.querySelectorAll('.widget-label, .widget-html, .widget-htmlmath, button')]
                   .map(e => e.innerText).filter(t => /\$[^$\n]+\$|\\\(|\\\[/.test(t)) : [],
      };
    }),
    state: state ? JSON.parse(state.textContent).state : {},
    images: [...document.images].map(i => [i.currentSrc || i.src, i.complete && i.naturalWidth > 0]),
    math: document.querySelectorAll('.math').length,
    math_unrendered: [...document.querySelectorAll('.math')].filter(m => !m.querySelector('mjx-container')).length,
    mathjax: document.querySelectorAll('mjx-container').length,
    mathjax_errors: document.querySelectorAll('mjx-merror').length,
    fa5: [...document.querySelectorAll('body *')].filter(isFa5).length,
  };
}
"""


def _offline_context(browser, blocked: list[str] | None = None):
    """A fresh browser context whose every non-local request is aborted (and appended to `blocked`)."""
    context = browser.new_context(viewport=VIEWPORT)

    def route(r) -> None:
        url = r.request.url
        if url.startswith(LOCAL_SCHEMES):
            r.continue_()
            return
        if blocked is not None:
            blocked.append(url)
        r.abort()

    context.route("**/*", route)
    return context


def _is_noise(message: str) -> bool:
    return any(rx.search(message) for rx, _why in KNOWN_NOISE)


def check_page(browser, page: str | Path, screenshot: str | Path | None = None,
               query: str = "", timeout_ms: int = 20_000) -> PageReport:
    """Open `page` (a built .html file, `query` appended to its URL) in a fresh context of
    `browser` with the network blocked, wait for MathJax and widgets, measure, screenshot."""
    path = Path(page).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"页面不存在：{path}")
    url = path.as_uri() + query
    rep = PageReport(url=url)
    missing_urls: list[str] = []
    context = _offline_context(browser, rep.blocked)
    try:
        tab = context.new_page()

        def on_console(msg) -> None:
            if msg.type != "error":
                return
            text = msg.text
            # "Failed to load resource" names no URL in its text; requestfailed below does.
            if text.startswith("Failed to load resource"):
                return
            (rep.noise if _is_noise(text) else rep.console_errors).append(text)

        def on_failed(req) -> None:
            u = req.url
            if not u.startswith(LOCAL_SCHEMES) or u in rep.blocked:
                return  # blocked requests are reported as such
            if KNOWN_MISSING.search(u):
                rep.noise.append(f"{u} ({req.failure})")
            else:
                missing_urls.append(f"{u} ({req.failure})")

        def on_pageerror(err) -> None:
            text = str(err.message if hasattr(err, "message") else err)
            (rep.noise if _is_noise(text) else rep.page_errors).append(text)

        tab.on("console", on_console)
        tab.on("requestfailed", on_failed)
        tab.on("pageerror", on_pageerror)
        tab.goto(url, wait_until="load", timeout=timeout_ms)
        m = tab.evaluate(_MEASURE_JS, [WIDGET_VIEW, WIDGET_STATE, timeout_ms])
        rep.missing = missing_urls
        rep.images = len(m["images"])
        rep.broken_images = [src for src, ok in m["images"] if not ok]
        for v in m["views"]:
            exp_views, exp_images, exp_text = _expected_widgets(m["state"], v["model_id"])
            rep.widget_areas.append({**v, "expected_views": exp_views, "expected_images": exp_images,
                                     "expected_text": exp_text})
        rep.math_nodes, rep.math_unrendered = m["math"], m["math_unrendered"]
        rep.mathjax, rep.mathjax_errors = m["mathjax"], m["mathjax_errors"]
        rep.fa5_elements = m["fa5"]
        if screenshot is not None:
            png = Path(screenshot)
            png.parent.mkdir(parents=True, exist_ok=True)
            png.unlink(missing_ok=True)
            tab.screenshot(path=str(png), full_page=True)
            rep.screenshot = str(png)
    finally:
        context.close()
    return rep


# ----------------------------------------------------------------------------- Chinese glyphs
TOFU_PROBES = "\ue000\ue001"  # private-use code points: no font has them, so both draw as .notdef
_GLYPH_JS = """
([chars, family]) => {
  const box = document.createElement('div');
  box.id = 'cjk-glyph-probe';
  box.style.cssText = 'position:fixed;left:0;top:0;z-index:2147483647;background:#fff;color:#000;' +
                      'padding:8px;display:flex;gap:8px;font-size:48px;line-height:1';
  box.style.fontFamily = family || getComputedStyle(document.body).fontFamily;
  for (const ch of chars) {
    const cell = document.createElement('span');
    cell.textContent = ch;
    cell.style.cssText = 'display:inline-block;width:64px;height:64px;text-align:center';
    box.appendChild(cell);
  }
  document.body.appendChild(box);
  return box.style.fontFamily;
}
"""


def cjk_glyphs(browser, page: str | Path, chars: str, family: str | None = None) -> dict:
    """Draw `chars` (distinct Chinese characters) and two private-use code points (`TOFU_PROBES`:
    the missing-glyph box) on `page` in the body's font (or `family`), screenshot each cell and
    compare pixels. Real glyphs carry ink and differ from each other and from the missing-glyph box;
    tofu boxes are identical to it.

    Returns {"family", "tofu_probe_identical", "blank": [..], "tofu": [..], "duplicates": [[a, b]..]}:
    Chinese text renders when `blank`, `tofu` and `duplicates` are all empty (`tofu_probe_identical`
    confirms the reference box really is a missing glyph)."""
    from PIL import Image, ImageChops

    context = _offline_context(browser)
    try:
        tab = context.new_page()
        tab.goto(Path(page).resolve().as_uri(), wait_until="load")
        used = tab.evaluate(_GLYPH_JS, [chars + TOFU_PROBES, family])
        tab.evaluate("document.fonts.ready")
        cells = tab.locator("#cjk-glyph-probe > span")
        crops = [Image.open(io.BytesIO(cells.nth(i).screenshot())).convert("L")
                 for i in range(cells.count())]
    finally:
        context.close()

    def same(a, b) -> bool:
        return ImageChops.difference(a, b).getbbox() is None

    def inked(img) -> bool:
        return img.point(lambda v: 255 if v < 128 else 0).getbbox() is not None

    *glyphs, tofu_a, tofu_b = crops
    return {
        "family": used,
        "tofu_probe_identical": same(tofu_a, tofu_b),
        "blank": [c for c, g in zip(chars, glyphs) if not inked(g)],
        "tofu": [c for c, g in zip(chars, glyphs) if same(g, tofu_a)],
        "duplicates": [[chars[i], chars[j]] for i in range(len(chars)) for j in range(i + 1, len(chars))
                       if same(glyphs[i], glyphs[j])],
    }


# ----------------------------------------------------------------------------- search
def search_results(browser, search_page: str | Path, term: str, timeout_ms: int = 20_000) -> list[str]:
    """Run the book's own search page (`search.html?q=term`, Sphinx's searchtools.js over file://,
    network blocked) and return the result links' hrefs, resolved to absolute file:// URLs."""
    from urllib.parse import quote

    context = _offline_context(browser)
    try:
        tab = context.new_page()
        tab.goto(Path(search_page).resolve().as_uri() + "?q=" + quote(term), wait_until="load")
        # searchtools.js writes a summary paragraph once the query has run
        tab.wait_for_selector("#search-results p.search-summary, #search-results .search-summary",
                              timeout=timeout_ms)
        tab.wait_for_function(
            "() => !document.querySelector('#search-results h2') || "
            "!/正在搜索|Searching/.test(document.querySelector('#search-results h2').textContent)",
            timeout=timeout_ms)
        return tab.eval_on_selector_all("#search-results ul.search li > a", "as => as.map(a => a.href)")
    finally:
        context.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="+", help="built HTML pages, e.g. _build/html/book/4.1-definition.html")
    ap.add_argument("--screenshots", help="write a full-page PNG of each page into this folder")
    ap.add_argument("--chromium", help=f"browser binary (default {DEFAULT_CHROMIUM})")
    args = ap.parse_args(argv)
    bad = 0
    try:
        with launch(args.chromium) as browser:
            for page in args.pages:
                png = Path(args.screenshots) / (Path(page).stem + ".png") if args.screenshots else None
                rep = check_page(browser, page, png)
                problems = rep.problems()
                bad += bool(problems)
                print(json.dumps({**asdict(rep), "problems": problems}, ensure_ascii=False))
    except FileNotFoundError as exc:
        print(f"render_check: {exc}", file=sys.stderr)
        return 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
