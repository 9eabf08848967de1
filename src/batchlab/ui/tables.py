"""Plain-text tables that line up when they mix Chinese and Latin characters.

A CJK character takes two columns in a monospace font; ``str.ljust`` counts it as one, so
f-string padding drifts as soon as a header is Chinese.
"""
from __future__ import annotations

import unicodedata
from typing import Sequence

__all__ = ["display_width", "text_table"]


def display_width(text: str) -> int:
    """Columns ``text`` occupies in a monospace font (wide and full-width characters count 2)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _cell(value: object, digits: int) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]], digits: int = 3) -> str:
    """Right-align numbers, left-align text, pad by display width; floats get ``digits`` decimals."""
    if any(len(row) != len(headers) for row in rows):
        raise ValueError(f"every row needs {len(headers)} cells, one per header {list(headers)}")
    cells = [[_cell(v, digits) for v in row] for row in rows]
    numeric = [all(isinstance(row[j], (int, float)) for row in rows) for j in range(len(headers))]
    widths = [max(display_width(str(h)), *(display_width(r[j]) for r in cells)) for j, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        out = []
        for j, v in enumerate(values):
            pad = " " * (widths[j] - display_width(v))
            out.append(pad + v if numeric[j] else v + pad)
        return "  ".join(out).rstrip()

    return "\n".join([line([str(h) for h in headers]), *(line(r) for r in cells)])
