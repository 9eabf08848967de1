"""``python -m batchlab grade``: run a class's submitted notebooks and score each exercise.

Each submission runs top to bottom in a fresh kernel of this Python environment (where batchlab is
installed) inside the sandbox of :mod:`batchlab.apps.sandbox`: an unprivileged account with no
capability, whoever starts ``grade``; only the system's libraries and this Python visible, read-only; a
read-only copy of its own file in an in-memory working folder; no network, no host socket; limits on
memory (all its processes together), processes, disk and time, past which the sandbox is killed and the
row says why. Every cell gets a time limit, the notebook a wall-clock budget; a cell that errors or runs
over is recorded and the rest of the notebook still runs, so one bad cell costs only the exercises it
breaks; a cell that ignores the interrupt ends that notebook's run.

A last cell, run in the same kernel, prints the answers the student gave (``batchlab.ui.exercises.answers``)
as data. The grader judges them in its own process with the rule the student's 正确/不对 came from
(``judge``): whatever a notebook does to its own kernel can change an answer, never a verdict. The grader
keeps nothing else a notebook prints.

The exercises of the assignment are the grader's own list: every exercise of each chapter that at least
half the class's notebooks work on (``check("4.1-2", answer)``, or ``ask("4.1-2")`` in older copies), or of the
chapters named with ``--chapter``. An exercise a student left unanswered, broke or deleted scores 0. A
file that is not a notebook, is too large, is a link or vanished, or whose kernel cannot run gets a row
that says why; whatever one file does costs only its own row. Every string a student controls (file
names, exception names) is shown with its control characters escaped, and a CSV cell that a spreadsheet
would read as a formula is written as text.
"""
from __future__ import annotations

import csv
import errno
import json
import logging
import os
import queue
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from batchlab.apps.sandbox import LIMITS, Watch, bwrap, hand_over, prepare_run, remove_tree, sandbox_argv
from batchlab.ui.exercises import EXERCISE_CALL, EXERCISES, judge
from batchlab.ui.tables import text_table

__all__ = ["DEFAULT_TIMEOUT_S", "DEFAULT_NOTEBOOK_S", "MAX_SUBMISSION_BYTES", "OK", "Grade", "GradingInterrupted",
           "submissions", "read_notebook", "asked_exercises", "grade_notebook", "grade_class",
           "assignment_exercises", "grade_table", "check_csv_target", "table_text", "write_csv", "printable",
           "spreadsheet_safe"]

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
INTERRUPT_GRACE_S = 10
"""Seconds an interrupted cell has to stop before the notebook's run is abandoned."""
MAX_SUBMISSION_BYTES = 16 * 2**20
"""The largest file graded (a chapter with its figures is under 0.5 MB); a larger one is refused unread."""
MAX_MESSAGE_BYTES = 16 * 2**20
"""The largest message the grader accepts from a kernel (a chapter's largest, a figure, is under 1 MiB)."""
_QUEUED = 8  # messages from a kernel waiting to be read: with MAX_MESSAGE_BYTES, at most 128 MiB

OK = "ok"
"""The status of a notebook whose every cell ran without error within the time limit."""

STUDENT, TOTAL, STATUS = "学生", "总分", "状态"
_SHOWN_PROBLEMS = 3  # a NameError cascade would otherwise fill the status column
_MARKER = "BatchlabGradeAnswers"
# Runs in the student's kernel after the last cell; names are private so they cannot clash. It hands the
# answers back as the text of an exception it raises, which travels in the cell's reply on the shell
# channel: a notebook that floods or breaks its output stream cannot lose or delay them. What it sends
# is data (the answers); the verdicts are the grader's.
_ANSWERS_CELL = ("import json as _batchlab_json\n"
                 "from batchlab.ui.exercises import answers as _batchlab_answers\n"
                 f"raise type({_MARKER!r}, (Exception,), {{}})(_batchlab_json.dumps(_batchlab_answers(), default=repr))")
