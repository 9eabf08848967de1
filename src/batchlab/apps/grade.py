"""``python -m batchlab grade``: run a class's submitted notebooks and score each exercise.

Each submission is copied into a fresh folder of its own and runs top to bottom there, in a fresh kernel
of this Python environment (where batchlab is installed) inside a bubblewrap sandbox: a read-only view
of the system, write access to its own folder only, no network, its own process namespace — everything
the notebook started is gone when its kernel is — and limits on file size and memory. Every cell gets a time limit;
a cell that errors or runs over is recorded and the rest of the notebook still runs, so one bad cell
costs only the exercises it breaks; a cell that ignores the interrupt ends that notebook's run.

A last cell, run in the same kernel, prints the answers the student gave (``batchlab.ui.exercises.answers``)
as data. The grader judges them in its own process with the rule the student's 正确/不对 came from
(``judge``): whatever a notebook does to its own kernel can change an answer, never a verdict.

The exercises of the assignment are the grader's own list: every exercise of each chapter that at least
half the class's notebooks work on (``check("4.1-2", answer)``, or ``ask("4.1-2")`` in older copies), or of the
chapters named with ``--chapter``. An
exercise a student left unanswered, broke or deleted scores 0. A file that is not a notebook, vanished,
or whose kernel cannot run gets a row that says why.
"""
from __future__ import annotations

import csv
import json
import logging
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from batchlab.ui.exercises import EXERCISE_CALL, EXERCISES, judge
from batchlab.ui.tables import text_table

__all__ = ["DEFAULT_TIMEOUT_S", "OK", "Grade", "submissions", "read_notebook", "asked_exercises", "sandbox_argv",
           "grade_notebook", "grade_class", "assignment_exercises", "grade_table", "check_csv_target",
           "table_text", "write_csv"]

DEFAULT_TIMEOUT_S = 600
"""Seconds one cell may run before it is interrupted (nbval's --nbval-cell-timeout in scripts/test.sh
is 300; a student's laptop-sized cell gets twice that)."""
INTERRUPT_GRACE_S = 10
"""Seconds an interrupted cell has to stop before the notebook's run is abandoned."""
MAX_FILE_BYTES = 256 * 2**20
"""The largest file a submission may write (RLIMIT_FSIZE inside the sandbox)."""
MAX_MEMORY_BYTES = 8 * 2**30
"""The address space a submission's kernel may map (RLIMIT_AS): a chapter's kernel peaks near 1.2 GB of
resident memory and torch maps far less than this; a runaway allocation fails inside the notebook."""

OK = "ok"
"""The status of a notebook whose every cell ran without error within the time limit."""

STUDENT, TOTAL, STATUS = "学生", "总分", "状态"
_SHOWN_PROBLEMS = 3  # a NameError cascade would otherwise fill the status column
_MARKER = "batchlab-grade-answers:"
# Runs in the student's kernel after the last cell; names are private so they cannot clash. What it
# prints is data (the answers); the verdicts are the grader's.
_ANSWERS_CELL = ("import json as _batchlab_json\n"
                 "from batchlab.ui.exercises import answers as _batchlab_answers\n"
                 f"print({_MARKER!r} + _batchlab_json.dumps(_batchlab_answers(), default=repr))")
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


NOT_A_NOTEBOOK, UNREADABLE = "不是 notebook：", "读不到文件"
"""How the status of a file that never ran begins."""


class _Abandoned(Exception):
    """A cell went on running after its interrupt: the notebook's run ends there."""


def submissions(directory: Path, exclude: Sequence[Path] = ()) -> list[Path]:
    """The files of ``directory`` to grade, by name: every visible file, so a student who handed in a
    non-notebook still gets a row; ``exclude`` is left out."""
    skip = {p.resolve() for p in exclude}
    return sorted((p for p in directory.iterdir()
                   if p.is_file() and not p.name.startswith(".") and p.resolve() not in skip),
                  key=lambda p: p.name)


def _student(path: Path) -> str:
    """The file's stem, readable even when the name's bytes are not UTF-8 (a zip made on a Chinese
    Windows names files in GBK): tried as UTF-8, then GB 18030, else with replacement characters."""
    raw = os.fsencode(path.name)
    for encoding in ("utf-8", "gb18030"):
        try:
            name = raw.decode(encoding)
            break
        except UnicodeDecodeError:
            continue
    else:
        name = raw.decode("utf-8", errors="replace")
    return name[:-len(path.suffix)] if path.suffix and name.endswith(path.suffix) else name


