"""What a reader sees in a chapter's outputs is for people: no Python repr (None, True/False, dicts, lists,
object reprs, /proc paths) and no run of zeros where a number belongs. Outputs the HTML book leaves out
(remove-output, remove-cell) and widgets (the page shows their view) are not read."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
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
