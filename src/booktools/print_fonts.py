"""TrueType twins of the CFF fonts the book prints with, so that the PDF carries real fonts, not Type 3.

Chromium's PDF writer (Skia) embeds a font as a font (a CIDFontType2 with its TrueType outlines, text that
screen readers, search and copy-and-paste read) only when the font has TrueType (`glyf`) outlines; a
font with CFF (PostScript) outlines is written as Type 3, each glyph a drawing procedure. The book's
Chinese is drawn in Noto Sans/Serif CJK (Debian fonts-noto-cjk, CFF collections) and its formulas in
MathJax's web fonts (CFF `.woff`), so before this every Chinese character and formula symbol of the PDF
was Type 3 (issue 42). At print time, and only there (the web pages keep their fonts):

- `system_twins()`: each CFF face of a CJK collection that draws Simplified Chinese (family "… SC":
  Sans, Sans Mono and Serif, regular and bold) is subset to the characters the book uses
  (`book_characters()`) and its outlines converted to TrueType (`to_truetype()`, as fontTools'
  Snippets/otf2ttf.py does: cubic curves to quadratic with cu2qu, within 1 unit of the em); `launch()`
  starts Chromium with a fontconfig file that adds the twins and rejects the CFF collection files, so
  every Chinese character, whether a CSS rule names the font, a generic family (MathJax's `\\text{}`
  asks for `serif`) or fallback picks it, is drawn from a twin;
- `web_font_css()`: each `@font-face` of a page (js/print_fonts.js lists them) whose file is a CFF font
  gets a later `@font-face` with the same family, weight and style and the twin as a data: URL, which
  replaces it in that printed page only.

Conversions are kept in `.cache/print-fonts/`, keyed by the source font's hash, the face, the characters
and `CONVERTER`; one not used for `KEEP_DAYS` is removed. Converting the six faces takes 12–27 s (a quiet
or a busy 2-core machine), once per change of the book's characters; a cached build spends 0.4 s here.
"""
from __future__ import annotations

import base64
import hashlib
import html as html_lib
import io
import os
import re
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote, urlsplit

from fontTools import subset
from fontTools.pens.cu2quPen import Cu2QuPen
from fontTools.pens.ttGlyphPen import TTGlyphPen
from fontTools.ttLib import TTFont, TTLibError, newTable

from booktools import ROOT

CACHE = ROOT / ".cache" / "print-fonts"
KEEP_DAYS = 14                 # a cached twin unused this long is removed (the book's characters moved on)
CONVERTER = 1                  # bump when the conversion changes: the cached twins are made again
MAX_ERR = 1.0                  # cu2qu's tolerance, in font units (Noto CJK: 1000 per em)
FONT_DIRS = (Path("/usr/share/fonts"), Path("/usr/local/share/fonts"), Path.home() / ".local/share/fonts")
CJK_PROBE = 0x4E00             # 一: a face that maps it draws Chinese
SCRIPT_SUFFIX = " SC"          # the collection's faces for the book's language (zh-CN: Simplified Chinese)
# characters a page may show that its HTML does not spell out (CSS content, list markers, quotes)
BASE_RANGES = ((0x20, 0x7E), (0xA0, 0xFF), (0x2000, 0x206F), (0x3000, 0x303F), (0xFF00, 0xFFEF))
TEXT_SUFFIXES = (".html", ".js", ".css")
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


@dataclass(frozen=True)
class Face:
    """One font of a font file (`index`: its place in a collection, 0 for a single font)."""
    path: Path
    index: int
    family: str
    style: str


# ----------------------------------------------------------------------------- conversion
def is_cff(font: TTFont) -> bool:
    """Whether the font's outlines are CFF (PostScript), which Chromium prints as Type 3."""
    return "CFF " in font or "CFF2" in font


