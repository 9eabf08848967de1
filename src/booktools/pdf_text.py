"""The text a reader copies out of the book's PDF: the fonts' ToUnicode maps made to agree with what the
pages say each character is.

A font draws one glyph for several characters (Noto Sans CJK: 长 and the radical ⻓, 气 and the Kangxi
radical ⽓, the dashes — and ―). Chromium (Skia) writes one character per glyph in the font's ToUnicode
map, often the radical, and wraps each use of the glyph that means another character in a marked span
`/Span <</ActualText (长)>> BDC … EMC`. Viewers, search and copy-and-paste that read the map and not the
spans (pdfminer, and so pdfplumber and the book's checks, among them) get 增⻓ for 增长, 常⻅ for 常见.
`fix_to_unicode()` reads every page's content with pikepdf (qpdf's parser), counts which text the spans
give each glyph of each font, and rewrites the maps to say that text.
"""
from __future__ import annotations

import io
from collections import Counter, defaultdict

import pikepdf
from pdfminer.cmapdb import CMapParser, FileUnicodeMap

_BDC, _EMC, _TF = pikepdf.Operator("BDC"), pikepdf.Operator("EMC"), pikepdf.Operator("Tf")
_SHOW = {pikepdf.Operator("Tj"), pikepdf.Operator("TJ"), pikepdf.Operator("'"), pikepdf.Operator('"')}
_CMAP_HEAD = ("/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n"
              "/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
              "/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n"
              "1 begincodespacerange\n<{lo}> <{hi}>\nendcodespacerange\n")
_CMAP_TAIL = "endcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n"


def _code_bytes(font: pikepdf.Dictionary) -> int:
    """How many bytes a character code of `font` takes: 2 for a composite (Type0) font, else 1."""
    return 2 if font.get("/Subtype") == pikepdf.Name.Type0 else 1


def _shown(operands) -> bytes:
    """The bytes a text-showing operator draws (the strings of a TJ array, the last operand otherwise)."""
    last = operands[-1]
    if isinstance(last, pikepdf.Array):
        return b"".join(bytes(s) for s in last if isinstance(s, pikepdf.String))
    return bytes(last)


def _spans(stream_owner, resources, found: dict, depth: int = 0) -> None:
    """Record, for each glyph drawn alone in an /ActualText span, the span's text:
    found[font object] counts (code, text). Form XObjects are followed with their own resources."""
    fonts = resources.get("/Font", {}) if resources is not None else {}
    xobjects = resources.get("/XObject", {}) if resources is not None else {}
    font, actual, codes = None, None, b""
    for op in pikepdf.parse_content_stream(stream_owner):
        operator, operands = op.operator, op.operands
        if operator == _TF:
            font = fonts.get(str(operands[0]))
        elif operator == _BDC and isinstance(operands[-1], pikepdf.Dictionary) and "/ActualText" in operands[-1]:
            actual, codes = str(operands[-1].ActualText), b""
        elif operator in _SHOW and actual is not None:
            codes += _shown(operands)
        elif operator == _EMC and actual is not None:
            if font is not None and font.is_indirect and len(codes) == _code_bytes(font) and actual:
                found[font.objgen][1][(codes, actual)] += 1
                found[font.objgen][0] = font
            actual = None
        elif operator == pikepdf.Operator("Do") and depth < 8:
            xobject = xobjects.get(str(operands[0]))
            if xobject is not None and xobject.get("/Subtype") == pikepdf.Name.Form:
                _spans(xobject, xobject.get("/Resources", resources), found, depth + 1)


def _cmap(table: dict[int, str], nbytes: int) -> bytes:
    """A ToUnicode CMap that maps each code of `table` (`nbytes` long) to its text."""
    hexcode = f"{{:0{2 * nbytes}X}}".format
    text = _CMAP_HEAD.format(lo=hexcode(0), hi=hexcode(256 ** nbytes - 1))
    items = sorted(table.items())
    for i in range(0, len(items), 100):   # at most 100 entries per block
        block = items[i:i + 100]
        text += f"{len(block)} beginbfchar\n"
        text += "".join(f"<{hexcode(code)}> <{s.encode('utf-16-be').hex().upper()}>\n" for code, s in block)
        text += "endbfchar\n"
    return (text + _CMAP_TAIL).encode("ascii")


def fix_to_unicode(pdf: pikepdf.Pdf) -> int:
    """Rewrite each font's ToUnicode map so that a glyph maps to the text its /ActualText spans give it
    (the most frequent one, if they differ); returns how many glyph mappings changed."""
    found: dict = defaultdict(lambda: [None, Counter()])
    for page in pdf.pages:
        _spans(page, page.get("/Resources"), found)
    changed = 0
    for font, counts in found.values():
        if "/ToUnicode" not in font:
            continue
        table = FileUnicodeMap()
        CMapParser(table, io.BytesIO(font.ToUnicode.read_bytes())).run()
        mapping = dict(table.cid2unichr)
        best: dict[bytes, tuple[int, str]] = {}
        for (code, text), n in counts.items():
            if n > best.get(code, (0, ""))[0]:
                best[code] = (n, text)
        fixes = {int.from_bytes(code, "big"): text for code, (_n, text) in best.items()
                 if mapping.get(int.from_bytes(code, "big")) != text}
        if fixes:
            mapping.update(fixes)
            font.ToUnicode = pdf.make_stream(_cmap(mapping, _code_bytes(font)))
            changed += len(fixes)
    return changed
