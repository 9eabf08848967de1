"""The book's symbols, each written once and rendered once per medium.

The prose typesets $B_\\text{noise}$, $S_\\text{min}$…; a table header, an explorer's summary, an exercise or an axis
label must show the same symbol, not the ASCII ``B_noise`` a program would write. Each symbol is a base letter and
a subscript; :func:`tex` gives it for Markdown/MathJax (wrapped in ``$…$``), :func:`html` for an HTML summary or
table (``<sub>``), :func:`mathtext` for a matplotlib label. Plain text (a terminal, a printed line) has no
subscripts: there the book says the glossary's word (简单噪声尺度…) instead of a symbol.
"""
from __future__ import annotations

import html as _html
from dataclasses import dataclass

__all__ = ["Symbol", "SYMBOLS", "tex", "html", "mathtext", "Typeset", "typeset"]


@dataclass(frozen=True)
class Symbol:
    """A letter with a subscript: ``word`` says whether the subscript is a word (upright) or a variable (italic)."""

    base: str
    sub: str
    word: bool = True


SYMBOLS: dict[str, Symbol] = {
    "B_noise": Symbol("B", "noise"),
    "B_simple": Symbol("B", "simple"),
    "B_crit": Symbol("B", "crit"),
    "B_global": Symbol("B", "global"),
    "S_min": Symbol("S", "min"),
    "E_min": Symbol("E", "min"),
    "G_B": Symbol("G", "B", word=False),
}
"""Every subscripted symbol a reader meets, by the ASCII name code uses for it."""


def _get(name: str) -> Symbol:
    try:
        return SYMBOLS[name]
    except KeyError:
        raise ValueError(f"没有符号 {name!r}；可选：{', '.join(SYMBOLS)}") from None


def tex(name: str) -> str:
    """The symbol for Markdown: ``tex("B_noise")`` → ``$B_\\text{noise}$`` (as the prose writes it)."""
    s = _get(name)
    return f"${s.base}_\\text{{{s.sub}}}$" if s.word else f"${s.base}_{s.sub}$"


def html(name: str) -> str:
    """The symbol for an HTML summary or table: ``B<sub>noise</sub>``; a variable subscript is italic."""
    s = _get(name)
    sub = _html.escape(s.sub) if s.word else f"<i>{_html.escape(s.sub)}</i>"
    return f"<i>{_html.escape(s.base)}</i><sub>{sub}</sub>"


def mathtext(name: str) -> str:
    """The symbol for a matplotlib label: ``$B_\\mathrm{noise}$``."""
    s = _get(name)
    return f"${s.base}_\\mathrm{{{s.sub}}}$" if s.word else f"${s.base}_{s.sub}$"


class Typeset(str):
    """Text that holds symbols: as a string it is the plain form (a terminal's), and ``__html__`` gives the HTML a
    table or card shows instead of escaping it."""

    html_text: str

    def __new__(cls, plain: str, html_text: str) -> "Typeset":
        obj = super().__new__(cls, plain)
        obj.html_text = html_text
        return obj

    def __html__(self) -> str:
        return self.html_text


def typeset(template: str) -> Typeset:
    """A label with symbols named in braces, ``"S/{S_min} 预测"``: HTML with ``<sub>`` for the page (the rest
    escaped), and the ASCII names for plain text."""
    import string

    plain, rich = [], []
    for literal, field, _, _ in string.Formatter().parse(template):
        plain.append(literal)
        rich.append(_html.escape(literal))
        if field is not None:
            plain.append(field)
            rich.append(html(field))
    return Typeset("".join(plain), "".join(rich))
