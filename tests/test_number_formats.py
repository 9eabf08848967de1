"""One format per quantity across the book (batchlab.page.numbers): a learning rate reads 3.0×10⁻³ wherever a
reader meets it, never 3e-3, 0.003 or 3.20×10⁻³; a throughput 3,200 tokens/s (three significant figures), never
3200 or 160,935; a dropout rate 0.1, never 0.100; a percentage 15.8%, never 15.79% or 15.8 %; a duration
0.407 秒, never 0.75 s.

Each quantity is recognised by its label or unit (学习率 / lr, tokens/s, dropout, %, 秒 / s), in prose, in a
table cell under a header that names it, and in outputs. Read are the notebooks as stored (Markdown and every
shown output: no build needed) and, when the book is built, every page (widgets' labels included).
Before this test: 3e-3 ×11 in 4.2's prose, 0.003/0.008/0.024 in its tables, 3.20×10⁻³ in its printout,
3200/5100 tokens/s in 4.5, 15.79%/27.27% in 4.5's audit, 0.00%/1.21%/0.08% in 4.3, dropout 0.10 in 4.3's table.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import pytest

from booktools import ROOT
from tests.reader_text import Seen, notebook_texts, page_texts

BOOK = ROOT / "book"
SUP = "⁰¹²³⁴⁵⁶⁷⁸⁹"
NUM = rf"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+|×10⁻?[{SUP}]+)?"
NUMBER = re.compile(NUM)


def _figures(number: str) -> int:
    digits = number.replace(",", "")
    if "." in digits:
        return len(digits.replace(".", "").lstrip("0"))
    return len(digits.lstrip("0").rstrip("0")) or 1


def _grouped(number: str) -> bool:
    whole = number.split(".")[0]
    return bool(re.fullmatch(r"\d{1,3}(?:,\d{3})*", whole))


@dataclass(frozen=True)
class Quantity:
    """A quantity: how prose names it (``prose``: a pattern whose groups hold its numbers), which table headers
    name it, and whether a number is in the book's one format (``ok``)."""

    name: str
    prose: tuple[re.Pattern, ...]
    header: re.Pattern
    ok: Callable[[str], bool]
    example: str


LR_OK = re.compile(rf"\d\.\d×10⁻[{SUP}]+|[1-9]\d*(?:\.\d+)?")  # below 1: m.m×10⁻ⁿ; from 1: ≤ 3 figures
LIST = rf"({NUM}(?:\s*[,、]\s*{NUM})*)"

QUANTITIES = (
    Quantity("学习率",
             (re.compile(rf"(?:学习率|\blr\b)[\s为是取{{（(]{{0,3}}{LIST}"),
              re.compile(rf"学习率[^。；;\n]*?→[^。；;\n]*?({NUM}(?:e[-+]?\d+|×10[^\s，。；]*))")),
             re.compile(r"学习率(?!调度)|\blr\b"), lambda n: bool(LR_OK.fullmatch(n)) and ("×" in n or _figures(n) <= 3), "3.0×10⁻³"),
    Quantity("吞吐量（tokens/s）",
             (re.compile(rf"({NUM})(?:\s*(?:→|到|升到|降到)\s*({NUM}))?\s*tokens/s"),
              re.compile(rf"吞吐量?[^。；;\n\d]{{0,6}}({NUM})[^。；;\n\d]{{0,4}}({NUM})?\s*tokens/s")),
             re.compile(r"tokens/s|吞吐"), lambda n: _grouped(n) and _figures(n) <= 3 and "e" not in n, "3,200"),
    Quantity("dropout",
             (re.compile(rf"dropout\s*(?:为|=|：|:)?\s*{LIST}"),),
             re.compile(r"^dropout$", re.I), lambda n: bool(re.fullmatch(r"0|1|0\.\d*[1-9]", n)), "0.1"),
    Quantity("百分比",
             (re.compile(rf"({NUM}\s*)%"),),
             re.compile(r"(?!)"), lambda n: bool(re.fullmatch(r"\d+(?:\.\d)?", n)), "15.8%"),
    Quantity("时长（秒）",
             (re.compile(rf"(?<![\w.]){NUM}\s*(?:ms|s)(?![\w/])"), re.compile(rf"({NUM})\s*(?:毫秒|秒)")),
             re.compile(r"（秒|秒）|毫秒|\(s\)"), lambda n: "." not in n or _figures(n) == 3, "0.407 秒"),
)


