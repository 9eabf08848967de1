"""The project's one way of launching Chromium, and the probes that need only a browser.

Playwright drives the Debian browser (/usr/bin/chromium; never `playwright install`).  The network
is off twice over: every request that is not a `file://` (or inline `data:`/`blob:`) URL is aborted
(and can be recorded) by a Playwright route (`offline_context()`), and Chromium itself sends anything
left to a proxy at 127.0.0.1:9 (the discard port, nothing listens; `<-loopback>` removes the implicit
loopback bypass).  `booktools.render_check` checks whole pages in such a browser; `cjk_glyphs()` checks
in a screenshot that Chinese text is drawn with real glyphs, `search_results()` runs the book's search.
The HTML tests (tests/test_html.py, tests/test_live_kernel.py) use `launch()` from here.
"""
from __future__ import annotations

import functools
import io
import os
import shutil
from contextlib import contextmanager
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
JS = Path(__file__).with_name("js")
"""The JavaScript the tools run in a page: one function expression per file, src/booktools/js/<name>.js."""


@functools.cache
def script(name: str, folder: Path = JS) -> str:
    """The JavaScript of ``<folder>/<name>.js`` (default :data:`JS`), to hand to Playwright's
    ``evaluate``/``wait_for_function``: each file holds one function expression, which Playwright calls
    with the argument it is given (tests/test_js.py compiles every file)."""
    return (Path(folder) / f"{name}.js").read_text(encoding="utf-8")


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
           offline: bool = True, beside=None, loopback: bool = False) -> Iterator:
    """A Playwright Browser on Debian's Chromium with CHROMIUM_ARGS (and OFFLINE_ARGS unless
    `offline=False`, e.g. for a page served from localhost).

    `loopback`: the network stays off except for this machine's own addresses (a page served by
    `serve()`; pair it with `served_context()`, which refuses every other origin).
    `env` replaces the browser's environment (e.g. a FONTCONFIG_FILE for a font-less check).
    `beside`: an open Browser whose Playwright driver to reuse (the sync API allows one per thread)."""
    exe = find_chromium(chromium)
    if exe is None:
        raise FileNotFoundError(
            f"找不到 Chromium（查找了 {chromium or DEFAULT_CHROMIUM + '、$CHROMIUM、PATH'}）；"
            "请安装 Debian 软件包 chromium")
    options = dict(executable_path=exe, headless=True, env=env,
                   args=CHROMIUM_ARGS + (OFFLINE_ARGS[:1] if loopback else OFFLINE_ARGS if offline else []))
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


def offline_context(browser, blocked: list[str] | None = None, viewport: dict | None = None, **options):
    """A fresh browser context (`viewport`, default VIEWPORT; `options` such as has_touch=True for a phone go
    to Playwright's new_context) whose every non-local request is aborted (and appended to `blocked`)."""
    context = browser.new_context(viewport=viewport or VIEWPORT, **options)

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


@contextmanager
def serve(folder: str | Path) -> Iterator[str]:
    """Serve ``folder`` over http on a free port of 127.0.0.1 (as any static server would, e.g. GitHub
    Pages or ``python -m http.server``) while the block runs; yields the origin, ``http://127.0.0.1:<port>``."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def served_context(browser, origin: str, requested: list[str] | None = None, viewport: dict | None = None):
    """A fresh browser context that loads only from ``origin`` (and inline data): every other request is
    aborted. ``requested`` collects every URL the pages asked for, refused ones marked ``refused:``."""
    context = browser.new_context(viewport=viewport or VIEWPORT)

    def route(r) -> None:
        url = r.request.url
        allowed = url.startswith((origin + "/", "data:", "blob:"))
        if requested is not None:
            requested.append(url if allowed else "refused:" + url)
        r.continue_() if allowed else r.abort()

    context.route("**/*", route)
    return context


# ----------------------------------------------------------------------------- Chinese glyphs
TOFU_PROBES = "\ue000\ue001"  # private-use code points: no font has them, so both draw as .notdef


def cjk_glyphs(browser, page: str | Path, chars: str, family: str | None = None) -> dict:
    """Draw `chars` (distinct Chinese characters) and two private-use code points (`TOFU_PROBES`:
    the missing-glyph box) on `page` in the body's font (or `family`), screenshot each cell and
    compare pixels. Real glyphs carry ink and differ from each other and from the missing-glyph box;
    tofu boxes are identical to it.

    Returns {"family", "tofu_probe_identical", "blank": [..], "tofu": [..], "duplicates": [[a, b]..]}:
    Chinese text renders when `blank`, `tofu` and `duplicates` are all empty (`tofu_probe_identical`
    confirms the reference box really is a missing glyph)."""
    from PIL import Image, ImageChops

    context = offline_context(browser)
    try:
        tab = context.new_page()
        tab.goto(Path(page).resolve().as_uri(), wait_until="load")
        used = tab.evaluate(script("glyph_probe"), [chars + TOFU_PROBES, family])
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
    return search_many(browser, search_page, [term], timeout_ms)[term]


def search_many(browser, search_page: str | Path, terms: list[str],
                timeout_ms: int = 20_000) -> dict[str, list[str]]:
    """`search_results` for each of `terms`, in one tab (the search page loaded afresh for each term, as a
    reader's query loads it): {term: result hrefs}."""
    from urllib.parse import quote

    context = offline_context(browser)
    found = {}
    try:
        tab = context.new_page()
        for term in terms:
            tab.goto(Path(search_page).resolve().as_uri() + "?q=" + quote(term), wait_until="load")
            # searchtools.js writes a summary paragraph once the query has run
            tab.wait_for_selector("#search-results p.search-summary, #search-results .search-summary",
                                  timeout=timeout_ms)
            tab.wait_for_function(script("search_done"), timeout=timeout_ms)
            found[term] = tab.eval_on_selector_all("#search-results ul.search li > a",
                                                   "as => as.map(a => a.href)")
    finally:
        context.close()
    return found


def refuse_stylesheet(context, name: str) -> None:
    """Serve every page of ``context`` its stylesheet without the part that came from ``name`` (``page.css``;
    booktools.fast_pages merges a page's sheets into one): the page as it looks without that file."""
    import urllib.parse

    from booktools.fast_pages import without_sheet

    def handle(route) -> None:
        url = urllib.parse.urlparse(route.request.url)
        if url.scheme == "file":
            text = Path(urllib.parse.unquote(url.path)).read_text(encoding="utf-8")
        else:
            text = route.fetch().text()
        route.fulfill(body=without_sheet(text, name), content_type="text/css; charset=utf-8")

    context.route("**/_static/bl-*.css*", handle)
