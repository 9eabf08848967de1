"""The whole book as one PDF, for print and offline reading, made from the built pages.

    .venv/bin/python -m booktools.pdf [--html _build/html] [--out _build/html/batch-size-book.pdf]

scripts/build-book.sh runs it after the HTML build. Each page the toc lists is opened in the
project's headless Chromium (`booktools.browser`, network off), left to typeset its formulas and draw
its widgets' default state (js/await_render.js, the wait of `booktools.render_check`), and printed with Playwright's
`page.pdf` (A4, print styles from book/_static/page.css and book/_static/print.css, which lets big
tables and code blocks break across pages instead of leaving half a page empty). Chromium embeds the
subset of every font it draws with, so the Chinese text carries its Noto Sans CJK glyphs
(fonts-noto-cjk, which scripts/setup-env.sh installs). The book is then put together by `merge()`, a
small joiner for the PDF 1.4 files Chromium (Skia) writes (classic xref table, no object streams), so
it needs no PDF library:

- in front, a title page (the title and author of _config.yml) and a contents page listing every page
  and its sections (the article's second-level headings, js/page_sections.js) with the page they
  start on, read from the named destinations Chromium writes for them; the front matter is printed
  again if its length changed the numbers it shows (`front_matter_html()`);
- one page tree with continuous page numbers: Chromium's footer carries the page's title, and
  `merge()` writes the number beside it on every page but the title page (Chromium's own page
  counter restarts with each printed page);
- bookmarks: one per page, its sections nested below it, the contents page first;
- links between pages turned into jumps inside the PDF, anchors kept per page.

The result lands in the built site (`_build/html/batch-size-book.pdf`); the preface links to it.
`outline()`, `outline_titles()` and `page_count()` read a joined PDF back, `booktools.pdf_read` reads
its pages (the tests use both); the build fails if `embedded_fonts()` finds no CJK font in it (the
Chinese text would print without its glyphs).
"""
from __future__ import annotations

import argparse
import html as html_lib
import re
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import yaml

from booktools import ROOT
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
    """Each built page printed by headless Chromium, with its title and sections."""
    from booktools.browser import launch

    if browser is None:
        with launch() as b:
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
        tab.emulate_media(media="print")
        # lay the page out at the printed column's width, then mark which blocks may split (print.css)
        tab.set_viewport_size(PRINT_VIEWPORT)
        tab.evaluate(script("print_breaks"), SPLIT_ABOVE_PX)
        title = tab.evaluate(script("page_title"))
        sections = [(s["id"], s["title"]) for s in tab.evaluate(script("page_sections"))]
        data, shrink = tab.pdf(outline=False, tagged=False, **PAGE_OPTIONS), {}
        for _attempt in range(2):  # a picture pushed to the next page, leaving most of this one empty
            heights = tab.evaluate(script("print_images"), [PICTURE_MIN_PX, shrink])
            more = picture_fixes(data, heights)
            if not more:
                break
            shrink.update(more)
            tab.evaluate(script("print_images"), [PICTURE_MIN_PX, shrink])
            data = tab.pdf(outline=False, tagged=False, **PAGE_OPTIONS)
        return Part(doc, title, data, sections)
    finally:
        context.close()


def picture_fixes(data: bytes, heights_px: list[float]) -> dict[str, int]:
    """Pictures to draw smaller, {index among the page's pictures: new maximum height in CSS px}: each
    picture that opens a page after one left at least `BLANK_LIMIT` empty (not the last page), if
    it fits the gap at no less than `SHRINK_FLOOR` of its size. `heights_px` are the page's pictures
    (js/print_images.js), in the order the PDF draws its images of that size."""
    from booktools import pdf_read

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
        return tab.pdf(outline=False, tagged=False, **FRONT_OPTIONS)
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
            '<div class="note">本 PDF 由网页版逐页打印而成；各章的探索器在这里只显示默认状态。</div></section>'
            f'<section class="contents"><h2>目录</h2><ol>{"".join(rows)}</ol></section>'
            "</body></html>\n")


def contents_entries(html: Path, parts: list[Part], first_page: int) -> list[ContentsEntry]:
    """The contents of the book whose pages `parts` are, numbered as if they start on page `first_page`."""
    entries, start = [], first_page
    for part in parts:
        pdf = _parse(part.data)
        pages = {num: i for i, num in enumerate(page_objects(pdf))}
        dests = named_destinations(pdf)
        uri = (html / f"{part.doc}.html").resolve().as_uri()
        entries.append(ContentsEntry(1, part.title, start, uri))
        for anchor, heading in part.sections:
            if anchor in dests:
                entries.append(ContentsEntry(2, heading, start + pages[dests[anchor][0]], f"{uri}#{anchor}"))
        start += len(pages)
    return entries


