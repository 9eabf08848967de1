"""The whole book as one PDF, for print and offline reading, made from the built pages.

    .venv/bin/python -m booktools.pdf [--html _build/html] [--out _build/html/batch-size-book.pdf]

scripts/build-book.sh runs it after the HTML build. Each page the toc lists is opened in the
project's headless Chromium (`booktools.browser`, network off), left to typeset its formulas and draw
its widgets' default state (js/await_render.js, the wait of `booktools.render_check`), and printed with Playwright's
`page.pdf` (A4, print styles from book/_static/page.css and book/_static/print.css, which lets big
tables and code blocks break across pages instead of leaving half a page empty; the API reference
prints as a short appendix, each module's purpose, js/print_appendix.js). Chromium embeds the
subset of every font it draws with, so the Chinese text carries its Noto Sans CJK glyphs
(fonts-noto-cjk, which scripts/setup-env.sh installs); it embeds them as TrueType fonts, not Type 3,
because the Chromium `build_book()` launches draws them, and MathJax's web fonts, from TrueType
twins of the CFF originals (`booktools.print_fonts`, `use_truetype_web_fonts()`). The printed pages are then joined by `merge()`
with pikepdf (qpdf):

- in front, a title page (the title and author of _config.yml, and the licences) and a contents page
  listing every page and its sections (the article's second-level headings, js/page_sections.js) with
  the page they start on, read from the named destinations Chromium writes for them; the front matter
  is printed again if its length changed the numbers it shows (`front_matter_html()`);
- one page tree with continuous page numbers: Chromium's footer carries the page's title, and
  `merge()` writes the number beside it on every page but the title page (Chromium's own page
  counter restarts with each printed page);
- bookmarks: one per page, its sections nested below it, the contents page first;
- links between pages turned into jumps inside the PDF, anchors kept per page (a /Names tree);
- a tagged PDF: each page printed with Chromium's structure tree (headings, paragraphs, tables, figures
  with their alternative text), the trees joined under one document (`_join_structure()`);
- the title, language and licence in the document information and the XMP metadata;
- the fonts' ToUnicode maps made to agree with Chromium's /ActualText spans (`booktools.pdf_text`), so
  that copying, search and the checks read 长 and not the radical ⻓ that shares its glyph.

The result lands in the built site (`_build/html/batch-size-book.pdf`); the preface links to it.
`outline()`, `outline_titles()` and `page_count()` read a joined PDF back (pikepdf), `booktools.pdf_read`
reads its pages (pdfplumber; the tests use both); the build fails if `embedded_fonts()` finds no CJK
font in it (the Chinese text would print without its glyphs), and names any `type3_fonts()` it finds.
"""
from __future__ import annotations

import argparse
import contextlib
import html as html_lib
import io
import re
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pikepdf
import yaml

from booktools import ROOT, pdf_read, print_fonts
from booktools.pdf_text import fix_to_unicode
from booktools.toc import toc_entries

PDF_NAME = "batch-size-book.pdf"
CONFIG = ROOT / "_config.yml"
MARGIN_MM = {"top": 14, "bottom": 16, "left": 12, "right": 12}
PT_PER_MM = 72 / 25.4
FOOTER_STYLE = ("width:100%;font-size:8px;color:#666;text-align:center;"
                "font-family:'Noto Sans CJK SC',sans-serif")
PAGE_OPTIONS = dict(format="A4", print_background=True, scale=0.8, prefer_css_page_size=False,
                    margin={k: f"{v}mm" for k, v in MARGIN_MM.items()},
                    display_header_footer=True, header_template="<span></span>",
                    footer_template=f'<div style="{FOOTER_STYLE}"><span class="title"></span></div>')
