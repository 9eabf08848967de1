"""Result tables: one set of formatted cells, shown as an HTML table in the book and as aligned text elsewhere.

``text_table`` formats every cell once and returns a :class:`Table`. Jupyter and the HTML book show its
``_repr_html_`` (a real ``<table>``, numbers right-aligned); ``str()``, ``print()`` and the notebook's
``text/plain`` output give the aligned text, which is what the CLI prints and what nbval compares.
Both forms read the same cell strings, so they cannot disagree.

The text form pads by display width: a CJK character takes two columns in a monospace font, while
``str.ljust`` counts it as one, so f-string padding drifts as soon as a header is Chinese.
"""
from __future__ import annotations

import html
import unicodedata
from dataclasses import dataclass
from typing import Any, Sequence

from batchlab.page.numbers import Formatted

__all__ = ["HTML_CLASS", "Shown", "Table", "display_width", "text_table"]

HTML_CLASS = "batchlab-table"   # the <table>'s class, for anyone styling result tables
# Inline, so the layout holds in JupyterLab and in the book without a stylesheet; tabular figures
# make the digits of a right-aligned column line up in a proportional font.
_ALIGN = {True: "text-align: right; font-variant-numeric: tabular-nums", False: "text-align: left"}
_TAG_STYLE = {"th": "padding: 0.2em 0.8em; border-bottom: 1px solid", "td": "padding: 0.1em 0.8em"}


def display_width(text: str) -> int:
    """Columns ``text`` occupies in a monospace font (wide and full-width characters count 2)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _cell(value: object, digits: int) -> str:
    # Readers never see a Python repr: yes/no for a bool, a dash for a missing value.
    if isinstance(value, bool):
        return "是" if value else "否"
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float, Formatted)) and not isinstance(value, bool)


class Shown:
    """A result shown two ways: ``text`` (print, a terminal, IPython's text/plain) and ``html()`` (the
    book's page). Jupyter picks the HTML, so a notebook cell that ends with one shows no repr."""

    text: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # IPython prefers a class's own __repr__ (a dataclass writes one) to an inherited _repr_pretty_
        cls._repr_pretty_ = Shown._repr_pretty_

    def html(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return self.html()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text)


@dataclass(frozen=True)
class Table(Shown):
    """Formatted cells of a result table; ``numeric[j]`` says whether column ``j`` is right-aligned."""

    headers: tuple[str, ...]
    cells: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...]

    @property
    def text(self) -> str:
        """Aligned plain text: numbers right, text left, columns two spaces apart, padded by display width."""
        widths = [max(display_width(h), *(display_width(r[j]) for r in self.cells))
                  for j, h in enumerate(self.headers)]

        def line(values: Sequence[str]) -> str:
            out = []
            for j, v in enumerate(values):
                pad = " " * (widths[j] - display_width(v))
                out.append(pad + v if self.numeric[j] else v + pad)
            return "  ".join(out).rstrip()

        return "\n".join([line(self.headers), *(line(r) for r in self.cells)])

    def html(self) -> str:
        """The same cells as an HTML ``<table>``, escaped (a header with symbols, :class:`~batchlab.page.symbols.Typeset`,
        gives its own HTML); deterministic, because nbval compares it."""
        def row(tag: str, values: Sequence[str]) -> str:
            return "<tr>" + "".join(f'<{tag} style="{_ALIGN[self.numeric[j]]}; {_TAG_STYLE[tag]}">'
                                    f"{v.__html__() if hasattr(v, '__html__') else html.escape(v)}</{tag}>"
                                    for j, v in enumerate(values)) + "</tr>"

        return "\n".join([f'<table class="{HTML_CLASS}" style="border-collapse: collapse">', "<thead>", row("th", self.headers), "</thead>",
                          "<tbody>", *(row("td", r) for r in self.cells), "</tbody>", "</table>"])



def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]], digits: int = 3) -> Table:
    """Format a result table once: numbers right-aligned, floats with ``digits`` decimals; a value formatted
    by :mod:`batchlab.page.numbers` is kept as it is (and right-aligned), a bool reads 是/否, None a dash.

    Show it with ``display(...)`` (or as a cell's last expression) for an HTML table in the book;
    ``str()``/``print()`` give the aligned text.
    """
    if any(len(row) != len(headers) for row in rows):
        raise ValueError(f"每一行都要有 {len(headers)} 个单元格，与表头 {list(headers)} 一一对应；"
                         f"实际各行的单元格数：{[len(row) for row in rows]}")
    numeric = tuple(all(_is_number(row[j]) for row in rows) for j in range(len(headers)))
    return Table(headers=tuple(h if hasattr(h, "__html__") else str(h) for h in headers),
                 cells=tuple(tuple(_cell(v, digits) for v in row) for row in rows),
                 numeric=numeric)
