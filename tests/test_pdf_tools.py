"""The PDF tools without a browser: booktools.pdf_text makes the fonts' ToUnicode maps say what Chromium's
/ActualText spans say (a page that draws 长 with the glyph it shares with the radical ⻓ reads 长), and
booktools imports no module that imports it back (the PDF writer and reader once did: issue 43).
"""
from __future__ import annotations

import ast
import io

import pikepdf
from hypothesis import given, settings, strategies as st

from booktools import ROOT, pdf_read
from booktools.pdf_text import _cmap, fix_to_unicode

RADICAL, CHARACTER = "\u2ec1", "\u957f"   # ⻓ and 长: one glyph in Noto Sans CJK


def _one_page(mapped: dict[int, str], shown: list[tuple[int, str | None]]) -> pikepdf.Pdf:
    """A page in a one-byte font whose ToUnicode map is `mapped`, showing each code of `shown` in turn,
    inside an /ActualText span when its text is given (as Skia writes a glyph that means another text)."""
    pdf = pikepdf.new()
    page = pdf.add_blank_page(page_size=(400, 200))
    font = pdf.make_indirect(pikepdf.Dictionary(Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1,
                                                BaseFont=pikepdf.Name.Helvetica,
                                                ToUnicode=pdf.make_stream(_cmap(mapped, 1))))
    page.Resources = pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=font))
    ops = b"BT /F1 12 Tf 10 100 Td\n"
    for code, actual in shown:
        glyph = b"<%02X> Tj 12 0 Td\n" % code
        if actual is None:
            ops += glyph
        else:
            ops += b"/Span <</ActualText <FEFF%s>>> BDC " % actual.encode("utf-16-be").hex().upper().encode() + glyph + b"EMC\n"
    page.Contents = pdf.make_stream(ops + b"ET\n")
    return pdf


def _text(pdf: pikepdf.Pdf) -> str:
    buf = io.BytesIO()
    pdf.save(buf)
    return pdf_read.read_pages(buf.getvalue())[0].text().replace(" ", "")


def test_actual_text_becomes_the_glyphs_text():
    pdf = _one_page({0x41: RADICAL}, [(0x41, CHARACTER)])
    assert _text(pdf) == RADICAL            # what a reader of the map alone gets from Chromium's PDF
    assert fix_to_unicode(pdf) == 1
    assert _text(pdf) == CHARACTER


def test_a_glyph_without_a_span_keeps_its_text():
    pdf = _one_page({0x41: RADICAL, 0x42: "B"}, [(0x41, None), (0x42, None)])
    assert fix_to_unicode(pdf) == 0
    assert _text(pdf) == RADICAL + "B"


@settings(max_examples=25, deadline=None)
@given(st.dictionaries(st.integers(0x21, 0x7E), st.sampled_from("甲乙⻓长—―"), min_size=1, max_size=6),
       st.data())
def test_every_glyph_reads_as_its_spans_say(mapped, data):
    codes = sorted(mapped)
    actual = {c: data.draw(st.sampled_from([None, "长", "见", "–"])) for c in codes}
    pdf = _one_page(mapped, [(c, actual[c]) for c in codes])
    fix_to_unicode(pdf)
    assert _text(pdf) == "".join(actual[c] or mapped[c] for c in codes)


# ----------------------------------------------------------------------------- no import circle
def _imports(path) -> set[str]:
    """The booktools modules a file imports, at any depth of the file (function-level imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("booktools"):
            if node.module == "booktools":
                found |= {f"booktools.{a.name}" for a in node.names}
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("booktools.")}
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of `graph` (module: modules it imports), each as the path that closes it."""
    found, done = [], set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            found.append(path[path.index(node):] + [node])
            return
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, path + [node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    return found


def test_booktools_has_no_import_circle():
    folder = ROOT / "src" / "booktools"
    graph = {f"booktools.{p.stem}": _imports(p) for p in folder.glob("*.py") if p.stem != "__init__"}
    assert {"booktools.pdf_read", "booktools.pdf_text"} <= graph["booktools.pdf"]
    assert cycles(graph) == []
    # the check sees a circle: the reader importing the writer back, as it once did
    assert cycles({**graph, "booktools.pdf_read": graph["booktools.pdf_read"] | {"booktools.pdf"}})
