"""One submission run top to bottom in a sandboxed kernel (:mod:`batchlab.apps.sandbox`), each cell
limited in time, the whole run watched; the grader keeps each cell's reply and nothing the notebook
prints. A last cell hands back the answers the student gave, as data."""
from __future__ import annotations

import asyncio
import atexit
import logging
import queue
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from batchlab.apps.grade_report import printable
from batchlab.apps.cgroups import Box
from batchlab.apps.sandbox import LIMITS, hand_over, launch_env, sandbox_argv, seal
from batchlab.apps.watch import Watch

__all__ = ["OK", "INTERRUPT_GRACE_S", "MAX_MESSAGE_BYTES", "run_notebook", "stop_running", "stop_requested",
           "reset_stop"]

OK = "ok"
"""The status of a notebook whose every cell ran without error within the time limit."""
INTERRUPT_GRACE_S = 10
"""Seconds an interrupted cell has to stop before the notebook's run is abandoned."""
MAX_MESSAGE_BYTES = 16 * 2**20
"""The largest message the grader accepts from a kernel (a chapter's largest, a figure, is under 1 MiB)."""
_QUEUED = 8  # messages from a kernel waiting to be read: with MAX_MESSAGE_BYTES, at most 128 MiB

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
_KERNEL = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}", "--HistoryManager.enabled=False"]
# nbclient logs every timeout and error; the status column says them, and the progress bar stays clean.
_QUIET = logging.getLogger(__name__)
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


class _Abandoned(Exception):
    """A cell went on running after its interrupt: the notebook's run ends there."""


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


class _Client:
    """nbclient's NotebookClient keeping no output and no widget message: the grader needs only each
    cell's reply, so a notebook that prints gigabytes or floods widget messages costs it nothing."""

    @staticmethod
    def make(notebook: Any, ipc: Path, **kwargs: Any) -> Any:
        from nbclient import NotebookClient

        class Client(NotebookClient):
            async def async_start_new_kernel(self, **kw: Any) -> None:
                # nbclient has just made Ctrl-C shut this kernel down and carry on with the class: make it
                # stop the class instead. Its internal tasks' errors after such a kill are not the row's.
                loop = asyncio.get_running_loop()
                loop.set_exception_handler(lambda *_: None)
                try:
                    loop.add_signal_handler(signal.SIGINT, stop_running)
                except (RuntimeError, NotImplementedError, ValueError):  # not the main thread
                    pass
                await super().async_start_new_kernel(**kw)

            async def async_start_new_kernel_client(self) -> Any:
                client = await super().async_start_new_kernel_client()
                seal(ipc)  # the kernel answered: its sockets exist, the folder is taken back
                return client

            def output(self, outs: list, msg: dict, display_id: Any, cell_index: int) -> Any:
                return None

            def handle_comm_msg(self, outs: list, msg: dict, cell_index: int) -> None:
                return None

        return Client(notebook, **kwargs)