# the front matter prints no footer of its own: the contents pages get their number from merge()
FRONT_OPTIONS = {**PAGE_OPTIONS, "scale": 1.0, "footer_template": "<span></span>"}
# A4 less the margins, in the CSS pixels Chromium lays out at scale 0.8: the printed column's width and
# a page's height; blocks taller than a third of a page may break across pages (js/print_breaks.js)
PRINT_VIEWPORT = {"width": round((210 - 24) * 96 / 25.4 / 0.8), "height": round((297 - 30) * 96 / 25.4 / 0.8)}
SPLIT_ABOVE_PX = PRINT_VIEWPORT["height"] // 3
# a picture (at least PICTURE_MIN_PX tall) that opens a page after one left BLANK_LIMIT of its body
# empty is drawn smaller to fit that gap (with room for its caption), down to SHRINK_FLOOR of its size
PICTURE_MIN_PX = 100
BLANK_LIMIT = 0.3
CAPTION_ALLOWANCE_PT = 60.0
SHRINK_FLOOR = 0.6
NUMBER_SIZE_PT = 6.5                           # the page number merge() writes in the footer
NUMBER_BASELINE_PT = 5.8 * PT_PER_MM          # above the paper's bottom edge: the footer title's baseline
FRONT_NAME = "_book_front.html"
# the book's licences (LICENSE files at the repository's root), on the title page and in the metadata
LICENCE = "正文与插图采用 CC BY-SA 4.0 许可，代码采用 MIT 许可"
# what the printed API reference says in place of the entries it leaves out (js/print_appendix.js)
APPENDIX_NOTE = "PDF 只收录每个模块的用途（它的说明的第一段）；每个函数、类与常量的说明见网页版的这一页。"
FONT_FILES = ("/FontFile", "/FontFile2", "/FontFile3")   # a font descriptor's embedded glyph programs


def book_meta(config: Path = CONFIG) -> tuple[str, str]:
    """The book's title and author, as _config.yml names them (the title page prints both)."""
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    return str(data["title"]), str(data.get("author") or "")


BOOK_TITLE = book_meta()[0]


def docnames() -> list[str]:
    return [re.sub(r"\.(ipynb|md)$", "", e) for e in toc_entries()]


@dataclass
class Part:
    """One printed piece of the book: a built page (or the front matter), its title, its PDF, and its
    sections as (anchor id, heading) in page order."""
    doc: str
    title: str
    data: bytes
    sections: list[tuple[str, str]] = field(default_factory=list)


# ----------------------------------------------------------------------------- printing
def print_pages(html: Path, docs: list[str], timeout_ms: int = 30_000, browser=None) -> list[Part]:
    """Each built page printed by headless Chromium, with its title and sections; without a `browser`,
    one that draws the Chinese fonts from their TrueType twins (`booktools.print_fonts.launch`)."""
    if browser is None:
        with print_fonts.launch(html) as b:
            return print_pages(html, docs, timeout_ms, b)
    return [_print_page(browser, html, doc, timeout_ms) for doc in docs]


def _print_page(browser, html: Path, doc: str, timeout_ms: int) -> Part:
    from booktools.browser import offline_context, script
    from booktools.toc import WIDGET_STATE, WIDGET_VIEW

    page = (html / f"{doc}.html").resolve()
    if not page.is_file():
        raise FileNotFoundError(f"页面不存在：{page}（先构建 HTML）")
    context = offline_context(browser)
    try:
        tab = context.new_page()
        tab.goto(page.as_uri(), wait_until="load", timeout=timeout_ms)
        tab.evaluate(script("await_render"), [WIDGET_VIEW, WIDGET_STATE, timeout_ms])  # waits for math, widgets
        use_truetype_web_fonts(tab)
        tab.emulate_media(media="print")
        # lay the page out at the printed column's width, then mark which blocks may split (print.css)
        tab.set_viewport_size(PRINT_VIEWPORT)
        tab.evaluate(script("print_appendix"), APPENDIX_NOTE)   # the API reference: a short appendix
        tab.evaluate(script("print_breaks"), SPLIT_ABOVE_PX)
        title = tab.evaluate(script("page_title"))
        sections = [(s["id"], s["title"]) for s in tab.evaluate(script("page_sections"))]
        data, shrink = tab.pdf(outline=False, tagged=True, **PAGE_OPTIONS), {}
        for _attempt in range(2):  # a picture pushed to the next page, leaving most of this one empty
            heights = tab.evaluate(script("print_images"), [PICTURE_MIN_PX, shrink])
            more = picture_fixes(data, heights)
            if not more:
                break
            shrink.update(more)
            tab.evaluate(script("print_images"), [PICTURE_MIN_PX, shrink])
            data = tab.pdf(outline=False, tagged=True, **PAGE_OPTIONS)
        return Part(doc, title, data, sections)
    finally:
        context.close()


