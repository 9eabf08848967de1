"""Finding one's way in the built book, in Chromium: the navigation drawers, the console, the icons.

* **The drawers** (☰ the book's contents, 「目录」; the list icon this page's contents, 「本页内容」) open and
  close at 390 (a phone, by tap), 900 and 1280 px (by click), and by keyboard: Enter or Space on the
  toggle opens, Escape closes; an open drawer holds the focus (on the current page's link), a closed one
  gives it back to its toggle; a tap on the backdrop closes. From 992 px the book's contents are a column
  that ☰ hides and shows (the focus stays on ☰); from 1200 px this page's contents are a column always
  shown. Each toggle's name (aria-label, title) is Chinese and its aria-expanded says whether it is open.
  One search box on screen at each width.
* **The console**: no console error, no uncaught script error, no failed or blocked request on any page
  of the site at 390 and 1280 px; nothing is excused (render_check's KNOWN_NOISE and KNOWN_MISSING
  included).
* **The icons** are drawn without fontawesome.js (1.5 MB) or an icon font: every icon on screen has ink.

Each check is a function returning faults in Chinese, run on the book and on a copy broken on purpose.
"""
from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest

from booktools import ROOT, browser as chromium, fast_pages, layout, render_check
from tests.book_pages import PAGES, ROOT_DOC, WIDTHS

STATE = chromium.script("drawer_state", ROOT / "tests" / "js")
DRAWER_WIDTHS = (390, 900, 1280)
WIDE = 992      # the themes' width from which the book's contents are a column, not a drawer
TOC_COLUMN = 1200   # and from which this page's contents are a column
# a chapter, the root page, the glossary (a Markdown page), a page without sections (no page contents),
# and the search page
DRAWER_PAGES = ["book/4.3-memory", ROOT_DOC, "book/glossary", "book/references", "search"]
NAMES = {"primary": "目录", "secondary": "本页内容"}
CJK = re.compile(r"[\u4e00-\u9fff]")
OTHER_PAGES = ["search", "genindex"]   # built pages the toc does not list (index.html only redirects to the root)


def _state(tab) -> dict:
    return tab.evaluate(STATE)


def _settled(tab, side: str, opened: bool, focus: str | None, polls: int = 60) -> dict:
    """The drawer's state once it shows what a step should give (`opened`, and its focus settled), or
    after `polls` looks 50 ms apart: the themes animate, and move the focus after an event."""
    for _ in range(polls):
        s = _state(tab)[side]
        if bool(s["links"]) == opened and s["expanded"] == ("true" if opened else "false") and (
                focus is None or s["focusInside" if focus == "inside" else "focusOnToggle"]):
            return s
        tab.wait_for_timeout(50)
    return s


def _context(browser, width: int):
    """A phone (touch) at 390 px, a mouse and keyboard above; the network off."""
    vp = {"width": width, "height": 844 if width < WIDE else 800}
    phone = {"has_touch": True, "is_mobile": True} if width < 900 else {}
    return chromium.offline_context(browser, viewport=vp, **phone)


def drawer_faults(browser, page: Path, width: int) -> list[str]:
    """Open and close each drawer on `page` at `width` by tap/click and by keyboard (see the module
    docstring); every step that does not do what it should, in Chinese (empty: all worked)."""
    faults: list[str] = []
    context = _context(browser, width)
    try:
        tab = context.new_page()
        tab.goto(page.resolve().as_uri(), wait_until="load")
        tab.wait_for_timeout(300)
        state = _state(tab)
        if state["searchBoxes"] != 1:
            faults.append(f"屏幕上有 {state['searchBoxes']} 个搜索框（应为 1 个）")
        for side, name in NAMES.items():
            faults += [f"{width} px「{name}」：{f}" for f in _side_faults(tab, side, name, width)]
    finally:
        context.close()
    return faults