def problems(pieces: list[Seen]) -> list[str]:
    """Every number of a known quantity not in the book's one format, with where it is."""
    found = []
    for piece in pieces:
        for q in QUANTITIES:
            numbers: list[str] = []
            if piece.header is not None:
                if q.header.search(piece.header):
                    numbers += [m.group(0) for m in NUMBER.finditer(piece.text)]
            for pattern in q.prose:
                for match in pattern.finditer(piece.text):
                    if not match.groups():  # the pattern's whole match is a contrary form (e.g. "0.75 s")
                        found.append(f"{piece.where}: {q.name} 「{match.group(0)}」（应为 {q.example} 的格式）：{piece.text[:90]}")
                        continue
                    for group in match.groups():
                        if group:
                            numbers += [m.group(0) for m in NUMBER.finditer(group)]
            if q.name == "百分比":  # a space before % is the other format
                found += [f"{piece.where}: 百分比「{m.group(0)}」前有空格：{piece.text[:90]}"
                          for m in re.finditer(rf"{NUM}\s+%", piece.text)]
            found += [f"{piece.where}: {q.name} 「{n}」（应为 {q.example} 的格式）：{piece.text[:90]}"
                      for n in dict.fromkeys(x.strip() for x in numbers) if not q.ok(n)]
    return found


CHAPTERS = sorted(BOOK.glob("4.*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_one_format_per_quantity_in_the_notebooks(path):
    assert problems(notebook_texts(path)) == []


def test_one_format_per_quantity_on_every_page(built):
    found = []
    for page in built.pages():
        found += problems(page_texts(page, built.html))
    assert found == []


def test_the_check_catches_a_second_format():
    bad = [Seen("x", "四组都用同一学习率 3e-3、不做缩放"), Seen("x", "0.003", header="学习率"),
           Seen("x", "线性缩放：单卡学习率 1.0×10⁻⁴ → 全局批大小 64 时 3.20×10⁻³"),
           Seen("x", "吞吐量从 3200 升到 5,100 tokens/s"), Seen("x", "模型估计 160,935 tokens/s"),
           Seen("x", "20000", header="tokens/s（910B 低端）"), Seen("x", "dropout 为 0.100"),
           Seen("x", "0.10", header="dropout"), Seen("x", "m = 16，15.79%"), Seen("x", "气泡 15.8 %"),
           Seen("x", "模型估计每步 0.75 s"), Seen("x", "启动 0.32 秒"), Seen("x", "学习率 {3e-3, 1.0×10⁻², 3e-2}")]
    for piece in bad:
        assert problems([piece]), piece
    good = [Seen("x", "四组都用同一学习率 3.0×10⁻³、不做缩放"), Seen("x", "3.0×10⁻³", header="学习率"),
            Seen("x", "单卡学习率 1.0×10⁻⁴ → 全局批大小 64 时 3.2×10⁻³"), Seen("x", "吞吐量从 3,200 升到 5,100 tokens/s"),
            Seen("x", "模型估计 161,000 tokens/s"), Seen("x", "20,000", header="tokens/s（910B 低端）"),
            Seen("x", "dropout 为 0.1"), Seen("x", "0", header="dropout"), Seen("x", "m = 16，15.8%"),
            Seen("x", "85%–90%"), Seen("x", "模型估计每步 0.407 秒"), Seen("x", "预算 600 秒"),
            Seen("x", "64 步后验证损失"), Seen("x", "2 (micro) × 4 (PP)"), Seen("x", "381 毫秒")]
    assert problems(good) == []
