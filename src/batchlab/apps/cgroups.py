"""Limits the kernel counts: one cgroup per sandbox, whose memory limit counts what no process owns
(memfd files, System V shared memory, in-memory folders' pages, the kernel memory of their inodes) as
well as every process's own memory, and whose process limit counts every thread.

What a machine offers (:func:`counting`, found once and said in one line by ``grade``):

* **cgroup v2** where this process's own cgroup is delegated to it (a systemd service with
  ``Delegate=yes``, a container's root): one child per sandbox with ``memory.max``,
  ``memory.swap.max = 0`` and ``pids.max``; ``memory.events`` says when the limit was reached;
* **cgroup v1** (a hybrid hierarchy, as on these build machines, writable by root):
  ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` where swap is counted) and ``pids.max``;
* **systemd** (a teacher's desktop: pure v2, the user's manager delegating memory):
  ``systemd-run --user --scope -p MemoryMax=…``, its cgroup found from the sandbox's first process;
* **none** (an unprivileged account without delegation): the grader's watcher sums the processes'
  resident memory instead, and :mod:`batchlab.apps.seccomp` refuses the memory no process owns.
"""
from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Counting", "counting", "Box", "ROOT"]

ROOT = Path("/sys/fs/cgroup")
_PREFIX = "batchlab-grade-"
_NEAR_LIMIT = 64 * 2**20  # usage this close to the limit after a failed charge: the notebook is at it


@dataclass(frozen=True)
class Counting:
    """How this machine counts a sandbox's memory: ``kind`` is ``"v2"``, ``"v1"``, ``"systemd"`` or
    ``""`` (none); ``parent`` the folder(s) new cgroups go in (v1: memory's, then pids')."""

    kind: str
    parents: tuple[Path, ...] = ()
    why_not: str = ""

    def line(self) -> str:
        """One Chinese line: which limit counts the memory no process owns."""
        if self.kind == "v1":
            return "内存与进程数上限由内核按 cgroup v1 计数（含共享内存、内存文件和内存中的文件夹）"
        if self.kind == "v2":
            return "内存与进程数上限由内核按 cgroup v2 计数（含共享内存、内存文件和内存中的文件夹）"
        if self.kind == "systemd":
            return "内存与进程数上限由内核按 cgroup v2 计数（systemd-run --user --scope）"
        return (f"没有可用的 cgroup（{self.why_not}）：内存上限改由批改程序合计各进程的常驻内存，"
                "并用 seccomp 禁止 memfd 与 System V 共享内存")


def _own(controller: str) -> str | None:
    """This process's cgroup path in the v1 hierarchy of ``controller``, or in v2 (``controller`` "")."""
    for line in Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines():
        number, controllers, path = line.split(":", 2)
        if (controller == "" and number == "0") or controller in controllers.split(","):
            return path
    return None


def _writes(path: Path, text: str) -> None:
    path.write_text(text, encoding="ascii")


def _probe(parent: Path) -> bool:
    """Whether a child cgroup can be made (and removed) under ``parent``."""
    child = parent / f"{_PREFIX}probe-{uuid.uuid4().hex[:8]}"
    try:
        child.mkdir()
    except OSError:
        return False
    try:
        child.rmdir()
    except OSError:
        pass
    return True


def _v2() -> Counting | None:
    """A delegated cgroup v2 subtree for this process, made ready for children with memory and pids."""
    if not (ROOT / "cgroup.controllers").is_file():
        return None
    own = _own("")
    if own is None:
        return None
    here = ROOT / own.lstrip("/")
    try:
        enabled = set((here / "cgroup.subtree_control").read_text().split())
        available = set((here / "cgroup.controllers").read_text().split())
    except OSError:
        return None
    if not {"memory", "pids"} <= available or not os.access(here, os.W_OK):
        return None
    if not {"memory", "pids"} <= enabled:
        # "no internal processes": this process moves into a leaf of its own before the controllers
        # are handed down to the sandboxes' cgroups
        try:
            leaf = here / f"{_PREFIX}grader"
            leaf.mkdir(exist_ok=True)
            _writes(leaf / "cgroup.procs", str(os.getpid()))
            _writes(here / "cgroup.subtree_control", "+memory +pids")
        except OSError:
            return None
    return Counting("v2", (here,)) if _probe(here) else None


def _v1() -> Counting | None:
    """The v1 memory and pids hierarchies, where this process may make cgroups in its own."""
    parents = []
    for controller in ("memory", "pids"):
        own = _own(controller)
        mount = ROOT / controller
        if own is None or not (mount / "cgroup.procs").is_file():
            return None
        parent = mount / own.lstrip("/")
        if not _probe(parent):
            return None
        parents.append(parent)
    return Counting("v1", tuple(parents))


