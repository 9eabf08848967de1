"""``python -m batchlab grade``: run a class's submitted notebooks and score each exercise.

Each submission runs top to bottom in a fresh kernel of this Python environment (where batchlab is
installed) inside the sandbox of :mod:`batchlab.apps.sandbox`: an unprivileged account with no
capability, whoever starts ``grade``; only the system's libraries and this Python visible, read-only; a
read-only copy of its own file in an in-memory working folder; no network, no host socket; limits on
memory (all its processes together), processes, disk and time, past which the sandbox is killed and the
row says why. Every cell gets a time limit, the notebook a wall-clock budget; a cell that errors or runs
over is recorded and the rest of the notebook still runs, so one bad cell costs only the exercises it
breaks; a cell that ignores the interrupt ends that notebook's run.

A last cell, run in the same kernel, hands back the answers the student gave
(``batchlab.ui.exercises.answers``) as data, in its reply (:mod:`batchlab.apps.grade_kernel`). The grader
judges them in its own process with the rule the student's 正确/不对 came from (``judge``): whatever a
notebook does to its own kernel can change an answer, never a verdict. The grader keeps nothing else a
notebook prints.

The exercises of the assignment are the grader's own list: every exercise of each chapter that at least
half the class's notebooks work on (``check("4.1-2", answer)``, or ``ask("4.1-2")`` in older copies), or of the
chapters named with ``--chapter``. An exercise a student left unanswered, broke or deleted scores 0. A
file that is not a notebook, is too large, is a link or vanished, or whose kernel cannot run gets a row
that says why; whatever one file does costs only its own row. Every string a student controls (file
names, exception names) is shown with its control, format and filler characters escaped and its length
capped, and a CSV cell that a spreadsheet would read as a formula is written as text
(:mod:`batchlab.apps.grade_report`).

A class is graded ``jobs`` notebooks at a time (:func:`class_jobs`: by default as many as the cores and
the memory limit allow), each in its own sandbox with its own limits; the rows come out in the order of
the files, as a serial run gives them.
"""
from __future__ import annotations

import importlib.util
import json
import os
import queue
import signal
import stat
import sys
import tempfile
import threading
import warnings
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence, TextIO

from batchlab.apps.cgroups import Box, counting
from batchlab.apps.grade_kernel import reset_stop, run_notebook, stop_requested, stop_running
from batchlab.apps.grade_report import printable
from batchlab.apps.sandbox import LIMITS, bwrap, prepare_run, remove_tree
from batchlab.ui.exercises import EXERCISE_CALL, EXERCISES, current_id, judge

__all__ = ["DEFAULT_TIMEOUT_S", "DEFAULT_NOTEBOOK_S", "MAX_SUBMISSION_BYTES", "Grade", "GradingInterrupted",
           "GRADE_MODULES", "check_grade_dependencies",
           "submissions", "read_notebook", "asked_exercises", "grade_notebook", "grade_class", "class_jobs",
           "assignment_exercises", "grade_table"]

DEFAULT_TIMEOUT_S = 600
"""Seconds one cell may run before it is interrupted (nbval's --nbval-cell-timeout in scripts/test.sh
is 300; a student's laptop-sized cell gets twice that)."""
CHAPTER_SECONDS = 20
"""The longest a chapter of the book takes to run top to bottom here (``benchmarks/bench.py``'s
chapter budget); a submission is a chapter with the student's answers."""
DEFAULT_NOTEBOOK_S = 30 * CHAPTER_SECONDS
"""Seconds one notebook may run in all (kernel start included): 30 × a chapter's own run time, so a slow
laptop-sized solution passes and 100 cells that each wait just under the cell limit do not hold the class
for hours."""
MAX_SUBMISSION_BYTES = 16 * 2**20
"""The largest file graded (a chapter with its figures is under 0.5 MB); a larger one is refused unread."""

STUDENT, TOTAL, STATUS = "学生", "总分", "状态"

GRADE_MODULES = ("nbformat", "nbclient", "jupyter_client", "ipykernel", "zmq")
"""What grading imports beyond batchlab's own dependencies: the extra ``batchlab[grade]`` in pyproject.toml
(``zmq`` is the distribution ``pyzmq``); tests/test_wheel.py checks the two lists agree."""


