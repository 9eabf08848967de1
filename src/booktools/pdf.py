"""The whole book as one PDF, for print and offline reading, made from the built pages.

    .venv/bin/python -m booktools.pdf [--html _build/html] [--out _build/html/batch-size-book.pdf]

scripts/build-book.sh runs it after the HTML build. Each page the toc lists is opened in the
project's headless Chromium (`booktools.browser`, network off), left to typeset its formulas and draw
its widgets' default state (js/await_render.js, the wait of `booktools.render_check`), and printed with Playwright's
`page.pdf` (A4, print styles from book/_static/page.css). Chromium embeds the subset of every font it
draws with, so the Chinese text carries its Noto Sans CJK glyphs (fonts-noto-cjk, which
scripts/setup-env.sh installs). The per-page PDFs are then joined in toc order by `merge()`, a small
joiner for the PDF 1.4 files Chromium (Skia) writes (classic xref table, no object streams), so the
book needs no PDF library: one bookmark per page (its title, with the page's own headings below it),
links between pages turned into jumps inside the PDF, anchors kept per page.

The result lands in the built site (`_build/html/batch-size-book.pdf`); the preface links to it.
`outline_titles()` and `page_count()` read a joined PDF back (the tests use them); the build
fails if `embedded_fonts()` finds no CJK font in it (the Chinese text would print without its glyphs).
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from booktools import ROOT
from booktools.toc import toc_entries

PDF_NAME = "batch-size-book.pdf"
BOOK_TITLE = "Batch Size 核心概念"
PAGE_OPTIONS = dict(format="A4", print_background=True, scale=0.8, prefer_css_page_size=False,
                    margin={"top": "14mm", "bottom": "16mm", "left": "12mm", "right": "12mm"},
                    display_header_footer=True, header_template="<span></span>",
                    footer_template=('<div style="width:100%;font-size:8px;color:#666;text-align:center;'
                                     'font-family:\'Noto Sans CJK SC\',sans-serif">'
                                     '<span class="title"></span> · <span class="pageNumber"></span></div>'))


def docnames() -> list[str]:
    return [re.sub(r"\.(ipynb|md)$", "", e) for e in toc_entries()]


# ----------------------------------------------------------------------------- printing
def print_pages(html: Path, docs: list[str], timeout_ms: int = 30_000) -> list[tuple[str, str, bytes]]:
    """(docname, title, PDF bytes) of each built page, printed by headless Chromium."""
    from booktools.browser import launch, offline_context, script
    from booktools.toc import WIDGET_STATE, WIDGET_VIEW

    out = []
    with launch() as browser:
        for doc in docs:
            page = (html / f"{doc}.html").resolve()
            if not page.is_file():
                raise FileNotFoundError(f"页面不存在：{page}（先构建 HTML）")
            context = offline_context(browser)
            try:
                tab = context.new_page()
                tab.goto(page.as_uri(), wait_until="load", timeout=timeout_ms)
                tab.evaluate(script("await_render"), [WIDGET_VIEW, WIDGET_STATE, timeout_ms])  # waits for math, widgets
                tab.emulate_media(media="print")
                title = tab.evaluate(script("page_title"))
                out.append((doc, title, tab.pdf(outline=True, tagged=False, **PAGE_OPTIONS)))
            finally:
                context.close()
    return out


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


def _renumber(body: bytes, base: int) -> bytes:
    """Shift every indirect reference in an object's dictionary part (never its stream data)."""
    m = _STREAM.search(body)
    head, tail = (body[: m.start()], body[m.start():]) if m else (body, b"")
    return _REF.sub(lambda r: b"%d 0 R" % (int(r.group(1)) + base), head) + tail


def _utf16(text: str) -> bytes:
    return b"<FEFF" + text.encode("utf-16-be").hex().upper().encode() + b">"


def _name_prefix(k: int) -> bytes:
    return b"p%d-" % k


def _first_page(pdf: _Pdf, node: int) -> int:
    d = pdf.dict_of(node)
    if re.search(rb"/Type\s*/Pages\b", d):
        kids = re.search(rb"/Kids\s*\[([^\]]*)\]", d).group(1)
        return _first_page(pdf, int(_REF.search(kids).group(1)))
    return node