def read_notebook(data: bytes, suffix: str = ".ipynb") -> Any:
    """The notebook in ``data`` (nbformat 4) from a file named ``…suffix``; raises ValueError with the
    reason it is not one."""
    import nbformat  # seconds to import (jsonschema): only the grade command pays for it

    if suffix != ".ipynb":
        raise ValueError(f"扩展名是 {suffix or '（无）'}，不是 .ipynb")
    text = data.decode("utf-8", errors="replace")
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
    """The ids its code cells ask or check (:data:`~batchlab.ui.exercises.EXERCISE_CALL`), known ones only, in
    the book's order."""
    found = {m.group("id") for cell in notebook.cells if cell.cell_type == "code"
             for m in EXERCISE_CALL.finditer(cell.source)}
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


def _judged(outputs: list[Any]) -> frozenset[str]:
    """The exercises whose answers, printed by the grader's last cell, the grader's ``judge`` accepts.
    Only the first well-formed answers line counts; anything else a notebook prints there is ignored."""
    for output in outputs:
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            for line in output["text"].splitlines():
                if not line.startswith(_MARKER):
                    continue
                try:
                    given = json.loads(line[len(_MARKER):])
                except ValueError:
                    continue
                if isinstance(given, dict):
                    return frozenset(i for i, answer in given.items() if i in EXERCISES and _right(i, answer))
    return frozenset()


def _right(exercise_id: str, answer: Any) -> bool:
    try:
        return judge(exercise_id, answer)
    except Exception:  # an answer no rule expected (e.g. a huge int for a float): wrong, not a crash
        return False


def _bwrap() -> str:
    """The bubblewrap executable, or RuntimeError: students' code never runs without the sandbox."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise RuntimeError("批改学生的代码需要沙箱 bubblewrap：请先安装（Debian/Ubuntu：apt-get install bubblewrap）")
    return bwrap


def sandbox_argv(work: Path, cpu_seconds: int = 24 * 3600) -> list[str]:
    """The command that starts a grading kernel: bubblewrap with a read-only root, ``work`` writable,
    a private /tmp, no network, its own PID namespace (all of it dies with the kernel), limits on file
    size, address space and CPU time (``cpu_seconds``), running this Python's ipykernel with history off. Raises RuntimeError without bubblewrap."""
    return [_bwrap(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            *_python_under_tmp(), "--bind", str(work), str(work), "--chdir", str(work),
            "--unshare-net", "--unshare-pid", "--die-with-parent",
            # the kernel's parent is outside the namespace: its "parent died" poller must not run
            "--unsetenv", "JPY_PARENT_PID", "--setenv", "IPYTHONDIR", str(work / ".ipython"),
            "--setenv", "HOME", str(work), "--setenv", "MPLCONFIGDIR", str(work / ".matplotlib"),
            "prlimit", f"--fsize={MAX_FILE_BYTES}", f"--as={MAX_MEMORY_BYTES}", f"--cpu={cpu_seconds}", "--",
            sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
            "--HistoryManager.enabled=False"]


def _python_under_tmp() -> list[str]:
    """Read-only binds for this Python's environment and import paths that live under /tmp (a CI checkout,
    say), which the sandbox's private /tmp would otherwise hide from the kernel."""
    tmp = Path(tempfile.gettempdir()).resolve()
    paths = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, *sys.path) if p and Path(p).exists()}
    under = sorted(p for p in paths if p.is_relative_to(tmp) and p != tmp)
    return [arg for p in under for arg in ("--ro-bind", str(p), str(p))]