def build_book(html: Path, docs: list[str] | None = None, meta: tuple[str, str] | None = None,
               browser=None) -> bytes:
    """Print every page (`docs`, default the toc's), then the title page and contents numbered to
    match, and join them. `meta`: (title, author), default _config.yml's; `browser`: an open one."""
    from booktools.browser import launch

    if browser is None:
        with launch() as b:
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


# ----------------------------------------------------------------------------- joining
_REF = re.compile(rb"(\d+) 0 R\b")
_STREAM = re.compile(rb">>\s*stream\r?\n")


@dataclass
class _Pdf:
    objects: dict[int, bytes]   # number -> body between "N 0 obj" and "endobj" (exclusive)
    root: int
    info: int | None

    def dict_of(self, num: int) -> bytes:
        body = self.objects[num]
        m = _STREAM.search(body)
        return body[: m.start() + 2] if m else body


def _parse(data: bytes) -> _Pdf:
    """A PDF 1.4 file with a classic xref table (what Skia writes)."""
    if not data.startswith(b"%PDF-"):
        raise ValueError("not a PDF")
    startxref = int(re.findall(rb"startxref\s+(\d+)", data)[-1])
    if not data[startxref:].startswith(b"xref"):
        raise ValueError("xref streams are not supported (expected Chromium/Skia output)")
    trailer = data[data.index(b"trailer", startxref):]
    root = int(re.search(rb"/Root (\d+) 0 R", trailer).group(1))
    info_m = re.search(rb"/Info (\d+) 0 R", trailer)
    offsets = {}
    lines = data[startxref + 4: data.index(b"trailer", startxref)].split()
    i = 0
    while i < len(lines):  # subsections: "first count", then count entries "offset gen n|f"
        first, count = int(lines[i]), int(lines[i + 1])
        i += 2
        for j in range(count):
            off, _gen, kind = lines[i: i + 3]
            i += 3
            if kind == b"n":
                offsets[first + j] = int(off)
    ordered = sorted(offsets.items(), key=lambda kv: kv[1])
    objects = {}
    for i, (num, off) in enumerate(ordered):
        end = ordered[i + 1][1] if i + 1 < len(ordered) else startxref
        chunk = data[off:end]
        head = re.match(rb"\s*(\d+) 0 obj\s*", chunk)
        if not head or int(head.group(1)) != num:
            raise ValueError(f"object {num} not at its xref offset")
        body = chunk[head.end():]
        body = body[: body.rindex(b"endobj")]
        objects[num] = body
    return _Pdf(objects, root, int(info_m.group(1)) if info_m else None)


parse_pdf = _parse


def stream_data(pdf: _Pdf, num: int) -> bytes:
    """The decoded data of stream object `num` (Flate or none: what Skia writes)."""
    body = pdf.objects[num]
    m = _STREAM.search(body)
    raw = body[m.end():]
    length = re.search(rb"/Length (\d+)(?! 0 R)", body[: m.start()])
    raw = raw[: int(length.group(1))] if length else raw[: raw.rindex(b"endstream")]
    return zlib.decompress(raw) if b"/FlateDecode" in body[: m.start()] else raw


def _renumber(body: bytes, base: int) -> bytes:
    """Shift every indirect reference in an object's dictionary part (never its stream data)."""
    m = _STREAM.search(body)
    head, tail = (body[: m.start()], body[m.start():]) if m else (body, b"")
    return _REF.sub(lambda r: b"%d 0 R" % (int(r.group(1)) + base), head) + tail


def _utf16(text: str) -> bytes:
    return b"<FEFF" + text.encode("utf-16-be").hex().upper().encode() + b">"


def _name_prefix(k: int) -> bytes:
    return b"p%d-" % k


def page_objects(pdf: _Pdf, node: int | None = None) -> list[int]:
    """The object numbers of a PDF's pages, in page order (a walk of its page tree)."""
    if node is None:
        node = int(re.search(rb"/Pages (\d+) 0 R", pdf.dict_of(pdf.root)).group(1))
    d = pdf.dict_of(node)
    if re.search(rb"/Type\s*/Pages\b", d):
        kids = re.search(rb"/Kids\s*\[([^\]]*)\]", d).group(1)
        return [p for kid in _REF.findall(kids) for p in page_objects(pdf, int(kid))]
    return [node]


