"""The book's PDF: made by the build (scripts/build-book.sh, and the same step in tests/conftest.py's
build), written into the built site, one bookmark per toc page in toc order, the Chinese font's glyphs
inside the file, and linked from the preface. Reads the PDF with booktools.pdf (no PDF library).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from booktools import ROOT, pdf
from tests.book_pages import PAGES, local_target

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def book_pdf(built) -> bytes:
    path = built.html / pdf.PDF_NAME
    assert path.is_file(), f"构建没有生成 PDF：{path}（scripts/build-book.sh 运行 python -m booktools.pdf）"
    return path.read_bytes()


def _title(built, doc: str) -> str:
    h1 = (built.soup(doc).find("article") or built.soup(doc)).find("h1")
    return re.sub(r"[#¶]\s*$", "", " ".join(h1.get_text(" ").split())).strip()


def test_pdf_has_one_section_per_toc_page_in_order(built, book_pdf):
    titles = pdf.outline_titles(book_pdf)
    assert titles == [_title(built, d) for d in PAGES]
    # every page is printed: more sheets than toc pages, and each chapter runs several
    assert pdf.page_count(book_pdf) >= 3 * len(PAGES), pdf.page_count(book_pdf)


def test_pdf_carries_the_chinese_font(book_pdf):
    fonts = pdf.embedded_fonts(book_pdf)
    assert any("CJK" in f for f in fonts), f"PDF 没有内嵌中文字体：{fonts}"


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
