"""booktools.fast_pages (issue 42): one stylesheet, scripts deferred in their order, images below the first
section lazy, the theme's sideways-scroll check narrowed — each rule on small pages it can get wrong, and on
the built book."""
from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from booktools import ROOT, fast_pages

# ----------------------------------------------------------------------------- stylesheets


def _site(tmp_path: Path) -> Path:
    static = tmp_path / "_static"
    (static / "styles").mkdir(parents=True)
    (static / "basic.css").write_text("div.b { background: url(file.png); }\n")
    (static / "styles" / "theme.css").write_text('@import "../basic.css";\n.t { background: url("../img/x.svg"); }\n')
    (static / "page.css").write_text(".p { color: red; background: url(data:image/png;base64,AAAA); }\n")
    (static / "print.css").write_text(".q { color: black; }\n")
    (tmp_path / "book").mkdir()
    return tmp_path


PAGE = """<html><head>
<link href="../_static/styles/theme.css?digest=1" rel="stylesheet" />
    <link rel="stylesheet" type="text/css" href="../_static/page.css?v=2" />
    <link rel="stylesheet" href="../_static/print.css" media="print" />
<link rel="stylesheet" href="https://example.org/far.css" />
</head><body><p>正文</p></body></html>"""


def test_stylesheets_become_one_in_order_with_imports_and_urls_rewritten(tmp_path):
    site = _site(tmp_path)
    written: dict = {}
    page = fast_pages.merge_stylesheets(PAGE, site / "book" / "a.html", site, written)
    links = re.findall(r'<link rel="stylesheet" href="([^"]+)"', page)
    assert links[0].startswith("../_static/bl-") and links[1] == "https://example.org/far.css" and len(links) == 2
    merged = (site / "_static" / links[0].rsplit("/", 1)[1]).read_text()
    # the imported sheet where its @import was, then the others in the page's order
    assert merged.index("div.b") < merged.index(".t {") < merged.index(".p {") < merged.index(".q {")
    assert "@import" not in merged
    assert "url(file.png)" in merged and 'url("img/x.svg")' in merged and "url(data:image/png;base64,AAAA)" in merged
    assert re.search(r"@media print \{\s*\.q", merged)
    # a second page with the same sheets shares the file; a page one level up links it from there
    again = fast_pages.merge_stylesheets(PAGE.replace("../_static", "_static"), site / "b.html", site, written)
    assert len(written) == 1 and f'href="_static/{links[0].rsplit("/", 1)[1]}"' in again


def test_a_sheet_can_be_taken_out_of_the_merged_one(tmp_path):
    site = _site(tmp_path)
    page = fast_pages.merge_stylesheets(PAGE, site / "book" / "a.html", site, {})
    merged = (site / "_static" / re.search(r'_static/(bl-[^"]+)"', page).group(1)).read_text()
    without = fast_pages.without_sheet(merged, "page.css")
    assert ".p {" not in without and ".t {" in without and ".q {" in without
    assert ".q {" not in fast_pages.without_sheet(merged, "print.css")
    with pytest.raises(ValueError, match="nav.css"):
        fast_pages.without_sheet(merged, "nav.css")


def test_a_missing_import_stops_the_build(tmp_path):
    site = _site(tmp_path)
    (site / "_static" / "styles" / "theme.css").write_text('@import "../gone.css";')
    with pytest.raises(ValueError, match="gone.css"):
        fast_pages.merge_stylesheets(PAGE, site / "book" / "a.html", site, {})


# ----------------------------------------------------------------------------- scripts
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "fast_pages.json").read_text(encoding="utf-8"))
# a file (it stops the reading), code that needs a file before it, a script that only names a value, one
# already out of the way (async), data (not code)
SCRIPT = st.sampled_from(FIXTURE["scripts"])


def _order(page: str) -> tuple[list[str], list[str]]:
    """What runs as the page is read (in order), and what runs after it (in order), by each script's text."""
    now, later = [], []
    for attrs, body in re.findall(r"<script\b([^>]*)>(.*?)</script>", page, re.S):
        if "application/json" in attrs or "async" in attrs:
            continue
        src = re.search(r'src="([^"]+)"', attrs)
        text = src.group(1) if src else body
        if text.startswith("data:text/javascript;base64,"):
            text = base64.b64decode(text.split(",", 1)[1]).decode()
        (later if "defer" in attrs else now).append(text)
    return now, later


@given(st.lists(SCRIPT, min_size=1, max_size=12))
def test_deferred_scripts_keep_their_order_and_only_independent_ones_run_early(kinds):
    page = "".join(k.format(n=i) for i, k in enumerate(kinds))
    now, later = _order(fast_pages.defer_scripts(page))
    before, _ = _order(page)
    # every script still runs once, files and code that needs them in their first order
    assert sorted(now + later) == sorted(before)
    assert later == [s for s in before if s in later]
    first_file = next((i for i, s in enumerate(before) if s.endswith(".js")), len(before))
    for s in now:  # what still runs at once needs nothing: before the first file, or names a value
        assert before.index(s) < first_file or s.startswith("let hint"), s  # names a value
    assert not any(s.endswith(".js") for s in now)