def to_truetype(font: TTFont, max_err: float = MAX_ERR) -> None:
    """Turn a CFF-outline OpenType font into a TrueType-outline one, in place: every glyph's cubic
    curves become quadratic ones (cu2qu), contours reversed to TrueType's clockwise direction; the
    metrics, cmap and layout tables stay. Glyph names are dropped (`post` format 3)."""
    if "CFF " not in font:
        raise ValueError(f"不是 CFF 字体：{font.reader.file if font.reader else font}")
    order = font.getGlyphOrder()
    glyph_set = font.getGlyphSet()
    glyphs = {}
    for name in order:
        pen = TTGlyphPen(glyph_set)
        glyph_set[name].draw(Cu2QuPen(pen, max_err, reverse_direction=True))
        glyphs[name] = pen.glyph()
    font["loca"] = newTable("loca")
    font["glyf"] = glyf = newTable("glyf")
    glyf.glyphOrder = order
    glyf.glyphs = glyphs
    del font["CFF "]
    if "VORG" in font:          # vertical origins belong to CFF fonts; TrueType keeps them in vmtx
        del font["VORG"]
    glyf.compile(font)
    hmtx = font["hmtx"]
    for name, glyph in glyf.glyphs.items():
        if hasattr(glyph, "xMin"):
            hmtx[name] = (hmtx[name][0], glyph.xMin)
    font["maxp"] = maxp = newTable("maxp")
    maxp.tableVersion = 0x00010000
    maxp.maxZones = 1
    for key in ("maxTwilightPoints", "maxStorage", "maxFunctionDefs", "maxInstructionDefs",
                "maxStackElements", "maxSizeOfInstructions", "maxComponentElements"):
        setattr(maxp, key, 0)
    post = font["post"]
    post.formatType = 3.0
    post.extraNames, post.mapping = [], {}
    font.sfntVersion = "\x00\x01\x00\x00"


def truetype_twin(path: Path, index: int = 0, chars: str | None = None, cache: Path = CACHE) -> Path:
    """The TrueType twin of face `index` of the CFF font file `path`, subset to `chars` (all its glyphs
    if None), as a .ttf file in `cache` (made once per source font, face, characters and CONVERTER)."""
    data = Path(path).read_bytes()
    key = hashlib.sha256(data + b"|%d|%d|" % (index, CONVERTER) + (chars or "").encode("utf-8")).hexdigest()[:24]
    out = Path(cache) / f"{Path(path).stem}-{index}-{key}.ttf"
    if out.is_file():
        os.utime(out)            # used now: kept by prune()
        return out
    font = TTFont(io.BytesIO(data), fontNumber=index, lazy=True)
    if chars is not None:
        options = subset.Options()
        options.name_IDs, options.name_languages = ["*"], ["*"]   # fontconfig matches the family by name
        options.notdef_outline = True
        options.desubroutinize = True
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=sorted({ord(c) for c in chars}))
        subsetter.subset(font)
    to_truetype(font)
    font.flavor = None           # a .woff source is written as a plain .ttf
    out.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    font.save(buf)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(out)     # a build beside this one never reads half a file
    return out


def prune(cache: Path = CACHE, keep_days: float = KEEP_DAYS) -> list[Path]:
    """Remove the cached twins not used for `keep_days` (never one a build beside this one uses now);
    returns them."""
    limit = time.time() - keep_days * 86400
    old = [p for p in Path(cache).glob("*.ttf") if p.stat().st_mtime < limit]
    for p in old:
        p.unlink(missing_ok=True)
    return old


# ----------------------------------------------------------------------------- the system's CJK fonts
def book_characters(html: Path) -> str:
    """Every character the built book (`html`, the site folder) may print: the text of its pages,
    scripts and styles (entities and \\uXXXX escapes decoded, so the widgets' stored states count),
    this package's scripts and front-matter strings, and `BASE_RANGES`."""
    chars: set[str] = set()
    sources = [p for p in Path(html).rglob("*") if p.suffix in TEXT_SUFFIXES and p.is_file()]
    sources += sorted(Path(__file__).parent.glob("js/*.js")) + [Path(__file__).with_name("pdf.py")]
    for p in sources:
        text = html_lib.unescape(p.read_text(encoding="utf-8", errors="ignore"))
        chars |= set(text) | {chr(int(h, 16)) for h in _ESCAPE.findall(text)}
    for lo, hi in BASE_RANGES:
        chars |= {chr(c) for c in range(lo, hi + 1)}
    return "".join(sorted(c for c in chars if c.isprintable() or c == " "))


def _font_files(dirs: tuple[Path, ...]) -> list[Path]:
    return sorted(p for d in dirs if d.is_dir() for p in d.rglob("*")
                  if p.suffix.lower() in (".otf", ".ttc", ".otc") and p.is_file())