def named_destinations(pdf: _Pdf) -> dict[str, tuple[int, bytes]]:
    """The named destinations of a Chromium-printed PDF: {name: (page object, the whole [..] array)}."""
    m = re.search(rb"/Dests (\d+) 0 R", pdf.dict_of(pdf.root))
    if not m:
        return {}
    body = pdf.dict_of(int(m.group(1)))
    return {unquote(name.decode("latin-1")): (int(page), arr)
            for name, arr, page in re.findall(rb"/([^\s/\[\]<>()]*)\s*(\[\s*(\d+) 0 R[^\]]*\])", body)}


def _number_stream(number: int, width: float) -> bytes:
    """Content that ends the page's own drawing (its `q` opened before it) and writes `number` in the
    footer, right-aligned at the right margin (Helvetica digits: 0.556 em each)."""
    text = str(number).encode()
    x = width - MARGIN_MM["right"] * PT_PER_MM - 0.556 * NUMBER_SIZE_PT * len(text)
    ops = (b"Q\nq\nBT\n/BLPageNo %.1f Tf\n0.4 0.4 0.4 rg\n1 0 0 1 %.2f %.2f Tm\n(%s) Tj\nET\nQ\n"
           % (NUMBER_SIZE_PT, x, NUMBER_BASELINE_PT, text))
    return b"<</Length %d>> stream\n" % len(ops) + ops + b"\nendstream\n"


def _with_number(head: bytes, font: int, opener: int, stamp: int, resources: dict[int, bytes]) -> bytes:
    """A page dictionary whose contents run inside q/Q and then draw the page number (`stamp`), with
    the number's font among its resources."""
    head = re.sub(rb"/Contents\s*(?:\[([^\]]*)\]|(\d+ 0 R))",
                  lambda m: b"/Contents [%d 0 R %s %d 0 R]" % (opener, (m.group(1) or m.group(2)).strip(), stamp),
                  head, count=1)
    font_entry = b"/BLPageNo %d 0 R " % font
    if re.search(rb"/Resources\s*<<", head):
        if re.search(rb"/Font\s*<<", head):
            return re.sub(rb"/Font\s*<<", b"/Font <<" + font_entry, head, count=1)
        return re.sub(rb"/Resources\s*<<", b"/Resources <</Font <<" + font_entry + b">> ", head, count=1)
    ref = re.search(rb"/Resources\s*(\d+) 0 R", head)
    if ref:  # shared resources: the numbered page gets its own copy with the font added
        shared = resources[int(ref.group(1))]
        body = (re.sub(rb"/Font\s*<<", b"/Font <<" + font_entry, shared, count=1) if b"/Font" in shared
                else shared.replace(b"<<", b"<</Font <<" + font_entry + b">> ", 1))
        return head.replace(ref.group(0), b"/Resources " + body.strip(), 1)
    return head.replace(b"<<", b"<</Resources <</Font <<" + font_entry + b">>>> ", 1)


