"""A chapter's figures and displayed formulas on a phone (390×844) and at a desk (1280×800), measured in
Chromium on the built book (booktools.layout through render_check, the pages tests/conftest.py loads once
per process): no figure wider than the column or sticking out of it, none in a box that scrolls sideways,
no displayed formula a reader has to scroll; a phone is served each figure's phone drawing
(booktools.picture), a desk the desk one. The smallest text of every image as displayed, at both widths,
is tests/test_page_layout.py::test_every_figure_is_legible_at_its_displayed_size (it measures the image
the page chose, `currentSrc`).

Before (HEAD at the start of issue 29, /tmp/before): at 390 px all 18 chapter figures were shown at their
desk width (495–780 px) in their own sideways scroll box in a 358 px column, and four displayed formulas
were wider than the column (4.1: 608 and 510 px, 4.2: 384 px, 4.4: 544 px) and scrolled.
"""
from __future__ import annotations

import io

import pytest
from PIL import Image

from batchlab.ui import style
from booktools import layout, picture, render_check
from tests.book_pages import CHAPTERS, PAGES, WIDTHS

pytestmark = pytest.mark.slow

CHAPTER_KINDS = ("figure", "other")  # an explorer's frozen image ("widget") is the explorers' own


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", PAGES)
def test_no_figure_is_wider_than_the_column_or_scrolls(rendered, doc, width):
    problems = rendered[doc, width].layout.figure_fit_problems(CHAPTER_KINDS)
    assert not problems, f"{doc}.html：\n" + "\n".join(problems)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", PAGES)
def test_no_displayed_formula_needs_scrolling(rendered, doc, width):
    problems = rendered[doc, width].layout.formula_fit_problems()
    assert not problems, f"{doc}.html：\n" + "\n".join(problems)


def _pictures(built, doc: str) -> list[tuple[str, str]]:
    """(desk file, phone file) of each <picture> on the built page, by file name."""
    out = []
    for pic in built.soup(doc).select("figure picture.bl-picture"):
        source, img = pic.find("source"), pic.find("img")
        assert source["media"] == picture.PHONE_MEDIA, source
        out.append((img["src"].rsplit("/", 1)[-1], source["srcset"].rsplit("/", 1)[-1]))
    return out


def test_every_chapter_figure_has_a_phone_drawing(built):
    """Each chapter's figures are <picture>s: the phone PNG beside the desk one in _images/, at most
    style.PHONE_PX wide, recording its dpi (the legibility check reads it)."""
    for doc in CHAPTERS:
        figures = built.soup(doc).select("figure img")
        pictures = _pictures(built, doc)
        assert figures and len(pictures) == len(figures), (doc, len(pictures), len(figures))
        for desk, phone in pictures:
            with Image.open(built.html / "_images" / phone) as image:
                assert image.width <= style.PHONE_PX, (doc, phone, image.width)
                assert image.info.get("dpi", (0,))[0] == pytest.approx(style.DPI, abs=0.01), (doc, phone)
            assert (built.html / "_images" / desk).is_file(), (doc, desk)


def test_a_phone_gets_the_phone_drawing_and_a_desk_the_desk_one(built, rendered):
    for doc in CHAPTERS:
        pictures = _pictures(built, doc)
        for width, pick in (("390", 1), ("1280", 0)):
            shown = [f["src"] for f in rendered[doc, width].layout.figures if f.get("kind") == "figure"]
            assert shown == [pair[pick] for pair in pictures], (doc, width, shown)


# ── the checks can fail ──────────────────────────────────────────────────────────────────────────────
BROKEN = """<html><head><style>body{margin:0 16px;font-size:16px} article{max-width:760px}
img{max-width:100%} figure{margin:0}</style></head><body>
<article class="bd-article">
  <figure><picture><source media="screen and (max-width: 767.98px)" srcset="phone.png" width="340" height="300">
    <img id="served" src="desk.png"></picture></figure>
  <figure><div style="overflow-x:auto"><img id="scrolls" src="desk.png" style="max-width:none"></div></figure>
  <figure><img id="wide" src="wide.png" style="max-width:none"></figure>
  <div class="math"><mjx-container display="true" style="display:block;overflow-x:auto">
    <span style="display:inline-block;width:500px">x</span></mjx-container></div>
  <div class="math"><mjx-container display="true" style="display:block">
    <span style="display:inline-block;width:200px">x</span></mjx-container></div>
</article></body></html>"""


def _png(width: int, dpi: int = 110) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, 300), "white").save(buffer, format="png", dpi=(dpi, dpi))
    return buffer.getvalue()


def _element(problems: list[str], name: str) -> bool:
    return any(name in p for p in problems)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_figure_and_formula_checks_catch_each_fault(browser, tmp_path, width):
    """At 390 px: a desk figure in a box that scrolls sideways, an image wider than the column and a
    500 px formula (in a scroll box, which the older check accepts) are reported; the <picture> that
    serves a 340 px drawing and a 200 px formula are not. At 1280 px all of them fit."""
    page = tmp_path / "broken.html"
    for name, px in (("desk.png", 760), ("phone.png", 340), ("wide.png", 1000)):
        (tmp_path / name).write_bytes(_png(px))
    page.write_text(BROKEN, encoding="utf-8")
    rep = render_check.check_page(browser, page, viewport=layout.VIEWPORTS[width]).layout
    figures = rep.figure_fit_problems()
    formulas = rep.formula_fit_problems()
    served = next(f for f in rep.figures if "img#served" in f["element"])
    assert _element(figures, "wide.png"), figures  # 1000 px: wider than the column at both widths
    if width == "390":
        assert served["src"] == "phone.png" and served["natural"][0] == 340, served
        assert _element(figures, "img#scrolls") and "滑动" in "\n".join(figures), figures
        assert not _element(figures, "img#served"), figures
        assert len(formulas) == 1 and "500 px" in formulas[0], formulas
        assert rep.math_overflow == [], "the older check lets a formula that scrolls pass"
    else:
        assert served["src"] == "desk.png", served
        assert not _element(figures, "img#scrolls") and not _element(figures, "img#served"), figures
        assert formulas == [], formulas