_TIMED_OUT = "batchlab-grade-timeout"  # the ename nbclient reports for an interrupted cell
_EXPECTED_ERROR = "raises-exception"  # the tag of a cell meant to fail (nbval and myst-nb honour it too)
_KERNEL = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}", "--HistoryManager.enabled=False"]
# nbclient logs every timeout and error; the status column says them, and the progress bar stays clean.
_QUIET = logging.getLogger(__name__)
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
# C0 and C1 controls, DEL, and the Unicode characters that move or reorder text on a screen
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def printable(text: str) -> str:
    """``text`` with every control character written as an escape (``\\n``, ``\\x1b``, ``\\u202e``), so a
    student's file name or exception name cannot add, move or erase a row on the instructor's screen."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def spreadsheet_safe(cell: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: one starting with ``= + - @``, tab or CR gets a leading
    apostrophe (OWASP's advice against CSV injection); numbers pass unchanged."""
    if isinstance(cell, str) and cell.startswith(_FORMULA_START):
        return "'" + cell
    return cell


@dataclass(frozen=True)
class Grade:
    """One submission: who (the file's stem), how its run went, and the exercises it asked and passed."""

    student: str
    status: str
    asked: tuple[str, ...] = ()
    passed: frozenset[str] = field(default_factory=frozenset)


NOT_A_NOTEBOOK, UNREADABLE, NOT_GRADED = "不是 notebook：", "读不到文件", "未批改："
"""How the status of a file that never ran begins."""


class _Abandoned(Exception):
    """A cell went on running after its interrupt: the notebook's run ends there."""


class GradingInterrupted(KeyboardInterrupt):
    """Ctrl-C: the sandbox is gone and nothing is written; ``done`` notebooks were graded."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(done, total)
        self.done, self.total = done, total


def submissions(directory: Path, exclude: Sequence[Path] = ()) -> list[Path]:
    """The entries of ``directory`` that get a row, by name: every visible entry except folders, so a
    student who handed in a non-notebook, a link or a pipe still gets a row (:func:`grade_notebook` grades
    regular files only); ``exclude`` is left out."""
    skip = {p.resolve() for p in exclude}
    return sorted((p for p in directory.iterdir()
                   if not p.name.startswith(".") and not (p.is_dir() and not p.is_symlink())
                   and p.resolve() not in skip),
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
    found = {m.group("id") for cell in notebook.cells if cell.cell_type == "code"
             for m in EXERCISE_CALL.finditer(cell.source)}
    return tuple(i for i in EXERCISES if i in found)


def _problem(cell_number: int, ename: str, timeout: int) -> str:
    if ename == _TIMED_OUT:
        return f"单元格 {cell_number} 运行超过 {timeout:g} 秒，已中断"
    return f"单元格 {cell_number} 抛出 {printable(ename)}"


def _status(problems: list[tuple[int, str]], timeout: int) -> str:
    if not problems:
        return OK
    kind = "超时" if any(ename == _TIMED_OUT for _, ename in problems) else "出错"
    shown = "；".join(_problem(n, ename, timeout) for n, ename in problems[:_SHOWN_PROBLEMS])
    more = f"；另有 {len(problems) - _SHOWN_PROBLEMS} 处" if len(problems) > _SHOWN_PROBLEMS else ""
    return f"{kind}：{shown}{more}"


def _judged(answers_json: str) -> frozenset[str]:
    """The exercises whose answers, sent by the grader's last cell as JSON, the grader's ``judge``
    accepts; anything that is not a JSON object of answers counts for nothing."""
    try:
        given = json.loads(answers_json)
    except (ValueError, RecursionError):
        return frozenset()
    if not isinstance(given, dict):
        return frozenset()
    return frozenset(i for i, answer in given.items() if i in EXERCISES and _right(i, answer))


def _right(exercise_id: str, answer: Any) -> bool:
    try:
        return judge(exercise_id, answer)
    except Exception:  # an answer no rule expected (e.g. a huge int for a float): wrong, not a crash
        return False


def grade_notebook(path: Path, timeout: int = DEFAULT_TIMEOUT_S, notebook_timeout: float = DEFAULT_NOTEBOOK_S,
                   hidden: Sequence[Path] = ()) -> Grade:
    """Grade the submission at ``path``: run it sandboxed, each cell limited to ``timeout`` seconds and
    the whole run to ``notebook_timeout``, and return its grade. ``hidden``: host folders the kernel must
    not see even were they inside the Python environment (the submissions). Never raises for what is in
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
        run = Path(tempfile.mkdtemp(prefix="batchlab-grade-"))
        try:
            status, answers = _run(notebook, run, prepare_run(run, data), timeout, notebook_timeout, hidden)
        finally:
            remove_tree(run)
        return Grade(student, status, asked, _judged(answers))
    except (KeyboardInterrupt, GradingInterrupted):
        raise
    except Exception as err:  # whatever one file does, the class goes on: this row says so
        return Grade(student, f"出错：批改这份文件时出了问题（{type(err).__name__}），其余同学不受影响")


