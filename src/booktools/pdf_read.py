"""Read a printed PDF back as a reader sees its pages, without a PDF library: where each page puts ink,
its text lines, its page number, its empty stretches and its empty boxes.

`booktools.pdf` prints the book with Chromium (Skia writes PDF 1.4: classic xref, Flate streams,
Type3/Type0 fonts with ToUnicode maps); this module interprets each page's content stream (the
graphics state, text positioning, paths, images and form XObjects) and records a box for every mark
that is not white. The checks of the book's PDF (tests/test_page_pdf.py) are built on it:

- `blank_fraction()`: how much of the page's body (inside the print margins) is empty bands taller
  than `GAP_PT`; a page that stops halfway has about 0.5;
- `empty_boxes()`: drawn boxes (a code block's background, an output frame) wide enough to hold a line
  and with no text or image inside;
- `lines()`: the page's text, one string per baseline, which the page-number, title-page and contents
  checks read.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import cached_property

from booktools.pdf import parse_pdf, stream_data

GAP_PT = 36.0        # a vertical gap taller than half an inch counts as blank (paragraph gaps are ~12 pt)
WHITE = 0.985        # a fill this light on every channel is paper, not a box

_TOKEN = re.compile(rb"<<|>>|\[|\]|<[0-9A-Fa-f\s]*>|\((?:\\.|[^\\)])*\)|/[^\s/\[\]()<>{}%]*"
                    rb"|[-+]?(?:\d+\.?\d*|\.\d+)|[A-Za-z'\"*]+[0-9]?|%[^\n]*")
_NUM = re.compile(rb"[-+]?(?:\d+\.?\d*|\.\d+)$")


@dataclass(frozen=True)
class Mark:
    """Something drawn: kind ("text", "path", "image"), its box in top-down page points, and for
    text the characters it shows; `filled` says whether a path is a filled area (not a stroke)."""
    kind: str
    x0: float
    y0: float
    x1: float
    y1: float
    text: str = ""
    size: float = 0.0
    filled: bool = False


@dataclass
class Page:
    number: int                 # 1-based position in the file
    width: float
    height: float
    marks: list[Mark] = field(default_factory=list)

    @cached_property
    def text_marks(self) -> list[Mark]:
        return [m for m in self.marks if m.kind == "text"]

    def lines(self, top: float = 0.0, bottom: float | None = None) -> list[str]:
        """The text drawn between `top` and `bottom` (points from the top), one string per baseline,
        top to bottom, characters left to right (a space where glyphs are far apart)."""
        bottom = self.height if bottom is None else bottom
        glyphs = sorted((m for m in self.text_marks if top <= m.y1 and m.y0 <= bottom and m.text),
                        key=lambda m: (m.y1, m.x0))
        rows: list[list[Mark]] = []
        for g in glyphs:
            if rows and abs(rows[-1][0].y1 - g.y1) <= 0.35 * max(g.size, rows[-1][0].size):
                rows[-1].append(g)
            else:
                rows.append([g])
        out = []
        for row in rows:
            row.sort(key=lambda m: m.x0)
            s, last = "", None
            for g in row:
                if last is not None and g.x0 - last.x1 > 0.8 * g.size:
                    s += " "
                s += g.text
                last = g
            out.append(s)
        return out

    def text(self) -> str:
        return "\n".join(self.lines())


# ----------------------------------------------------------------------------- fonts
def _to_unicode(cmap: bytes) -> tuple[dict[bytes, str], int]:
    """A ToUnicode CMap as {code bytes: text} and the code length in bytes."""
    table: dict[bytes, str] = {}

    def uni(h: bytes) -> str:
        raw = bytes.fromhex(re.sub(rb"\s", b"", h).decode())
        return raw.decode("utf-16-be", errors="replace")

    nbytes = 1
    m = re.search(rb"begincodespacerange\s*<([0-9A-Fa-f]+)>", cmap)
    if m:
        nbytes = len(m.group(1)) // 2
    for block in re.findall(rb"beginbfchar(.*?)endbfchar", cmap, re.S):
        for src, dst in re.findall(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f\s]*)>", block):
            table[bytes.fromhex(src.decode())] = uni(dst)
    for block in re.findall(rb"beginbfrange(.*?)endbfrange", cmap, re.S):
        for lo, hi, rest in re.findall(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*(\[[^\]]*\]|<[0-9A-Fa-f]+>)", block):
            a, b, n = int(lo, 16), int(hi, 16), len(lo) // 2
            if rest.startswith(b"["):
                for i, dst in enumerate(re.findall(rb"<([0-9A-Fa-f]+)>", rest)):
                    table[(a + i).to_bytes(n, "big")] = uni(dst)
            else:
                base = bytes.fromhex(rest[1:-1].decode())
                start = int.from_bytes(base, "big")
                for i in range(b - a + 1):
                    table[(a + i).to_bytes(n, "big")] = (start + i).to_bytes(len(base), "big").decode(
                        "utf-16-be", errors="replace")
    return table, nbytes


@dataclass
class _Font:
    table: dict[bytes, str] | None
    nbytes: int

    def decode(self, s: bytes) -> list[str]:
        if self.table is None:  # a standard font without a map: its bytes are Latin-1 text
            return list(s.decode("latin-1"))
        n = self.nbytes
        return [self.table.get(s[i:i + n], "\ufffd") for i in range(0, len(s) - n + 1, n)]


# ----------------------------------------------------------------------------- interpreting
def _mul(a, b):
    """Matrix product a×b of PDF matrices [a b c d e f]."""
    return [a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
            a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3],
            a[4] * b[0] + a[5] * b[2] + b[4], a[4] * b[1] + a[5] * b[3] + b[5]]


def _apply(m, x, y):
    return m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5]


def _bbox(points):
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return min(xs), min(ys), max(xs), max(ys)


class _Reader:
    def __init__(self, pdf):
        self.pdf = pdf
        self.fonts: dict[int, _Font] = {}

    def _resolve(self, token: bytes):
        m = re.fullmatch(rb"\s*(\d+) 0 R\s*", token)
        return int(m.group(1)) if m else None

    def _dict_entries(self, body: bytes, key: bytes) -> dict[bytes, int]:
        """`/Key <</Name N 0 R ...>>` (inline or by reference) as {name: object number}."""
        m = re.search(rb"/" + key + rb"\s*(<<(?:[^<>]|<[^<]|>[^>])*>>|\d+ 0 R)", body)
        if not m:
            return {}
        inner = m.group(1)
        ref = self._resolve(inner)
        if ref is not None:
            inner = self.pdf.dict_of(ref)
        return {k: int(v) for k, v in re.findall(rb"/([^\s/<>\[\]()]+)\s+(\d+) 0 R", inner)}

    def _resources(self, body: bytes) -> bytes:
        m = re.search(rb"/Resources\s*(\d+) 0 R", body)
        if m:
            return self.pdf.dict_of(int(m.group(1)))
        m = re.search(rb"/Resources\s*<<", body)
        if not m:
            return b""
        depth, i = 0, m.end() - 2
        while i < len(body):
            if body.startswith(b"<<", i):
                depth, i = depth + 1, i + 2
            elif body.startswith(b">>", i):
                depth, i = depth - 1, i + 2
                if depth == 0:
                    return body[m.end() - 2: i]
            else:
                i += 1
        return body[m.end() - 2:]

    def font(self, num: int) -> _Font:
        if num not in self.fonts:
            d = self.pdf.dict_of(num)
            tu = re.search(rb"/ToUnicode (\d+) 0 R", d)
            if tu:
                table, n = _to_unicode(stream_data(self.pdf, int(tu.group(1))))
                if b"/Type0" in d:
                    n = 2
                self.fonts[num] = _Font(table, n)
            else:
                self.fonts[num] = _Font(None, 1)
        return self.fonts[num]

    def run(self, content: bytes, resources: bytes, ctm, marks: list[Mark], height: float, depth: int = 0):
        fonts = self._dict_entries(resources, b"Font")
        xobjects = self._dict_entries(resources, b"XObject")
        stack = []
        gs = {"ctm": ctm, "fill": (0.0,), "stroke": (0.0,)}
        saved = []
        path: list[tuple[float, float]] = []
        tm = tlm = [1, 0, 0, 1, 0, 0]
        font, size, leading = None, 0.0, 0.0
        actual: list | None = None   # [text, shown?] inside a /Span <</ActualText ...>> BDC

        def add(kind, pts, text="", sz=0.0, filled=False):
            x0, y0, x1, y1 = _bbox(pts)
            marks.append(Mark(kind, x0, height - y1, x1, height - y0, text, sz, filled))

        def white(colour) -> bool:
            return len(colour) in (1, 3) and all(c >= WHITE for c in colour)

        def show(s: bytes):
            nonlocal tm
            if font is None:
                return
            chars = font.decode(s)
            nonlocal actual
            if actual is not None:
                chars = [actual[0] if not actual[1] else ""] + [""] * (len(chars) - 1)
                actual[1] = True
            m = _mul(tm, gs["ctm"])
            scale = (abs(m[2]) ** 2 + abs(m[3]) ** 2) ** 0.5 * size
            w = 0.55 * size * max(1, len(chars))
            pts = [_apply(m, x, y) for x in (0, w) for y in (-0.2 * size, 0.85 * size)]
            text = "".join(chars)
            if text.strip() and not white(gs["fill"]):
                add("text", pts, text, scale)
            tm = _mul([1, 0, 0, 1, w, 0], tm)

        for tok in _TOKEN.findall(content):
            if tok.startswith(b"%"):
                continue
            if _NUM.match(tok) or tok[:1] in b"/<([]" or tok == b">>":
                stack.append(tok)
                continue
            op, args = tok, stack
            stack = []
            try:
                nums = [float(a) for a in args if _NUM.match(a)]
                if op == b"q":
                    saved.append(dict(gs))
                elif op == b"Q":
                    gs = saved.pop() if saved else gs
                elif op == b"cm":
                    gs["ctm"] = _mul(nums[-6:], gs["ctm"])
                elif op in (b"rg", b"g", b"k", b"sc", b"scn"):
                    gs["fill"] = tuple(nums) if op != b"k" else (0.0,) if any(nums) else (1.0,)
                elif op in (b"RG", b"G", b"K", b"SC", b"SCN"):
                    gs["stroke"] = tuple(nums)
                elif op == b"BT":
                    tm = tlm = [1, 0, 0, 1, 0, 0]
                elif op == b"Tf":
                    font = self.font(fonts[args[0][1:]]) if args[0][1:] in fonts else _Font(None, 1)
                    size = nums[-1]
                elif op == b"Tm":
                    tm = tlm = nums[-6:]
                elif op in (b"Td", b"TD"):
                    tm = tlm = _mul([1, 0, 0, 1, nums[-2], nums[-1]], tlm)
                    if op == b"TD":
                        leading = -nums[-1]
                elif op == b"TL":
                    leading = nums[-1]
                elif op == b"T*":
                    tm = tlm = _mul([1, 0, 0, 1, 0, -leading], tlm)
                elif op in (b"Tj", b"'", b'"'):
                    if op != b"Tj":
                        tm = tlm = _mul([1, 0, 0, 1, 0, -leading], tlm)
                    show(_string(args[-1]))
                elif op == b"TJ":
                    show(b"".join(_string(a) for a in args if a[:1] in b"<("))
                elif op == b"BDC":
                    m = re.search(rb"/ActualText\s*<FEFF([0-9A-Fa-f]*)>", b" ".join(args))
                    actual = [bytes.fromhex(m.group(1).decode()).decode("utf-16-be", "replace"), False] if m else None
                elif op == b"EMC":
                    actual = None
                elif op == b"m" or op == b"l":
                    path.append(_apply(gs["ctm"], nums[-2], nums[-1]))
                elif op == b"c":
                    path += [_apply(gs["ctm"], nums[i], nums[i + 1]) for i in (0, 2, 4)]
                elif op in (b"v", b"y"):
                    path += [_apply(gs["ctm"], nums[i], nums[i + 1]) for i in (0, 2)]
                elif op == b"re":
                    x, y, w, h = nums[-4:]
                    path += [_apply(gs["ctm"], x + dx, y + dy) for dx in (0, w) for dy in (0, h)]
                elif op in (b"f", b"F", b"f*", b"B", b"B*", b"b", b"b*", b"S", b"s", b"n"):
                    if path and op != b"n":
                        filled = op not in (b"S", b"s")
                        colour = gs["fill"] if filled else gs["stroke"]
                        if not white(colour):
                            add("path", path, filled=filled)
                    path = []
                elif op == b"Do":
                    num = xobjects.get(args[-1][1:])
                    if num is not None and depth < 8:
                        d = self.pdf.dict_of(num)
                        if b"/Image" in d:
                            add("image", [_apply(gs["ctm"], x, y) for x in (0, 1) for y in (0, 1)])
                        elif b"/Form" in d:
                            matrix = re.search(rb"/Matrix\s*\[([^\]]*)\]", d)
                            fm = [float(v) for v in matrix.group(1).split()] if matrix else [1, 0, 0, 1, 0, 0]
                            self.run(stream_data(self.pdf, num), self._resources(d) or resources,
                                     _mul(fm, gs["ctm"]), marks, height, depth + 1)
            except (IndexError, ValueError, KeyError):
                continue  # a malformed operator draws nothing we can place


def _string(tok: bytes) -> bytes:
    if tok.startswith(b"<"):
        return bytes.fromhex(re.sub(rb"\s", b"", tok[1:-1]).decode())
    if tok.startswith(b"("):
        body = tok[1:-1]
        return re.sub(rb"\\([\\()])", rb"\1", body)
    return b""


def page_objects(pdf) -> list[tuple[int, bytes]]:
    """(object number, resources) of every page in page-tree order, resources inherited."""
    cat = pdf.dict_of(pdf.root)
    out = []

    def walk(num: int, inherited: bytes):
        d = pdf.dict_of(num)
        res = _Reader(pdf)._resources(d) or inherited
        if re.search(rb"/Type\s*/Pages\b", d):
            for kid in re.findall(rb"(\d+) 0 R", re.search(rb"/Kids\s*\[([^\]]*)\]", d).group(1)):
                walk(int(kid), res)
        else:
            out.append((num, res))

    walk(int(re.search(rb"/Pages (\d+) 0 R", cat).group(1)), b"")
    return out


def read_pages(data: bytes, numbers: list[int] | None = None) -> list[Page]:
    """Every page of a PDF (or only the 1-based `numbers`) with its marks."""
    pdf = parse_pdf(data)
    reader = _Reader(pdf)
    pages = []
    for i, (num, res) in enumerate(page_objects(pdf), start=1):
        if numbers is not None and i not in numbers:
            continue
        d = pdf.dict_of(num)
        box = [float(v) for v in re.search(rb"/MediaBox\s*\[([^\]]*)\]", d).group(1).split()]
        width, height = box[2] - box[0], box[3] - box[1]
        contents = re.search(rb"/Contents\s*(\[[^\]]*\]|\d+ 0 R)", d)
        streams = [int(n) for n in re.findall(rb"(\d+) 0 R", contents.group(1))] if contents else []
        content = b"\n".join(stream_data(pdf, n) for n in streams)
        page = Page(i, width, height)
        reader.run(content, res, [1, 0, 0, 1, -box[0], -box[1]], page.marks, height)
        pages.append(page)
    return pages


# ----------------------------------------------------------------------------- checks
def body_band(page: Page, top_pt: float, bottom_pt: float) -> tuple[float, float]:
    return top_pt, page.height - bottom_pt


def blank_fraction(page: Page, top_pt: float, bottom_pt: float, gap: float = GAP_PT) -> float:
    """The share of the page's body (between the top and bottom print margins) that lies in empty
    horizontal bands taller than `gap` points: 0 for a full page, about 0.5 for one that stops halfway."""
    y_top, y_bottom = body_band(page, top_pt, bottom_pt)
    spans = sorted((max(m.y0, y_top), min(m.y1, y_bottom)) for m in page.marks
                   if m.y1 > y_top and m.y0 < y_bottom and m.x1 > 0 and m.x0 < page.width)
    empty, cursor = 0.0, y_top
    for a, b in spans:
        if a - cursor > gap:
            empty += a - cursor
        cursor = max(cursor, b)
    if y_bottom - cursor > gap:
        empty += y_bottom - cursor
    return empty / (y_bottom - y_top)


def empty_boxes(page: Page, min_width: float | None = None, min_height: float = 1.5) -> list[Mark]:
    """Filled areas at least `min_width` wide (default: 40 % of the page, the width of a code block,
    an output frame or a card, not of a table cell) that hold no text, image or other drawing: a box
    printed without its content. Thin rules (< `min_height`) are lines, not boxes."""
    min_width = 0.4 * page.width if min_width is None else min_width
    boxes = [m for m in page.marks if m.kind == "path" and m.filled
             and m.x1 - m.x0 >= min_width and m.y1 - m.y0 >= min_height]
    found = []
    for box in boxes:
        inside = [m for m in page.marks if m is not box and (m.kind != "path" or m.x1 - m.x0 < min_width)
                  and box.x0 <= (m.x0 + m.x1) / 2 <= box.x1 and box.y0 <= (m.y0 + m.y1) / 2 <= box.y1]
        if not inside:
            found.append(box)
    return found


# ----------------------------------------------------------------------------- the book's checks
def _plain(text: str) -> str:
    """Text as compared across the PDF: NFKC (ligatures such as ﬁ split), no whitespace."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def footer_number(page: Page, bottom_pt: float) -> int | None:
    """The page number printed in the footer (below the body), if any: the last number on its lines."""
    lines = page.lines(page.height - bottom_pt, page.height)
    m = re.search(r"(\d+)\s*$", lines[-1]) if lines else None
    return int(m.group(1)) if m else None