def use_truetype_web_fonts(tab) -> int:
    """Replace the page's CFF web fonts (MathJax's) with their TrueType twins for this print
    (`booktools.print_fonts.web_font_css`), and wait until they are loaded; returns how many."""
    from booktools.browser import script

    css = print_fonts.web_font_css(tab.evaluate(script("print_fonts")))
    if css:
        tab.add_style_tag(content=css)
        tab.evaluate(script("fonts_loaded"))
    return css.count("@font-face")


def picture_fixes(data: bytes, heights_px: list[float]) -> dict[str, int]:
    """Pictures to draw smaller, {index among the page's pictures: new maximum height in CSS px}: each
    picture that opens a page after one left at least `BLANK_LIMIT` empty (not the last page), if
    it fits the gap at no less than `SHRINK_FLOOR` of its size. `heights_px` are the page's pictures
    (js/print_images.js), in the order the PDF draws its images of that size."""
    pages = pdf_read.read_pages(data)
    px_to_pt = 0.75 * PAGE_OPTIONS["scale"]
    top, bottom = MARGIN_MM["top"] * PT_PER_MM, MARGIN_MM["bottom"] * PT_PER_MM
    seen, images = set(), []
    for p in pages:
        for m in sorted(p.marks, key=lambda m: m.y0):
            key = (p.number, round(m.x0), round(m.y0), round(m.x1), round(m.y1))
            if m.kind == "image" and m.y1 - m.y0 >= PICTURE_MIN_PX * px_to_pt * 0.95 and key not in seen:
                seen.add(key)
                images.append((p.number, m))
    if len(images) != len(heights_px):
        return {}  # the PDF's pictures do not match the page's: change nothing rather than the wrong one
    fixes = {}
    for p, nxt in zip(pages, pages[1:]):
        if pdf_read.blank_fraction(p, top, bottom) < BLANK_LIMIT:
            continue
        body = [m for m in nxt.marks if top <= m.y1 and m.y0 <= nxt.height - bottom]
        first = min(body, key=lambda m: m.y0, default=None)
        lowest = max((m.y1 for m in p.marks if m.y0 <= p.height - bottom), default=top)
        for i, (number, m) in enumerate(images):
            if number == nxt.number and first is not None and m.y0 - first.y0 < 24:
                gap = p.height - bottom - lowest
                height = gap - CAPTION_ALLOWANCE_PT
                if height >= SHRINK_FLOOR * (m.y1 - m.y0):
                    fixes[str(i)] = int(height / px_to_pt)
                break
    return fixes


def print_html(browser, path: Path, timeout_ms: int = 30_000) -> bytes:
    from booktools.browser import offline_context

    context = offline_context(browser)
    try:
        tab = context.new_page()
        tab.goto(path.resolve().as_uri(), wait_until="load", timeout=timeout_ms)
        tab.evaluate("document.fonts.ready")
        return tab.pdf(outline=False, tagged=True, **FRONT_OPTIONS)
    finally:
        context.close()


