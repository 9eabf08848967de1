"""The grader's watch over one running sandbox (:class:`Watch`): its memory as its cgroup counts it (else
the resident memory of its processes), their number, the files in its in-memory folders and in the one
folder it shares with the grader, and a wall-clock budget. Past any of them the whole sandbox is killed
and the row says which limit (:mod:`batchlab.apps.sandbox` builds the sandbox; the grader,
``apps.grade_kernel``, starts it and its watch)."""
from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

from batchlab.apps.cgroups import Box
from batchlab.apps.sandbox import LIMITS, WORK_DIR, Limits
from batchlab.apps.seccomp import KILLED_EXIT

__all__ = ["Watch"]


class Watch:
    """Watches one sandbox from the grader's side: every ``interval`` seconds its memory (as its cgroup
    ``box`` counts it, else the resident memory of all processes under ``pid``), their number, the files
    in its in-memory folders, the shared folder's contents and the wall clock. Past a limit it kills them
    all and keeps the reason (Chinese, for the row)."""

    def __init__(self, shared: Path, limits: Limits = LIMITS, wall_seconds: float = 3600.0,
                 interval: float = 0.05, box: Box | None = None) -> None:
        self.shared, self.limits, self.wall_seconds, self.interval = shared, limits, wall_seconds, interval
        self.box = box
        self.reason: str | None = None
        self.peak_bytes = 0
        self._pid: int | None = None
        self._process: subprocess.Popen | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="batchlab-grade-watch")
        self._start = time.monotonic()

    def watch(self, pid: int, process: subprocess.Popen | None = None) -> None:
        """Start watching the sandbox whose outermost process is ``pid`` (``process``, if the grader
        started it, tells how it ended: :meth:`refused`)."""
        self._pid, self._process = pid, process
        if self.box is not None:
            self.box.found(pid)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the sandbox ended) and kill whatever of it is left. A memory limit its cgroup
        saw reached between two looks is its :attr:`reason` too."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.kill()
        self.ended()

    def kill(self) -> None:
        """Kill the sandbox's processes: its outermost process and everything under it."""
        import psutil

        for proc in self._family():
            try:
                proc.kill()
            except psutil.Error:
                pass
        if self.box is not None:
            self.box.kill()

    def ended(self) -> str | None:
        """Why the sandbox ended, once it has: a limit the watcher saw, its cgroup's memory limit reached
        (the kernel's own killer may act before the next look), or a call the kernel killed it for."""
        if self.reason is None and self.box is not None and self.box.over():
            self.reason = self._memory_reason()
        return self.reason or self.refused()

    def refused(self) -> str | None:
        """Why the sandbox ended, if the kernel killed it for memory no process owns (no cgroup here to
        count it: :mod:`batchlab.apps.seccomp`); None otherwise."""
        if self._process is None:
            return None
        try:
            code = self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None
        if code != KILLED_EXIT or self.box is not None:
            return None
        return (f"申请了无主内存（memfd 或 System V 共享内存；没有 cgroup 时它们不计入 "
                f"{self.limits.memory_bytes / 2**30:g} GiB 的内存上限，所以一律禁止），已停止")

    def _family(self) -> list:
        """The sandbox's outermost process and every process under it; none once it is gone."""
        import psutil

        if self._pid is None:
            return []
        try:
            top = psutil.Process(self._pid)
            return [top, *top.children(recursive=True)]
        except psutil.Error:
            return []

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            reason = self._over()
            if reason is not None:
                self.reason = reason
                self.kill()
                return

    def _over(self) -> str | None:
        import psutil

        if time.monotonic() - self._start > self.wall_seconds:
            return f"整份作业运行超过 {self.wall_seconds:g} 秒（--notebook-timeout），已停止"
        family = self._family()
        if not family:
            return None
        if len(family) > self.limits.processes:
            return f"进程数超过 {self.limits.processes}，已停止"
        if self.box is not None:  # the kernel counts: memfd, shared memory and in-memory folders included
            self.peak_bytes = self.box.peak_bytes()
            if self.box.over():
                return self._memory_reason()
        else:
            resident = 0
            for proc in family:
                try:
                    resident += proc.memory_info().rss
                except psutil.Error:
                    pass
            self.peak_bytes = max(self.peak_bytes, resident)
            if resident > self.limits.memory_bytes:
                return f"所有进程合计占用内存超过 {self.limits.memory_bytes / 2**30:g} GiB，已停止"
        return self._files_over(family) or self._shared_over()

    def _memory_reason(self) -> str:
        return (f"内存超过 {self.limits.memory_bytes / 2**30:g} GiB（内核按 cgroup 计数，含共享内存、内存文件和"
                "内存中的文件夹），已停止")

    def _files_over(self, family: list) -> str | None:
        """Files and folders in the sandbox's in-memory folders, read through its kernel's view."""
        import psutil

        for proc in reversed(family):  # the innermost process sees the sandbox's own mounts
            try:
                if "ipykernel" not in " ".join(proc.cmdline()):
                    continue
                used = 0
                for folder in (WORK_DIR, "/tmp", "/dev/shm"):
                    fs = os.statvfs(f"/proc/{proc.pid}/root{folder}")
                    used += fs.f_files - fs.f_ffree
            except (OSError, psutil.Error):  # a process that just ended
                continue
            if used > self.limits.inodes:
                return f"在内存中的文件夹里建了超过 {self.limits.inodes:,} 个文件，已停止"
            return None
        return None

    def _shared_over(self) -> str | None:
        entries, size, stack = 0, 0, [self.shared]
        while stack:
            try:
                with os.scandir(stack.pop()) as it:
                    for entry in it:
                        entries += 1
                        if entries > self.limits.shared_entries:
                            return f"在与批改程序共用的文件夹里写了超过 {self.limits.shared_entries} 个文件，已停止"
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(Path(entry.path))
                        else:
                            size += entry.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                continue
        if size > self.limits.shared_bytes:
            return f"在与批改程序共用的文件夹里写了超过 {self.limits.shared_bytes / 2**20:g} MiB，已停止"
        return None