def numbering_problems(pages: list[Page], bottom_pt: float, unnumbered: int = 1) -> list[str]:
    """Every page after the first `unnumbered` shows its own position in the file as its number, and
    those first pages show none."""
    out = []
    for p in pages:
        shown = footer_number(p, bottom_pt)
        want = None if p.number <= unnumbered else p.number
        if shown != want:
            out.append(f"第 {p.number} 页页脚的页码是 {shown}，应为 {want}")
    return out


def title_page_problems(pages: list[Page], title: str, author: str) -> list[str]:
    """The first page names the book and its author."""
    if not pages:
        return ["PDF 没有页"]
    text = _plain(pages[0].text())
    return [f"扉页（第 1 页）上没有{what}“{want}”" for what, want in (("书名", title), ("作者", author))
            if _plain(want) not in text]


def contents_listing(pages: list[Page], heading: str = "目录") -> list[tuple[str, int]]:
    """The (title, page number) lines of the printed contents: the pages from the one whose first line
    is `heading` on, while most of a page's lines end in a page number (the first chapter's page does
    not). A title that wraps is joined to the line with its number."""
    start = next((p for p in pages if p.lines() and _plain(p.lines()[0]) == heading), None)
    if start is None:
        return []
    entries = []
    for p in pages[start.number - 1:]:
        lines = p.lines(0, p.height - 36)   # the body and not the footer line with the page number
        lines = lines[1:] if p is start else lines
        found, pending = [], ""
        for line in lines:
            m = re.fullmatch(r"(.*\S)\s+(\d+)", line.strip())
            if m:
                found.append(((pending + m.group(1)).strip(), int(m.group(2))))
                pending = ""
            else:
                pending += line
        if not found or len(found) < 0.8 * len(lines):
            break
        entries += found
    return entries


