"""No raw markup and no ASCII symbol in anything a reader sees.

Markdown that did not render (``**小批次“前期收敛快”**``: MyST does not close emphasis next to CJK quotation
marks), TeX outside a formula (``2^{1/4}``, ``B_{noise}``), and a symbol the prose typesets ($B_\\text{noise}$)
written as a program writes it (``B_noise``, ``S_min``, ``G_B``) are all defects. Read: every built page's
visible text, image alt text, figure captions, table cells, saved widgets' labels and outputs
(tests/reader_text.py), and the notebooks' Markdown and shown outputs as stored. The API reference's
signatures and docstrings (``dl.py``) are code documentation and are not read, and its module docstrings,
English and written as code writes symbols, are read for unrendered markup only.
Before: 4.2's ``**小批次“前期收敛快”**`` (bold markers shown), 4.6 Fig. 18's ``2^{1/4}``; B_noise / S_min / E_min /
B_simple / G_B as ASCII in 4.2's exercises (5), table headers (3), printouts (3) and a claim card (3).
"""
from __future__ import annotations

import re

import pytest

from booktools import ROOT
from tests.reader_text import Seen, notebook_texts, page_texts

BOOK = ROOT / "book"
RAW_MARKUP = re.compile(r"\*\*|\^\{|_\{")
# The symbols the prose typesets (batchlab.page.symbols.SYMBOLS) and the ASCII a program writes for them.
from batchlab.page.symbols import SYMBOLS  # noqa: E402

ASCII_SYMBOL = re.compile(r"(?<![\w.])(?:" + "|".join(map(re.escape, SYMBOLS)) + r"|B_new|B_old)(?!\w)")


def problems(pieces: list[Seen], markup: bool = True, symbols: bool = True) -> list[str]:
    """Each piece of reader text that shows raw markup (when ``markup``) or an ASCII symbol (when ``symbols``)."""
    found = []
    for piece in pieces:
        if markup and RAW_MARKUP.search(piece.text):
            found.append(f"{piece.where}: 未渲染的标记：{piece.text[:100]}")
        if symbols and ASCII_SYMBOL.search(piece.text):
            found.append(f"{piece.where}: ASCII 符号 {ASCII_SYMBOL.search(piece.text).group(0)}：{piece.text[:100]}")
    return found


@pytest.mark.parametrize("path", sorted(BOOK.glob("4.*.ipynb")), ids=lambda p: p.stem)
def test_no_ascii_symbol_in_the_notebooks(path):
    pieces = notebook_texts(path)
    # Markdown source legitimately holds ** (it renders as bold): that is checked on the built page.
    prose = [p for p in pieces if p.where.endswith(" md")]
    assert problems(prose, markup=False) + problems([p for p in pieces if p not in prose]) == []


def test_no_raw_markup_or_ascii_symbol_on_any_page(built):
    found = []
    for page in built.pages():
        # The API reference quotes the code's English docstrings, which write symbols as code does (G_B):
        # it is read for unrendered markup only.
        found += problems(page_texts(page, built.html), symbols=page.name != "api.html")
    assert found == []


def test_the_check_catches_markup_and_symbols(tmp_path):
    page = tmp_path / "p.html"
    page.write_text(
        '<html><body><main><p>**小批次“前期收敛快”**只在按样本计时</p>'
        '<figure><img src="x.png" alt="细扫 2^{1/4} 倍"><figcaption>步长 2^{1/4} 倍</figcaption></figure>'
        '<table><tr><th>S/S_min 预测</th></tr><tr><td>1.0</td></tr></table>'
        '<div class="cell_output"><pre>初始化时：逐样本 B_simple = 18.3</pre></div>'
        '<script type="application/vnd.jupyter.widget-state+json">'
        '{"state": {"a": {"model_name": "IntSliderModel", "state": {"description": "B_{noise}"}}}}</script>'
        "</main></body></html>", encoding="utf-8")
    found = problems(page_texts(page, tmp_path))
    for needle in ("**小批次", "alt", "步长 2^{1/4}", "S_min", "B_simple", "B_{noise}"):
        assert any(needle in f for f in found), (needle, found)
    clean = tmp_path / "q.html"
    clean.write_text('<html><body><main><p><strong>小批次“前期收敛快”</strong>：只在按样本计时</p>'
                     '<table><tr><th>S/<i>S</i><sub>min</sub> 预测</th></tr><tr><td>1.0</td></tr></table>'
                     '<p><code>B_noise</code> 与 <span class="math">\\(B_\\text{noise}\\)</span></p>'
                     "</main></body></html>", encoding="utf-8")
    assert problems(page_texts(clean, tmp_path)) == []


def test_exercises_typeset_their_symbols():
    # The page shows an exercise's question as Markdown (its symbols in $…$, as the prose writes them); a
    # terminal (bl.ask, python -m batchlab grade) shows Exercise.text(), the same words without the markup.
    from batchlab.ui.exercises import EXERCISES
    from tests.reader_text import markdown_text
    for exercise_id, exercise in EXERCISES.items():
        shown = [exercise.question, *(exercise.choices or {}).values()]
        assert problems([Seen(exercise_id, markdown_text(t)) for t in shown], markup=False) == [], exercise_id
        assert "$" not in exercise.text() and "\\" not in exercise.text(), exercise_id
    from batchlab.ui.exercises.base import Exercise
    e = Exercise(r"噪声尺度 $B_\text{noise}$ = 64，保存 $s\times s$ 分数", lambda: 1, "")
    assert e.text() == "噪声尺度 B_noise = 64，保存 s×s 分数"
    assert problems([Seen("x", markdown_text("梯度噪声尺度 B_noise = 64"))], markup=False)
