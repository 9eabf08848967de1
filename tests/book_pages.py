"""The book as the tests see it: the pages the toc lists, the built site, the widths pages are checked at.

Shared by tests/conftest.py (the ``built``, ``browser`` and ``rendered`` fixtures) and the test modules;
imported one way, ``from tests.book_pages import …``.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
from bs4 import BeautifulSoup

from booktools import ROOT, layout
from booktools.toc import resolve_entry, toc_entries


def _strip_suffix(entry: str) -> str:
    return re.sub(r"\.(ipynb|md)$", "", entry)


ROOT_DOC = _strip_suffix(toc_entries()[0])
PAGES = [_strip_suffix(e) for e in toc_entries()]  # every page the toc lists (chapters, preface, glossary)
CHAPTERS = [
    _strip_suffix(e) for e in toc_entries()
    if (ROOT / f"{_strip_suffix(e)}.ipynb").is_file()
]
WIDTHS = list(layout.VIEWPORTS)  # "1280" (1280×800) and "390" (390×844, a phone)
SCREENSHOTS = ROOT / "_build" / "screenshots"  # where CI and readers find the pages' screenshots


def screenshot_path(doc: str, width: str) -> Path:
    return SCREENSHOTS / f"{doc}-{width}.png"


def toc_markdown() -> dict[str, str]:
    """The prose of every page the toc lists, by entry: .md files whole, notebooks' markdown cells joined."""
    pages = {}
    for entry in toc_entries():
        for path in resolve_entry(entry)[:1]:
            if path.suffix == ".ipynb":
                nb = nbformat.read(path, as_version=4)
                pages[entry] = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
            else:
                pages[entry] = path.read_text(encoding="utf-8")
    return pages


class Built:
    """A built book: its html folder and, when the tests built it, the build's log, exit status and time."""

    def __init__(self, html: Path, log: str | None, rc: int | None, seconds: float | None):
        self.html, self.log, self.rc, self.seconds = html.resolve(), log, rc, seconds
        self._soups: dict[Path, BeautifulSoup] = {}

    def page(self, docname: str) -> Path:
        return self.html / f"{docname}.html"

    def soup(self, docname: str) -> BeautifulSoup:
        return self.parse(self.page(docname))

    def parse(self, page: Path) -> BeautifulSoup:
        """The page's parsed HTML, parsed once for all tests (they only read it)."""
        if page not in self._soups:
            self._soups[page] = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        return self._soups[page]

    def pages(self) -> list[Path]:
        """Book pages (not the theme's template snippets under _static/)."""
        return sorted(p for p in self.html.rglob("*.html")
                      if p.relative_to(self.html).parts[0] not in ("_static", "_sources", "_images"))


def local_target(page: Path, url: str, html_root: Path) -> Path | None:
    """File a relative URL on `page` points to (None for anchors/data:/mailto: ...)."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    return (page.parent / unquote(parts.path)).resolve()