def _side_faults(tab, side: str, name: str, width: int) -> list[str]:
    s = _state(tab)[side]
    toggle = tab.locator(f".bd-header-article .{side}-toggle")
    column = width >= (WIDE if side == "primary" else TOC_COLUMN)
    if side == "secondary" and toggle.count() == 0:
        return []  # a page without sections has no page contents, and no button for them
    if column and side == "secondary":
        return [] if s["links"] else ["本页内容一栏不在屏幕上"]
    out = []
    if not s["toggle"]:
        return ["按钮不在屏幕上"]
    for attr in ("label", "title"):
        if not s[attr] or not CJK.search(s[attr]) or re.search(r"[A-Za-z]", s[attr]):
            out.append(f"按钮的 {attr} 不是中文：{s[attr]!r}")

    def expect(opened: bool, how: str, focus: str | None = None) -> None:
        s = _settled(tab, side, opened, focus)
        if bool(s["links"]) != opened:
            out.append(f"{how}后{'没有打开' if opened else '没有关上'}（屏幕上的链接 {s['links']} 个）")
        if s["expanded"] != ("true" if opened else "false"):
            out.append(f"{how}后 aria-expanded = {s['expanded']!r}")
        if focus == "inside" and not s["focusInside"]:
            out.append(f"{how}后焦点不在抽屉里")
        if focus == "toggle" and not s["focusOnToggle"]:
            out.append(f"{how}后焦点没有回到按钮上")

    def press(key: str) -> None:
        tab.keyboard.press(key)

    if column:  # the book's contents as a column: shown, ☰ hides it, ☰ shows it again
        expect(True, "打开页面")
        toggle.click()
        expect(False, "点按钮", "toggle")
        press("Enter")
        expect(True, "在按钮上按 Enter", "toggle")
        press(" ")
        expect(False, "在按钮上按空格", "toggle")
        press(" ")
        return out
    expect(False, "打开页面")
    toggle.tap() if width < 900 else toggle.click()
    expect(True, "点按钮" if width >= 900 else "轻触按钮", "inside")
    press("Escape")
    expect(False, "按 Esc", "toggle")
    press("Enter")
    expect(True, "在按钮上按 Enter", "inside")
    press("Escape")
    expect(False, "按 Esc", "toggle")
    press(" ")
    expect(True, "在按钮上按空格", "inside")
    vw = tab.viewport_size["width"]
    # a tap on the backdrop, beside the drawer (the book's contents open on the left, the page's on the right)
    x = vw - 12 if side == "primary" else 12
    url = tab.url
    tab.touchscreen.tap(x, 400) if width < 900 else tab.mouse.click(x, 400)
    tab.wait_for_timeout(300)
    if tab.url != url:  # the tap went through the backdrop and followed a link on the page beneath it
        out.append(f"点抽屉外的遮罩后打开了遮罩下面的链接（{tab.url}）")
        tab.goto(url, wait_until="load")
        return out
    expect(False, "点抽屉外的遮罩")
    return out


@pytest.mark.parametrize("width", DRAWER_WIDTHS)
@pytest.mark.parametrize("doc", DRAWER_PAGES)
def test_drawers_open_and_close(built, browser, doc, width):
    faults = drawer_faults(browser, built.html / f"{doc}.html", width)
    assert not faults, f"{doc}.html：\n" + "\n".join(faults)


def _broken_copy(built, tmp_path, doc: str, old: str, new: str, count: int = 1) -> Path:
    """A copy of the site with one page changed (`old` → `new`, which must occur)."""
    copy = tmp_path / "html"
    if not copy.exists():
        shutil.copytree(built.html, copy, ignore=shutil.ignore_patterns("_images", "*.pdf", "searchindex.js"))
    page = copy / f"{doc}.html"
    text = page.read_text(encoding="utf-8")
    assert old in text, f"{doc}.html 里没有 {old!r}：坏样本没有弄坏任何东西"
    page.write_text(text.replace(old, new, count), encoding="utf-8")
    return page


def test_drawer_check_catches_each_fault(built, browser, tmp_path):
    """The same check on pages broken on purpose: the theme's hidden toggles back in front (the fault of
    issue 29: ☰ opened nothing), an English name, and no book/_js/nav.js (the focus lost on close)."""
    doc = "book/4.3-memory"
    hidden = ('<button class="sidebar-toggle primary-toggle" style="display:none"></button>'
              '<button class="sidebar-toggle secondary-toggle" style="display:none"></button>')
    page = _broken_copy(built, tmp_path, doc, '<div id="pst-skip-link"', hidden + '<div id="pst-skip-link"')
    faults = drawer_faults(browser, page, 390)
    assert any("「目录」：轻触按钮后没有打开" in f for f in faults), faults
    assert any("「本页内容」：轻触按钮后没有打开" in f for f in faults), faults
    faults = drawer_faults(browser, page, 1280)
    assert any("「目录」：点按钮后没有关上" in f for f in faults), faults

    page = _broken_copy(built, tmp_path / "en", doc, 'aria-label="目录"', 'aria-label="Toggle primary sidebar"')
    assert any("aria-label" in f or "label" in f for f in drawer_faults(browser, page, 900))

    nav_js = re.search(r'<script defer src="\.\./_static/nav\.js[^"]*"></script>', page.read_text(encoding="utf-8"))
    page = _broken_copy(built, tmp_path / "nojs", doc, nav_js.group(0), "")
    faults = drawer_faults(browser, page, 390)
    assert any("按 Esc后焦点没有回到按钮上" in f for f in faults), faults
    assert any("aria-expanded" in f for f in faults), faults


def test_one_search_box_check_catches_a_second(built, browser, tmp_path):
    """A second search box in sight (as pydata's top bar drew one at desk width) is reported."""
    box = re.search(r'<button class="btn search-button-field[^>]*>.*?</button>',
                    built.page("book/4.3-memory").read_text(encoding="utf-8"), re.DOTALL).group(0)
    page = _broken_copy(built, tmp_path, "book/4.3-memory", '<div class="bd-header-article d-print-none">',
                        '<div class="bd-header-article d-print-none">' + box)
    assert any("2 个搜索框" in f for f in drawer_faults(browser, page, 1280))


