"""The page a reader meets, measured in Chromium on the built book at 1280×800 and 390×844
(booktools.layout through render_check, on the pages tests/test_html.py loads once per process):
nothing in the main content sticks out sideways unless it sits in a box meant to scroll, no table
cell is narrower than 3 em (the glossary's term column used to stack one character per line), every
displayed equation fits or scrolls, and a code cell holds an 88-character line at 1280 px.

Before book/_static/page.css and booktools.sphinxext (measured on the same pages): 3 pages scrolled
sideways on a phone (a long inline name: 21–105 px), 238 table cells at 390 px and 111 at 1280 px were
narrower than 3 em (the narrowest 2.06 em: the glossary's 中文 column, 33 px at both widths), and a
code cell held 77 characters at 1280 px.
"""
from __future__ import annotations

import pytest

from booktools import layout, render_check
from test_html import PAGES, WIDTHS, browser, built, rendered  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", PAGES)
def test_nothing_sticks_out_and_tables_stay_readable(rendered, doc, width):
    rep = rendered[doc, width].layout
    problems = rep.layout_problems()
    assert not problems, f"{doc}.html：\n" + "\n".join(problems)


def test_code_cells_hold_88_characters_at_1280(rendered):
    measured = {doc: rendered[doc, "1280"].layout.code_columns for doc in PAGES}
    assert any(v is not None for v in measured.values()), "没有任何页面有代码框，检查没有被执行"
    short = {doc: v for doc, v in measured.items() if v is not None and v < layout.CODE_COLUMNS}
    assert not short, f"1280 px 宽时代码框一行放不下 {layout.CODE_COLUMNS} 个字符：{short}"


def test_glossary_tables_are_measured(rendered):
    """The glossary's 5-column tables are really there and measured at both widths."""
    for w in WIDTHS:
        rep = rendered["book/glossary", w].layout
        assert rep.narrowest_cell_em is not None and rep.narrowest_cell_em >= layout.MIN_CELL_EM - 0.05, rep


BROKEN = """<html><head><style>body{margin:0;font-size:16px} article{width:300px}</style></head><body>
<article class="bd-article">
  <div id="wide" style="width:2000px">太宽的块</div>
  <div style="overflow-x:auto"><div id="scrolls" style="width:900px">在滚动框里，允许</div></div>
  <div id="clips" style="overflow:hidden;width:200px"><div style="width:600px">被裁掉</div></div>
  <table><tr><td>中文术语</td><td>English term here</td><td>符号</td><td>代码里的名字</td>
    <td>很长很长很长很长很长很长很长很长的含义说明文字很长很长很长很长很长</td></tr></table>
  <div class="math"><mjx-container display="true" style="display:block">
    <span style="display:inline-block;width:700px">x</span></mjx-container></div>
  <p>第一句。 第二句 <code>中 文</code> 后面<span class="math">x</span> 的值</p>
  <pre>中 文 代码不算</pre>
</article></body></html>"""


@pytest.mark.parametrize("width", WIDTHS)
def test_layout_check_catches_each_fault(browser, tmp_path, width):
    """booktools.layout can fail: overflow, clipping, a narrow cell, a wide equation, a CJK space; and
    what scrolls in its own box, code, and a space beside code or math are not reported."""
    page = tmp_path / "broken.html"
    page.write_text(BROKEN, encoding="utf-8")
    rep = render_check.check_page(browser, page, viewport=layout.VIEWPORTS[width]).layout
    text = "\n".join(rep.problems())
    assert any("#wide" in o["element"] for o in rep.overflow), text
    assert not any("#scrolls" in o["element"] for o in rep.overflow), text
    assert any("#clips" in c["element"] for c in rep.clipped), text
    assert rep.narrow_cells and rep.narrowest_cell_em < layout.MIN_CELL_EM, text
    assert len(rep.math_overflow) == 1, text
    assert len(rep.cjk_spaces) == 1 and "。 第二句" in rep.cjk_spaces[0]["context"], rep.cjk_spaces
    assert rep.page_scroll > 0
