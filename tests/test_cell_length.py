"""A chapter's code cells hold the experiment, not its bookkeeping (issue 19): every code cell that is not
setup has at most MAX_LINES lines of code (blank and comment-only lines not counted). Setup is the Colab
cell and each chapter's first code cell (imports, the corpus, the style). Verdicts are shown by one call to
batchlab.ui.claims, tables by batchlab.ui.tables; what does not fit is split at a point a reader can
follow, or moved into batchlab."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
MAX_LINES = 10
# (chapter, first line of the cell) → why it may be longer. Keep this short; every entry is a debt.
ALLOWED: dict[tuple[str, str], str] = {}


def code_lines(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#"))


def long_cells(path: Path) -> list[tuple[str, int]]:
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    body = [c for c in cells if "colab-setup" not in c.metadata.get("tags", [])][1:]   # [0] is setup
    return [(c.source.splitlines()[0], code_lines(c.source)) for c in body
            if code_lines(c.source) > MAX_LINES and (path.stem[:3], c.source.splitlines()[0]) not in ALLOWED]


@pytest.mark.parametrize("path", sorted(BOOK.glob("4.*.ipynb")), ids=lambda p: p.stem)
def test_chapter_cells_are_short(path):
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
