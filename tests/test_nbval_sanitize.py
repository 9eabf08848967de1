"""The nbval sanitizer rounds measured floats to two decimals (conftest.py), rather than truncating, and
nbval compares every text-like MIME type of an output under the same rules as its text: the HTML of a
table (what the book's page shows, and what Jupyter stores first) is sanitized like its text/plain.

nbval 0.11's ``IPyNbCell.compare_outputs`` passes every ``data`` entry not in ``IPyNbFile.skip_compare``
through ``IPyNbCell.sanitize`` (text/html, text/latex, text/markdown alike), and conftest.py's ``ROUND2``
patch acts on the patterns that ``sanitize`` uses, so nothing MIME-specific needs patching. These tests go
through that code path on a real nbval item (collected, not run: no kernel), so an nbval that stopped
sanitizing one of them fails here.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output
from nbval.plugin import IPyNbCell, IPyNbFile, get_sanitize_patterns

from batchlab.ui.tables import text_table
from booktools import ROOT
from conftest import ROUND_MARK, round_floats

SANITIZE = ROOT / "tests" / "nbval-sanitize.cfg"
HEADERS = ["做法", "损失"]


def sanitize(text: str) -> str:
    for regex, replace in get_sanitize_patterns(SANITIZE.read_text(encoding="utf-8")):
        text = re.sub(regex, round_floats if replace == ROUND_MARK else replace, text)
    return text


def test_values_either_side_of_a_truncation_boundary_compare_equal():
    assert sanitize("loss 0.1699") == sanitize("loss 0.1701") == "loss 0.17"
    assert sanitize("B_simple = 18.296") == "B_simple = 18.30"


def test_different_values_still_differ_and_short_numbers_are_untouched():
    assert sanitize("0.158") != sanitize("0.273")
    assert sanitize("m = 16, 15.8%") == "m = 16, 15.8%"
    assert sanitize("-1.23456") == "-1.23"
    assert sanitize("at 0x7f3a2b1c9d80") == "at 0xADDRESS"


def table(loss: float):
    """A table with one measured float to four decimals, as a chapter prints it."""
    return text_table(HEADERS, [["基线", loss], ["微批次 ×2", 2.5]], digits=4)


def shown(loss: float, mimes: tuple[str, ...]):
    """The execute_result a notebook stores for ``table(loss)``, with only the ``mimes`` asked for."""
    t = table(loss)
    data = {"text/plain": t.text, "text/html": t.html(), "text/markdown": f"损失 **{loss:.4f}**",
            "text/latex": f"$L = {loss:.4f}$"}
    return new_output("execute_result", data={m: data[m] for m in mimes}, execution_count=1)


@pytest.fixture
def cell(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> IPyNbCell:
    """A real nbval cell item of a one-cell notebook (collected by nbval in this session, not run: no kernel),
    its file's patterns read from tests/nbval-sanitize.cfg by nbval's own, conftest-patched, setup."""
    assert getattr(IPyNbFile.setup_sanitize_files, "_batchlab_rounding", False), "conftest.py's patch is not active"
    nbformat.write(new_notebook(cells=[new_code_cell("table", execution_count=1, outputs=[])]), tmp_path / "lab.ipynb")
    monkeypatch.setattr(request.config.option, "nbval_sanitize_with", str(SANITIZE))  # --nbval-sanitize-with
    notebook = IPyNbFile.from_parent(request.session, path=tmp_path / "lab.ipynb")
    (item,) = notebook.collect()
    notebook.setup_sanitize_files()  # what IPyNbFile.setup does before it starts the kernel
    return item


MIMES = [("text/plain",), ("text/html",), ("text/markdown",), ("text/latex",),
         ("text/plain", "text/html")]


@pytest.mark.parametrize("mimes", MIMES, ids="+".join)
def test_floats_differing_past_two_decimals_compare_equal_in_every_text_mime(cell, mimes):
    stored, measured = [shown(0.1234, mimes)], [shown(0.1236, mimes)]  # another CPU's fourth decimal
    assert table(0.1234).html() != table(0.1236).html()                 # different before sanitizing
    assert cell.compare_outputs(measured, stored), "\n".join(cell.comparison_traceback)


@pytest.mark.parametrize("mimes", MIMES, ids="+".join)
def test_a_genuinely_different_value_still_differs_in_every_text_mime(cell, mimes):
    assert not cell.compare_outputs([shown(0.1534, mimes)], [shown(0.1234, mimes)])
    assert any(mimes[0] in line for line in cell.comparison_traceback)  # the report names the MIME type


def test_the_sanitizer_is_what_makes_them_equal(cell):
    """Without the patterns the same outputs differ: the equality above is the sanitizer's doing."""
    cell.parent.sanitize_patterns.clear()
    assert not cell.compare_outputs([shown(0.1236, ("text/html",))], [shown(0.1234, ("text/html",))])


def test_html_is_rounded_like_text(cell):
    """The sanitized HTML carries the same rounded number as the sanitized text."""
    t = table(0.1236)
    assert "0.12" in cell.sanitize(t.html()) and "0.1236" not in cell.sanitize(t.html())
    assert cell.sanitize(t.text).split()[3] == "0.12"