def check_grade_dependencies() -> None:
    """Refuse in one line, before any work, where :data:`GRADE_MODULES` are not installed (a student's
    ``pip install batchlab`` has none of them): raises RuntimeError naming ``pip install batchlab[grade]``."""
    missing = [name for name in GRADE_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise RuntimeError(f"批改需要 {'、'.join(missing)}，当前环境没有安装：请先运行 pip install batchlab[grade]")


@dataclass(frozen=True)
class Grade:
    """One submission: who (the file's stem), how its run went, and the exercises it asked and passed."""

    student: str
    status: str
    asked: tuple[str, ...] = ()
    passed: frozenset[str] = field(default_factory=frozenset)


NOT_A_NOTEBOOK, UNREADABLE, NOT_GRADED = "不是 notebook：", "读不到文件", "未批改："
"""How the status of a file that never ran begins."""


class GradingInterrupted(KeyboardInterrupt):
    """Ctrl-C: the sandbox is gone and nothing is written; ``done`` notebooks were graded."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(done, total)
        self.done, self.total = done, total


def submissions(directory: Path, exclude: Sequence[Path] = ()) -> list[Path]:
    """The entries of ``directory`` that get a row, by name: every visible entry except folders, so a
    student who handed in a non-notebook, a link or a pipe still gets a row (:func:`grade_notebook` grades
    regular files only); ``exclude`` is left out."""
    # realpath, not Path.resolve(): a link to itself is a file with a row, not a "Symlink loop" error
    skip = {os.path.realpath(p) for p in exclude}
    return sorted((p for p in directory.iterdir()
                   if not p.name.startswith(".") and not (p.is_dir() and not p.is_symlink())
                   and os.path.realpath(p) not in skip),
                  key=lambda p: os.fsencode(p.name))


def _student(path: Path) -> str:
    """The file's stem, readable even when the name's bytes are not UTF-8 (a zip made on a Chinese
    Windows names files in GBK): tried as UTF-8, then GB 18030, else with replacement characters; control
    characters escaped."""
    raw = os.fsencode(path.name)
    for encoding in ("utf-8", "gb18030"):
        try:
            name = raw.decode(encoding)
            break
        except UnicodeDecodeError:
            continue
    else:
        name = raw.decode("utf-8", errors="replace")
    return printable(name[:-len(path.suffix)] if path.suffix and name.endswith(path.suffix) else name)


def _read_submission(path: Path) -> bytes | str:
    """The bytes of the regular file at ``path`` (at most :data:`MAX_SUBMISSION_BYTES`), or the status of
    the row when it is a link, not a regular file, too large or gone. Opened without following links
    and without blocking (a pipe would wait for ever)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        if path.is_symlink():
            return f"{NOT_GRADED}这是一个符号链接，只批改文件夹里的普通文件"
        return f"{UNREADABLE}（{type(err).__name__}），批改开始后它被删除或改动了"
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            return f"{NOT_GRADED}不是普通文件，只批改文件夹里的普通文件"
        if info.st_size > MAX_SUBMISSION_BYTES:
            return (f"{NOT_GRADED}文件有 {info.st_size / 2**20:,.0f} MiB，超过 {MAX_SUBMISSION_BYTES / 2**20:g} MiB 的上限"
                    "（一章连同图也不到 1 MiB）")
        data = f.read(MAX_SUBMISSION_BYTES + 1)
    if len(data) > MAX_SUBMISSION_BYTES:  # it grew while being read
        return f"{NOT_GRADED}文件超过 {MAX_SUBMISSION_BYTES / 2**20:g} MiB 的上限"
    return data


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
    except RecursionError:  # "[" * 200000: no notebook nests that deep
        raise ValueError("JSON 嵌套过深，不是 Jupyter 保存的文件") from None
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
    found = {current_id(m.group("id")) for cell in notebook.cells if cell.cell_type == "code"
             for m in EXERCISE_CALL.finditer(cell.source)}
    return tuple(i for i in EXERCISES if i in found)


def _judged(answers_json: str) -> frozenset[str]:
    """The exercises whose answers, sent by the grader's last cell as JSON, the grader's ``judge``
    accepts; anything that is not a JSON object of answers counts for nothing."""
    try:
        given = json.loads(answers_json)
    except (ValueError, RecursionError):
        return frozenset()
    if not isinstance(given, dict):
        return frozenset()
    # a kernel reports ids as they are now; an id from before a move (RENAMED) is read as its new one
    return frozenset(current_id(i) for i, answer in given.items() if current_id(i) in EXERCISES and _right(i, answer))


def _right(exercise_id: str, answer: Any) -> bool:
    try:
        return judge(exercise_id, answer)
    except Exception:  # an answer no rule expected (e.g. a huge int for a float): wrong, not a crash
        return False


def grade_notebook(path: Path, timeout: int = DEFAULT_TIMEOUT_S, notebook_timeout: float = DEFAULT_NOTEBOOK_S,
                   hidden: Sequence[Path] = (), slot: int = 0) -> Grade:
    """Grade the submission at ``path``: run it sandboxed, each cell limited to ``timeout`` seconds and
    the whole run to ``notebook_timeout``, and return its grade. ``hidden``: host folders the kernel must
    not see even were they inside something the sandbox shows (the submissions). ``slot``: which of the
    sandboxes running at once this one is. Its memory and processes are counted by a cgroup of its own
    where the machine offers one (:func:`~batchlab.apps.cgroups.counting`). Never raises for what is in
    the file: the status says what went wrong."""
    student = _student(path)
    try:
        data = _read_submission(path)
        if isinstance(data, str):
            return Grade(student, data)
        try:
            notebook = read_notebook(data, path.suffix)
        except ValueError as err:
            return Grade(student, f"{NOT_A_NOTEBOOK}{err}")
        asked = asked_exercises(notebook)
        how = counting()
        run = Path(tempfile.mkdtemp(prefix="batchlab-grade-"))
        box = None
        try:
            box = Box(how, LIMITS.memory_bytes, LIMITS.processes) if how.kind else None
            ipc = prepare_run(run, data, slot, refuse_memory=box is None)
            status, answers = run_notebook(notebook, run, ipc, timeout, notebook_timeout, hidden, slot, box)
        finally:
            if box is not None:
                box.remove()
            remove_tree(run)
        return Grade(student, status, asked, _judged(answers))
    except (KeyboardInterrupt, GradingInterrupted):
        raise
    except Exception as err:  # whatever one file does, the class goes on: this row says so
        return Grade(student, f"出错：批改这份文件时出了问题（{type(err).__name__}），其余同学不受影响")


MAX_JOBS = 64
"""The most sandboxes ``--jobs`` runs at once."""


def class_jobs(jobs: int | None, files: int) -> tuple[int, str]:
    """How many sandboxes run at once, and why (Chinese, for the first line): ``jobs`` as asked (1 …
    :data:`MAX_JOBS`, else ValueError), or by default one per core while the memory now available
    holds each one's memory limit; never more than there are files."""
    if jobs is not None:
        if not 1 <= jobs <= MAX_JOBS:
            raise ValueError(f"--jobs = {jobs}：必须在 1 到 {MAX_JOBS} 之间")
        return max(1, min(jobs, files)), "--jobs"
    import psutil

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    available = psutil.virtual_memory().available
    fits = int(available // LIMITS.memory_bytes)
    chosen = max(1, min(cores, fits, files, MAX_JOBS))
    return chosen, (f"{cores} 核，可用内存 {available / 2**30:.0f} GiB 容得下 {fits} 份各 "
                    f"{LIMITS.memory_bytes / 2**30:g} GiB 的上限")


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM ends grading as Ctrl-C does: every sandbox killed, nothing written."""
    raise KeyboardInterrupt


def grade_class(directory: Path, timeout: int = DEFAULT_TIMEOUT_S, exclude: Sequence[Path] = (),
                progress: bool | None = None, notebook_timeout: float = DEFAULT_NOTEBOOK_S,
                jobs: int | None = None, stream: TextIO | None = None) -> list[Grade]:
    """Grade every submission in ``directory`` (see :func:`submissions`), ``jobs`` at a time
    (:func:`class_jobs`), and return the grades in the files' order. On ``stream`` (stderr): first one
    line on how many sandboxes run at once and what counts their memory, then, on a terminal (or with
    ``progress``), a progress line (done/total, elapsed, estimated remaining). Raises ValueError for a
    folder with nothing to grade and RuntimeError when the sandbox is missing, both before any output;
    :class:`GradingInterrupted` on Ctrl-C or SIGTERM once every running sandbox is killed."""
    from tqdm import tqdm

    stream = sys.stderr if stream is None else stream
    bwrap()  # refuse before any work
    files = submissions(directory, exclude)
    if not files:
        raise ValueError(f"DIR = {str(directory)!r}：文件夹里没有要批改的文件")
    n, why = class_jobs(jobs, len(files))
    print(f"批改 {len(files)} 份，同时运行 {n} 个沙箱（{why}）；{counting().line()}", file=stream, flush=True)
    show = stream.isatty() if progress is None else progress
    grades: dict[int, Grade] = {}
    slots: queue.SimpleQueue[int] = queue.SimpleQueue()
    for slot in range(n):
        slots.put(slot)

    def one(index: int, path: Path) -> None:
        if stop_requested():
            return
        slot = slots.get()
        try:
            grade = grade_notebook(path, timeout, notebook_timeout, hidden=[directory], slot=slot)
        finally:
            slots.put(slot)
        if not stop_requested():  # a kernel killed half-way by Ctrl-C is not a grade
            grades[index] = grade

    reset_stop()
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
    pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="batchlab-grade")
    futures = [pool.submit(one, i, path) for i, path in enumerate(files)]
    try:
        with tqdm(total=len(files), desc="批改", unit="份", disable=not show, file=stream) as bar:
            pending = set(futures)
            while pending:  # the main thread only waits, so Ctrl-C reaches it at once
                finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                bar.update(len(finished))
    except KeyboardInterrupt:
        stop_running()
    finally:
        if stop_requested():
            for future in futures:
                future.cancel()
            stop_running()  # a sandbox that started since
        pool.shutdown(wait=True)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if stop_requested():
        raise GradingInterrupted(len(grades), len(files))
    for future in futures:
        future.result()  # a bug in the grader itself is not hidden
    return [grades[i] for i in range(len(files))]


def assignment_exercises(grades: Sequence[Grade], chapters: Sequence[str] | None = None) -> list[str]:
    """The grader's list of the assignment's exercises, in the book's order: every exercise of the
    ``chapters`` named (e.g. ``["4.1"]``), or else of each chapter that at least half of the notebooks
    ask — so no single notebook can add columns to its classmates' table."""
    by_chapter: dict[str, list[str]] = {}
    for i in EXERCISES:
        by_chapter.setdefault(i.split("-")[0], []).append(i)
    if chapters is None:
        notebooks = [g for g in grades if not g.status.startswith((NOT_A_NOTEBOOK, UNREADABLE, NOT_GRADED))]
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