# ----------------------------------------------------------------------------- front matter
FRONT_CSS = """
@page { size: A4; }
body { font-family: 'Noto Sans CJK SC', sans-serif; color: #222; margin: 0; font-size: 10.5pt; }
.title-page { height: 240mm; display: flex; flex-direction: column; justify-content: center;
              text-align: center; break-after: page; }
.title-page h1 { font-size: 30pt; font-weight: 700; margin: 0 0 10mm; }
.title-page .author { font-size: 14pt; color: #444; }
.title-page .note { margin-top: 40mm; font-size: 9pt; color: #777; }
.title-page .licence { margin-top: 3mm; font-size: 9pt; color: #777; }
.contents h2 { font-size: 18pt; margin: 0 0 6mm; }
.contents ol { list-style: none; margin: 0; padding: 0; }
.contents li { break-inside: avoid; }
.contents a { color: inherit; text-decoration: none; display: flex; align-items: last baseline; }
.contents .chapter > a { font-weight: 700; margin-top: 3mm; }
.contents .section > a { padding-left: 7mm; font-size: 9.5pt; color: #333; }
.contents .leader { flex: 1; border-bottom: 1px dotted #999; margin: 0 2mm; min-width: 8mm; }
.contents .page { min-width: 8mm; text-align: right; font-variant-numeric: tabular-nums; }
"""


@dataclass
class ContentsEntry:
    """A line of the printed contents: a page of the book (level 1) or one of its sections (level 2)."""
    level: int
    title: str
    page: int
    href: str


def front_matter_html(title: str, author: str, entries: list[ContentsEntry]) -> str:
    """The title page and the contents (every entry with its page number, linked to its place)."""
    esc = html_lib.escape
    rows = []
    for e in entries:
        cls = "chapter" if e.level == 1 else "section"
        rows.append(f'<li class="{cls}"><a href="{esc(e.href)}"><span class="text">{esc(e.title)}</span>'
                    f'<span class="leader"></span><span class="page">{e.page}</span></a></li>')
    return ("<!DOCTYPE html>\n"
            f'<html lang="zh-CN"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{FRONT_CSS}</style></head><body>"
            f'<section class="title-page"><h1>{esc(title)}</h1><div class="author">{esc(author)}</div>'
            '<div class="note">本 PDF 由网页版逐页打印而成；各章的探索器在这里只显示默认状态。</div>'
            f'<div class="licence">{esc(LICENCE)}</div></section>'
            f'<section class="contents"><h2>目录</h2><ol>{"".join(rows)}</ol></section>'
            "</body></html>\n")


# ----------------------------------------------------------------------------- joining (pikepdf)
def _open(data: bytes) -> pikepdf.Pdf:
    return pikepdf.open(io.BytesIO(data))


def _page_index(pdf: pikepdf.Pdf) -> dict[tuple[int, int], int]:
    """{page object's (number, generation): its 0-based position}."""
    return {page.obj.objgen: i for i, page in enumerate(pdf.pages)}


def named_destinations(pdf: pikepdf.Pdf) -> dict[str, tuple[int, list]]:
    """The named destinations of a PDF (the catalog's /Dests dictionary, as Chromium writes them, and
    the /Names /Dests tree, as `merge()` does): {name: (0-based page, the rest of the [page …] array)}."""
    where, found = _page_index(pdf), {}
    entries = list(pdf.Root.get("/Dests", {}).items())
    if "/Names" in pdf.Root and "/Dests" in pdf.Root.Names:
        entries += list(pikepdf.NameTree(pdf.Root.Names.Dests).items())
    for name, dest in entries:
        dest = dest.get("/D") if isinstance(dest, pikepdf.Dictionary) else dest
        if isinstance(dest, pikepdf.Array) and len(dest) and dest[0].objgen in where:
            found[unquote(str(name).removeprefix("/"))] = (where[dest[0].objgen], list(dest)[1:])
    return found


