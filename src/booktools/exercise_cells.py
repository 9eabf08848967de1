"""Each exercise as the page shows it: its question as Markdown, its self-check cell beneath.

The question text lives once, in ``batchlab.ui.exercises`` (where ``check`` and ``grade`` judge the answers);
this tool writes it into the chapters as a Markdown cell a reader sees without running anything, followed
by a short self-check cell:

    answer = None  # 换成你的答案
    bl.check("4.3-1", answer)

Its output ("还没有作答…" until a student answers) stays in the notebook for nbval and is left out of the
HTML book (``remove-output``).

    .venv/bin/python -m booktools.exercise_cells --apply book/*.ipynb   # write or refresh the cells

`--apply` is idempotent. After changing a question in ``batchlab.ui.exercises``, run it again;
tests/test_exercise_cells.py fails until then.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from batchlab.ui.exercises import EXERCISE_CALL, EXERCISES, current_id

__all__ = ["QUESTION_TAG", "CHECK_TAGS", "question_markdown", "check_source", "exercise_ids",
           "apply", "main"]

QUESTION_TAG = "exercise-question"
CHECK_TAGS = ["exercise-check", "remove-output"]


def question_markdown(exercise_id: str) -> str:
    """The question of ``exercise_id`` as the page shows it: bold number, the text, its choices as a list."""
    exercise = EXERCISES[exercise_id]
    lines = [f"**练习 {exercise_id}**　{exercise.question}"]
    if exercise.choices:
        lines.append("")
        lines += [f"- **{letter}.** {text}" for letter, text in exercise.choices.items()]
    return "\n".join(lines)


def check_source(exercise_id: str) -> str:
    """The self-check cell under the question (a predict-then-run exercise asks for the prediction first)."""
    if EXERCISES[exercise_id].predict:
        return ('prediction = None  # 运行实验之前，先写下你的预测\n'
                'answer = None  # 运行之后，填你看到的结果\n'
                f'bl.check("{exercise_id}", answer, prediction)')
    return f'answer = None  # 换成你的答案\nbl.check("{exercise_id}", answer)'


def exercise_ids(cell: nbformat.NotebookNode) -> list[str]:
    """The exercise ids a code cell asks or checks (known ones only, as they are now)."""
    if cell.cell_type != "code":
        return []
    ids = (current_id(m.group("id")) for m in EXERCISE_CALL.finditer(cell.source))  # a moved id: its id now
    return list(dict.fromkeys(i for i in ids if i in EXERCISES))


def _is_question(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "markdown" and QUESTION_TAG in (cell.get("metadata", {}).get("tags") or [])


def apply(path: Path) -> bool:
    """Give every exercise cell of ``path`` its question above and the canonical check; return whether
    the file changed. A check cell whose source changes loses its outputs (run the notebook again)."""
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    cells = []
    for cell in nb.cells:
        if _is_question(cell):
            continue  # regenerated below, in front of its check cell
        ids = exercise_ids(cell)
        if len(ids) == 1:
            (exercise_id,) = ids
            question = nbformat.v4.new_markdown_cell(question_markdown(exercise_id))
            question.metadata["tags"] = [QUESTION_TAG]
            question.id = f"question-{exercise_id.replace('.', '-')}"
            cells.append(question)
            source = check_source(exercise_id)
            if cell.source != source:
                cell.source, cell.outputs, cell.execution_count = source, [], None
            cell.metadata["tags"] = list(CHECK_TAGS)
        cells.append(cell)
    nb.cells = cells
    changed = nbformat.writes(nb) != before
    if changed:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.exercise_cells", description=__doc__.splitlines()[0])
    parser.add_argument("--apply", nargs="+", metavar="NOTEBOOK", required=True,
                        help="write the question and check cells into these notebooks")
    args = parser.parse_args(argv)
    for name in args.apply:
        if apply(Path(name)):
            print(f"updated {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