def merge(parts: list[Part], title: str = BOOK_TITLE, unnumbered: int = 0, contents_page: int | None = None) -> bytes:
    """Join Chromium-printed PDFs in order: one page tree numbered continuously (every page after the
    first `unnumbered` carries its number in the footer), one bookmark per part with its sections
    below it (the first part's bookmark points at `contents_page`, 1-based, if given), named anchors
    kept per part (prefixed), and links from one part to another (file:// URLs of the built pages)
    turned into jumps inside the joined PDF."""
    pdfs = [_parse(p.data) for p in parts]
    index = {Path(p.doc).name + ".html": k for k, p in enumerate(parts) if p.doc}
    bases, base = [], 0
    for pdf in pdfs:
        bases.append(base)
        base += max(pdf.objects) + 1
    nxt = base
    new_objects: dict[int, bytes] = {}

    def alloc(body: bytes | None = None) -> int:
        nonlocal nxt
        nxt += 1
        if body is not None:
            new_objects[nxt - 1] = body
        return nxt - 1

    catalog, pages_root, outlines_root, dests_obj, info_obj = alloc(), alloc(), alloc(), alloc(), alloc()
    font = alloc(b"<</Type /Font\n/Subtype /Type1\n/BaseFont /Helvetica\n/Encoding /WinAnsiEncoding>>\n")
    opener = alloc(b"<</Length 2>> stream\nq\n\nendstream\n")
    kids, items, dest_entries, page_no = [], [], [], 0
    for k, (pdf, b0) in enumerate(zip(pdfs, bases)):
        cat = pdf.dict_of(pdf.root)
        pages = int(re.search(rb"/Pages (\d+) 0 R", cat).group(1))
        dests = re.search(rb"/Dests (\d+) 0 R", cat)
        order = page_objects(pdf)
        numbers = {num: page_no + i + 1 for i, num in enumerate(order)}
        page_no += len(order)
        prefix = _name_prefix(k)
        skip = {pdf.root} | ({pdf.info} if pdf.info is not None else set())
        for num, body in pdf.objects.items():
            if num in skip:
                continue
            body = _renumber(body, b0)
            m = _STREAM.search(body)
            head, tail = (body[: m.start()], body[m.start():]) if m else (body, b"")
            head = re.sub(rb"/Dest /", b"/Dest /" + prefix, head)

            def link(u: re.Match) -> bytes:
                url = urlsplit(u.group(1).decode("latin-1"))
                target = index.get(Path(unquote(url.path)).name)
                if url.scheme != "file" or target is None:
                    return u.group(0)
                anchor = unquote(url.fragment)
                if anchor and re.fullmatch(r"[A-Za-z0-9_.-]+", anchor):
                    return b"/S /GoTo /D /" + _name_prefix(target) + anchor.encode()
                return b"/S /GoTo /D /" + _name_prefix(target) + b"page-start"

            head = re.sub(rb"/S /URI\s*/URI \(([^)]*)\)", link, head)
            if num == pages:
                head = head.replace(b"<<", b"<</Parent %d 0 R" % pages_root, 1)
            if num in numbers and numbers[num] > unnumbered:
                width = float(re.search(rb"/MediaBox\s*\[\s*[-\d.]+\s+[-\d.]+\s+([-\d.]+)", head).group(1))
                stamp = alloc(_number_stream(numbers[num], width))
                head = _with_number(head, font, opener, stamp,
                                    {n + b0: _renumber(pdf.dict_of(n), b0) for n in _ref_targets(head, b0)})
            new_objects[num + b0] = head + tail
        kids.append(pages + b0)
        part_dests = named_destinations(pdf)
        if dests:
            entries = _renumber(pdf.dict_of(int(dests.group(1))), b0).strip()
            entries = entries.removeprefix(b"<<").removesuffix(b">>")
            dest_entries.append(re.sub(rb"(^|\n)/", lambda m: m.group(1) + b"/" + prefix, entries))
            new_objects.pop(int(dests.group(1)) + b0, None)
        first_page = order[0] + b0
        dest_entries.append(b"/" + prefix + b"page-start [%d 0 R /XYZ null null null]" % first_page)
        mark_page = order[contents_page - 1] + b0 if (k == 0 and contents_page) else first_page
        children = [(heading, _renumber(part_dests[anchor][1], b0))
                    for anchor, heading in parts[k].sections if anchor in part_dests]
        items.append((alloc(), parts[k].title, b"[%d 0 R /XYZ null null null]" % mark_page, children))
    for i, (item, text, dest, children) in enumerate(items):
        links = b"/Prev %d 0 R\n" % items[i - 1][0] if i else b""
        links += b"/Next %d 0 R\n" % items[i + 1][0] if i + 1 < len(items) else b""
        kids_nums = [alloc() for _ in children]
        for j, ((heading, cdest), cnum) in enumerate(zip(children, kids_nums)):
            clinks = b"/Prev %d 0 R\n" % kids_nums[j - 1] if j else b""
            clinks += b"/Next %d 0 R\n" % kids_nums[j + 1] if j + 1 < len(kids_nums) else b""
            new_objects[cnum] = (b"<</Title " + _utf16(heading) + b"\n/Parent %d 0 R\n" % item + clinks
                                 + b"/Dest " + cdest + b">>\n")
        sub = (b"/First %d 0 R\n/Last %d 0 R\n/Count -%d\n" % (kids_nums[0], kids_nums[-1], len(kids_nums))
               if kids_nums else b"")
        new_objects[item] = (b"<</Title " + _utf16(text) + b"\n/Parent %d 0 R\n" % outlines_root + links
                             + sub + b"/Dest " + dest + b">>\n")
    new_objects[outlines_root] = b"<</Type /Outlines\n/First %d 0 R\n/Last %d 0 R\n/Count %d>>\n" % (
        items[0][0], items[-1][0], len(items))
    new_objects[pages_root] = b"<</Type /Pages\n/Kids [%s]\n/Count %d>>\n" % (
        b" ".join(b"%d 0 R" % p for p in kids), page_no)
    new_objects[dests_obj] = b"<<" + b"\n".join(dest_entries) + b">>\n"
    new_objects[catalog] = (b"<</Type /Catalog\n/Pages %d 0 R\n/Outlines %d 0 R\n/Dests %d 0 R\n"
                            b"/PageMode /UseOutlines\n/Lang (zh-CN)>>\n" % (pages_root, outlines_root, dests_obj))
    new_objects[info_obj] = b"<</Title " + _utf16(title) + b"\n/Producer (booktools.pdf + Skia/PDF)>>\n"

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for num in sorted(new_objects):
        offsets[num] = len(out)
        out += b"%d 0 obj\n" % num + new_objects[num] + (b"" if new_objects[num].endswith(b"\n") else b"\n") + b"endobj\n"
    size = nxt
    xref = len(out)
    out += b"xref\n0 %d\n" % size
    for num in range(size):
        out += (b"%010d 00000 n \n" % offsets[num]) if num in offsets else b"0000000000 65535 f \n"
    out += b"trailer\n<</Size %d\n/Root %d 0 R\n/Info %d 0 R>>\nstartxref\n%d\n%%%%EOF\n" % (
        size, catalog, info_obj, xref)
    return bytes(out)