def contents_entries(html: Path, parts: list[Part], first_page: int) -> list[ContentsEntry]:
    """The contents of the book whose pages `parts` are, numbered as if they start on page `first_page`."""
    entries, start = [], first_page
    for part in parts:
        with _open(part.data) as pdf:
            dests, count = named_destinations(pdf), len(pdf.pages)
        uri = (html / f"{part.doc}.html").resolve().as_uri()
        entries.append(ContentsEntry(1, part.title, start, uri))
        for anchor, heading in part.sections:
            if anchor in dests:
                entries.append(ContentsEntry(2, heading, start + dests[anchor][0], f"{uri}#{anchor}"))
        start += count
    return entries


def build_book(html: Path, docs: list[str] | None = None, meta: tuple[str, str] | None = None,
               browser=None) -> bytes:
    """Print every page (`docs`, default the toc's), then the title page and contents numbered to
    match, and join them. `meta`: (title, author), default _config.yml's; `browser`: an open one."""
    if browser is None:
        with print_fonts.launch(html) as b:
            return build_book(html, docs, meta, b)
    title, author = book_meta() if meta is None else meta
    with tempfile.TemporaryDirectory() as tmp:
        parts = print_pages(html, docnames() if docs is None else docs, browser=browser)
        front_path = Path(tmp) / FRONT_NAME
        front_pages = 2
        for _attempt in range(4):  # the contents' length moves the numbers it prints: print until stable
            front_path.write_text(front_matter_html(title, author, contents_entries(html, parts, front_pages + 1)),
                                  encoding="utf-8")
            front = print_html(browser, front_path)
            if page_count(front) == front_pages:
                break
            front_pages = page_count(front)
        else:
            raise RuntimeError("目录页数不收敛")
        return merge([Part("", "目录", front)] + parts, title, unnumbered=1, contents_page=2)


def _stamp_number(out: pikepdf.Pdf, page: pikepdf.Page, number: int, font: pikepdf.Object) -> None:
    """Draw `number` in the page's footer, right-aligned at the right margin (Helvetica digits: 0.556 em
    each), after the page's own drawing (wrapped in q … Q so its graphics state cannot leak), marked as
    a pagination artifact (not part of the text a screen reader reads)."""
    name = page.add_resource(font, pikepdf.Name.Font, prefix="BLPageNo")
    text = str(number)
    x = float(page.mediabox[2]) - MARGIN_MM["right"] * PT_PER_MM - 0.556 * NUMBER_SIZE_PT * len(text)
    page.contents_add(pikepdf.Stream(out, b"q\n"), prepend=True)
    page.contents_add(pikepdf.Stream(out, b"Q\n/Artifact <</Type /Pagination>> BDC q BT %s %.1f Tf 0.4 0.4 0.4 rg "
                                          b"1 0 0 1 %.2f %.2f Tm (%s) Tj ET Q EMC\n" % (
        str(name).encode(), NUMBER_SIZE_PT, x, NUMBER_BASELINE_PT, text.encode())))


def _link_target(url: str, index: dict[str, int]) -> str | None:
    """The joined PDF's destination name for a link to a printed page (a file:// URL of the built
    site, with or without an anchor), or None for a link that leaves the book."""
    parts = urlsplit(url)
    target = index.get(Path(unquote(parts.path)).name)
    if parts.scheme != "file" or target is None:
        return None
    return f"p{target}-{unquote(parts.fragment) or 'page-start'}"


