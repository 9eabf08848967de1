"""The book's PDF: made by the build (scripts/build-book.sh, and the same step in tests/conftest.py's
build), written into the built site, the Chinese font's glyphs inside the file, linked from the preface,
and laid out as a printed book. booktools.pdf_read reads the PDF back (pdfplumber): the text of each
page, where its ink lies; booktools.pdf (pikepdf) its outline, page count, fonts and structure tree.

- a title page (the book's title and author from _config.yml, no page number), then a printed
  contents: every page of the toc and each of its sections, with the page it starts on, and that page
  shows that title;
- page numbers run on through the whole file (the number in each page's footer is its position);
- bookmarks: one per toc page (the contents first), its sections nested below it, each on the page
  that shows its title;
- no page at least 35 % empty except a chapter's last (and the title page), no empty box;
- tagged (a structure tree with one part per printed page), and the API reference a short appendix.

Before (the build of db5a718, measured with these checks): 224 pages, no title page or contents, page
numbers restarting at 1 in each of the 11 printed pages, 11 bookmarks and none below them, 14 pages
≥ 35 % empty of which 7 not a chapter's last (75 % in the API reference, 66 % the preface's first page,
59 % the glossary's first page, its table pushed whole to the next, 46 % before 4.6's cheat sheet) and
empty frames on 24 pages (a code cell's frame at the foot of a page with its code on the next, an
admonition's shadow). After: 222 pages, 12 bookmarks with 82 sections below them, no such page, no
empty frame. `test_pdf_checks_catch_each_fault` shows each check failing on a PDF made
wrong on purpose.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from booktools import ROOT, pdf, pdf_read
from tests.book_pages import PAGES, local_target

pytestmark = pytest.mark.slow

TOP_PT = pdf.MARGIN_MM["top"] * pdf.PT_PER_MM
BOTTOM_PT = pdf.MARGIN_MM["bottom"] * pdf.PT_PER_MM


@pytest.fixture(scope="module")
def book_pdf(built) -> bytes:
    path = built.html / pdf.PDF_NAME
    assert path.is_file(), f"构建没有生成 PDF：{path}（scripts/build-book.sh 运行 python -m booktools.pdf）"
    return path.read_bytes()


@pytest.fixture(scope="module")
def book_pages(book_pdf) -> list[pdf_read.Page]:
    return pdf_read.read_pages(book_pdf)


def _text(tag) -> str:
    """A heading as the reader reads it: no headerlink mark, inline math without its \\( \\)."""
    text = " ".join(tag.get_text(" ").split())
    return re.sub(r"[#¶]\s*$", "", text.replace("\\(", "").replace("\\)", "")).strip()


def _chapters(built) -> list[tuple[str, list[str]]]:
    """(title, [section headings]) of every toc page, from the built HTML."""
    out = []
    for doc in PAGES:
        article = built.soup(doc).find("article") or built.soup(doc)
        sections = [_text(h) for h in article.select("section[id] > h2")]
        out.append((_text(article.find("h1")), sections))
    return out


def test_pdf_opens_with_a_title_page(book_pages):
    title, author = pdf.book_meta()
    assert pdf_read.title_page_problems(book_pages, title, author) == []
    assert pdf_read.footer_number(book_pages[0], BOTTOM_PT) is None


def test_pdf_contents_lists_every_page_and_section_with_its_page(built, book_pages):
    expected = [(level, t) for title, sections in _chapters(built)
                for level, t in [(1, title)] + [(2, s) for s in sections]]
    assert len(expected) > 2 * len(PAGES)
    assert pdf_read.contents_problems(book_pages, expected) == []


def test_pdf_pages_are_numbered_continuously(book_pages):
    assert pdf_read.numbering_problems(book_pages, BOTTOM_PT, unnumbered=1) == []


def test_pdf_bookmarks_nest_sections_under_chapters(built, book_pdf, book_pages):
    bookmarks = pdf.outline(book_pdf)
    assert pdf_read.outline_problems(book_pages, bookmarks, [("目录", [])] + _chapters(built)) == []
    assert pdf.outline_titles(book_pdf)[1:] == [t for t, _ in _chapters(built)]
    assert sum(len(b.children) for b in bookmarks) > 2 * len(PAGES)   # sections, not only chapters
    assert pdf.page_count(book_pdf) >= 3 * len(PAGES) == 3 * (len(bookmarks) - 1)


def test_pdf_has_no_half_empty_page_but_a_chapter_end(book_pdf, book_pages):
    allowed = pdf_read.last_pages(pdf.outline(book_pdf), len(book_pages))
    assert pdf_read.blank_problems(book_pages, allowed, TOP_PT, BOTTOM_PT) == []


def test_pdf_has_no_empty_box(book_pages):
    assert pdf_read.empty_box_problems(book_pages) == []


def test_pdf_carries_the_chinese_font(book_pdf):
    fonts = pdf.embedded_fonts(book_pdf)
    assert any("CJK" in f for f in fonts), f"PDF 没有内嵌中文字体：{fonts}"


def test_pdf_is_tagged_with_one_part_per_page(book_pdf):
    """Chromium's structure tree of every printed page, joined under one document: a screen reader, reflow
    and copy-and-paste get headings, paragraphs, lists and figures (issue 42: the PDF had no tags)."""
    roles = pdf.structure_roles(book_pdf)
    assert roles["Document"] == 1 and roles["Part"] == len(PAGES) + 1, roles   # the front matter, each page
    assert roles["H1"] >= len(PAGES) and roles["P"] > 10 * len(PAGES), roles
    assert roles["lost page"] == 0, roles


def test_pdf_prints_the_api_reference_as_a_short_appendix(book_pdf, book_pages):
    """The API page printed whole was 166 of the PDF's 291 pages (issue 42); the PDF keeps each module's
    purpose and says the entries are on the web page: at most a tenth of the book."""
    marks = pdf.outline(book_pdf)
    i = 1 + PAGES.index("book/api")
    end = marks[i + 1].page if i + 1 < len(marks) else len(book_pages) + 1
    assert end - marks[i].page <= 0.1 * len(book_pages), (marks[i].page, end)
    assert pdf_read._plain(pdf.APPENDIX_NOTE) in pdf_read._plain(book_pages[marks[i].page - 1].text())


def test_preface_links_to_the_pdf(built):
    page = built.page(PAGES[0])
    hrefs = [a["href"] for a in built.soup(PAGES[0]).find_all("a", href=True) if a["href"].endswith(".pdf")]
    assert hrefs, "前言里没有 PDF 的链接"
    targets = {local_target(page, h, built.html) for h in hrefs}
    assert targets == {(built.html / pdf.PDF_NAME).resolve()}, targets


def test_the_build_command_makes_the_pdf():
    script = (ROOT / "scripts" / "build-book.sh").read_text(encoding="utf-8")
    assert "-m booktools.pdf" in script
    assert "bash scripts/build-book.sh" in (ROOT / "README.md").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- the checks can fail
PARAGRAPH = "<p>" + "批大小决定每一步用多少样本估计梯度，也决定一步要占多少显存。" * 6 + "</p>"


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html><html lang="zh-CN"><head><meta charset="utf-8"><title>{title}</title></head>'
            f'<body style="font-family:\'Noto Sans CJK SC\',sans-serif"><article class="bd-article">'
            f'<section id="top"><h1>{title}</h1>{body}</section></article></body></html>')


def _sections(*names: str) -> str:
    return "".join(f'<section id="s{i}"><h2>{n}</h2>{PARAGRAPH * 6}</section>' for i, n in enumerate(names))


MINI = {
    "book/a": _page("甲章", _sections("第一节", "第二节", "第三节")),
    "book/b": _page("乙章", _sections("第四节", "第五节")),
    # half a page, then a forced break: the first page is mostly empty and not the chapter's last
    "book/gap": _page("空页章", PARAGRAPH * 3 + '<div style="break-before: page"></div>' + PARAGRAPH * 12),
    # a grey frame with nothing in it, as a code cell's frame left at the foot of a page
    "book/box": _page("空框章", PARAGRAPH * 2 + '<div style="background:#eee;border:1px solid #ccc;height:60px">'
                      "</div>" + PARAGRAPH * 2),
}


def _mini_html(tmp_path: Path) -> Path:
    html = tmp_path / "html"
    for doc, text in MINI.items():
        (html / doc).parent.mkdir(parents=True, exist_ok=True)
        (html / f"{doc}.html").write_text(text, encoding="utf-8")
    return html


def test_pdf_checks_catch_each_fault(browser, tmp_path):
    """Each check of the book's PDF passes a small book printed the way the build prints, and fails it
    made wrong: no title page, contents one page off, flat bookmarks, page numbers restarting, a page
    left half empty, an empty frame."""
    html, meta = _mini_html(tmp_path), ("测试书", "某作者")
    good = pdf.build_book(html, ["book/a", "book/b"], meta=meta, browser=browser)
    pages, marks = pdf_read.read_pages(good), pdf.outline(good)
    expected = [("目录", []), ("甲章", ["第一节", "第二节", "第三节"]), ("乙章", ["第四节", "第五节"])]
    listed = [(lvl, t) for title, secs in expected[1:] for lvl, t in [(1, title)] + [(2, s) for s in secs]]
    assert pdf_read.title_page_problems(pages, *meta) == []
    assert pdf_read.contents_problems(pages, listed) == []
    assert pdf_read.numbering_problems(pages, BOTTOM_PT) == []
    assert pdf_read.outline_problems(pages, marks, expected) == []
    assert pdf_read.blank_problems(pages, pdf_read.last_pages(marks, len(pages)), TOP_PT, BOTTOM_PT) == []
    assert pdf_read.empty_box_problems(pages) == []
    assert pdf.structure_roles(good)["Part"] == 3 and pdf.structure_roles(good)["lost page"] == 0

    parts = pdf.print_pages(html, ["book/a", "book/b"], browser=browser)
    # no front matter: page 1 is the first chapter, which names neither the book nor its author
    bare = pdf_read.read_pages(pdf.merge(parts, "测试书"))
    assert pdf_read.title_page_problems(bare, *meta)
    # the contents numbered as if the front matter were one page shorter
    front = tmp_path / "front.html"
    front.write_text(pdf.front_matter_html(*meta, pdf.contents_entries(html, parts, 2)), encoding="utf-8")
    off = pdf.merge([pdf.Part("", "目录", pdf.print_html(browser, front))] + parts, "测试书", 1, 2)
    assert any("那一页上没有它" in p for p in pdf_read.contents_problems(pdf_read.read_pages(off), listed))
    # bookmarks only at chapter level
    flat_parts = [pdf.Part(p.doc, p.title, p.data) for p in parts]
    flat = pdf.merge([pdf.Part("", "目录", pdf.print_html(browser, front))] + flat_parts, "测试书", 1, 2)
    assert pdf_read.outline_problems(pdf_read.read_pages(flat), pdf.outline(flat), expected)
    # numbers restarting in each printed page: Chromium's own counter, nothing written by merge()
    restart = pdf.merge([pdf.Part(p.doc, p.title, _print_numbered(browser, html, p.doc)) for p in parts],
                        "测试书", unnumbered=10 ** 6)
    shown = [pdf_read.footer_number(p, BOTTOM_PT) for p in pdf_read.read_pages(restart)]
    assert shown.count(1) == 2, shown
    assert pdf_read.numbering_problems(pdf_read.read_pages(restart), BOTTOM_PT, unnumbered=0)
    assert not pdf.structure_roles(restart)   # pages printed untagged: no structure tree, not half of one
    # a page half empty before a forced break, and an empty frame
    broken = pdf.print_pages(html, ["book/gap", "book/box"], browser=browser)
    joined = pdf.merge(broken, "测试书")
    pages = pdf_read.read_pages(joined)
    blank = pdf_read.blank_problems(pages, pdf_read.last_pages(pdf.outline(joined), len(pages)), TOP_PT, BOTTOM_PT)
    assert any(p.startswith("第 1 页") for p in blank), blank
    boxes = pdf_read.empty_box_problems(pages)
    assert len(boxes) == 1 and pdf.outline(joined)[1].page <= int(re.search(r"第 (\d+) 页", boxes[0])[1]), boxes


def _print_numbered(browser, html: Path, doc: str) -> bytes:
    """A page printed with Chromium's own page counter in the footer (1, 2, … in every printed page)."""
    from booktools.browser import offline_context

    context = offline_context(browser)
    try:
        tab = context.new_page()
        tab.goto((html / f"{doc}.html").resolve().as_uri())
        footer = f'<div style="{pdf.FOOTER_STYLE}"><span class="pageNumber"></span></div>'
        return tab.pdf(**{**pdf.PAGE_OPTIONS, "footer_template": footer})
    finally:
        context.close()