def _systemd() -> Counting | None:
    """``systemd-run --user --scope`` where the user's manager runs and delegates memory."""
    if shutil.which("systemd-run") is None or not Path("/run/systemd/system").is_dir():
        return None
    probe = ["systemd-run", "--user", "--scope", "--quiet", "--collect", "-p", "MemoryMax=64M", "-p", "TasksMax=16",
             "--", "sh", "-c", "cat /proc/self/cgroup"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    path = done.stdout.strip().splitlines()[-1].split(":", 2)[-1] if done.stdout.strip() else ""
    return Counting("systemd") if (ROOT / path.lstrip("/") / "memory.max").is_file() else None


@functools.lru_cache(maxsize=1)
def counting() -> Counting:
    """What counts a sandbox's memory here (see the module's docstring), found once."""
    for find in (_v2, _v1, _systemd):
        try:
            found = find()
        except OSError:
            found = None
        if found is not None:
            return found
    why = "以 root 运行或委派一个 cgroup v2 子树即可" if os.geteuid() != 0 else "这台机器没有可写的 cgroup"
    return Counting("", why_not=why)


class Box:
    """One sandbox's cgroup: made before it starts (:meth:`procs` are the files its first process joins,
    :meth:`prefix` the command that starts it in a scope), asked whether it reached its limits
    (:meth:`over`), emptied and removed afterwards (:meth:`remove`)."""

    def __init__(self, how: Counting, memory_bytes: int, processes: int) -> None:
        self.how, self.memory_bytes, self.processes = how, memory_bytes, processes
        self.folders: list[Path] = []
        self._scope: Path | None = None  # systemd: found from the first process
        name = f"{_PREFIX}{uuid.uuid4().hex[:12]}"
        if how.kind == "v2":
            folder = how.parents[0] / name
            folder.mkdir()
            self.folders = [folder]
            _writes(folder / "memory.max", str(memory_bytes))
            if (folder / "memory.swap.max").exists():
                _writes(folder / "memory.swap.max", "0")
            _writes(folder / "pids.max", str(processes))
        elif how.kind == "v1":
            memory, pids = (parent / name for parent in how.parents)
            memory.mkdir()
            self.folders = [memory]
            pids.mkdir()
            self.folders.append(pids)
            _writes(memory / "memory.limit_in_bytes", str(memory_bytes))
            if (memory / "memory.memsw.limit_in_bytes").exists():  # swap counted too, where the kernel can
                try:
                    _writes(memory / "memory.memsw.limit_in_bytes", str(memory_bytes))
                except OSError:
                    pass
            _writes(pids / "pids.max", str(processes))

    def procs(self) -> list[str]:
        """The ``cgroup.procs`` files the sandbox's first process writes its pid to before it starts."""
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def prefix(self) -> list[str]:
        """The command that starts the sandbox in a scope of its own (systemd), else nothing."""
        if self.how.kind != "systemd":
            return []
        return ["systemd-run", "--user", "--scope", "--quiet", "--collect", "-p", f"MemoryMax={self.memory_bytes}",
                "-p", "MemorySwapMax=0", "-p", f"TasksMax={self.processes}", "--"]

    def found(self, pid: int) -> None:
        """The sandbox's first process is ``pid``: under systemd, its scope is where it runs."""
        if self.how.kind != "systemd":
            return
        try:
            text = Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8")
        except OSError:
            return
        for line in text.splitlines():
            if line.startswith("0::"):
                self._scope = ROOT / line[3:].lstrip("/")

    def _memory_folder(self) -> Path | None:
        return self._scope if self.how.kind == "systemd" else (self.folders[0] if self.folders else None)

    def over(self) -> bool:
        """Whether the sandbox reached its memory limit: the kernel killed one of its processes for it,
        or a charge failed when it held (nearly) all of the limit. Still true once it has ended."""
        folder = self._memory_folder()
        if folder is None:
            return False
        try:
            if self.how.kind == "v1":
                oom = dict(line.split() for line in (folder / "memory.oom_control").read_text().splitlines())
                killed, failed = int(oom.get("oom_kill", 0)), int((folder / "memory.failcnt").read_text())
            else:
                events = dict(line.split() for line in (folder / "memory.events").read_text().splitlines())
                killed, failed = int(events.get("oom_kill", 0)), int(events.get("max", 0))
        except (OSError, ValueError):
            return False
        return killed > 0 or (failed > 0 and self.peak_bytes() >= self.memory_bytes - _NEAR_LIMIT)

    def peak_bytes(self) -> int:
        """The most memory the sandbox held (v1's high-water mark, v2's ``memory.peak`` where the kernel
        has it, else its current use)."""
        folder = self._memory_folder()
        for name in ("memory.max_usage_in_bytes", "memory.peak", "memory.current", "memory.usage_in_bytes"):
            try:
                return int((folder / name).read_text()) if folder is not None else 0
            except (OSError, ValueError):
                continue
        return 0

    def kill(self) -> None:
        """Kill every process in the cgroup (even one that left the watcher's process tree)."""
        for folder in self.folders:
            if (folder / "cgroup.kill").exists():
                try:
                    _writes(folder / "cgroup.kill", "1")
                    continue
                except OSError:
                    pass
            try:
                pids = (folder / "cgroup.procs").read_text().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass

    def remove(self, wait_s: float = 5.0) -> None:
        """Kill what is left and remove the cgroup (once its last process is gone)."""
        deadline = time.monotonic() + wait_s
        for folder in self.folders:
            while True:
                self.kill()
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.02)