def _join_structure(out: pikepdf.Pdf, sources: list[pikepdf.Pdf], starts: list[int]) -> bool:
    """Put the structure trees of tagged parts (Chromium's `tagged` print: headings, paragraphs, lists,
    tables, figures with their alternative text) under one StructTreeRoot of the joined PDF, in page
    order: each part's marked-content keys (/StructParents, /StructParent) move past the previous parts'.
    Leaves the PDF untagged, and says so (False), if any part has no tree: half a tree misleads a screen
    reader more than none."""
    trees = [src.Root.get("/StructTreeRoot") for src in sources]
    if not trees or any(tree is None for tree in trees):
        return False
    root = out.make_indirect(pikepdf.Dictionary(Type=pikepdf.Name.StructTreeRoot))
    kids, parents, offset = pikepdf.Array(), pikepdf.NumberTree.new(out), 0
    for k, tree in enumerate(trees):
        tree = out.copy_foreign(tree)   # its /Pg references land on the pages already copied
        top = tree.get("/K", pikepdf.Array())
        for element in top if isinstance(top, pikepdf.Array) else [top]:
            if element.get("/S") == pikepdf.Name.Document:   # the book is the document, a printed page a part
                element.S = pikepdf.Name.Part
            kids.append(element)
        entries = list(pikepdf.NumberTree(tree.ParentTree).items()) if "/ParentTree" in tree else []
        for key, value in entries:
            parents[int(key) + offset] = value
        for page in out.pages[starts[k]:starts[k + 1]]:
            if "/StructParents" in page.obj:
                page.obj.StructParents = int(page.obj.StructParents) + offset
            for annot in page.get("/Annots", []):
                if "/StructParent" in annot:
                    annot.StructParent = int(annot.StructParent) + offset
        for key in ("/RoleMap", "/ClassMap"):
            if key in tree:
                merged = root.get(key, pikepdf.Dictionary())
                for name, value in tree[key].items():
                    merged[name] = value
                root[key] = merged
        offset += max(int(tree.get("/ParentTreeNextKey", 0)), max((int(key) for key, _ in entries), default=-1) + 1)
    root.K = out.make_indirect(pikepdf.Dictionary(Type=pikepdf.Name.StructElem, S=pikepdf.Name.Document,
                                                  P=root, K=kids))
    for element in kids:
        element.P = root.K
    root.ParentTree = parents.obj
    root.ParentTreeNextKey = offset
    out.Root.StructTreeRoot = root
    out.Root.MarkInfo = pikepdf.Dictionary(Marked=True)
    return True


def merge(parts: list[Part], title: str = BOOK_TITLE, unnumbered: int = 0, contents_page: int | None = None) -> bytes:
    """Join Chromium-printed PDFs in order (pikepdf): one page tree numbered continuously (every page
    after the first `unnumbered` carries its number in the footer), one bookmark per part with its
    sections below it (the first part's bookmark points at `contents_page`, 1-based, if given), named
    anchors kept per part (prefixed `p<k>-`), links from one part to another (file:// URLs of the built
    pages) turned into jumps inside the joined PDF, the parts' structure trees joined (tagged PDF), and
    the book's title, language and licence."""
    buf = io.BytesIO()
    with contextlib.ExitStack() as stack:
        sources = [stack.enter_context(_open(p.data)) for p in parts]
        out = stack.enter_context(pikepdf.new())
        index = {Path(p.doc).name + ".html": k for k, p in enumerate(parts) if p.doc}
        dests: dict[str, tuple[int, list]] = {}
        starts: list[int] = []
        for k, src in enumerate(sources):
            starts.append(len(out.pages))
            dests[f"p{k}-page-start"] = (starts[k], [pikepdf.Name.XYZ, None, None, None])
            for name, (i, rest) in named_destinations(src).items():
                dests[f"p{k}-{name}"] = (starts[k] + i, rest)
            with warnings.catch_warnings():   # pikepdf warns that names are not carried: they are, above
                warnings.simplefilter("ignore", pikepdf.PageCopyWarning)
                out.pages.extend(src.pages)
        starts.append(len(out.pages))
        for k in range(len(parts)):
            for page in out.pages[starts[k]:starts[k + 1]]:
                for annot in page.get("/Annots", []):
                    if isinstance(annot.get("/Dest"), pikepdf.Name):   # an anchor on the same printed page
                        annot.Dest = pikepdf.String(f"p{k}-{unquote(str(annot.Dest)[1:])}")
                    action = annot.get("/A")
                    if action is not None and action.get("/S") == pikepdf.Name.URI:
                        target = _link_target(str(action.URI), index)
                        if target is not None:
                            annot.A = pikepdf.Dictionary(S=pikepdf.Name.GoTo, D=pikepdf.String(target))
        _join_structure(out, sources, starts)
        tree = pikepdf.NameTree.new(out)
        for name, (i, rest) in dests.items():
            tree[name] = out.make_indirect(pikepdf.Array([out.pages[i].obj, *rest]))
        out.Root.Names = pikepdf.Dictionary(Dests=tree.obj)
        font = out.make_indirect(pikepdf.Dictionary(Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1,
                                                    BaseFont=pikepdf.Name.Helvetica,
                                                    Encoding=pikepdf.Name.WinAnsiEncoding))
        for number, page in enumerate(out.pages, start=1):
            if number > unnumbered:
                _stamp_number(out, page, number, font)
        with out.open_outline() as outline:
            for k, part in enumerate(parts):
                first = starts[k] + (contents_page - 1 if k == 0 and contents_page else 0)
                item = pikepdf.OutlineItem(part.title, first)
                for anchor, heading in part.sections:
                    if f"p{k}-{anchor}" in dests:
                        item.children.append(pikepdf.OutlineItem(heading, pikepdf.String(f"p{k}-{anchor}")))
                item.is_closed = True
                outline.root.append(item)
        out.Root.PageMode = pikepdf.Name.UseOutlines
        out.Root.Lang = pikepdf.String("zh-CN")
        with out.open_metadata(set_pikepdf_as_editor=False) as meta:
            meta["dc:title"] = title
            meta["dc:language"] = ["zh-CN"]
            meta["dc:rights"] = LICENCE
        out.docinfo["/Title"] = title
        out.docinfo["/Producer"] = f"booktools.pdf (pikepdf {pikepdf.__version__}) + Skia/PDF"
        fix_to_unicode(out)   # the text a reader copies is the text the page means (booktools.pdf_text)
        out.save(buf)
    return buf.getvalue()


