"""``python -m batchlab grade``: run a class's submitted notebooks and score each exercise.

Each submission runs top to bottom in a fresh kernel of this Python environment (where batchlab is
installed). Every cell gets a time limit; a cell that errors or runs over is recorded and the rest of
the notebook still runs, so one bad cell costs only the exercises it breaks. A last cell, run in the
same kernel, reads :func:`batchlab.ui.exercises.results`: the verdicts ``check`` printed to the
student are the grade.

The exercises of the class are those its notebooks ask (``ask("4.1-2")``) or check; an exercise a
student left unanswered, broke or deleted scores 0. A file that is not a notebook, or a notebook whose
kernel cannot run, gets a row that says why.
"""
from __future__ import annotations

import csv
import json
import logging
import re
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from batchlab.ui.exercises import EXERCISES
from batchlab.ui.tables import text_table

__all__ = ["DEFAULT_TIMEOUT_S", "OK", "Grade", "submissions", "read_notebook", "asked_exercises",
           "grade_notebook", "grade_class", "grade_table", "table_text", "write_csv"]

DEFAULT_TIMEOUT_S = 600
"""Seconds one cell may run before it is interrupted (nbval's --nbval-cell-timeout in scripts/test.sh
is 300; a student's laptop-sized cell gets twice that)."""

OK = "ok"
"""The status of a notebook whose every cell ran without error within the time limit."""

STUDENT, TOTAL, STATUS = "学生", "总分", "状态"
_SHOWN_PROBLEMS = 3  # a NameError cascade would otherwise fill the status column
_ASK = re.compile(r"""\bask\(\s*(["'])(?P<id>[^"']+)\1\s*\)""")
_MARKER = "batchlab-grade-results:"
# Runs in the student's kernel after the last cell; names are private so they cannot clash.
_RESULTS_CELL = ("import json as _batchlab_json\n"
                 "from batchlab.ui.exercises import results as _batchlab_results\n"
                 f"print({_MARKER!r} + _batchlab_json.dumps(_batchlab_results()))")
_TIMED_OUT = "batchlab-grade-timeout"  # the ename nbclient reports for an interrupted cell
_EXPECTED_ERROR = "raises-exception"  # the tag of a cell meant to fail (nbval and myst-nb honour it too)
# nbclient logs every timeout and error; the status column says them, and the progress bar stays clean.
_QUIET = logging.getLogger(__name__)
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


@dataclass(frozen=True)
class Grade:
    """One submission: who (the file's stem), how its run went, and the exercises it asked and passed."""

    student: str
    status: str
    asked: tuple[str, ...] = ()
    passed: frozenset[str] = field(default_factory=frozenset)


def submissions(directory: Path, exclude: Sequence[Path] = ()) -> list[Path]:
    """The files of ``directory`` to grade, by name: every visible file, so a student who handed in a
    non-notebook still gets a row; ``exclude`` (the CSV being written there) is left out."""
    skip = {p.resolve() for p in exclude}
    return sorted((p for p in directory.iterdir()
                   if p.is_file() and not p.name.startswith(".") and p.resolve() not in skip),
                  key=lambda p: p.name)


def read_notebook(path: Path) -> Any:
    """The notebook at ``path`` (nbformat 4); raises ValueError with the reason it is not one."""
    import nbformat  # seconds to import (jsonschema): only the grade command pays for it

    if path.suffix != ".ipynb":
        raise ValueError(f"扩展名是 {path.suffix or '（无）'}，不是 .ipynb")
    text = path.read_bytes().decode("utf-8", errors="replace")
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"第 {err.lineno} 行第 {err.colno} 列起不是合法的 JSON，文件不完整或已损坏") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. cells without ids: harmless, nbformat fills them in
        try:
            notebook = nbformat.reads(text, as_version=4)
            nbformat.validate(notebook)
        except Exception as err:  # nbformat raises several kinds for "valid JSON, not a notebook"
            raise ValueError(f"不符合 nbformat 格式（{type(err).__name__}）") from None
    return notebook


def asked_exercises(notebook: Any) -> tuple[str, ...]:
    """The ids its code cells ``ask``, known ones only, in the book's order."""
    found = {m.group("id") for cell in notebook.cells if cell.cell_type == "code"
             for m in _ASK.finditer(cell.source)}
    return tuple(i for i in EXERCISES if i in found)


def _problem(cell_number: int, ename: str, timeout: int) -> str:
    if ename == _TIMED_OUT:
        return f"单元格 {cell_number} 运行超过 {timeout:g} 秒，已中断"
    return f"单元格 {cell_number} 抛出 {ename}"


def _status(problems: list[tuple[int, str]], timeout: int) -> str:
    if not problems:
        return OK
    kind = "超时" if any(ename == _TIMED_OUT for _, ename in problems) else "出错"
    shown = "；".join(_problem(n, ename, timeout) for n, ename in problems[:_SHOWN_PROBLEMS])
    more = f"；另有 {len(problems) - _SHOWN_PROBLEMS} 处" if len(problems) > _SHOWN_PROBLEMS else ""
    return f"{kind}：{shown}{more}"