class _Client:
    """nbclient's NotebookClient keeping no output and no widget message: the grader needs only each
    cell's reply, so a notebook that prints gigabytes or floods widget messages costs it nothing."""

    @staticmethod
    def make(notebook: Any, **kwargs: Any) -> Any:
        from nbclient import NotebookClient

        class Client(NotebookClient):
            def output(self, outs: list, msg: dict, display_id: Any, cell_index: int) -> Any:
                return None

            def handle_comm_msg(self, outs: list, msg: dict, cell_index: int) -> None:
                return None

        return Client(notebook, **kwargs)


def _kernel_manager(run: Path, ipc: Path, cpu_seconds: int, watch: Watch, hidden: Sequence[Path]) -> Any:
    """A manager for a sandboxed kernel of this Python (whatever kernelspec the notebook names, as nbval's
    --nbval-current-env does: students' notebooks import the instructor's batchlab), talking over Unix
    sockets in ``ipc`` since the sandbox has no network; ``watch`` starts when the sandbox does."""
    from ipykernel.kernelspec import RESOURCES
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    import zmq.asyncio

    argv = sandbox_argv(run, _KERNEL, LIMITS, cpu_seconds, hidden)

    class Sandboxed(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            # interrupts travel as messages: a signal to bubblewrap does not reach into its namespace
            return KernelSpec(resource_dir=RESOURCES, argv=argv, display_name="batchlab-grade", language="python",
                              interrupt_mode="message")

    class Manager(AsyncKernelManager):
        def write_connection_file(self, **kwargs: Any) -> None:
            super().write_connection_file(**kwargs)
            hand_over(Path(self.connection_file))  # the kernel's account reads it

        def client(self, **kwargs: Any) -> Any:
            return super().client(context=self.context, **kwargs)  # the bounded sockets below

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            await super()._async_launch_kernel(kernel_cmd, **kw)
            watch.watch(self.provisioner.pid)

    # What the grader receives is bounded too: a message over MAX_MESSAGE_BYTES is dropped by zmq, and at
    # most _QUEUED messages wait to be read, so a notebook printing gigabytes costs megabytes here.
    context = zmq.asyncio.Context()
    context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
    context.setsockopt(zmq.RCVHWM, _QUEUED)
    return Manager(kernel_spec_manager=Sandboxed(), kernel_name="batchlab-grade", transport="ipc",
                   ip=str(ipc / "kernel"), connection_file=str(ipc / "kernel.json"), context=context)


_CURRENT: dict[str, Watch] = {}  # the sandbox running now, for Ctrl-C


def _run(notebook: Any, run: Path, ipc: Path, timeout: int, notebook_timeout: float,
         hidden: Sequence[Path]) -> tuple[str, str]:
    """Execute ``notebook`` plus the answers cell in a sandboxed kernel: (status, the answers as JSON,
    empty if none came back)."""
    import nbformat
    from nbclient.exceptions import DeadKernelError

    # Cell numbers as a reader counts them in the student's notebook (markdown included), from 1.
    problems: list[tuple[int, str]] = []
    answers: dict[str, str] = {}
    last = len(notebook.cells)
    notebook.cells.append(nbformat.v4.new_code_cell(_ANSWERS_CELL))
    current = {"cell": 0}
    watch = Watch(ipc, LIMITS, wall_seconds=notebook_timeout)

    def on_cell_execute(cell: Any, cell_index: int) -> None:
        current["cell"] = cell_index + 1

    async def on_cell_executed(cell: Any, cell_index: int, execute_reply: dict) -> None:
        content = execute_reply.get("content", {})
        if cell_index == last:
            if content.get("ename") == _MARKER:
                answers["json"] = str(content.get("evalue", ""))
            elif content.get("status") == "error":
                answers["error"] = printable(str(content.get("ename", "?")))
        elif (content.get("status") == "error" and _EXPECTED_ERROR not in cell.metadata.get("tags", [])):
            problems.append((cell_index + 1, str(content.get("ename", "?"))))
        if content.get("ename") == _TIMED_OUT and not await _stopped(client, execute_reply):
            raise _Abandoned

    manager = _kernel_manager(run, ipc, 2 * timeout * (last + 2) + 60, watch, hidden)
    client = _Client.make(
        # CPU time: every cell at its limit on two threads, and the start; a runaway that escapes the
        # per-cell timeout (threads it started, say) is killed by SIGXCPU and its row says the kernel died.
        notebook, km=manager,
        timeout=int(min(timeout, notebook_timeout)), allow_errors=True, interrupt_on_timeout=True,
        # Do not wait here for an interrupted cell's reply: _stopped gives it INTERRUPT_GRACE_S.
        error_on_timeout={"ename": _TIMED_OUT, "evalue": "", "traceback": []},
        on_cell_execute=on_cell_execute, on_cell_executed=on_cell_executed, log=_QUIET,
        resources={"metadata": {"path": str(ipc)}})
    _CURRENT["watch"] = watch
    try:
        # cleanup_kc: the kernel is ours to shut down (km= alone would leave it running). The kernel's
        # own stdout/stderr hold only its start-up banner; what the student's code prints is dropped.
        client.execute(cleanup_kc=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except _Abandoned:
        return (f"中断无效：单元格 {current['cell']} 运行超过 {timeout:g} 秒且不响应中断，这份作业的运行到此结束，"
                "后面的单元格和答案都没有读到"), ""
    except DeadKernelError:
        if watch.reason is not None:
            return f"超限：单元格 {current['cell']} 运行时{watch.reason}，后面的单元格和答案都没有读到", ""
        return f"出错：内核在单元格 {current['cell']} 意外退出", ""
    except Exception as err:  # kernel failed to start, protocol error, …: this row, not the class
        if watch.reason is not None:
            return f"超限：{watch.reason}", ""
        return f"出错：无法运行（{type(err).__name__}：{printable(str(err))[:200]}）", ""
    finally:
        _CURRENT.pop("watch", None)
        watch.stop()
        manager.context.destroy(linger=0)
    status = _status(problems, timeout)
    if "json" not in answers:
        why = f"读答案的单元格抛出 {answers['error']}" if "error" in answers else "读答案的单元格没有交回答案"
        status = f"出错：{why}" if status == OK else f"{status}；{why}"
    return status, answers.get("json", "")


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
                progress: bool = True, notebook_timeout: float = DEFAULT_NOTEBOOK_S) -> list[Grade]:
    """Grade every submission in ``directory`` (see :func:`submissions`), one after another, with a
    progress bar on stderr. Raises RuntimeError before any work when the sandbox is missing, and
    :class:`GradingInterrupted` on Ctrl-C once the running sandbox is killed."""
    from tqdm import tqdm

    bwrap()  # refuse before any work
    files = submissions(directory, exclude)
    grades: list[Grade] = []
    interrupted: list[int] = []

    def on_interrupt(signum: int, frame: Any) -> None:
        interrupted.append(signum)  # no exception inside nbclient's event loop: stop the sandbox instead
        watch = _CURRENT.get("watch")
        if watch is not None:
            watch.kill()

    import threading

    main = threading.current_thread() is threading.main_thread()  # only the main thread takes signals
    previous = signal.signal(signal.SIGINT, on_interrupt) if main else None
    try:
        with tqdm(files, desc="批改", unit="份", disable=not progress) as bar:
            for path in bar:
                if interrupted:
                    break
                bar.set_postfix_str(_student(path))
                grade = grade_notebook(path, timeout, notebook_timeout, hidden=[directory])
                if not interrupted:
                    grades.append(grade)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    if interrupted:
        raise GradingInterrupted(len(grades), len(files))
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


def check_csv_target(csv_path: Path, submissions_dir: Path) -> Path:
    """The file ``--csv`` will write, resolved as the system will (links followed before ``..``); refused,
    before any grading, if writing it could lose something: inside the submissions folder (it would
    overwrite or join the submissions), a folder, a place that cannot be written, a name too long."""
    shown = printable(str(csv_path))
    if len(os.fsencode(Path(csv_path).name)) > 200:  # the temporary file beside it adds a prefix and a suffix
        raise ValueError(f"--csv：文件名太长（{len(os.fsencode(Path(csv_path).name))} 字节，最多 200）")
    try:
        target = Path(os.path.realpath(csv_path))
        inside = target.is_relative_to(Path(os.path.realpath(submissions_dir)))
        exists, is_dir = target.exists(), target.is_dir()
        parent_ok = target.parent.is_dir()
    except (OSError, ValueError) as err:  # a name with a NUL byte, a folder name over the system's limit
        code = errno.errorcode.get(err.errno, "") if isinstance(err, OSError) else "含有空字符"
        raise ValueError(f"--csv {shown!r}：无法使用这个路径（{code}）") from None
    if inside:
        raise ValueError(f"--csv {shown!r}：不能写进提交文件夹 {printable(str(submissions_dir))!r}（会覆盖或混入学生的文件）")
    if is_dir:
        raise ValueError(f"--csv {shown!r}：这是一个文件夹，不是文件")
    if not parent_ok:
        raise ValueError(f"--csv {shown!r}：文件夹 {printable(str(target.parent))!r} 不存在")
    if not os.access(target.parent, os.W_OK) or (exists and not os.access(target, os.W_OK)):
        raise ValueError(f"--csv {shown!r}：没有写入权限")
    return target


def write_csv(path: Path, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """The table as CSV, UTF-8 with a byte-order mark so that Excel reads the Chinese, every cell a
    spreadsheet would take for a formula written as text (:func:`spreadsheet_safe`); written to a
    temporary file beside ``path`` and renamed over it, so a failure leaves no half-written table."""
    with tempfile.NamedTemporaryFile("w", newline="", encoding="utf-8-sig", dir=Path(path).parent,
                                     prefix=".grades-", suffix=".csv", delete=False) as f:
        writer = csv.writer(f)
        writer.writerow([spreadsheet_safe(h) for h in headers])
        writer.writerows([spreadsheet_safe(c) for c in row] for row in rows)
    os.replace(f.name, path)


def table_text(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The table for the terminal, with a line on what the numbers mean."""
    exercises = len(headers) - 3  # all but student, total and status
    return (text_table(headers, rows).text + f"\n\n{len(rows)} 份提交；每道练习答对 1 分，满分 {exercises} 分。"
            "未作答、出错或删掉的练习记 0 分。")