def test_a_deferred_inline_script_is_its_text_unchanged():
    body = "DOCUMENTATION_OPTIONS.pagename = '4.3 显存';"
    page = fast_pages.defer_scripts(f'<script src="a.js"></script><script>{body}</script>')
    data = re.search(r'src="data:text/javascript;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(data).decode("utf-8") == body


# ----------------------------------------------------------------------------- images and the theme's script


def test_images_after_the_first_section_heading_load_lazily():
    page = ('<header><h2>x</h2><img src="logo.png"></header><article><h1>t</h1><img src="top.png">'
            '<h2>a</h2><img src="a.png"><img loading="eager" src="b.png"><img decoding="async" src="c.png"></article>')
    fast = fast_pages.lazy_images(page)
    assert '<img src="logo.png">' in fast and '<img src="top.png">' in fast
    assert '<img loading="lazy" decoding="async" src="a.png">' in fast
    assert '<img decoding="async" loading="eager" src="b.png">' in fast
    assert '<img loading="lazy" decoding="async" src="c.png">' in fast and fast.count("decoding") == 3
    assert fast_pages.lazy_images("<article><p>no sections</p><img src=a></article>").count("lazy") == 0


def test_a_figure_image_is_described_by_its_caption_not_its_address():
    fig = ('<figure id="f"><img src="../_images/a.png" alt="../_images/a.png" width="9">'
           '<figcaption><p><span class="caption-number">图 5 </span><span class="caption-text">误差 &amp; '
           '<mjx-assistive-mml><math><mi>B</mi></math></mjx-assistive-mml> 的关系</span></p></figcaption></figure>')
    out = fast_pages.caption_alt(fig)
    assert 'alt="误差 &amp; B 的关系"' in out and "图 5" not in out.split("<figcaption>")[0]
    described = fig.replace('alt="../_images/a.png"', 'alt="一条曲线"')
    assert fast_pages.caption_alt(described) == described  # an image that has a description keeps it
    assert fast_pages.caption_alt(fig.replace("<figcaption>", "<div>").replace("</figcaption>", "</div>")) == \
        fig.replace("<figcaption>", "<div>").replace("</figcaption>", "</div>")


def _theme_js() -> str:
    import pydata_sphinx_theme
    spec = json.loads(fast_pages.THEME_PATCHES.read_text(encoding="utf-8"))
    path = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static" / "scripts" / \
        Path(spec["file"]).name
    return path.read_text(encoding="utf-8")


def test_the_pinned_theme_script_is_patched_once_and_a_changed_one_stops_the_build(tmp_path):
    scripts = tmp_path / "_static" / "scripts"
    scripts.mkdir(parents=True)
    target = scripts / "pydata-sphinx-theme.js"
    target.write_text(_theme_js(), encoding="utf-8")
    fast_pages.patch_theme_js(tmp_path)
    patched = target.read_text(encoding="utf-8")
    assert "checkVisibility({contentVisibilityAuto:!0})" in patched and "contentvisibilityautostatechange" in patched
    fast_pages.patch_theme_js(tmp_path)  # a second build leaves it as it is
    assert target.read_text(encoding="utf-8") == patched
    target.write_text(_theme_js().replace("e.tabIndex=e.scrollWidth", "e.tabIndex=e.offsetWidth"), encoding="utf-8")
    with pytest.raises(ValueError, match="主题版本变了"):
        fast_pages.patch_theme_js(tmp_path)


# ----------------------------------------------------------------------------- the built book


def test_every_page_links_one_stylesheet_and_nothing_stops_its_reading(built):
    pages = [p for p in built.html.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts]
    checked = 0
    for path in pages:
        page = path.read_text(encoding="utf-8")
        head = page[:page.find("</head>")]
        if "<link" not in head or 'http-equiv="refresh"' in head:
            continue  # the redirecting index page
        checked += 1
        searching = "searchtools.js" in page  # the search page keeps Sphinx's order (fast_pages._SEARCH_PAGE)
        sheets = re.findall(r'<link\b[^>]*rel="stylesheet"[^>]*>', head)
        assert len(sheets) == 1 and "_static/bl-" in sheets[0], (path.name, sheets)
        for attrs, body in re.findall(r"<script\b([^>]*)>(.*?)</script>", page, re.S):
            if "src=" in attrs and not searching:
                assert re.search(r"\b(defer|async)\b", attrs), (path.name, attrs)
        files = re.findall(r'<script\b[^>]*src="([^"]+\.js)[^"]*"', page)
        assert files[0].endswith("nav.js"), (path.name, files[:3])
    assert checked >= 12
    assert "contentvisibilityautostatechange" in (built.html / "_static/scripts/pydata-sphinx-theme.js").read_text()