def merge(parts: list[tuple[str, str, bytes]], title: str = BOOK_TITLE) -> bytes:
    """Join Chromium-printed PDFs (docname, title, bytes) in order: one page tree, one bookmark per
    part (its own bookmarks below it), named anchors kept per part (prefixed), and links from one
    part to another (file:// URLs of the built pages) turned into jumps inside the joined PDF."""
    pdfs = [_parse(b) for _d, _t, b in parts]
    index = {Path(doc).name + ".html": k for k, (doc, _t, _b) in enumerate(parts)}
    bases, base = [], 0
    for pdf in pdfs:
        bases.append(base)
        base += max(pdf.objects) + 1
    nxt = base
    new_objects: dict[int, bytes] = {}

    def alloc() -> int:
        nonlocal nxt
        nxt += 1
        return nxt - 1

    catalog, pages_root, outlines_root, dests_obj, info_obj = alloc(), alloc(), alloc(), alloc(), alloc()
    kids, items, dest_entries, total_pages = [], [], [], 0
    for k, (pdf, b0) in enumerate(zip(pdfs, bases)):
        cat = pdf.dict_of(pdf.root)
        pages = int(re.search(rb"/Pages (\d+) 0 R", cat).group(1))
        outlines = re.search(rb"/Outlines (\d+) 0 R", cat)
        dests = re.search(rb"/Dests (\d+) 0 R", cat)
        first_page = _first_page(pdf, pages) + b0
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
                total_pages += int(re.search(rb"/Count (\d+)", head).group(1))
            new_objects[num + b0] = head + tail
        kids.append(pages + b0)
        if dests:
            entries = _renumber(pdf.dict_of(int(dests.group(1))), b0).strip()
            entries = entries.removeprefix(b"<<").removesuffix(b">>")
            dest_entries.append(re.sub(rb"(^|\n)/", lambda m: m.group(1) + b"/" + prefix, entries))
            del new_objects[int(dests.group(1)) + b0]
        dest_entries.append(b"/" + prefix + b"page-start [%d 0 R /XYZ null null null]" % first_page)
        # the part's bookmark: its outline root becomes the item (its children already point at it)
        item = (int(outlines.group(1)) + b0) if outlines else alloc()
        children = b""
        if outlines:
            root = new_objects[item]
            first = re.search(rb"/First (\d+) 0 R", root)
            last = re.search(rb"/Last (\d+) 0 R", root)
            count = re.search(rb"/Count (\d+)", root)
            if first and last:
                children = b"/First %s 0 R\n/Last %s 0 R\n/Count -%s\n" % (
                    first.group(1), last.group(1), count.group(1) if count else b"1")
        items.append((item, parts[k][1], first_page, children))
    for i, (item, text, first_page, children) in enumerate(items):
        links = b"/Prev %d 0 R\n" % items[i - 1][0] if i else b""
        links += b"/Next %d 0 R\n" % items[i + 1][0] if i + 1 < len(items) else b""
        new_objects[item] = (b"<</Title " + _utf16(text) + b"\n/Parent %d 0 R\n" % outlines_root + links
                             + children + b"/Dest [%d 0 R /XYZ null null null]>>\n" % first_page)
    new_objects[outlines_root] = b"<</Type /Outlines\n/First %d 0 R\n/Last %d 0 R\n/Count %d>>\n" % (
        items[0][0], items[-1][0], len(items))
    new_objects[pages_root] = b"<</Type /Pages\n/Kids [%s]\n/Count %d>>\n" % (
        b" ".join(b"%d 0 R" % p for p in kids), total_pages)
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


# ----------------------------------------------------------------------------- reading back
def page_count(data: bytes) -> int:
    return len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", data))


def outline_titles(data: bytes) -> list[str]:
    """The top-level bookmarks of a PDF that `merge()` wrote, in order."""
    pdf = _parse(data)
    cat = pdf.dict_of(pdf.root)
    node = int(re.search(rb"/First (\d+) 0 R", pdf.dict_of(int(re.search(rb"/Outlines (\d+) 0 R", cat).group(1)))).group(1))
    titles = []
    while True:
        d = pdf.dict_of(node)
        hexed = re.search(rb"/Title <FEFF([0-9A-Fa-f]*)>", d).group(1)
        titles.append(bytes.fromhex(hexed.decode()).decode("utf-16-be"))
        m = re.search(rb"/Next (\d+) 0 R", d)
        if not m:
            return titles
        node = int(m.group(1))


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
    data = merge(print_pages(html, docnames()))
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