# ----------------------------------------------------------------------------- reading back
def page_count(data: bytes) -> int:
    """The number of pages."""
    with _open(data) as pdf:
        return len(pdf.pages)


@dataclass
class Bookmark:
    """An entry of a PDF's outline: its title, the 1-based page it jumps to, and its children."""
    title: str
    page: int | None
    children: list["Bookmark"] = field(default_factory=list)


def outline(data: bytes) -> list[Bookmark]:
    """The bookmarks of a PDF, as a tree (explicit destinations and named ones both resolved to pages)."""
    with _open(data) as pdf:
        where, names = _page_index(pdf), named_destinations(pdf)

        def page_of(item: pikepdf.OutlineItem) -> int | None:
            dest = item.destination
            if dest is None and item.action is not None and item.action.get("/S") == pikepdf.Name.GoTo:
                dest = item.action.D
            if isinstance(dest, pikepdf.Array) and len(dest):
                return where[dest[0].objgen] + 1 if dest[0].objgen in where else None
            if isinstance(dest, (pikepdf.Name, pikepdf.String)):
                name = unquote(str(dest).removeprefix("/")) if isinstance(dest, pikepdf.Name) else str(dest)
                return names[name][0] + 1 if name in names else None
            return None

        def level(items) -> list[Bookmark]:
            return [Bookmark(item.title, page_of(item), level(item.children)) for item in items]

        with pdf.open_outline() as tree:
            return level(tree.root)


def outline_titles(data: bytes) -> list[str]:
    """The top-level bookmarks of a PDF, in order."""
    return [b.title for b in outline(data)]


