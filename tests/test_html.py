"""Checks on the built HTML book: strict build, offline assets, Chinese UI and search,
and every toc page in headless Chromium (Playwright, booktools.render_check) with the network
switched off: no console error, widgets, math, a CJK font, the search page; full-page screenshots
at 1280 and 390 px go to _build/screenshots/ (`<page>-1280.png`, `<page>-390.png`) for inspection.

The book is built ONCE per test process into a temporary directory, as scripts/build-book.sh builds it:
`jupyter-book build <repo> --path-output <tmp> -W` (publishes the notebooks' committed outputs, which
nbval checks), then `python -m booktools.pdf` (the book's PDF). The `built`, `browser` and `rendered`
fixtures are tests/conftest.py's, shared with tests/test_page_*.py (the build and the loaded pages);
BATCHLAB_HTML_DIR checks an existing build instead (see there).

Chromium (/usr/bin/chromium, Debian package `chromium`) is a required test
dependency: without it the render test fails, it is not skipped.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
from bs4 import BeautifulSoup

from booktools import ROOT, browser as chromium, layout, render_check
from booktools.toc import WIDGET_STATE, WIDGET_VIEW
from tests.book_pages import CHAPTERS, PAGES, ROOT_DOC, WIDTHS, local_target, screenshot_path

VENDOR = ROOT / "book" / "_vendor"
CJK = re.compile(r"[\u4e00-\u9fff]")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)  # http://, https://, //host

# Vendored files (scripts/vendor_js.sh) and where the pages must find them. No widget manager: the frozen
# explorers are HTML (booktools.frozen), so require.js and embed-amd.js are neither vendored nor loaded.
WIDGET_MANAGER = ("require.js", "embed-amd.js")
MATHJAX_JS = "_static/mathjax/es5/tex-mml-chtml.js"
MATHJAX_FONT = "_static/mathjax/es5/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff"
MATHJAX_EXT = "_static/mathjax/es5/input/tex/extensions/boldsymbol.js"


def _notebook_model_ids(docname: str) -> list[str]:
    nb = nbformat.read(ROOT / f"{docname}.ipynb", as_version=4)
    return [
        o["data"][WIDGET_VIEW]["model_id"]
        for c in nb.cells if c.cell_type == "code"
        for o in c.get("outputs", []) if WIDGET_VIEW in o.get("data", {})
    ]


# --------------------------------------------------------------------------- tests
def test_build_succeeded(built):
    assert (built.html / "index.html").is_file()
    if built.log is not None:  # we ran the build ourselves
        assert built.rc == 0
        assert "build succeeded" in built.log, built.log[-3000:]
        # Sphinx's own "WARNING: ..." lines (the kernel's "[IPKernelApp] WARNING | ..." is not ours)
        sphinx_warnings = re.findall(r"^.*\b(?:WARNING|ERROR|CRITICAL): .*$", built.log, re.MULTILINE)
        assert not sphinx_warnings, "\n".join(sphinx_warnings)
    for doc in PAGES:
        assert built.page(doc).is_file(), f"missing page {doc}.html"


def test_only_toc_files_built(built):
    """only_build_toc_files/exclude_patterns: README, tests, src ... are not pages."""
    expected = {f"{d}.html" for d in PAGES} | {"index.html", "search.html", "genindex.html"}
    got = {str(p.relative_to(built.html)) for p in built.pages()}
    assert got == expected, f"unexpected pages: {sorted(got - expected)}, missing: {sorted(expected - got)}"


@pytest.mark.parametrize("doc", CHAPTERS)
def test_chapter_page_has_chinese_text_and_figures(built, doc):
    soup = built.soup(doc)
    article = soup.find("article") or soup.find("main")
    assert article is not None, f"{doc}.html has no <article>/<main>"
    text = article.get_text(" ", strip=True)
    assert len(CJK.findall(text)) >= 50, f"{doc}.html: little or no Chinese text in the article"
    images = [img.get("src", "") for img in article.find_all("img")]
    ok = []
    for src in images:
        target = local_target(built.page(doc), src, built.html)
        if target and target.is_file() and (built.html / "_images") in target.parents:
            ok.append(src)
    assert ok, f"{doc}.html: no <img> pointing at an existing file under _images/ (srcs: {images})"


def _notebook_state(docname: str) -> dict:
    nb = nbformat.read(ROOT / f"{docname}.ipynb", as_version=4)
    return nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})


@pytest.mark.parametrize("doc", CHAPTERS)
def test_chapter_page_shows_its_explorers_frozen_without_a_widget_manager(built, doc):
    """Each widget view the notebook saved is a frozen explorer written as HTML (booktools.frozen): every
    control of the saved state shown, inert, and every saved figure as an image file; the page embeds no
    widget state and loads no widget manager (issue 29: 4.4 MB of embed-amd.js before any text)."""
    model_ids = _notebook_model_ids(doc)
    soup = built.soup(doc)
    assert not soup.find_all("script", attrs={"type": WIDGET_STATE})
    assert not soup.find_all("script", attrs={"type": WIDGET_VIEW})
    srcs = [s.get("src", "").split("?")[0] for s in soup.find_all("script", src=True)]
    assert not [s for s in srcs if s.endswith(WIDGET_MANAGER)], f"{doc}.html loads a widget manager: {srcs}"
    frozen = soup.select(".bl-frozen")
    assert len(frozen) == len(model_ids), f"{doc}.html shows {len(frozen)} frozen explorers, the notebook {len(model_ids)}"
    state = _notebook_state(doc)
    for view, model_id in zip(frozen, model_ids):
        expected = render_check.expected_frozen(state, model_id)
        controls = view.select(".bl-frozen-control")
        assert len(controls) == expected["controls"] > 0, (doc, len(controls), expected)
        assert all(c.has_attr("disabled") for c in view.select(".bl-frozen-control input, select, button"))
        images = view.select("img.bl-frozen-figure")
        assert len(images) == expected["images"], (doc, len(images), expected)
        for img in images:
            target = local_target(built.page(doc), img["src"], built.html)
            assert target and target.is_file() and target.read_bytes().startswith(b"\x89PNG"), img["src"]
        assert view.select(".batchlab-live"), f"{doc}.html: the frozen explorer lost its live marker"


def test_frozen_html_refuses_a_widget_it_cannot_draw():
    """A saved widget model booktools.frozen has no drawing for fails the build, naming it (a frozen view
    never silently loses a control)."""
    from booktools import frozen

    state = {"a": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_b"]}},
             "b": {"model_name": "ColorPickerModel", "state": {"description": "颜色", "value": "#fff"}}}
    with pytest.raises(ValueError, match="ColorPickerModel"):
        frozen.frozen_html(state, "a", [])
    with pytest.raises(ValueError, match="没有保存的状态"):
        frozen.frozen_html(state, "missing", [])


def test_no_external_loads(built):
    """Nothing a page loads comes from the network (anchor links are fine)."""
    offenders = []
    for page in built.pages():
        soup = built.parse(page)
        for tag, attr in (("script", "src"), ("link", "href"), ("img", "src"),
                          ("iframe", "src"), ("source", "src"), ("video", "src"),
                          ("audio", "src"), ("embed", "src"), ("object", "data")):
            for el in soup.find_all(tag):
                url = (el.get(attr) or "").strip()
                if EXTERNAL.match(url):
                    offenders.append(f"{page.relative_to(built.html)}: <{tag} {attr}={url}>")
        for style in soup.find_all("style"):
            for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", style.get_text()):
                if EXTERNAL.match(url.strip()):
                    offenders.append(f"{page.relative_to(built.html)}: <style> url({url})")
    for css in (built.html / "_static").rglob("*.css"):
        body = css.read_text(encoding="utf-8", errors="replace")
        for url in re.findall(r"(?:@import\s+(?:url\()?|url\()\s*['\"]?([^'\")\s;]+)", body):
            if EXTERNAL.match(url):
                offenders.append(f"{css.relative_to(built.html)}: {url}")
    assert not offenders, "external resources:\n" + "\n".join(offenders)


@pytest.mark.parametrize("doc", CHAPTERS)
def test_chapter_page_has_launch_links(built, doc):
    """Binder and Colab links to this notebook in the repository and branch of _config.yml; they are
    plain <a> links, which test_no_external_loads allows (a click leaves the page; nothing loads)."""
    import posixpath

    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    repo, launch = config["repository"], config["launch_buttons"]
    repo_path = urlsplit(repo["url"]).path.strip("/")  # <owner>/<name>
    notebook = posixpath.normpath(posixpath.join(repo.get("path_to_book") or ".", f"{doc}.ipynb"))
    hrefs = [a["href"] for a in built.soup(doc).find_all("a", href=True)]
    for name, key in (("Binder", "binderhub_url"), ("Colab", "colab_url")):
        host = urlsplit(launch[key]).netloc
        links = [h for h in hrefs if urlsplit(h).netloc == host]
        assert links, f"{doc}.html has no {name} link (launch_buttons.{key} = {launch[key]})"
        for href in links:
            path = urlsplit(href).path
            assert f"/{repo_path}/" in path and repo["branch"] in path.split("/"), (
                f"{doc}.html: {name} link {href} is not {repo_path} at branch {repo['branch']}")
            assert href.endswith(f"/{notebook}") and "/./" not in href, (
                f"{doc}.html: {name} link {href} does not open {notebook}")


def test_local_assets_resolve(built):
    """Every script/stylesheet/image a page references exists in the output."""
    broken = []
    for page in built.pages():
        soup = built.parse(page)
        refs = [s.get("src") for s in soup.find_all("script", src=True)]
        refs += [l.get("href") for l in soup.find_all("link", href=True)
                 if set(l.get("rel") or []) & {"stylesheet", "preload", "icon"}]
        refs += [i.get("src") for i in soup.find_all("img", src=True)]
        for url in refs:
            target = local_target(page, url, built.html)
            if target is not None and not target.is_file():
                broken.append(f"{page.relative_to(built.html)}: {url}")
    assert not broken, "missing files:\n" + "\n".join(broken)


def test_no_page_loads_a_script_twice(built):
    """Guards against JB1 auto-injecting vendored JS (a root `_static/` folder)."""
    dupes = []
    for page in built.pages():
        soup = built.parse(page)
        srcs = [s["src"].split("?")[0] for s in soup.find_all("script", src=True)]
        seen = {s for s in srcs if srcs.count(s) > 1}
        if seen:
            dupes.append(f"{page.relative_to(built.html)}: {sorted(seen)}")
    assert not dupes, "\n".join(dupes)


def test_vendored_files_in_output(built):
    for rel in (MATHJAX_JS, MATHJAX_FONT, MATHJAX_EXT):
        assert (built.html / rel).is_file(), f"vendored file missing from the build: {rel}"
    # byte-identical to what scripts/vendor_js.sh recorded
    manifest = (VENDOR / "MANIFEST.sha256").read_text().split("\n")
    for line in filter(None, manifest):
        digest, name = line.split(maxsplit=1)
        name = name.removeprefix("./")
        if name == "README.md":
            continue  # not copied: Sphinx applies exclude_patterns to static files too
        out = built.html / "_static" / name
        assert out.is_file(), f"vendored file not copied to the output: {name}"
        assert hashlib.sha256(out.read_bytes()).hexdigest() == digest, f"{out} differs from the manifest"
    # formulas are typeset at build time (booktools.prerender_math): a math page loads no MathJax at all,
    # neither the vendored copy nor a CDN's, and carries its typeset formulas
    math_pages = [p for p in built.pages() if built.parse(p).find(class_="math") is not None]
    assert math_pages, "no page contains math"
    for p in math_pages:
        soup = built.parse(p)
        srcs = [s["src"].split("?")[0] for s in soup.find_all("script", src=True)]
        assert not any("mathjax" in s.lower() for s in srcs), f"{p.name} loads a math engine: {srcs}"
        assert soup.find("mjx-container") is not None, f"{p.name} has math but no typeset formula"


def test_vendor_manifest_matches_sources():
    """book/_vendor is exactly what scripts/vendor_js.sh produced (no hand edits)."""
    lines = [l for l in (VENDOR / "MANIFEST.sha256").read_text().splitlines() if l]
    listed = set()
    for line in lines:
        digest, name = line.split(maxsplit=1)
        f = VENDOR / name
        listed.add(f.resolve())
        assert f.is_file(), f"{name} listed in MANIFEST.sha256 but missing"
        assert hashlib.sha256(f.read_bytes()).hexdigest() == digest, f"{name} was modified"
    actual = {p.resolve() for p in VENDOR.rglob("*") if p.is_file() and p.name != "MANIFEST.sha256"}
    assert actual == listed, f"unlisted vendored files: {sorted(map(str, actual - listed))}"
    total = sum(p.stat().st_size for p in actual)
    assert total < 8 * 2**20, f"vendored JS grew to {total / 2**20:.1f} MiB"


def _search_index(built) -> dict:
    raw = (built.html / "searchindex.js").read_text(encoding="utf-8")
    m = re.fullmatch(r"\s*Search\.setIndex\((.*)\)\s*;?\s*", raw, re.DOTALL)
    assert m, "searchindex.js has an unexpected format"
    return json.loads(m.group(1))


def test_search_index_segments_chinese(built):
    """html_search_language=zh + jieba: Chinese words (not only Latin terms) are indexed."""
    import jieba  # required: without it Sphinx indexes no Chinese terms at all

    index = _search_index(built)
    terms = index["terms"]
    cjk_words = [t for t in terms if len(t) >= 2 and all(CJK.match(ch) for ch in t)]
    assert len(cjk_words) >= 20, f"only {len(cjk_words)} Chinese words in the search index"
    # words jieba finds in the preface's first paragraph must be searchable
    preface = (ROOT / f"{ROOT_DOC}.md").read_text(encoding="utf-8")
    body = next(p for p in re.split(r"\n\s*\n", preface)
                if p.strip() and not p.lstrip().startswith(("#", "$", "```", ":::")))
    jieba.setLogLevel(60)
    words = {w for w in jieba.cut_for_search(body) if len(w) == 2 and all(CJK.match(c) for c in w)}
    assert words, "preface's first paragraph has no 2-character Chinese words"
    missing = sorted(w for w in words if w not in terms)
    assert len(missing) <= len(words) // 4, f"preface words missing from the index: {missing}"


def test_chinese_ui(built):
    soup = built.soup(CHAPTERS[0])
    assert (soup.html.get("lang") or "").lower() in ("zh-cn", "zh"), soup.html.get("lang")
    text = soup.get_text(" ")
    assert "搜索" in text, "search box is not labelled 搜索 (language: zh_CN)"
    assert "上一页" in text, "prev link is not labelled 上一页 (language: zh_CN)"


# --------------------------------------------------------------------------- in the browser
# Every toc page in headless Chromium (booktools.render_check: Playwright on Debian's Chromium,
# every non-file:// request aborted and recorded): tests/conftest.py's `rendered`, screenshots in
# _build/screenshots/ where CI and readers find them.

# (term a reader types, chapter it must find): each occurs in some pages only, so the result list
# shows that the search filters. 噪声 is in jieba's dictionary; 屋顶线 (roofline) is a term of art
# that is not, and so is found only if the index holds it as a word (the book's search terms:
# booktools.search_terms; tests/test_page_search.py searches every one of them).
SEARCH_CASES = [("噪声", "book/4.2-convergence"), ("屋顶线", "book/4.4-efficiency")]
FONT_DIRS_WITHOUT_CJK = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/truetype/liberation")


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", PAGES)
def test_page_renders_offline_in_chromium(built, rendered, doc, width):
    """No console or page error, no request leaving the machine, every image decoded, every widget
    view showing its controls and default output, every formula typeset by MathJax."""
    rep = rendered[doc, width]
    problems = rep.problems()
    assert not problems, f"{doc}.html（{width} px 宽）在浏览器中：\n" + "\n".join(problems)
    soup = built.soup(doc)
    # the browser saw what the built HTML holds (nothing dropped before it was checked)
    assert rep.math_nodes == len(soup.select(".math")), (
        f"{doc}.html：源文件有 {len(soup.select('.math'))} 个公式，浏览器中有 {rep.math_nodes} 个")
    assert rep.mathjax >= rep.math_nodes
    assert rep.images >= len(soup.find_all("img")), f"{doc}.html：浏览器中的图片少于 HTML 中的 <img>"
    assert len(rep.frozen) == len(soup.select(".bl-frozen"))


def test_browser_checks_were_exercised(rendered):
    """The book has formulas and frozen explorers, so MathJax and the frozen views were really checked."""
    assert any(r.mathjax for r in rendered.values()), "没有任何页面含公式，MathJax 检查没有被执行"
    assert {r.layout.width for r in rendered.values()} == {int(w) for w in WIDTHS}
    views = [v for r in rendered.values() for v in r.frozen]
    assert any(v["images_shown"] for v in views) and any(v["controls"] for v in views), "冻结视图检查没有被执行"


def test_render_check_catches_broken_pages(browser, tmp_path):
    """Each check in render_check.check_page can fail: a page with one fault of every kind."""
    page = tmp_path / "broken.html"
    page.write_text(
        '<html><body><p>坏页面</p>'
        '<img src="https://example.invalid/remote.png"><img src="missing.png">'
        '<span class="math notranslate nohighlight">\\(x\\)</span>'
        '<script>console.error("boom")</script><script>undefinedFunction()</script>'
        '</body></html>', encoding="utf-8")
    rep = render_check.check_page(browser, page, tmp_path / "broken.png")
    assert rep.blocked == ["https://example.invalid/remote.png"]
    assert any("missing.png" in m for m in rep.missing)
    assert len(rep.broken_images) == 2
    assert rep.console_errors == ["boom"]
    assert any("undefinedFunction" in e for e in rep.page_errors)
    assert rep.math_unrendered == 1
    assert len(rep.problems()) >= 6


def test_a_cancelled_fetch_is_a_missing_file_only_when_the_file_is_missing(tmp_path):
    """The browser dropping a fetch of a file that is there (a <picture>'s unused source) is not a missing
    file; an aborted fetch of a file that is not there, or any other failure, still is."""
    there = tmp_path / "phone.png"
    there.write_bytes(b"png")
    assert render_check.cancelled_fetch(there.as_uri(), "net::ERR_ABORTED")
    assert not render_check.cancelled_fetch((tmp_path / "gone.png").as_uri(), "net::ERR_ABORTED")
    assert not render_check.cancelled_fetch(there.as_uri(), "net::ERR_FILE_NOT_FOUND")
    assert not render_check.cancelled_fetch("https://example.invalid/x.png", "net::ERR_ABORTED")


def test_render_check_catches_a_frozen_explorer_without_its_figure_and_mathjax(built, browser, tmp_path):
    """A copy of the book without a frozen explorer's figure file and without its typeset formulas: check_page
    reports the figure missing and every formula raw."""
    doc = "book/4.3-memory"  # a frozen explorer with a figure, and formulas
    copy = tmp_path / "html"
    shutil.copytree(built.html, copy)
    figure = built.soup(doc).select_one("img.bl-frozen-figure")["src"]
    local_target(copy / f"{doc}.html", figure, copy).unlink()
    # formulas are typeset at build time: a page whose typesetting was lost shows TeX source instead
    page = copy / f"{doc}.html"
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    for typeset in soup.find_all("mjx-container"):
        typeset.replace_with("\\(x\\)")
    page.write_text(str(soup), encoding="utf-8")
    rep = render_check.check_page(browser, page, timeout_ms=3000)
    assert rep.frozen and rep.frozen[0]["images_shown"] < rep.frozen[0]["images"], rep.frozen
    assert rep.math_nodes and rep.math_unrendered == rep.math_nodes and rep.mathjax == 0
    assert any("默认图" in p for p in rep.problems()) and any("MathJax" in p for p in rep.problems())


def test_render_check_catches_raw_latex_and_live_controls_in_a_frozen_explorer(built, browser, tmp_path):
    """A frozen label with LaTeX left as source, and a frozen control a reader could move, are reported."""
    doc = "book/4.3-memory"  # its frozen explorer has drop-downs
    copy = tmp_path / "html"
    shutil.copytree(built.html, copy)
    page = copy / f"{doc}.html"
    text = page.read_text(encoding="utf-8")
    text = text.replace('<span class="bl-frozen-label">', '<span class="bl-frozen-label">$b$ ', 1)
    page.write_text(text.replace('<select disabled', '<select', 1), encoding="utf-8")
    rep = render_check.check_page(browser, page, timeout_ms=3000)
    assert any(v["raw_latex"] for v in rep.frozen) and any(not v["inert"] for v in rep.frozen), rep.frozen
    assert any("LaTeX" in p for p in rep.problems()) and any("不会重新计算" in p for p in rep.problems())


def test_screenshots_written(rendered):
    """A full-page screenshot of every page at both widths: _build/screenshots/<page>-<width>.png."""
    from PIL import Image

    for (doc, w), rep in rendered.items():
        png = screenshot_path(doc, w)
        assert rep.screenshot == str(png) and png.is_file(), f"截图不存在：{png}"
        assert png.stat().st_size > 20_000, f"截图过小（{png.stat().st_size} 字节）：{png}"
        with Image.open(png) as img:
            assert img.format == "PNG", f"{png} 不是 PNG"
            width, height = img.size
            lo, hi = img.convert("L").getextrema()
        vp = layout.VIEWPORTS[w]
        assert width == vp["width"] and height >= vp["height"], f"{png} 的尺寸 {width}×{height} 不是整页截图"
        # a page taller than the cap (the API page) is shot down to it: no picture worth gigabytes of browser
        assert height <= render_check.SCREENSHOT_MAX_PX, f"{png} 高 {height} 像素，超过截图上限"
        assert lo < hi, f"{png} 是纯色图片"
    assert {w for _doc, w in rendered} == set(WIDTHS)


def _page_chars(built, doc: str, n: int = 6) -> str:
    """The first `n` distinct Chinese characters of the page's article."""
    text = (built.soup(doc).find("article") or built.soup(doc)).get_text(" ")
    return "".join(dict.fromkeys(CJK.findall(text)))[:n]


def test_chinese_text_uses_a_cjk_font(built, browser):
    """Screenshot check: the page's body font draws Chinese with real glyphs, no tofu boxes."""
    chars = _page_chars(built, CHAPTERS[0])
    assert len(chars) == 6, chars
    res = chromium.cjk_glyphs(browser, built.page(CHAPTERS[0]), chars)
    assert res["tofu_probe_identical"], "对照用的缺字方框（U+E000、U+E001）应当完全相同"
    assert not res["blank"] and not res["tofu"] and not res["duplicates"], (
        f"正文字体（{res['family']}）显示中文为空白或方框（豆腐块）：{res}")


def test_cjk_check_fails_without_a_cjk_font(built, browser, tmp_path):
    """The same check on a Chromium that sees only fonts without Chinese glyphs reports tofu,
    so the check above would catch a machine or CI image without fonts-noto-cjk."""
    dirs = [d for d in FONT_DIRS_WITHOUT_CJK if Path(d).is_dir()]
    assert dirs, f"找不到不含中文的字体目录：{FONT_DIRS_WITHOUT_CJK}"
    conf = tmp_path / "fonts.conf"
    conf.write_text('<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig>'
                    + "".join(f"<dir>{d}</dir>" for d in dirs)
                    + f"<cachedir>{tmp_path / 'fc-cache'}</cachedir></fontconfig>", encoding="utf-8")
    chars = _page_chars(built, CHAPTERS[0])
    with chromium.launch(env={**os.environ, "FONTCONFIG_FILE": str(conf)}, beside=browser) as no_cjk:
        res = chromium.cjk_glyphs(no_cjk, built.page(CHAPTERS[0]), chars)
    assert res["tofu_probe_identical"]
    assert set(res["tofu"]) | set(res["blank"]) == set(chars), f"没有中文字体时应当全部是方框：{res}"


@pytest.mark.parametrize("term,chapter", SEARCH_CASES)
def test_chinese_search_finds_chapter(built, browser, term, chapter):
    """The book's search page (searchtools.js + searchindex.js over file://) finds `chapter`, and
    only pages that contain the term."""
    def article(doc: str) -> str:
        return (built.soup(doc).find("article") or built.soup(doc)).get_text()

    assert term in article(chapter), f"{chapter} 不再包含“{term}”：请换一个检索词"
    assert any(term not in article(d) for d in PAGES), f"每一页都含“{term}”，结果无法说明搜索在筛选"
    hrefs = chromium.search_results(browser, built.html / "search.html", term)
    found = sorted({str(Path(unquote(urlsplit(h).path)).relative_to(built.html).with_suffix(""))
                    for h in hrefs})
    assert chapter in found, (
        f"搜索“{term}”没有找到 {chapter}；结果：{found}。searchtools.js 只在空格和标点处切分检索词，"
        "索引里却是 jieba 分出的词：不在 jieba 词典里的术语要加进用户词典（html_search_options 的 dict）")
    wrong = [d for d in found if d not in PAGES or term not in article(d)]
    assert not wrong, f"搜索“{term}”的结果中这些页面不含该词：{wrong}"
