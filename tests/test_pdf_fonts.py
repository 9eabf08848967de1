"""The book's PDF carries real fonts, not Type 3 (issue 42, item 8): Chromium (Skia) embeds a font as a
TrueType CIDFont only when its outlines are TrueType; Noto Sans/Serif CJK and MathJax's web fonts are CFF,
so every Chinese character and formula symbol was a Type 3 glyph (3,300 Type 3 font dictionaries in the
156-page PDF of ea1c494). `booktools.print_fonts` prints with TrueType twins of them.

Before/after (the same build, 156 pages both): 18.1 → 10.2 MiB, 3,300 → 0 Type 3 fonts, the text pdfplumber
reads identical, pages rendered at 100 dpi alike to anti-aliasing.

- without a browser: the CFF → TrueType conversion keeps each glyph's outline (its bounds within the
  conversion's tolerance) and its cmap, refuses a TrueType font, is cached; `web_font_css` replaces a CFF
  web font and leaves a TrueType one; `type3_fonts` finds a planted Type 3 font dictionary;
- a small page printed by the plain browser has Type 3 CJK fonts, by `print_fonts.launch()` none, and
  its Chinese copies out right;
- the built PDF: no Type 3 font, the Chinese fonts embedded as TrueType, and chapter sentences read back
  character for character.
"""
from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pikepdf
import pytest
from fontTools.fontBuilder import FontBuilder
from fontTools.pens.boundsPen import BoundsPen
from fontTools.pens.t2CharStringPen import T2CharStringPen
from fontTools.ttLib import TTFont

from booktools import pdf, pdf_read, print_fonts
from booktools.pdf_text import fix_to_unicode
from tests.book_pages import CHAPTERS

CJK = re.compile(r"[\u3400-\u9fff]")
RADICALS = re.compile(r"[\u2e80-\u2fdf]")       # CJK radicals and Kangxi radicals: never the text meant here
SENTENCE = "批大小决定每一步用多少样本估计梯度，增长常见。"


def _sans_face() -> print_fonts.Face:
    faces = [f for f in print_fonts.cjk_cff_faces() if f.family == "Noto Sans CJK SC" and f.style == "Regular"]
    assert faces, "找不到 Noto Sans CJK SC（fonts-noto-cjk，scripts/setup-env.sh 安装）"
    return faces[0]


def _bounds(font: TTFont, char: str) -> tuple:
    glyph_set = font.getGlyphSet()
    pen = BoundsPen(glyph_set)
    glyph_set[font.getBestCmap()[ord(char)]].draw(pen)
    return pen.bounds


def _cff_font(path: Path) -> Path:
    """A one-glyph CFF OpenType font (a square for "A"), as a web font might be."""
    fb = FontBuilder(1000, isTTF=False)
    fb.setupGlyphOrder([".notdef", "A"])
    fb.setupCharacterMap({ord("A"): "A"})
    pen = T2CharStringPen(600, None)
    pen.moveTo((100, 0)), pen.curveTo((100, 300), (500, 300), (500, 0)), pen.lineTo((100, 0))
    pen.closePath()
    empty = T2CharStringPen(600, None).getCharString()
    fb.setupCFF("TestCFF", {"FullName": "TestCFF"}, {".notdef": empty, "A": pen.getCharString()}, {})
    fb.setupHorizontalMetrics({".notdef": (600, 0), "A": (600, 100)})
    fb.setupHorizontalHeader(ascent=800, descent=-200)
    fb.setupNameTable({"familyName": "TestCFF", "styleName": "Regular"})
    fb.setupOS2()
    fb.setupPost()
    fb.save(str(path))
    return path


# ----------------------------------------------------------------------------- without a browser
def test_truetype_twin_keeps_the_glyphs_and_is_cached(tmp_path):
    face = _sans_face()
    chars = "批大小增长A"
    twin = print_fonts.truetype_twin(face.path, face.index, chars, cache=tmp_path)
    source, made = TTFont(face.path, fontNumber=face.index, lazy=True), TTFont(twin)
    assert "glyf" in made and not print_fonts.is_cff(made) and print_fonts.is_cff(source)
    assert made["name"].getBestFamilyName() == "Noto Sans CJK SC"        # fontconfig finds it by this name
    assert {ord(c) for c in chars} <= set(made.getBestCmap())
    assert len(made.getGlyphOrder()) < 200                               # subset, not 65,535 glyphs
    for c in chars:
        assert _bounds(made, c) == pytest.approx(_bounds(source, c), abs=2), c
    inode = twin.stat().st_ino
    assert print_fonts.truetype_twin(face.path, face.index, chars, cache=tmp_path) == twin
    assert twin.stat().st_ino == inode                                   # taken from the cache, not made again
    other = print_fonts.truetype_twin(face.path, face.index, "批", cache=tmp_path)
    assert other != twin
    os.utime(other, (0, 0))                                              # unused since 1970
    assert print_fonts.prune(tmp_path) == [other] and twin.is_file()


def test_a_cff_font_converts_and_a_truetype_one_is_refused(tmp_path):
    made = TTFont(print_fonts.truetype_twin(_cff_font(tmp_path / "t.otf"), cache=tmp_path))
    assert _bounds(made, "A") == pytest.approx((100, 0, 500, 225), abs=1)   # the curve's top: 0.75 × 300
    with pytest.raises(ValueError, match="不是 CFF 字体"):
        print_fonts.to_truetype(made)