def _passed(outputs: list[Any]) -> frozenset[str]:
    for output in outputs:
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            for line in output["text"].splitlines():
                if line.startswith(_MARKER):
                    return frozenset(i for i, right in json.loads(line[len(_MARKER):]).items() if right)
    return frozenset()


def grade_notebook(path: Path, timeout: int = DEFAULT_TIMEOUT_S) -> Grade:
    """Run the submission at ``path`` in a fresh kernel, each cell limited to ``timeout`` seconds, and
    return its grade. Never raises for what is inside the file: the status says what went wrong."""
    student = path.stem
    try:
        notebook = read_notebook(path)
    except ValueError as err:
        return Grade(student, f"不是 notebook：{err}")
    asked = asked_exercises(notebook)

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    # Cell numbers as a reader counts them in the student's notebook (markdown included), from 1.
    problems: list[tuple[int, str]] = []
    last = len(notebook.cells)
    notebook.cells.append(nbformat.v4.new_code_cell(_RESULTS_CELL))
    current = {"cell": 0}

    def on_cell_execute(cell: Any, cell_index: int) -> None:
        current["cell"] = cell_index + 1

    def on_cell_executed(cell: Any, cell_index: int, execute_reply: dict) -> None:
        content = execute_reply.get("content", {})
        if (cell_index < last and content.get("status") == "error"
                and _EXPECTED_ERROR not in cell.metadata.get("tags", [])):
            problems.append((cell_index + 1, content.get("ename", "?")))

    client = NotebookClient(
        notebook, km=_kernel_manager(),
        timeout=timeout, allow_errors=True, interrupt_on_timeout=True,
        # Do not wait for an interrupted cell's reply: a cell that ignores the interrupt would hang here.
        error_on_timeout={"ename": _TIMED_OUT, "evalue": "", "traceback": []},
        on_cell_execute=on_cell_execute, on_cell_executed=on_cell_executed, log=_QUIET,
        resources={"metadata": {"path": str(path.parent.resolve())}})
    try:
        # cleanup_kc: the kernel is ours to shut down (km= alone would leave it running). The kernel's
        # own stderr holds only its start-up warnings, which would break the progress bar; what the
        # student's code prints travels in the cells' outputs.
        client.execute(cleanup_kc=True, stderr=subprocess.DEVNULL)
    except DeadKernelError:
        return Grade(student, f"出错：内核在单元格 {current['cell']} 意外退出", asked)
    except Exception as err:  # kernel failed to start, protocol error, …: this row, not the class
        return Grade(student, f"出错：无法运行（{type(err).__name__}：{err}）", asked)
    return Grade(student, _status(problems, timeout), asked, _passed(notebook.cells[-1].outputs))


def _kernel_manager() -> Any:
    """A manager for a kernel of this Python, whatever kernelspec the notebook names (as nbval's
    --nbval-current-env does): students' notebooks import the instructor's batchlab."""
    from ipykernel.kernelspec import RESOURCES, get_kernel_dict
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    class CurrentEnvironment(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(resource_dir=RESOURCES, **get_kernel_dict())

    return AsyncKernelManager(kernel_spec_manager=CurrentEnvironment(), kernel_name="batchlab-grade")


def grade_class(directory: Path, timeout: int = DEFAULT_TIMEOUT_S, exclude: Sequence[Path] = (),
                progress: bool = True) -> list[Grade]:
    """Grade every submission in ``directory`` (see :func:`submissions`), one after another, with a
    progress bar on stderr."""
    from tqdm import tqdm

    files = submissions(directory, exclude)
    grades = []
    with tqdm(files, desc="批改", unit="份", disable=not progress) as bar:
        for path in bar:
            bar.set_postfix_str(path.name)
            grades.append(grade_notebook(path, timeout))
    return grades


def grade_table(grades: Sequence[Grade]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows: student, 1/0 per exercise of the class, total, status (last: it can be long).
    The class's exercises are every one a notebook asks or passes, in the book's order, so an exercise a
    student deleted still scores 0."""
    seen = {i for g in grades for i in (*g.asked, *g.passed)}
    ids = [i for i in EXERCISES if i in seen]
    rows = [[g.student, *(int(i in g.passed) for i in ids), sum(i in g.passed for i in ids), g.status]
            for g in grades]
    return [STUDENT, *ids, TOTAL, STATUS], rows


def write_csv(path: Path, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """The table as CSV, UTF-8 with a byte-order mark so that Excel reads the Chinese."""
    with open(path, "w", newline="", encoding="utf-8-sig") as f:
        writer = csv.writer(f)
        writer.writerow(headers)
        writer.writerows(rows)


def table_text(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The table for the terminal, with a line on what the numbers mean."""
    exercises = len(headers) - 3  # all but student, total and status
    return (text_table(headers, rows).text + f"\n\n{len(rows)} 份提交；每道练习答对 1 分，满分 {exercises} 分。"
            "未作答、出错或删掉的练习记 0 分。")