def _ref_targets(head: bytes, base: int) -> list[int]:
    """The original numbers of a renumbered page's /Resources reference (empty if inline)."""
    m = re.search(rb"/Resources\s*(\d+) 0 R", head)
    return [int(m.group(1)) - base] if m else []


# ----------------------------------------------------------------------------- reading back
def page_count(data: bytes) -> int:
    """The number of pages (the page tree's count)."""
    pdf = _parse(data)
    return int(re.search(rb"/Count (\d+)", pdf.dict_of(int(re.search(rb"/Pages (\d+) 0 R",
                                                                        pdf.dict_of(pdf.root)).group(1)))).group(1))


@dataclass
class Bookmark:
    """An entry of a PDF's outline: its title, the 1-based page it jumps to, and its children."""
    title: str
    page: int | None
    children: list["Bookmark"] = field(default_factory=list)


def outline(data: bytes) -> list[Bookmark]:
    """The bookmarks of a PDF, as a tree (explicit destinations and named ones both resolved to pages)."""
    pdf = _parse(data)
    cat = pdf.dict_of(pdf.root)
    root = re.search(rb"/Outlines (\d+) 0 R", cat)
    if not root:
        return []
    numbers = {num: i + 1 for i, num in enumerate(page_objects(pdf))}
    names = named_destinations(pdf)

    def page_of(d: bytes) -> int | None:
        m = re.search(rb"/Dest\s*\[\s*(\d+) 0 R", d)
        if m:
            return numbers.get(int(m.group(1)))
        m = re.search(rb"/Dest\s*/([^\s/\[\]<>()]+)", d)
        return numbers.get(names[m.group(1).decode()][0]) if m and m.group(1).decode() in names else None

    def level(first: re.Match | None) -> list[Bookmark]:
        out, node = [], int(first.group(1)) if first else None
        while node is not None:
            d = pdf.dict_of(node)
            hexed = re.search(rb"/Title <FEFF([0-9A-Fa-f]*)>", d).group(1)
            out.append(Bookmark(bytes.fromhex(hexed.decode()).decode("utf-16-be"), page_of(d),
                                level(re.search(rb"/First (\d+) 0 R", d))))
            m = re.search(rb"/Next (\d+) 0 R", d)
            node = int(m.group(1)) if m else None
        return out

    return level(re.search(rb"/First (\d+) 0 R", pdf.dict_of(int(root.group(1)))))


def outline_titles(data: bytes) -> list[str]:
    """The top-level bookmarks of a PDF, in order."""
    return [b.title for b in outline(data)]


def embedded_fonts(data: bytes) -> list[str]:
    """The fonts whose glyphs travel in the PDF (subset prefix dropped, sorted): a font file
    (/FontFile, /FontFile2, /FontFile3) in its descriptor, or a Type3 font, whose glyphs are drawing
    procedures in the file. Skia writes CFF-based OpenType fonts such as Noto Sans CJK as Type3."""
    pdf = _parse(data)
    named, embedded = {}, set()
    for num in pdf.objects:
        d = pdf.dict_of(num)
        if re.search(rb"/Type\s*/FontDescriptor", d):
            m = re.search(rb"/FontName /([^\s/<>\[\]]+)", d)
            if m:
                named[num] = m.group(1).decode("latin-1").split("+")[-1]
            if re.search(rb"/FontFile[23]? \d+ 0 R", d):
                embedded.add(num)
        elif re.search(rb"/Subtype\s*/Type3", d) and b"/CharProcs" in d:
            m = re.search(rb"/FontDescriptor (\d+) 0 R", d)
            if m:
                embedded.add(int(m.group(1)))
    return sorted({named[n] for n in embedded if n in named})


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
    print(f"pdf: {out} ({pages} pages, {out.stat().st_size / 2**20:.1f} MiB, {seconds:.0f} s; "
          f"fonts: {', '.join(fonts)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