def _kernel_manager(work: Path, cpu_seconds: int) -> Any:
    """A manager for a sandboxed kernel of this Python (whatever kernelspec the notebook names, as nbval's
    --nbval-current-env does: students' notebooks import the instructor's batchlab), talking over Unix
    sockets in ``work`` since the sandbox has no network."""
    from ipykernel.kernelspec import RESOURCES
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    argv = sandbox_argv(work, cpu_seconds)

    class Sandboxed(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            # interrupts travel as messages: a signal to bubblewrap does not reach into its namespace
            return KernelSpec(resource_dir=RESOURCES, argv=argv, display_name="batchlab-grade", language="python",
                              interrupt_mode="message")

    return AsyncKernelManager(kernel_spec_manager=Sandboxed(), kernel_name="batchlab-grade", transport="ipc",
                              ip=str(work / "kernel"), connection_file=str(work / "kernel.json"))


def grade_notebook(path: Path, timeout: int = DEFAULT_TIMEOUT_S) -> Grade:
    """Run the submission at ``path`` from a copy in a fresh folder, sandboxed, each cell limited to
    ``timeout`` seconds, and return its grade. Never raises for what is inside the file: the status says
    what went wrong."""
    student = _student(path)
    try:
        data = path.read_bytes()
    except OSError as err:  # deleted or unreadable since the folder was listed
        return Grade(student, f"{UNREADABLE}（{type(err).__name__}），批改开始后它被删除或改动了")
    try:
        notebook = read_notebook(data, path.suffix)
    except ValueError as err:
        return Grade(student, f"{NOT_A_NOTEBOOK}{err}")
    asked = asked_exercises(notebook)
    with tempfile.TemporaryDirectory(prefix="batchlab-grade-") as work:
        work_dir = Path(work)
        (work_dir / "submission.ipynb").write_bytes(data)  # what the student's cells see of their file
        status, outputs = _run(notebook, work_dir, timeout)
    return Grade(student, status, asked, _judged(outputs))


def _run(notebook: Any, work: Path, timeout: int) -> tuple[str, list[Any]]:
    """Execute ``notebook`` plus the answers cell in a sandboxed kernel in ``work``: (status, the answers
    cell's outputs)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    # Cell numbers as a reader counts them in the student's notebook (markdown included), from 1.
    problems: list[tuple[int, str]] = []
    last = len(notebook.cells)
    notebook.cells.append(nbformat.v4.new_code_cell(_ANSWERS_CELL))
    current = {"cell": 0}

    def on_cell_execute(cell: Any, cell_index: int) -> None:
        current["cell"] = cell_index + 1

    async def on_cell_executed(cell: Any, cell_index: int, execute_reply: dict) -> None:
        content = execute_reply.get("content", {})
        if (cell_index < last and content.get("status") == "error"
                and _EXPECTED_ERROR not in cell.metadata.get("tags", [])):
            problems.append((cell_index + 1, content.get("ename", "?")))
        if content.get("ename") == _TIMED_OUT and not await _stopped(client, execute_reply):
            raise _Abandoned

    client = NotebookClient(
        # CPU time: every cell at its limit on two threads, and the start; a runaway that escapes the
        # per-cell timeout (threads it started, say) is killed by SIGXCPU and its row says the kernel died.
        notebook, km=_kernel_manager(work, 2 * timeout * (last + 2) + 60),
        timeout=timeout, allow_errors=True, interrupt_on_timeout=True,
        # Do not wait here for an interrupted cell's reply: _stopped gives it INTERRUPT_GRACE_S.
        error_on_timeout={"ename": _TIMED_OUT, "evalue": "", "traceback": []},
        on_cell_execute=on_cell_execute, on_cell_executed=on_cell_executed, log=_QUIET,
        resources={"metadata": {"path": str(work)}})
    try:
        # cleanup_kc: the kernel is ours to shut down (km= alone would leave it running). The kernel's
        # own stdout/stderr hold only its start-up banner; what the student's code prints travels in outputs.
        client.execute(cleanup_kc=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except _Abandoned:
        return (f"中断无效：单元格 {current['cell']} 运行超过 {timeout:g} 秒且不响应中断，这份作业的运行到此结束，"
                "后面的单元格和答案都没有读到"), []
    except DeadKernelError:
        return f"出错：内核在单元格 {current['cell']} 意外退出", []
    except Exception as err:  # kernel failed to start, protocol error, …: this row, not the class
        return f"出错：无法运行（{type(err).__name__}：{err}）", []
    return _status(problems, timeout), notebook.cells[-1].outputs


async def _stopped(client: Any, execute_reply: dict) -> bool:
    """Whether the interrupted cell's own reply arrives within INTERRUPT_GRACE_S, i.e. it stopped."""
    msg_id = execute_reply.get("parent_header", {}).get("msg_id")
    deadline = time.monotonic() + INTERRUPT_GRACE_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            msg = await client.kc.shell_channel.get_msg(timeout=left)
        except queue.Empty:
            return False
        if msg.get("parent_header", {}).get("msg_id") == msg_id:
            return True
    return False


def grade_class(directory: Path, timeout: int = DEFAULT_TIMEOUT_S, exclude: Sequence[Path] = (),
                progress: bool = True) -> list[Grade]:
    """Grade every submission in ``directory`` (see :func:`submissions`), one after another, with a
    progress bar on stderr. Raises RuntimeError before any work when the sandbox is missing."""
    from tqdm import tqdm

    _bwrap()  # refuse before any work
    files = submissions(directory, exclude)
    grades = []
    with tqdm(files, desc="批改", unit="份", disable=not progress) as bar:
        for path in bar:
            bar.set_postfix_str(_student(path))
            grades.append(grade_notebook(path, timeout))
    return grades


def assignment_exercises(grades: Sequence[Grade], chapters: Sequence[str] | None = None) -> list[str]:
    """The grader's list of the assignment's exercises, in the book's order: every exercise of the
    ``chapters`` named (e.g. ``["4.1"]``), or else of each chapter that at least half of the notebooks
    ask — so no single notebook can add columns to its classmates' table."""
    by_chapter: dict[str, list[str]] = {}
    for i in EXERCISES:
        by_chapter.setdefault(i.split("-")[0], []).append(i)
    if chapters is None:
        notebooks = [g for g in grades if not g.status.startswith((NOT_A_NOTEBOOK, UNREADABLE))]
        asking = {c: sum(any(i.startswith(c + "-") for i in g.asked) for g in notebooks) for c in by_chapter}
        chapters = [c for c, n in asking.items() if n and 2 * n >= len(notebooks)]
    unknown = [c for c in chapters if c not in by_chapter]
    if unknown:
        raise ValueError(f"--chapter {' '.join(unknown)}：没有这一章的练习，可选 {' '.join(by_chapter)}")
    return [i for c in by_chapter if c in chapters for i in by_chapter[c]]


def grade_table(grades: Sequence[Grade], chapters: Sequence[str] | None = None) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows: student, 1/0 per exercise of the assignment (:func:`assignment_exercises`),
    total, status (last: it can be long)."""
    ids = assignment_exercises(grades, chapters)
    rows = [[g.student, *(int(i in g.passed) for i in ids), sum(i in g.passed for i in ids), g.status]
            for g in grades]
    return [STUDENT, *ids, TOTAL, STATUS], rows


def check_csv_target(csv_path: Path, submissions_dir: Path) -> None:
    """Refuse, before any grading, a ``--csv`` that could lose something: a path inside the submissions
    folder (it would overwrite or join the submissions), a folder, or a place that cannot be written."""
    target = Path(os.path.abspath(csv_path))
    if target.is_relative_to(Path(os.path.abspath(submissions_dir))) or \
            target.resolve().is_relative_to(submissions_dir.resolve()):
        raise ValueError(f"--csv {str(csv_path)!r}：不能写进提交文件夹 {str(submissions_dir)!r}（会覆盖或混入学生的文件）")
    if target.is_dir():
        raise ValueError(f"--csv {str(csv_path)!r}：这是一个文件夹，不是文件")
    if not target.parent.is_dir():
        raise ValueError(f"--csv {str(csv_path)!r}：文件夹 {str(target.parent)!r} 不存在")
    if not os.access(target.parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ValueError(f"--csv {str(csv_path)!r}：没有写入权限")


def write_csv(path: Path, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """The table as CSV, UTF-8 with a byte-order mark so that Excel reads the Chinese; written to a
    temporary file beside ``path`` and renamed over it, so a failure leaves no half-written table."""
    with tempfile.NamedTemporaryFile("w", newline="", encoding="utf-8-sig", dir=Path(path).parent,
                                     prefix=".grades-", suffix=".csv", delete=False) as f:
        writer = csv.writer(f)
        writer.writerow(headers)
        writer.writerows(rows)
    os.replace(f.name, path)


def table_text(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The table for the terminal, with a line on what the numbers mean."""
    exercises = len(headers) - 3  # all but student, total and status
    return (text_table(headers, rows).text + f"\n\n{len(rows)} 份提交；每道练习答对 1 分，满分 {exercises} 分。"
            "未作答、出错或删掉的练习记 0 分。")
