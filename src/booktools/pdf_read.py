"""Read a printed PDF back as a reader sees its pages, through pdfplumber (pdfminer.six): where each
page puts ink, its text lines, its page number, its empty stretches and its empty boxes.

`booktools.pdf` prints the book with Chromium and joins it with pikepdf; this module asks pdfplumber
for every character, rectangle, line, curve and image of a page (form XObjects included) and keeps a
box for each that is not white. The checks of the book's PDF (tests/test_page_pdf.py) are built on it:

- `blank_fraction()`: how much of the page's body (inside the print margins) is empty bands taller
  than `GAP_PT`; a page that stops halfway has about 0.5;
- `empty_boxes()`: drawn boxes (a code block's background, an output frame) wide enough to hold a line
  and with no text or image inside;
- `Page.lines()`: the page's text, one string per line (pdfplumber's own line grouping), which the
  page-number, title-page and contents checks read.
"""
from __future__ import annotations

import io
import logging
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import pdfplumber
from pdfplumber.utils import extract_text

GAP_PT = 36.0        # a vertical gap taller than half an inch counts as blank (paragraph gaps are ~12 pt)
WHITE = 0.985        # a colour this light on every channel is paper, not ink

# pdfminer logs a warning per glyph of a font without a /FontBBox (Skia's Type 3 fonts): not our concern
logging.getLogger("pdfminer").setLevel(logging.ERROR)


@dataclass(frozen=True)
class Mark:
    """Something drawn: kind ("text", "path", "image"), its box in top-down page points, and for
    text the character it shows; `filled` says whether a path is a filled area (not a stroke)."""
    kind: str
    x0: float
    y0: float
    x1: float
    y1: float
    text: str = ""
    filled: bool = False


@dataclass
class Page:
    """One page: its 1-based position in the file, its size in points, its marks and the characters
    (pdfplumber's dictionaries) that make its text."""
    number: int
    width: float
    height: float
    marks: list[Mark] = field(default_factory=list)
    chars: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def lines(self, top: float = 0.0, bottom: float | None = None) -> list[str]:
        """The text whose baseline lies between `top` and `bottom` (points from the top), one string per
        line, top to bottom (pdfplumber joins the characters and puts a space where they are far apart)."""
        bottom = self.height if bottom is None else bottom
        chars = [c for c in self.chars if top <= c["bottom"] and c["top"] <= bottom]
        return [line for line in extract_text(chars).splitlines() if line.strip()]

    def text(self) -> str:
        return "\n".join(self.lines())


def _ink(colour: Any) -> bool:
    """Whether a pdfplumber colour (grey, RGB or CMYK tuple, or a pattern) leaves a mark on white paper."""
    if not isinstance(colour, (tuple, list)) or not all(isinstance(c, (int, float)) for c in colour):
        return True   # a pattern or an unknown space: count it as ink
    if len(colour) == 4:
        return any(colour)
    return not all(c >= WHITE for c in colour)


def _page(number: int, page: pdfplumber.page.Page) -> Page:
    out = Page(number, float(page.width), float(page.height))
    for c in page.chars:
        if c["text"].strip() and _ink(c.get("non_stroking_color")):
            # a line is its characters' baseline: pdfminer's boxes hang from each font's descent and
            # ascent, which puts the Latin, Chinese and formula characters of one heading points apart
            baseline = out.height - c["matrix"][5]
            out.chars.append({**c, "top": baseline, "doctop": baseline, "bottom": baseline})
            out.marks.append(Mark("text", c["x0"], c["top"], c["x1"], c["bottom"], c["text"]))
    for obj in page.rects + page.lines + page.curves:
        filled = bool(obj.get("fill"))
        if _ink(obj.get("non_stroking_color") if filled else obj.get("stroking_color")):
            out.marks.append(Mark("path", obj["x0"], obj["top"], obj["x1"], obj["bottom"], filled=filled))
    for img in page.images:
        out.marks.append(Mark("image", img["x0"], img["top"], img["x1"], img["bottom"]))
    return out


def read_pages(data: bytes, numbers: list[int] | None = None) -> list[Page]:
    """Every page of a PDF (or only the 1-based `numbers`) with its marks."""
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        return [_page(i, p) for i, p in enumerate(pdf.pages, start=1) if numbers is None or i in numbers]


# ----------------------------------------------------------------------------- checks
def blank_fraction(page: Page, top_pt: float, bottom_pt: float, gap: float = GAP_PT) -> float:
    """The share of the page's body (between the top and bottom print margins) that lies in empty
    horizontal bands taller than `gap` points: 0 for a full page, about 0.5 for one that stops halfway."""
    y_top, y_bottom = top_pt, page.height - bottom_pt
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
    """Text as compared across the PDF: NFKC (ligatures such as ﬁ split, the Kangxi radicals some
    fonts map their glyphs to read as the ordinary characters), no whitespace."""
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