def test_web_font_css_replaces_only_cff_fonts(tmp_path):
    cff = _cff_font(tmp_path / "cff.otf")
    ttf = tmp_path / "ttf.ttf"
    TTFont(print_fonts.truetype_twin(cff, cache=tmp_path)).save(str(ttf))
    faces = [{"family": "MJXTEX", "weight": "normal", "style": "normal", "urls": [cff.as_uri()]},
             {"family": "Plain", "weight": "700", "style": "normal", "urls": [ttf.as_uri()]},
             {"family": "Remote", "weight": "normal", "style": "normal", "urls": ["https://example.org/a.woff"]}]
    css = print_fonts.web_font_css(faces)
    assert css.count("@font-face") == 1 and 'font-family: "MJXTEX"' in css and "data:font/ttf;base64," in css
    assert print_fonts.web_font_css(faces[1:]) == ""


def _with_type3(data: bytes) -> bytes:
    """`data` with a Type 3 font dictionary planted on its first page."""
    with pikepdf.open(io.BytesIO(data)) as doc:
        font = doc.make_indirect(pikepdf.Dictionary(
            Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type3, FontBBox=[0, 0, 1, 1],
            FontMatrix=[0.001, 0, 0, 0.001, 0, 0], CharProcs=pikepdf.Dictionary(),
            Encoding=pikepdf.Dictionary(Differences=[]), FirstChar=0, LastChar=0, Widths=[0]))
        doc.pages[0].add_resource(font, pikepdf.Name.Font, prefix="Planted")
        buf = io.BytesIO()
        doc.save(buf)
    return buf.getvalue()


def test_type3_fonts_finds_a_planted_one():
    doc = pikepdf.new()
    doc.add_blank_page()
    buf = io.BytesIO()
    doc.save(buf)
    assert pdf.type3_fonts(buf.getvalue()) == []
    found = pdf.type3_fonts(_with_type3(buf.getvalue()))
    assert len(found) == 1 and found[0].startswith("Type3 "), found


# ----------------------------------------------------------------------------- printed
def _text(data: bytes) -> str:
    return "".join(p.text() for p in pdf_read.read_pages(data)).replace(" ", "").replace("\n", "")


@pytest.mark.slow
def test_print_fonts_browser_embeds_truetype_where_the_plain_one_writes_type3(browser, tmp_path):
    page = tmp_path / "html" / "mini.html"
    page.parent.mkdir()
    page.write_text('<!DOCTYPE html><html lang="zh-CN"><head><meta charset="utf-8"><title>字体</title></head>'
                    f"<body><p>{SENTENCE}</p><p><b>{SENTENCE}</b></p>"
                    f'<p style="font-family:serif">{SENTENCE}</p><pre>{SENTENCE}</pre></body></html>',
                    encoding="utf-8")
    plain = pdf.print_html(browser, page)
    assert any("CJK" in name for name in pdf.type3_fonts(plain))        # what Chromium does by itself
    with print_fonts.launch(page.parent, beside=browser) as twins:
        printed = pdf.print_html(twins, page)
    assert pdf.type3_fonts(printed) == []
    assert {"NotoSansCJKsc-Regular", "NotoSansCJKsc-Bold", "NotoSerifCJKsc-Regular"} <= set(pdf.embedded_fonts(printed))
    with pikepdf.open(io.BytesIO(printed)) as doc:   # the radicals' ToUnicode fix, as merge() applies it
        fix_to_unicode(doc)
        fixed = io.BytesIO()
        doc.save(fixed)
    assert _text(fixed.getvalue()).count(SENTENCE) == 4
    assert pdf.type3_fonts(_with_type3(printed))                         # and the check still sees one


@pytest.mark.slow
def test_built_pdf_has_no_type3_font(built):
    data = (built.html / pdf.PDF_NAME).read_bytes()
    assert pdf.type3_fonts(data) == []
    with pikepdf.open(io.BytesIO(data)) as doc:
        kinds = {str(d.BaseFont).split("+")[-1]: str(d.Subtype) for o in doc.objects
                 if isinstance(o, pikepdf.Dictionary) and o.get("/Subtype") == pikepdf.Name.Type0
                 for d in o.DescendantFonts}
    assert kinds.get("NotoSansCJKsc-Regular") == "/CIDFontType2", kinds


@pytest.mark.slow
def test_built_pdf_reads_back_the_chapters_chinese(built):
    text = _text((built.html / pdf.PDF_NAME).read_bytes())
    assert "(cid:" not in text                                           # a glyph without its character
    assert not RADICALS.findall(text), RADICALS.findall(text)[:10]
    checked = 0
    for doc in CHAPTERS:
        article = built.soup(doc).find("article")
        for p in article.find_all("p"):
            if p.find(["code", "span", "a", "mjx-container", "math"]) is None:
                said = "".join(p.get_text().split())
                if len(CJK.findall(said)) >= 20:
                    assert said in text, (doc, said)
                    checked += 1
                    break
    assert checked >= len(CHAPTERS) - 2, checked