def cjk_cff_faces(dirs: tuple[Path, ...] = FONT_DIRS) -> list[Face]:
    """The CFF faces of the system's fonts that draw Simplified Chinese: in a CJK collection, the faces
    whose family name ends in " SC" (Noto Sans CJK SC, Noto Sans Mono CJK SC, Noto Serif CJK SC)."""
    faces = []
    for path in _font_files(dirs):
        for index in _collection_size(path):
            try:
                font = TTFont(path, fontNumber=index, lazy=True)
            except (TTLibError, OSError):
                break
            family = font["name"].getBestFamilyName() or ""
            if is_cff(font) and family.endswith(SCRIPT_SUFFIX) and CJK_PROBE in font.getBestCmap():
                faces.append(Face(path, index, family, font["name"].getBestSubFamilyName() or ""))
    return faces


def _collection_size(path: Path) -> range:
    """The faces of a font file: a collection's count, else one."""
    with open(path, "rb") as f:
        head = f.read(12)
    return range(int.from_bytes(head[8:12], "big")) if head[:4] == b"ttcf" else range(1)


def fontconfig_file(folder: Path, twins: list[Path], rejected: list[Path]) -> Path:
    """A fontconfig configuration in `folder`: the system's, plus the twins' folder, minus the
    `rejected` font files (their CFF faces would otherwise still be chosen where a twin lacks a face)."""
    fonts = folder / "fonts"
    fonts.mkdir(parents=True, exist_ok=True)
    for twin in twins:
        (fonts / twin.name).symlink_to(twin)
    globs = "".join(f"<glob>{html_lib.escape(str(p))}</glob>" for p in rejected)
    conf = folder / "fonts.conf"
    conf.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">\n<fontconfig>\n'
        f"  <cachedir>{html_lib.escape(str(folder / 'cache'))}</cachedir>\n"   # first: new caches land here
        '  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>\n'
        f"  <dir>{html_lib.escape(str(fonts))}</dir>\n"
        f"  <selectfont><rejectfont>{globs}</rejectfont></selectfont>\n</fontconfig>\n", encoding="utf-8")
    return conf


def system_twins(html: Path, dirs: tuple[Path, ...] = FONT_DIRS) -> tuple[list[Path], list[Path]]:
    """The TrueType twins of the system's Simplified Chinese CFF faces, subset to the book's characters,
    and the font files they replace."""
    chars = book_characters(html)
    faces = cjk_cff_faces(dirs)
    prune()
    return [truetype_twin(f.path, f.index, chars) for f in faces], sorted({f.path for f in faces})


@contextmanager
def launch(html: Path, beside=None) -> Iterator:
    """Chromium (booktools.browser.launch, offline) that draws the system's Chinese fonts from their
    TrueType twins (`system_twins()`), for printing the book built in `html`."""
    from booktools.browser import launch as launch_browser

    twins, rejected = system_twins(html)
    with tempfile.TemporaryDirectory(prefix="bl-print-fonts-") as tmp:
        conf = fontconfig_file(Path(tmp), twins, rejected)
        with launch_browser(env={**os.environ, "FONTCONFIG_FILE": str(conf)}, beside=beside) as browser:
            yield browser


# ----------------------------------------------------------------------------- a page's web fonts
def _local_file(url: str) -> Path | None:
    parts = urlsplit(url)
    return Path(unquote(parts.path)) if parts.scheme == "file" else None


def web_font_css(faces: list[dict]) -> str:
    """`@font-face` rules that replace each CFF web font of a page with its TrueType twin (a data: URL):
    `faces` as js/print_fonts.js lists them ({family, weight, style, urls}); faces whose files are not
    local, not fonts, or already TrueType are left as they are."""
    rules = []
    for face in faces:
        for url in face["urls"]:
            path = _local_file(url)
            if path is None or not path.is_file():
                continue
            twin = _web_twin(path)
            if twin is not None:
                family = face["family"].replace("\\", "\\\\").replace('"', '\\"')
                rules.append(f'@font-face {{ font-family: "{family}"; font-weight: {face["weight"]}; '
                             f'font-style: {face["style"]}; src: url(data:font/ttf;base64,{twin}); }}')
            break   # the first local file is the one the page loads
    return "\n".join(rules)


_WEB_TWINS: dict[Path, str | None] = {}


def _web_twin(path: Path) -> str | None:
    """The base64 TrueType twin of a CFF font file (whole: web fonts are small), None if not CFF."""
    if path not in _WEB_TWINS:
        try:
            cff = is_cff(TTFont(path, lazy=True))
        except (TTLibError, OSError, ImportError):   # not a font, or a woff2 without brotli: left alone
            cff = False
        _WEB_TWINS[path] = base64.b64encode(truetype_twin(path).read_bytes()).decode("ascii") if cff else None
    return _WEB_TWINS[path]
