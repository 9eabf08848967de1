"""A chapter's figures and displayed formulas on a phone (390×844) and at a desk (1280×800), measured in
Chromium on the built book (booktools.layout through render_check, the pages tests/conftest.py loads once
per process): no figure wider than the column or sticking out of it, none in a box that scrolls sideways,
no displayed formula a reader has to scroll; a phone is served each figure's phone drawing
(booktools.picture), a desk the desk one. The smallest text of every image as displayed, at both widths,
is tests/test_page_layout.py::test_every_figure_is_legible_at_its_displayed_size (it measures the image
the page chose, `currentSrc`).

Issue 42 §6: the phone drawing is drawn at style.PHONE_DENSITY pixels per CSS pixel; each drawing's
markup says its density (``srcset``) and its CSS size (``width``/``height``: the box is reserved before
the PNG arrives), both checked against the PNG (picture.claim_problems), and the browser must show every
image at the density its dpi records (layout.density_problems): a 1× PNG claimed 2× and a 2× PNG served
as 1× are the contrary cases below. Before/after (every chapter re-executed into /tmp and built): the 24
phone PNGs 1× → 2× (e.g. 343×461 → 686×924 pixels for the same 343×461 CSS px), the desk <img> without →
with its size (at 1280 px a figure's box was 0 px tall until its PNG arrived), `_images/` 2.93 → 1.58 MB
(phone figures 1.15 → 0.85 MB, desk 1.39 → 0.47 MB: style.compact_png's 256-colour palette).

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


def _file(url: str) -> str:
    """The file name of an image URL or of a ``srcset`` (its density descriptor dropped)."""
    return url.split()[0].rsplit("/", 1)[-1]


def _tags(built, doc: str) -> list[tuple]:
    """(<source>, <img>) of each chapter figure's <picture> on the built page."""
    out = []
    for pic in built.soup(doc).select("figure picture.bl-picture"):
        source, img = pic.find("source"), pic.find("img")
        assert source["media"] == picture.PHONE_MEDIA, source
        out.append((source, img))
    return out


def _pictures(built, doc: str) -> list[tuple[str, str]]:
    """(desk file, phone file) of each <picture> on the built page, by file name."""
    return [(_file(img["src"]), _file(source["srcset"])) for source, img in _tags(built, doc)]


def test_every_chapter_figure_has_a_phone_drawing(built):
    """Each chapter's figures are <picture>s: the phone PNG beside the desk one in _images/, at most
    style.PHONE_PX CSS pixels wide; each drawing's markup says the density its PNG's dpi records and its
    CSS size (pixels ÷ density), so a phone shows it at that size and its box is reserved before it loads."""
    for doc in CHAPTERS:
        figures = built.soup(doc).select("figure img")
        tags = _tags(built, doc)
        assert figures and len(tags) == len(figures), (doc, len(tags), len(figures))
        problems = []
        for source, img in tags:
            phone = (built.html / "_images" / _file(source["srcset"])).read_bytes()
            desk = (built.html / "_images" / _file(img["src"])).read_bytes()
            problems += picture.claim_problems(_file(source["srcset"]), phone, source["srcset"],
                                               source.get("width"), source.get("height"))
            problems += picture.claim_problems(_file(img["src"]), desk, img.get("srcset"),
                                               img.get("width"), img.get("height"))
            css_w = picture.css_size(*picture.png_size(phone))[0]
            assert css_w <= style.PHONE_PX, (doc, source["srcset"], css_w)
            assert img.get("decoding") == "async", (doc, img)
        assert not problems, f"{doc}.html：\n" + "\n".join(problems)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", PAGES)
def test_every_image_is_shown_at_the_density_it_was_drawn_at(rendered, doc, width):
    problems = rendered[doc, width].layout.density_problems()
    assert not problems, f"{doc}.html：\n" + "\n".join(problems)


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
  <figure><picture><source media="screen and (max-width: 767.98px)" srcset="sharp.png 2x" width="340" height="150">
    <img id="sharp" src="desk.png" width="760" height="300"></picture></figure>
  <figure><picture><source media="screen and (max-width: 767.98px)" srcset="phone.png 2x" width="170" height="150">
    <img id="halved" src="desk.png" width="760" height="300"></picture></figure>
  <figure><img id="doubled" src="sharp.png"></figure>
  <figure><div style="overflow-x:auto"><img id="scrolls" src="desk.png" style="max-width:none"></div></figure>
  <figure><img id="wide" src="wide.png" style="max-width:none"></figure>
  <div class="math"><mjx-container display="true" style="display:block;overflow-x:auto">
    <span style="display:inline-block;width:500px">x</span></mjx-container></div>
  <div class="math"><mjx-container display="true" style="display:block">
    <span style="display:inline-block;width:200px">x</span></mjx-container></div>
</article></body></html>"""


def _png(width: int, dpi: int = 110, height: int = 300) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, format="png", dpi=(dpi, dpi))
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
    (tmp_path / "sharp.png").write_bytes(_png(680, dpi=220))  # a phone drawing at 2 pixels per CSS pixel
    page.write_text(BROKEN, encoding="utf-8")
    rep = render_check.check_page(browser, page, viewport=layout.VIEWPORTS[width]).layout
    figures = rep.figure_fit_problems()
    formulas = rep.formula_fit_problems()
    density = rep.density_problems()
    legible = rep.figure_problems(8.5)
    served = next(f for f in rep.figures if "img#served" in f["element"])
    assert _element(figures, "wide.png"), figures  # 1000 px: wider than the column at both widths
    # a 2× PNG served as 1× (its own <img>, no density): shown twice as large at both widths
    assert _element(density, "img#doubled") and not _element(density, "img#served"), density
    if width == "390":
        sharp = next(f for f in rep.figures if "img#sharp" in f["element"])
        assert sharp["src"] == "sharp.png" and sharp["natural"][0] == 340 and sharp["pixels"] == 680, sharp
        assert sharp["shown"] == pytest.approx(340, abs=0.5) and not _element(legible, "img#sharp"), legible
        # a 1× PNG claimed 2×: shown at 170 px, its text half as tall
        assert _element(density, "img#halved") and _element(legible, "img#halved"), (density, legible)
        assert not _element(density, "img#sharp"), density
        assert served["src"] == "phone.png" and served["natural"][0] == 340, served
        assert _element(figures, "img#scrolls") and "滑动" in "\n".join(figures), figures
        assert not _element(figures, "img#served"), figures
        assert len(formulas) == 1 and "500 px" in formulas[0], formulas
        assert rep.math_overflow == [], "the older check lets a formula that scrolls pass"
    else:
        assert served["src"] == "desk.png", served
        assert not _element(density, "img#sharp") and not _element(density, "img#halved"), density
        assert not _element(figures, "img#scrolls") and not _element(figures, "img#served"), figures
        assert formulas == [], formulas