def contents_problems(pages: list[Page], expected: list[tuple[int, str]]) -> list[str]:
    """The printed contents lists each `expected` (level, title) in order, and the page each line gives
    shows that title."""
    listing = contents_listing(pages)
    if not listing:
        return ["没有找到目录页（首行为“目录”的页）"]
    out = []
    titles = [_plain(t) for t, _ in listing]
    want = [_plain(t) for _, t in expected]
    if titles != want:
        missing = [t for _, t in expected if _plain(t) not in titles]
        out.append(f"目录列出的条目与书的章节不一致：缺 {missing[:5]}，共 {len(titles)} 条，应为 {len(want)} 条")
    for title, number in listing:
        if not 1 <= number <= len(pages) or _plain(title) not in _plain(pages[number - 1].text()):
            out.append(f"目录说“{title}”在第 {number} 页，那一页上没有它")
    return out


def outline_problems(pages: list[Page], bookmarks, expected: list[tuple[str, list[str]]]) -> list[str]:
    """The PDF's bookmarks are `expected`: (chapter title, [its section titles]) in order, each section
    nested under its chapter; every bookmark jumps to a page that shows its title, and a section's page
    lies within its chapter."""
    out = []
    got = [(b.title, [c.title for c in b.children]) for b in bookmarks]
    if [_plain(t) for t, _ in got] != [_plain(t) for t, _ in expected]:
        out.append(f"顶层书签 {[t for t, _ in got]} 应为 {[t for t, _ in expected]}")
        return out
    starts = [b.page or 0 for b in bookmarks] + [len(pages) + 1]
    for i, (b, (title, sections)) in enumerate(zip(bookmarks, expected)):
        if [_plain(c.title) for c in b.children] != [_plain(s) for s in sections]:
            out.append(f"“{title}”下的书签 {[c.title for c in b.children]} 应为各节 {sections}")
        for mark in [b] + b.children:
            if mark.page is None or not 1 <= mark.page <= len(pages):
                out.append(f"书签“{mark.title}”没有指向一页")
            elif _plain(mark.title) not in _plain(pages[mark.page - 1].text()):
                out.append(f"书签“{mark.title}”指向第 {mark.page} 页，那一页上没有它")
        for c in b.children:
            if c.page is not None and not starts[i] <= c.page < starts[i + 1]:
                out.append(f"书签“{c.title}”（第 {c.page} 页）不在“{title}”的页内")
    return out


def last_pages(bookmarks, page_total: int) -> set[int]:
    """The last page of each top-level bookmark's pages (a chapter's last page), and the pages before
    the first bookmark (the title page)."""
    starts = sorted(b.page for b in bookmarks if b.page)
    last = {s - 1 for s in starts[1:]} | {page_total}
    return last | set(range(1, starts[0])) if starts else last


def blank_problems(pages: list[Page], allowed: set[int], top_pt: float, bottom_pt: float,
                   limit: float = 0.35) -> list[str]:
    """Pages (other than `allowed`, a chapter's last) whose body is at least `limit` empty."""
    out = []
    for p in pages:
        frac = blank_fraction(p, top_pt, bottom_pt)
        if frac >= limit and p.number not in allowed:
            out.append(f"第 {p.number} 页有 {frac:.0%} 是空白（不是一章的最后一页）")
    return out


def empty_box_problems(pages: list[Page]) -> list[str]:
    """Boxes printed with nothing inside (a code block's frame at the foot of a page, an empty output)."""
    return [f"第 {p.number} 页有空框：x {b.x0:.0f}–{b.x1:.0f} pt，y {b.y0:.0f}–{b.y1:.0f} pt"
            for p in pages for b in empty_boxes(p)]
