"""A chapter's code cells hold the experiment, not its bookkeeping (issue 19): every code cell has at most
MAX_LINES lines of code (blank and comment-only lines not counted); the setup cells — the Colab cell and
each chapter's first code cell (imports, the corpus, the style) — at most SETUP_LINES, counted the same
way (issue 27: a student imitates them). Verdicts are shown by one call to
batchlab.ui.claims, tables by batchlab.ui.tables; what does not fit is split at a point a reader can
follow, or moved into batchlab.

Every code line the page shows is at most MAX_WIDTH display columns (a CJK character is two), so the
content column holds it at desk width without a sideways scroll."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from batchlab.ui.tables import display_width
from booktools import ROOT

BOOK = ROOT / "book"
MAX_LINES = 10
SETUP_LINES = 12
MAX_WIDTH = 88
HIDDEN = {"remove-input", "remove-cell", "hide-input"}   # tags whose cell's code the page does not show
# chapter → how many shown code lines are still wider than MAX_WIDTH. Every entry is a debt: lower it as
# the chapter is shortened, remove it at zero.
WIDE_DEBT: dict[str, int] = {}
# (chapter, first line of the cell) → why it may be longer. Keep this short; every entry is a debt.
ALLOWED: dict[tuple[str, str], str] = {}


def code_lines(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#"))


def long_cells(path: Path) -> list[tuple[str, int]]:
    """(first line, code lines) of each code cell over its limit: SETUP_LINES for the Colab cell and
    the first code cell after it, MAX_LINES for the rest."""
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    colab = [c for c in cells if "colab-setup" in c.metadata.get("tags", [])]
    body = [c for c in cells if c not in colab]
    limits = [(c, SETUP_LINES) for c in [*colab, *body[:1]]] + [(c, MAX_LINES) for c in body[1:]]
    return [(c.source.splitlines()[0], code_lines(c.source)) for c, limit in limits
            if code_lines(c.source) > limit and (path.stem[:3], c.source.splitlines()[0]) not in ALLOWED]


@pytest.mark.parametrize("path", sorted(BOOK.glob("4.*.ipynb")), ids=lambda p: p.stem)
def test_chapter_cells_are_short(path):
    assert long_cells(path) == []


def test_setup_cells_are_counted_too(tmp_path):
    nb = nbformat.v4.new_notebook()
    setup = "\n".join(f"import m{i}" for i in range(13))
    nb.cells = [nbformat.v4.new_code_cell(setup), nbformat.v4.new_code_cell("x = 1")]
    path = tmp_path / "4.9-example.ipynb"
    nbformat.write(nb, path)
    assert long_cells(path) == [("import m0", 13)]
    nb.cells[0].source = "\n".join(f"import m{i}" for i in range(12))
    nbformat.write(nb, path)
    assert long_cells(path) == []


def test_the_count_ignores_blanks_and_comments_only():
    assert code_lines("import x\n\n# a comment\n    # indented comment\ny = 1  # trailing\n") == 2


def test_every_allowance_is_still_needed():
    """An entry whose cell has become short (or gone) is removed from ALLOWED."""
    for (chapter, first), reason in ALLOWED.items():
        assert reason
        path = next(BOOK.glob(f"{chapter}-*.ipynb"))
        cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        assert any(s.splitlines()[0] == first and code_lines(s) > MAX_LINES for s in cells if s), (chapter, first)


def wide_lines(path: Path) -> list[str]:
    """The code lines wider than MAX_WIDTH display columns in the cells the page shows."""
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    shown = [c for c in cells if not HIDDEN & set(c.metadata.get("tags", []))]
    return [line for c in shown for line in c.source.splitlines() if display_width(line) > MAX_WIDTH]


@pytest.mark.parametrize("path", sorted(BOOK.glob("4.*.ipynb")), ids=lambda p: p.stem)
def test_shown_code_fits_the_column(path):
    wide = wide_lines(path)
    assert len(wide) == WIDE_DEBT.get(path.stem[:3], 0), "\n".join(wide)


def test_the_width_counts_cjk_as_two_columns_and_skips_hidden_cells(tmp_path):
    nb = nbformat.v4.new_notebook()
    cjk = "x = '" + "宽" * 41 + "'"                         # 47 characters, 88 columns
    nb.cells = [nbformat.v4.new_code_cell(f"{cjk}\n{cjk[:-1]}宽'\n" + "y" * 88),
                nbformat.v4.new_code_cell("z" * 120, metadata={"tags": ["remove-input"]})]
    path = tmp_path / "4.9-example.ipynb"
    nbformat.write(nb, path)
    assert wide_lines(path) == [cjk[:-1] + "宽'"]


def test_every_width_debt_is_still_owed():
    """A debt paid off is removed, not left at zero (the parametrized test checks each count)."""
    for chapter, owed in WIDE_DEBT.items():
        assert owed > 0 and any(BOOK.glob(f"{chapter}-*.ipynb")), chapter