# --------------------------------------------------------------------------- the console
def console_faults(rep: render_check.PageReport) -> list[str]:
    """Every console error, uncaught error and failed or blocked request of a loaded page, with nothing
    excused: what render_check set aside as known noise counts too."""
    return ([f"控制台错误：{m}" for m in rep.console_errors] + [f"脚本错误：{m}" for m in rep.page_errors]
            + [f"被拦截的网络请求：{u}" for u in rep.blocked] + [f"加载失败：{u}" for u in rep.missing]
            + [f"（render_check 视为已知）{m}" for m in rep.noise])


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", PAGES)
def test_no_console_error_or_failed_request(rendered, doc, width):
    faults = console_faults(rendered[doc, width])
    assert not faults, f"{doc}.html（{width} px）：\n" + "\n".join(faults)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", OTHER_PAGES)
def test_no_console_error_on_the_other_pages(built, browser, doc, width):
    rep = render_check.check_page(browser, built.html / f"{doc}.html", viewport=layout.VIEWPORTS[width])
    faults = console_faults(rep)
    assert not faults, f"{doc}.html（{width} px）：\n" + "\n".join(faults)


def test_console_check_catches_each_fault(browser, tmp_path):
    """tests/fixtures/console_faults.html, a page with each fault: the same `const` declared twice
    (sphinx-thebe's THEBE_JS_URL before issue 29, which render_check excused), a console.error, a missing
    local file, a request leaving the machine."""
    page = tmp_path / "broken.html"
    shutil.copy(ROOT / "tests" / "fixtures" / "console_faults.html", page)
    faults = console_faults(render_check.check_page(browser, page, timeout_ms=3000))
    assert any("THEBE_JS_URL" in f for f in faults), faults
    assert any("boom" in f for f in faults), faults
    assert any("missing.js" in f for f in faults), faults
    assert any("example.invalid" in f for f in faults), faults


# --------------------------------------------------------------------------- the icons
def icon_faults(browser, page: Path, width: int) -> list[str]:
    """Icons on screen drawn with no ink, and what the page fetched to draw icons (fontawesome.js, an icon
    font): each in Chinese."""
    from PIL import Image

    requested: list[str] = []
    context = chromium.offline_context(browser, viewport={"width": width, "height": 800})
    faults = []
    try:
        tab = context.new_page()
        tab.on("request", lambda r: requested.append(r.url))
        tab.goto(page.resolve().as_uri(), wait_until="load")
        tab.wait_for_timeout(500)
        icons = tab.locator(".bd-header-article [class*='fa-']")
        drawn = 0
        for i in range(icons.count()):
            icon = icons.nth(i)
            if not icon.is_visible() or not icon.bounding_box() or icon.bounding_box()["width"] < 4:
                continue
            img = Image.open(io.BytesIO(icon.screenshot())).convert("L")
            lo, hi = img.getextrema()
            drawn += 1
            if hi - lo < 80:
                faults.append(f"{width} px：图标 {icon.get_attribute('class')!r} 是空白")
        if not drawn:
            faults.append(f"{width} px：页眉上没有看得见的图标")
    finally:
        context.close()
    faults += [f"为图标加载了 {u.rsplit('/', 1)[-1]}" for u in requested
               if re.search(r"fontawesome|fa-(solid|brands|regular)|/[0-9a-f]{20}\.(woff2?|ttf)", u)]
    return faults


@pytest.mark.parametrize("width", WIDTHS)
def test_icons_drawn_without_fontawesome(built, browser, width):
    for doc in ("book/4.3-memory", ROOT_DOC):
        assert "fontawesome.js" not in built.page(doc).read_text(encoding="utf-8")
        faults = icon_faults(browser, built.page(doc), int(width))
        assert not faults, f"{doc}.html：\n" + "\n".join(faults)


def test_icon_check_catches_blank_icons_and_the_script(built, browser, tmp_path):
    """An icon whose picture is gone is reported blank; without book/_static/nav.css the theme's icon font
    is fetched again (and the widget manager's Font Awesome 5 faces, which the book does not ship); with
    fontawesome.js back, its load is reported."""
    doc = "book/4.3-memory"
    blank = "html body .fa-bars::before { mask: none; -webkit-mask: none; background: none; }"
    page = _broken_copy(built, tmp_path, doc, "</head>", f"<style>{blank}</style></head>")
    assert any("空白" in f and "fa-bars" in f for f in icon_faults(browser, page, 1280))
    # the page's one stylesheet (booktools.fast_pages merged them) without its nav.css part
    href = re.search(r'<link rel="stylesheet" href="(\.\./_static/bl-[0-9a-f]+\.css)"',
                     built.page(doc).read_text(encoding="utf-8")).group(1)
    without = fast_pages.without_sheet((built.page(doc).parent / href).read_text(encoding="utf-8"), "nav.css")
    page = _broken_copy(built, tmp_path / "nocss", doc, href, "../_static/bl-no-nav.css")
    (page.parent.parent / "_static" / "bl-no-nav.css").write_text(without, encoding="utf-8")
    assert any("fa-solid-900" in f for f in icon_faults(browser, page, 1280))
    page = _broken_copy(built, tmp_path / "fa", doc, "</head>",
                        '<script defer src="../_static/scripts/fontawesome.js"></script></head>')
    assert any("fontawesome.js" in f for f in icon_faults(browser, page, 1280))
