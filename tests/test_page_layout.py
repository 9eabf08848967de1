"""The page a reader meets, measured in Chromium on the built book at 1280×800 and 390×844
(booktools.layout through render_check, on the pages tests/conftest.py loads once per process):
nothing in the main content sticks out sideways unless it sits in a box meant to scroll, every
displayed equation fits or scrolls, and a code cell holds an 88-character line at 1280 px. Tables are
measured by characters per rendered line in tests/test_page_tables.py.

Before book/_static/page.css and booktools.sphinxext (measured on the same pages): 3 pages scrolled
sideways on a phone (a long inline name: 21–105 px), 238 table cells at 390 px and 111 at 1280 px were
narrower than 3 em (the narrowest 2.06 em: the glossary's 中文 column, 33 px at both widths), and a
code cell held 77 characters at 1280 px.

Every figure's smallest text is at least 8 pt as the page shows it, at both widths: the smallest font
the book's figures draw (test_figures_legible.SMALLEST_FONT_PT, 8.5 pt at 110 dpi) scaled by the
width Chromium displays each image at over its natural width. Before page.css §6 the phone column
shrank every figure to 342–354 px: 4.3–7.4 pt (a 771 px figure at 342 px: 4.3 pt); the 1280 px
column showed them unscaled (9.7 pt, the diagram of 4.1 at 778 of 780 px).
"""
from __future__ import annotations

import pytest

from batchlab.ui import style
from booktools import layout, render_check
from tests.book_pages import CHAPTERS, PAGES, WIDTHS
from tests.test_cell_length import MAX_WIDTH as CODE_COLUMNS  # the book's code line length
from tests.test_figures_legible import SMALLEST_FONT_PT

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", PAGES)
def test_nothing_sticks_out(rendered, doc, width):
    rep = rendered[doc, width].layout
    problems = rep.layout_problems()
    assert not problems, f"{doc}.html：\n" + "\n".join(problems)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", PAGES)
def test_every_figure_is_legible_at_its_displayed_size(rendered, doc, width):
    rep = rendered[doc, width].layout
    problems = rep.figure_problems(SMALLEST_FONT_PT, default_dpi=style.DPI)  # explorers' PNGs: no pHYs
    assert not problems, f"{doc}.html：\n" + "\n".join(problems)


def test_the_figures_of_every_chapter_are_measured(rendered):
    """The figure check sees each chapter's figures (its PNGs and its explorer's image) at both widths."""
    for doc in CHAPTERS:
        for w in WIDTHS:
            figures = rendered[doc, w].layout.figures
            assert figures and all(f["dpi"] for f in figures if not f["src"].startswith("data:")), (doc, w, figures)
    explorers = [f for doc in CHAPTERS for f in rendered[doc, "390"].layout.figures  # booktools.frozen's names
                 if f["src"].rsplit("/", 1)[-1].startswith("frozen-")]
    assert explorers, "no explorer image measured"


def test_figure_points_from_the_displayed_width():
    """The rule in numbers: 8.5 pt at 110 dpi is 9.7 pt shown unscaled and 4.3 pt when a 771 px PNG
    is squeezed into a 342 px phone column, as it was."""
    assert layout.text_points(8.5, 110, 771, 771) == pytest.approx(9.74, abs=0.01)
    assert layout.text_points(8.5, 110, 771, 342) == pytest.approx(4.32, abs=0.01)
    rep = layout.LayoutReport(width=390, figures=[
        {"element": "img", "src": "squeezed.png", "natural": [771, 400], "shown": 342.0, "dpi": 110.0,
         "scroll_box": None},
        {"element": "img", "src": "scrolls.png", "natural": [771, 400], "shown": 771.0, "dpi": 110.0,
         "scroll_box": 358},
        {"element": "img", "src": "no-dpi.png", "natural": [771, 400], "shown": 771.0, "dpi": None,
         "scroll_box": None}])
    problems = rep.figure_problems(8.5)
    assert len(problems) == 2 and "squeezed.png" in problems[0] and "4.3 pt" in problems[0], problems
    assert "no-dpi.png" in problems[1], problems
    assert len(rep.figure_problems(8.5, default_dpi=110)) == 1


def test_code_cells_hold_88_characters_at_1280(rendered):
    measured = {doc: rendered[doc, "1280"].layout.code_columns for doc in PAGES}
    assert any(v is not None for v in measured.values()), "没有任何页面有代码框，检查没有被执行"
    short = {doc: v for doc, v in measured.items() if v is not None and v < CODE_COLUMNS}
    assert not short, f"1280 px 宽时代码框一行放不下 {CODE_COLUMNS} 个字符：{short}"


BROKEN = """<html><head><style>body{margin:0;font-size:16px} article{width:300px}</style></head><body>
<article class="bd-article">
  <div id="wide" style="width:2000px">太宽的块</div>
  <div style="overflow-x:auto"><div id="scrolls" style="width:900px">在滚动框里，允许</div></div>
  <div id="clips" style="overflow:hidden;width:200px"><div style="width:600px">被裁掉</div></div>
  <div class="math"><mjx-container display="true" style="display:block">
    <span style="display:inline-block;width:700px">x</span></mjx-container></div>
  <p>第一句。 第二句 <code>中 文</code> 后面<span class="math">x</span> 的值</p>
  <pre>中 文 代码不算</pre>
  <img id="squeezed" src="figure.png" style="max-width:100%">
  <div style="overflow-x:auto"><img id="scrolled" src="DATA_URI" style="max-width:none"></div>
</article></body></html>"""


def _png(width: int = 760, dpi: int = 110) -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, 300), "white").save(buffer, format="png", dpi=(dpi, dpi))
    return buffer.getvalue()


@pytest.mark.parametrize("width", WIDTHS)
def test_layout_check_catches_each_fault(browser, tmp_path, width):
    """booktools.layout can fail: overflow, clipping, a wide equation, a CJK space; and
    what scrolls in its own box, code, and a space beside code or math are not reported."""
    import base64

    page = tmp_path / "broken.html"
    (tmp_path / "figure.png").write_bytes(_png())
    page.write_text(BROKEN.replace("DATA_URI", "data:image/png;base64," + base64.b64encode(_png()).decode()),
                    encoding="utf-8")
    rep = render_check.check_page(browser, page, viewport=layout.VIEWPORTS[width]).layout
    text = "\n".join(rep.problems())
    assert any("#wide" in o["element"] for o in rep.overflow), text
    assert not any("#scrolls" in o["element"] for o in rep.overflow), text
    assert any("#clips" in c["element"] for c in rep.clipped), text
    assert len(rep.math_overflow) == 1, text
    assert len(rep.cjk_spaces) == 1 and "。 第二句" in rep.cjk_spaces[0]["context"], rep.cjk_spaces
    assert rep.page_scroll > 0
    # a figure squeezed into the 300 px column is too small; one at its own width in a scroll box is not
    points = {f["element"].split(" > ")[-1]: pt for f, pt in rep.figure_points(SMALLEST_FONT_PT)}
    assert points["img#squeezed"] == pytest.approx(SMALLEST_FONT_PT * 110 / 96 * 300 / 760, abs=0.05), points
    assert points["img#scrolled"] == pytest.approx(SMALLEST_FONT_PT * 110 / 96, abs=0.05), points
    figure_text = "\n".join(rep.figure_problems(SMALLEST_FONT_PT))
    assert "img#squeezed" in figure_text and "img#scrolled" not in figure_text, figure_text
    assert not any("img#scrolled" in o["element"] for o in rep.overflow), text
