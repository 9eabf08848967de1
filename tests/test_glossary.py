"""The glossary (book/glossary.md) is the source of the book's Chinese terms: its tables parse, every
term is defined once, and no page of the book uses a wording the glossary rules out."""
from __future__ import annotations

import re

import pytest

from booktools import ROOT
from batchlab.lecture.verdicts import VERDICT_LABELS
from booktools.search_terms import AVOID, GLOSSARY, glossary_tables
from tests.book_pages import toc_markdown

VERDICTS = "结论用语"  # the section of verdict words (word, meaning): search terms too
TABLES = glossary_tables(GLOSSARY.read_text(encoding="utf-8"))


def _pages() -> dict[str, str]:
    """Every toc page's prose except the glossary's own."""
    glossary = str(GLOSSARY.relative_to(ROOT).with_suffix(""))
    return {entry: text for entry, text in toc_markdown().items() if entry != glossary}


def _unquoted(text: str) -> str:
    """Text outside “…” quotations: quoting the lecture (原文) in its own words is allowed."""
    return re.sub(r"“[^”]*”", "", text)


def test_every_term_is_defined_once_with_its_english_name():
    terms = [row[0] for heading, rows in TABLES.items() if heading not in (AVOID, VERDICTS) for row in rows]
    assert len(terms) > 40
    assert len(terms) == len(set(terms)), sorted(t for t in terms if terms.count(t) > 1)
    for heading, rows in TABLES.items():
        if heading not in (AVOID, VERDICTS):
            assert all(len(row) == 5 and row[1] for row in rows), heading


def test_the_verdict_words_are_the_codes_words():
    """Each verdict word a chapter prints is defined once, with the meaning the code gives it."""
    assert {row[0]: row[1] for row in TABLES[VERDICTS]} == VERDICT_LABELS


def test_chapter_46_terms_are_in_the_glossary():
    terms = {row[0] for rows in TABLES.values() for row in rows}
    for term in ["点对点通信", "环形全归约", "批归一化", "层归一化", "损失归一化", "噪声地板", "调参速查表", "屋顶线"]:
        assert term in terms


@pytest.mark.parametrize("avoid, use", [tuple(row) for row in TABLES[AVOID]])
def test_no_page_uses_a_wording_the_glossary_rules_out(avoid, use):
    offenders = [page for page, text in _pages().items() if avoid in _unquoted(text)]
    assert not offenders, f"{offenders} 用了“{avoid}”，术语表规定用“{use}”"


def test_the_rule_catches_an_offender():
    assert "微批量" in _unquoted("把微批量调大")
    assert "微批量" not in _unquoted("原文说“把微批量调大”")


def test_search_dictionary_is_the_glossary():
    """book/_search_terms.txt (jieba's user dictionary for the book's search) is generated from the
    glossary: a term added there must reach the search too."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "booktools.search_terms", "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    words = (ROOT / "book" / "_search_terms.txt").read_text(encoding="utf-8").split()
    assert "屋顶线" in words and "梯度累积" in words


# An English term appears only in parentheses beside its Chinese one (at first use); elsewhere the prose
# says 批大小, 全局批大小, 微批次大小. Code, math, quotations of the lecture and parentheses are left out.
ENGLISH_IN_PROSE = re.compile(r"(?<![A-Za-z])(?:Global |Micro-)?Batch Size(?![A-Za-z])|(?<![A-Za-z])Global \d")


def _english_outside_parentheses(text: str) -> list[str]:
    prose = re.sub(r"```.*?```|`[^`]*`|\$\$.*?\$\$|\$[^$\n]*\$|（[^）]*）|\([^)]*\)", "", _unquoted(text), flags=re.S)
    return ENGLISH_IN_PROSE.findall(prose)


def test_english_terms_only_in_parentheses():
    offenders = {page: found for page, text in _pages().items() if (found := _english_outside_parentheses(text))}
    assert not offenders, f"正文里直接用了英文术语（应写批大小等，英文只在第一次出现时放在括号里）：{offenders}"


def test_the_english_rule_catches_an_offender():
    assert _english_outside_parentheses("# 4.2 Batch Size对收敛的影响，小 Batch Size 一定") == ["Batch Size", "Batch Size"]
    assert _english_outside_parentheses("例如 Global 64 的作业") == ["Global 6"]
    assert not _english_outside_parentheses("批大小（Batch Size）与原文说的“Batch Size 只影响显存”，`batch_size`，$\\text{Global Batch}$")
