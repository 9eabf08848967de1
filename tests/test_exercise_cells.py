"""Each exercise reads as prose on the page: its question is a Markdown cell generated from batchlab (the one
text that check() and grade judge against), and the self-check cell under it is short and names it."""
from __future__ import annotations


import nbformat
import pytest

from batchlab.ui.exercises import EXERCISES
from booktools import ROOT
from booktools.exercise_cells import CHECK_TAGS, QUESTION_TAG, apply, check_source, exercise_ids, question_markdown

BOOK = ROOT / "book"
CHAPTERS = sorted(BOOK.glob("4.*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_exercise_is_a_question_above_its_check(path):
    cells = nbformat.read(path, as_version=4).cells
    chapter = path.stem.split("-")[0]
    checked = []
    for before, cell in zip(cells, cells[1:]):
        ids = exercise_ids(cell)
        if not ids:
            continue
        (exercise_id,) = ids
        checked.append(exercise_id)
        assert cell.source == check_source(exercise_id) and cell.metadata.get("tags") == CHECK_TAGS, exercise_id
        assert before.cell_type == "markdown" and QUESTION_TAG in before.metadata.get("tags", []), exercise_id
        assert before.source == question_markdown(exercise_id), (
            f"{exercise_id} 的题目与 batchlab 不一致：运行 .venv/bin/python -m booktools.exercise_cells --apply {path}")
    assert checked == [i for i in EXERCISES if i.startswith(chapter + "-")]
    assert not any("ask(" in c.source for c in cells if c.cell_type == "code")


def test_apply_writes_the_question_and_is_idempotent(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('ask("4.4-5")\nanswer = None\ncheck("4.4-5", answer)')]
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    assert apply(path) and not apply(path)
    cells = nbformat.read(path, as_version=4).cells
    assert [c.cell_type for c in cells] == ["markdown", "code"]
    assert cells[0].source.startswith("**练习 4.4-5**　") and "- **A.** " in cells[0].source
    assert cells[1].source == check_source("4.4-5")
