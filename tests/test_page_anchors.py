"""Links a reader shares and the header's entries (issue 42 item 8), on the built book: every section's anchor
says what the section is (`booktools.reader_page.SectionAnchors`: `#梯度累积-用时间换显存`, never `#id3` or
`#b`), the download menu's 「.pdf」 opens the book's PDF instead of printing the page, and a phone shows no
fullscreen button. The links between pages and to these anchors resolve (tests/test_page_api.py
`test_every_link_in_the_book_resolves`).
"""
from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

import pytest
from docutils.core import publish_doctree

from booktools import browser as chromium
from booktools.reader_page import PDF_NAME, SectionAnchors, pdf_entry, section_slug
from tests.book_pages import PAGES

OPAQUE = re.compile(r"^(?:id\d+|[a-z]{1,2})$")   # a counter, or the one or two Latin letters of a Chinese title
CJK = re.compile(r"[\u3400-\u9fff]")


def test_the_slug_rule():
    assert section_slug("4.3 批大小对显存占用的影响") == "4-3-批大小对显存占用的影响"
    assert section_slug("梯度累积：用时间换显存") == "梯度累积-用时间换显存"
    assert section_slug("在小模型上测量：哪一项随 B 增长？") == "在小模型上测量-哪一项随-b-增长"
    assert section_slug("ZeRO-1 与 1F1B") == "zero-1-与-1f1b"
    assert section_slug("stage_memory（阶段）") == "stage-memory-阶段"
    assert section_slug("：？") == "section"


RST = """
.. _labelled:

有标签的一节
============

正文。

梯度累积：用时间换显存
======================

正文。

梯度累积：用时间换显存
======================

同名的第二节。

在小模型上测量：哪一项随 B 增长？
================================

正文。

Plain English
=============

正文。
"""


def section_ids(apply: bool) -> list[list[str]]:
    doc = publish_doctree(RST, settings_overrides={"report_level": 5, "auto_id_prefix": "id"})   # as Sphinx
    if apply:
        SectionAnchors(doc).apply()
    return [s["ids"] for s in doc.findall(lambda n: n.tagname == "section")]


def test_sections_take_their_titles_anchors():
    """A Chinese title gives its words (a second section of the same title a suffix); a label and an ASCII
    title keep their ids. Without the transform docutils gives the counters and the lone letter."""
    before = section_ids(apply=False)
    assert before[1][0].startswith("id") and before[3] == ["b"], before
    after = section_ids(apply=True)
    assert after == [["labelled", "id1"], ["梯度累积-用时间换显存"], ["梯度累积-用时间换显存-2"], ["在小模型上测量-哪一项随-b-增长"],
                     ["plain-english"]], after


def test_no_page_has_an_opaque_section_anchor(built):
    """Every section of every page, and every link of a page's own contents, names the section by its words."""
    opaque, chinese = [], 0
    for doc in PAGES:
        soup = built.soup(doc)
        for section in soup.select("article section[id]"):
            title = section.find(re.compile("^h[1-6]$"))
            if OPAQUE.match(section["id"]):
                opaque.append(f"{doc}: #{section['id']} {title.get_text(strip=True) if title else ''}")
            chinese += bool(CJK.search(unquote(section["id"])))
        for a in soup.select(".bd-sidebar-secondary a[href^='#'], #jb-print-toc a[href^='#']"):
            if OPAQUE.match(unquote(a["href"][1:])):
                opaque.append(f"{doc}: 本页目录链接 {a['href']}")
    assert not opaque, "\n".join(opaque)
    assert chinese >= 50, chinese   # the sections the counters named before


def test_the_header_pdf_entry_opens_the_books_pdf(built):
    """On every page the download menu's 「.pdf」 is a link to batch-size-book.pdf at the site's root (written by
    booktools.pdf), not sphinx-book-theme's window.print() of the page."""
    for doc in PAGES:
        page = built.page(doc)
        entry = built.soup(doc).select_one(".dropdown-download-buttons .btn-download-pdf-button")
        assert entry is not None and entry.name == "a", (doc, entry)
        target = (page.parent / unquote(urlsplit(entry["href"]).path)).resolve()
        assert target == built.html / PDF_NAME, (doc, entry["href"])
        assert "window.print" not in str(entry)


def test_the_pdf_entry_rule_replaces_the_print_button():
    """pdf_entry on sphinx-book-theme's buttons: the print button becomes the link; others stay."""
    printing = {"type": "javascript", "javascript": "window.print()", "text": ".pdf", "label": "download-pdf-button"}
    source = {"type": "link", "url": "../_sources/x.ipynb", "text": ".ipynb", "label": "download-notebook-button"}
    context = {"pathto": lambda name, resource=0: f"../{name}",
               "header_buttons": [{"type": "group", "buttons": [source, dict(printing)]},
                                  {"type": "javascript", "label": "fullscreen-button"}]}
    pdf_entry(None, "book/x", "page.html", context, None)
    buttons = context["header_buttons"][0]["buttons"]
    assert buttons[0] == source and buttons[1]["type"] == "link" and buttons[1]["url"] == f"../{PDF_NAME}"
    assert printing != buttons[1]


@pytest.mark.parametrize("width,shown", [(390, False), (1280, True)])
def test_no_fullscreen_button_on_a_phone(built, browser, width, shown):
    context = chromium.offline_context(browser, viewport={"width": width, "height": 844})
    try:
        tab = context.new_page()
        tab.goto(built.page("book/4.3-memory").as_uri(), wait_until="load")
        assert tab.locator(".btn-fullscreen-button").count() == 1
        assert tab.locator(".btn-fullscreen-button").is_visible() is shown
    finally:
        context.close()


def test_a_target_inside_a_section_keeps_its_id():
    """An id that is not the title's (the API page's module target on its layer's section) stays beside the
    new anchor."""
    doc = publish_doctree("格式\n====\n\n正文。\n", settings_overrides={"report_level": 5, "auto_id_prefix": "id",
                                                                   "doctitle_xform": False})
    section = next(doc.findall(lambda n: n.tagname == "section"))
    section["ids"].append("module-batchlab.formulas")
    doc.ids["module-batchlab.formulas"] = section
    SectionAnchors(doc).apply()
    assert section["ids"] == ["格式", "module-batchlab.formulas"], section["ids"]