def _kernel_manager(run: Path, ipc: Path, cpu_seconds: int, watch: Watch, hidden: Sequence[Path], slot: int,
                    box: Box | None) -> Any:
    """A manager for a sandboxed kernel of this Python (whatever kernelspec the notebook names, as nbval's
    --nbval-current-env does: students' notebooks import the instructor's batchlab), talking over Unix
    sockets in ``ipc`` since the sandbox has no network; ``watch`` starts when the sandbox does. Started
    with :func:`~batchlab.apps.sandbox.launch_env` only, in the cgroup ``box`` where there is one."""
    from ipykernel.kernelspec import RESOURCES
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    import zmq.asyncio

    argv = sandbox_argv(run, _KERNEL, LIMITS, cpu_seconds, hidden, slot, box)

    class Sandboxed(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            # interrupts travel as messages: a signal to bubblewrap does not reach into its namespace
            return KernelSpec(resource_dir=RESOURCES, argv=argv, display_name="batchlab-grade", language="python",
                              interrupt_mode="message")

    class Manager(AsyncKernelManager):
        def write_connection_file(self, **kwargs: Any) -> None:
            super().write_connection_file(**kwargs)
            hand_over(Path(self.connection_file), slot)  # the kernel's account reads it

        def client(self, **kwargs: Any) -> Any:
            return super().client(context=self.context, **kwargs)  # the bounded sockets below

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            kw["env"] = launch_env()  # not the grader's: bubblewrap's own environment is readable inside
            await super()._async_launch_kernel(kernel_cmd, **kw)
            watch.watch(self.provisioner.pid, getattr(self.provisioner, "process", None))
            if stop_requested():  # Ctrl-C while it started
                watch.kill()

    # What the grader receives is bounded too: a message over MAX_MESSAGE_BYTES is dropped by zmq, and at
    # most _QUEUED messages wait to be read, so a notebook printing gigabytes costs megabytes here.
    context = zmq.asyncio.Context()
    context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
    context.setsockopt(zmq.RCVHWM, _QUEUED)
    return Manager(kernel_spec_manager=Sandboxed(), kernel_name="batchlab-grade", transport="ipc",
                   ip=str(ipc / "kernel"), connection_file=str(ipc / "kernel.json"), context=context)


_STATE: dict[str, Any] = {"watches": set(), "stop": False}  # the sandboxes running now; Ctrl-C seen


def run_notebook(notebook: Any, run: Path, ipc: Path, timeout: int, notebook_timeout: float,
                 hidden: Sequence[Path], slot: int = 0, box: Box | None = None) -> tuple[str, str]:
    """Execute ``notebook`` plus the answers cell in a sandboxed kernel: (status, the answers as JSON,
    empty if none came back). ``slot`` and ``box``: see :func:`~batchlab.apps.sandbox.sandbox_argv`.
    Every cell's error counts, whatever tags the student gave it (``raises-exception`` included)."""
    import nbformat
    from nbclient.exceptions import DeadKernelError

    # Cell numbers as a reader counts them in the student's notebook (markdown included), from 1.
    problems: list[tuple[int, str]] = []
    answers: dict[str, str] = {}
    last = len(notebook.cells)
    notebook.cells.append(nbformat.v4.new_code_cell(_ANSWERS_CELL))
    current = {"cell": 0}
    watch = Watch(ipc, LIMITS, wall_seconds=notebook_timeout, box=box)

    def on_cell_execute(cell: Any, cell_index: int) -> None:
        current["cell"] = cell_index + 1

    async def on_cell_executed(cell: Any, cell_index: int, execute_reply: dict) -> None:
        content = execute_reply.get("content", {})
        if cell_index == last:
            if content.get("ename") == _MARKER:
                answers["json"] = str(content.get("evalue", ""))
            elif content.get("status") == "error":
                answers["error"] = printable(str(content.get("ename", "?")))
        elif content.get("status") == "error":
            problems.append((cell_index + 1, str(content.get("ename", "?"))))
        if content.get("ename") == _TIMED_OUT and not await _stopped(client, execute_reply):
            raise _Abandoned

    manager = _kernel_manager(run, ipc, 2 * timeout * (last + 2) + 60, watch, hidden, slot, box)
    client = _Client.make(
        # CPU time: every cell at its limit on two threads, and the start; a runaway that escapes the
        # per-cell timeout (threads it started, say) is killed by SIGXCPU and its row says the kernel died.
        notebook, ipc, km=manager,
        timeout=int(min(timeout, notebook_timeout)), allow_errors=True, interrupt_on_timeout=True,
        # Do not wait here for an interrupted cell's reply: _stopped gives it INTERRUPT_GRACE_S.
        error_on_timeout={"ename": _TIMED_OUT, "evalue": "", "traceback": []},
        on_cell_execute=on_cell_execute, on_cell_executed=on_cell_executed, log=_QUIET,
        resources={"metadata": {"path": str(ipc)}})
    _STATE["watches"].add(watch)
    try:
        # cleanup_kc: the kernel is ours to shut down (km= alone would leave it running). The kernel's
        # own stdout/stderr hold only its start-up banner; what the student's code prints is dropped.
        client.execute(cleanup_kc=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except _Abandoned:
        return (f"中断无效：单元格 {current['cell']} 运行超过 {timeout:g} 秒且不响应中断，这份作业的运行到此结束，"
                "后面的单元格和答案都没有读到"), ""
    except DeadKernelError:
        reason = watch.ended()
        if reason is not None:
            return f"超限：单元格 {current['cell']} 运行时{reason}，后面的单元格和答案都没有读到", ""
        return f"出错：内核在单元格 {current['cell']} 意外退出", ""
    except Exception as err:  # kernel failed to start, protocol error, …: this row, not the class
        if (reason := watch.ended()) is not None:
            return f"超限：{reason}", ""
        return f"出错：无法运行（{type(err).__name__}：{printable(str(err))[:200]}）", ""
    finally:
        # nbclient registers its kernel's clean-up to run at exit and leaves it registered when the kernel
        # dies while starting (Ctrl-C then): at exit it failed on ``assert self.km is not None``. The
        # sandbox is ended here, so that hook has nothing to do.
        atexit.unregister(client._cleanup_kernel)
        _STATE["watches"].discard(watch)
        watch.stop()
        manager.context.destroy(linger=0)
    if watch.reason is not None:  # a limit reached as the last cells ran: the run does not count
        return f"超限：{watch.reason}", ""
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




def stop_running() -> None:
    """Ctrl-C or SIGTERM: kill every sandbox running now (each notebook's run ends as a dead kernel),
    and remember that grading should stop."""
    _STATE["stop"] = True
    for watch in list(_STATE["watches"]):
        watch.kill()


def stop_requested() -> bool:
    """Whether Ctrl-C was pressed since :func:`reset_stop`."""
    return bool(_STATE["stop"])


def reset_stop() -> None:
    """Start a class: no Ctrl-C seen yet."""
    _STATE["stop"] = False
