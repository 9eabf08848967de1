"""Comments and docstrings a reader sees in a chapter's code cells are Chinese; identifiers stay English.

A comment (or docstring) is English when, after dropping what sits in backticks (identifiers, units), it has a
Latin word and no Chinese character: ``# sample budget; evaluate every 128 samples`` is, ``# 样本预算`` and
``# 每个 `rate` 一次`` are not. ``# noqa: E731`` counts as English: a reader does not need a linter's code.
Cells the page does not show (remove-cell, remove-input) are not read.
Before: 28 English comments (4.2 6, 4.3 7, 4.6 15), five of them ``# noqa: E731``.
"""
from __future__ import annotations

import io
import re
import tokenize

import nbformat
import pytest

from booktools import ROOT

BOOK = ROOT / "book"
HIDDEN = {"remove-cell", "remove-input"}
CJK = re.compile(r"[\u3400-\u9fff]")
LATIN_WORD = re.compile(r"[A-Za-z]{2,}")
BACKTICKED = re.compile(r"``?[^`]*``?")


def english_comments(source: str) -> list[str]:
    """The comments and docstrings of ``source`` that are written in English."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        is_docstring = token.type == tokenize.STRING and token.string.lstrip("rbuRBU").startswith(('"""', "'''"))
        if token.type != tokenize.COMMENT and not is_docstring:
            continue
        words = BACKTICKED.sub("", token.string)
        if LATIN_WORD.search(words) and not CJK.search(words):
            found.append(token.string)
    return found


@pytest.mark.parametrize("path", sorted(BOOK.glob("4.*.ipynb")), ids=lambda p: p.stem)
def test_no_english_comment_in_a_shown_code_cell(path):
    found = [f"[{i}] {comment}" for i, cell in enumerate(nbformat.read(path, as_version=4).cells)
             if cell.cell_type == "code" and not HIDDEN & set(cell.get("metadata", {}).get("tags", []))
             for comment in english_comments(cell.source)]
    assert found == []


def test_the_check_finds_english_comments():
    bad = ["x = 1  # sample budget; evaluate every 128 samples", "f = lambda: 0  # noqa: E731",
           'def f():\n    """Per seed: the loss after n samples at ``rate``."""\n', "# GPT-2's tied V × h matrix\n"]
    for source in bad:
        assert english_comments(source), source
    good = ["x = 1  # 样本预算；每 128 条样本评估一次", 'def f():\n    """每个 `rate` 的损失。"""\n',
            "y = 2  # B = 8, B = 128", "s = '# not a comment'", "# `per_sample` 的均值\nz = 3"]
    for source in good:
        assert english_comments(source) == [], source
