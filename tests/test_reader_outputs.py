"""What a reader sees in a chapter's outputs is for people: no Python repr (None, True/False, dicts, lists,
object reprs, /proc paths) and no run of zeros where a number belongs. Outputs the HTML book leaves out
(remove-output, remove-cell) and widgets (the page shows their view) are not read."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from booktools import ROOT

BOOK = ROOT / "book"
REPR = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\{['\"\d]|\['|\[\d+(?:\.\d+)?(?:, \d+(?:\.\d+)?){2,}\]"
                  r"|/proc/|object at 0x|\b0\.0000\d")


def reader_lines(path: Path) -> list[str]:
    """The text lines of ``path``'s outputs that the HTML book shows."""
    lines = []
    for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.cell_type != "code" or {"remove-output", "remove-cell"} & set(tags):
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data:
                continue
            text = output.get("text") or data.get("text/plain") or ""
            lines += [f"[{index}] {line}" for line in "".join(text).splitlines()]
    return lines


@pytest.mark.parametrize("path", sorted(BOOK.glob("4.*.ipynb")), ids=lambda p: p.stem)
def test_no_python_repr_in_what_readers_see(path):
    assert [line for line in reader_lines(path) if REPR.search(line)] == []


def test_the_pattern_catches_reprs():
    for bad in ("推荐： 1 ； None", "步数：{'基线': 32}", "[4, 3, 2, 1]", "差异 < 1e-6：True", "['115%']",
                "{'device': 'cpu'}", "0.000000109", "<Foo object at 0x7f>"):
        assert REPR.search(bad), bad
    for good in ("落在 [9.2, 94.8]", "阶段 0–3 最多同时持有的微批次 4、3、2、1", "1.1×10⁻⁷", "成立", "2.0 GiB"):
        assert not REPR.search(good), good


# Codes of the job record (batchlab.ui.names.CODE_NAMES: gpipe, 1f1b, none, selective, full, bf16-mixed, adam…)
# stay in code; a reader's table or line says the glossary's name (batchlab.ui.names.name).
from batchlab.ui.names import CODE_NAMES, name  # noqa: E402

CODE = re.compile(r"(?<![\w-])(?:" + "|".join(sorted(map(re.escape, CODE_NAMES), key=len, reverse=True)) + r")(?![\w-])")


@pytest.mark.parametrize("path", sorted(BOOK.glob("4.*.ipynb")), ids=lambda p: p.stem)
def test_no_code_names_in_what_readers_see(path):
    assert [line for line in reader_lines(path) if CODE.search(line)] == []


def test_the_code_pattern_catches_code_names():
    for bad in ("gpipe  1.00", "重计算 selective", "1f1b：峰值 80%", "bf16-mixed  sgd-momentum", "adam 3e-3", "none"):
        assert CODE.search(bad), bad
    for good in ("GPipe", "1F1B", "选择性重计算", "fp32 全精度", "Adam", "不重计算", "带动量的 SGD", name("precision", "bf16-mixed")):
        assert not CODE.search(good), good


# Numbers for people (batchlab.page.numbers): a count has thousands separators, and a large quantity has no
# run of decimals — a raw byte count (25159499776) or a rate to three decimals (5123.457 tokens/s) is not.
RAW_NUMBER = re.compile(r"(?<![\w.,×^⁰¹²³⁴⁵⁶⁷⁸⁹-])(?:\d{5,}(?![\d,])|\d{4,}\.\d{2,})")


@pytest.mark.parametrize("path", sorted(BOOK.glob("4.*.ipynb")), ids=lambda p: p.stem)
def test_numbers_are_formatted_for_people(path):
    assert [line for line in reader_lines(path) if RAW_NUMBER.search(line)] == []


def test_the_number_pattern_catches_raw_numbers():
    for bad in ("激活值 25159499776", "tokens/s 5123.457", "  1048576  ", "峰值 123456 字节"):
        assert RAW_NUMBER.search(bad), bad
    for good in ("25,159,499,776", "5,120", "23.4 GiB", "1.1×10⁻⁷", "2.345", "M = 1024", "2019 年", "1,234.5",
                 "npu-smi-23.0-8cards", "种子 0"):
        assert not RAW_NUMBER.search(good), good


# A number at float32 rounding level (below batchlab.lecture.verdicts.FLOAT32_ROUNDING, 10⁻⁶) is noise whose
# digits change with the CPU's vector instructions (and fail nbval on another CPU): a reader sees what it
# means, batchlab.page.numbers.float_gap's "< 10⁻⁶（float32 舍入）", not m×10⁻⁷.
ROUNDING_NOISE = re.compile(r"×10⁻(?:[⁷⁸⁹]|[¹²³⁴⁵⁶⁷⁸⁹][⁰¹²³⁴⁵⁶⁷⁸⁹])(?![⁰¹²³⁴⁵⁶⁷⁸⁹])"
                            r"|\d(?:\.\d+)?e-(?:0?[7-9]|[1-9]\d)\b")


@pytest.mark.parametrize("path", sorted(BOOK.glob("4.*.ipynb")), ids=lambda p: p.stem)
def test_no_digits_of_rounding_noise_in_what_readers_see(path):
    assert [line for line in reader_lines(path) if ROUNDING_NOISE.search(line)] == []


def test_the_rounding_pattern_catches_noise_digits():
    for bad in ("累积  1.1×10⁻⁷  成立", "差异 9.1×10⁻⁸", "2.2×10⁻¹²", "gap 1.5e-07", "1e-8"):
        assert ROUNDING_NOISE.search(bad), bad
    for good in ("< 10⁻⁶（float32 舍入）", "1.0×10⁻⁶", "3.3×10⁻²", "3.20×10⁻³", "lr 1e-3", "1e-6"):
        assert not ROUNDING_NOISE.search(good), good