def structure_roles(data: bytes) -> Counter:
    """How many elements of each role (Document, Part, H1, P, Figure …) the PDF's structure tree holds
    (empty if the PDF is not tagged); an element that marks content on a page the PDF does not hold
    counts under "lost page"."""
    roles: Counter = Counter()
    with _open(data) as pdf:
        if "/StructTreeRoot" not in pdf.Root:
            return roles
        pages = set(_page_index(pdf))
        todo = [pdf.Root.StructTreeRoot.get("/K")]
        while todo:
            node = todo.pop()
            if isinstance(node, pikepdf.Array):
                todo.extend(node)
            elif isinstance(node, pikepdf.Dictionary) and "/S" in node:
                roles[str(node.S)[1:]] += 1
                if "/Pg" in node and node.Pg.objgen not in pages:
                    roles["lost page"] += 1
                todo.append(node.get("/K"))
    return roles


def embedded_fonts(data: bytes) -> list[str]:
    """The fonts whose glyphs travel in the PDF (subset prefix dropped, sorted): a font file
    (/FontFile, /FontFile2, /FontFile3) in its descriptor, or a Type 3 font, whose glyphs are drawing
    procedures in the file. Skia writes CFF-based OpenType fonts such as Noto Sans CJK as Type 3
    (`type3_fonts()`) unless they are given TrueType twins (`booktools.print_fonts`)."""
    names = set()
    with _open(data) as pdf:
        for obj in pdf.objects:
            if not isinstance(obj, pikepdf.Dictionary) or obj.get("/Type") != pikepdf.Name.Font:
                continue
            descriptors = [obj.get("/FontDescriptor")] + [d.get("/FontDescriptor") for d in obj.get("/DescendantFonts", [])]
            for d in descriptors:
                if d is not None and "/FontName" in d and (
                        obj.get("/Subtype") == pikepdf.Name.Type3 or any(k in d for k in FONT_FILES)):
                    names.add(str(d.FontName)[1:].split("+")[-1])
    return sorted(names)


def type3_fonts(data: bytes) -> list[str]:
    """The Type 3 fonts of a PDF (their names, subset prefix dropped, or `Type3 <object number>` for one
    without a name), one entry per font dictionary: glyphs drawn as procedures, which Skia writes for a
    font without TrueType outlines (`booktools.print_fonts` gives the book's fonts TrueType twins)."""
    found = []
    with _open(data) as pdf:
        for obj in pdf.objects:
            if (isinstance(obj, pikepdf.Dictionary) and obj.get("/Type") == pikepdf.Name.Font
                    and obj.get("/Subtype") == pikepdf.Name.Type3):
                d = obj.get("/FontDescriptor")
                name = d.get("/FontName") if d is not None else obj.get("/Name")
                found.append(str(name)[1:].split("+")[-1] if name is not None else f"Type3 {obj.objgen[0]}")
    return found


def build(html: Path, out: Path) -> tuple[int, float]:
    t0 = time.monotonic()
    data = build_book(html)
    out.write_bytes(data)
    return page_count(data), time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m booktools.pdf", description=__doc__.splitlines()[0])
    ap.add_argument("--html", default=str(ROOT / "_build" / "html"), help="the built HTML book")
    ap.add_argument("--out", help=f"the PDF to write (default <html>/{PDF_NAME})")
    args = ap.parse_args(argv)
    html = Path(args.html)
    out = Path(args.out) if args.out else html / PDF_NAME
    try:
        pages, seconds = build(html, out)
    except FileNotFoundError as exc:
        print(f"booktools.pdf: {exc}", file=sys.stderr)
        return 2
    fonts = embedded_fonts(out.read_bytes())
    if not any("CJK" in f for f in fonts):  # Chinese drawn in no CJK font: boxes, or glyphs the file lacks
        print(f"booktools.pdf: {out} 没有内嵌中文字体（只有 {fonts}）：请安装 fonts-noto-cjk（scripts/setup-env.sh）",
              file=sys.stderr)
        return 1
    type3 = Counter(type3_fonts(out.read_bytes()))
    print(f"pdf: {out} ({pages} pages, {out.stat().st_size / 2**20:.1f} MiB, {seconds:.0f} s; "
          f"fonts: {', '.join(fonts)}; Type 3: {', '.join(f'{k} ×{n}' for k, n in type3.items()) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
