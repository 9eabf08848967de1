"""The sandbox ``grade`` runs a student's kernel in: what it may see, what it may do, and how much.

A student's notebook is untrusted code. Whoever starts ``grade`` (an instructor's account, or root in a
container or CI), the kernel runs

* as an **unprivileged user with no capabilities**: started by root, bubblewrap builds the sandbox and
  ``setpriv`` then switches to :data:`HOST_UID`, an account of its own (no capability, an empty bounding
  set, ``no_new_privs``) before a second, unprivileged bubblewrap disables user namespaces; started by
  anyone else, one unprivileged bubblewrap does the same as that user, with every capability dropped;
* seeing **only what a kernel needs**: the system's programs and libraries (``/usr``), a few files of
  ``/etc``, this Python's environment and the folders its ``.pth`` files add (where ``batchlab`` lives),
  read-only; its own working folder and ``/tmp`` as size-capped in-memory folders; no host home, no
  submissions folder, no socket of the host (so no Docker or D-Bus), a fresh ``/dev`` and ``/proc``;
* with **no network**, its own process, IPC and host-name namespaces, an environment cleared to
  :data:`PASSED_ENV`, and limits on processes, file size and address space per process;
* watched by the grader (:class:`Watch`): the resident memory of all its processes together, their
  number, the files in the one host folder it shares (the kernel's sockets) and a wall-clock budget;
  past any of them the whole sandbox is killed and the row says which.

Nothing here imports torch; the grader (``apps.grade``) uses these pieces.
"""
from __future__ import annotations

import functools
import os
import shutil
import site
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

__all__ = ["HOST_UID", "SANDBOX_UID", "Limits", "LIMITS", "PASSED_ENV", "WORK_DIR", "bwrap", "python_paths",
           "sandbox_argv", "prepare_run", "hand_over", "seal", "Watch", "remove_tree"]

HOST_UID = 1_666_000_013
"""The account a kernel runs as on the host when ``grade`` is started by root: no login has it, so no
file of anyone's is its own, and the process limit counts only the sandbox's processes."""
SANDBOX_UID = 1000
"""The user id the kernel sees inside the sandbox (its home is :data:`WORK_DIR`)."""
WORK_DIR = "/home/student"
"""The kernel's working folder inside the sandbox: an in-memory folder holding a read-only copy of the
submission (``submission.ipynb``); what the notebook writes there is gone with the sandbox."""
PASSED_ENV = ("TZ", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "ATEN_CPU_CAPABILITY",
              "TORCH_DEVICE_BACKEND_AUTOLOAD")
"""The instructor's environment variables a kernel inherits (the numerics and threads of torch); every
other variable (tokens, paths, the instructor's name) stays outside."""
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "fonts", "alternatives", "localtime", "mime.types")
_TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


@dataclass(frozen=True)
class Limits:
    """What one notebook may use; the defaults are :data:`LIMITS` (``book/instructors.md`` states them)."""

    memory_bytes: int = 4 * 2**30
    """Resident memory of all the notebook's processes together (a chapter's kernel peaks near 1.2 GB)."""
    address_space_bytes: int = 8 * 2**30
    """Address space one process may map (RLIMIT_AS): torch maps far more than it touches."""
    processes: int = 256
    """Processes and threads of the sandbox's account together (RLIMIT_NPROC; torch starts one thread
    per core)."""
    work_bytes: int = 256 * 2**20
    """Size of the working folder (in memory)."""
    tmp_bytes: int = 256 * 2**20
    """Size of /tmp (in memory)."""
    shm_bytes: int = 64 * 2**20
    """Size of /dev/shm (in memory)."""
    shared_bytes: int = 1 * 2**20
    """What the notebook may leave in the host folder it shares with the grader (its sockets are empty)."""
    shared_entries: int = 64


LIMITS = Limits()


@functools.lru_cache(maxsize=1)
def bwrap() -> str:
    """The bubblewrap executable, once it has shown it can build the sandbox here (an unprivileged user
    namespace whose own namespaces are disabled); RuntimeError otherwise: students' code never runs
    without the sandbox."""
    found = shutil.which("bwrap")
    if found is None:
        raise RuntimeError("批改学生的代码需要沙箱 bubblewrap：请先安装（Debian/Ubuntu：apt-get install bubblewrap）")
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        raise RuntimeError("以 root 批改需要 setpriv（util-linux）来换成无特权账户：请先安装 util-linux")
    probe = [found, "--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "true"]
    if os.geteuid() == 0:
        probe = ["setpriv", f"--reuid={HOST_UID}", f"--regid={HOST_UID}", "--clear-groups", "--", *probe]
    done = subprocess.run(probe, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = printable_line(done.stderr)
        raise RuntimeError(f"bubblewrap 在这台机器上建不起沙箱（{why}）：需要允许无特权用户命名空间"
                           "（例如 sysctl kernel.unprivileged_userns_clone=1，或 Ubuntu 的 bwrap AppArmor 配置）")
    return found


def printable_line(text: str) -> str:
    """The first line of a tool's message, at most 120 characters, for a one-line refusal."""
    lines = text.strip().splitlines()
    return (lines[0] if lines else "没有输出")[:120]


def python_paths() -> list[Path]:
    """The folders this Python's kernel imports from: its installation, its environment and the folders the
    environment's ``.pth`` files name (an editable ``batchlab``). Not the current folder or PYTHONPATH:
    they may be an instructor's home or the submissions themselves."""
    roots = {Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    roots.add(Path(sys.executable).resolve().parent.parent)
    site_dirs = [Path(p) for p in site.getsitepackages()]
    for site_dir in site_dirs:
        for pth in sorted(site_dir.glob("*.pth")) if site_dir.is_dir() else []:
            for line in pth.read_text(encoding="utf-8", errors="replace").splitlines():
                line = line.strip()
                if line and not line.startswith(("#", "import")) and Path(line).is_absolute() and Path(line).is_dir():
                    roots.add(Path(line))
    def reachable(p: Path) -> bool:
        try:
            return p.exists()
        except OSError:  # a folder this account may not enter: the kernel could not either
            return False

    resolved = sorted({p.resolve() for p in roots if reachable(p)} | {p for p in roots if reachable(p)})
    # keep the outermost of nested folders
    return [p for p in resolved if not any(p != q and p.is_relative_to(q) for q in resolved)]


def _parents(paths: Sequence[Path]) -> list[str]:
    """Every folder above ``paths``, outermost first, to be made 0755 (bubblewrap makes them 0700 as root,
    which an unprivileged kernel could not cross)."""
    found = {str(parent) for p in paths for parent in p.parents if str(parent) != "/"}
    return sorted(found, key=lambda s: (s.count("/"), s))


def prepare_run(run: Path, submission: bytes) -> Path:
    """Lay out the grader's folder for one notebook and return the folder the kernel shares with it.

    ``run/given`` holds, read-only for the kernel, the submission's copy and the sandbox's ``/etc/passwd``,
    ``group`` and ``hosts``; ``run/ipc`` (returned) is the one host folder the kernel may write, for the
    connection file and the kernel's sockets (:class:`Watch` keeps it small). As root, ``ipc`` belongs to
    :data:`HOST_UID`."""
    given, ipc = run / "given", run / "ipc"
    given.mkdir(mode=0o755)
    ipc.mkdir(mode=0o700)
    files = {"submission.ipynb": submission,
             "passwd": (f"root:x:0:0::/root:/usr/sbin/nologin\n"
                        f"student:x:{SANDBOX_UID}:{SANDBOX_UID}::{WORK_DIR}:/usr/sbin/nologin\n"
                        "nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n").encode(),
             "group": f"root:x:0:\nstudent:x:{SANDBOX_UID}:\nnogroup:x:65534:\n".encode(),
             "hosts": b"127.0.0.1 localhost\n"}
    for name, data in files.items():
        (given / name).write_bytes(data)
        (given / name).chmod(0o644)
    if os.geteuid() == 0:
        os.chown(ipc, HOST_UID, HOST_UID)
    return ipc


def hand_over(path: Path) -> None:
    """Let the kernel's account read ``path`` (a file the grader wrote into the shared folder as root)."""
    if os.geteuid() == 0:
        os.chown(path, HOST_UID, HOST_UID)


def seal(ipc: Path) -> None:
    """Once the kernel is listening, take the shared folder and its files back (as root): the kernel keeps
    its sockets open but can no longer write a byte to the host's disk. Run by another user, the kernel
    is that user and could take them back, so :class:`Watch` watches the folder instead."""
    if os.geteuid() != 0:
        return
    for path in (ipc, *ipc.iterdir()):
        os.chown(path, 0, 0, follow_symlinks=False)
    ipc.chmod(0o755)


def sandbox_argv(run: Path, command: Sequence[str], limits: Limits = LIMITS, cpu_seconds: int = 24 * 3600,
                 hidden: Sequence[Path] = ()) -> list[str]:
    """The command line that runs ``command`` in the sandbox (see the module's docstring) for the folder
    ``run`` laid out by :func:`prepare_run`; ``run/ipc`` is bound at its own path. ``hidden`` are host
    folders covered by an empty one should they lie inside something bound (the submissions, say).
    Raises RuntimeError without bubblewrap."""
    binary = bwrap()
    pythons = python_paths()
    given, ipc = run / "given", run / "ipc"
    mounts: list[str] = ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm",
                         "--ro-bind", "/usr", "/usr"]
    for name in _TOP_LEVEL:
        top = Path("/", name)
        if top.is_symlink():
            mounts += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            mounts += ["--ro-bind", str(top), str(top)]
    mounts += ["--perms", "0755", "--dir", "/etc"]  # bubblewrap would make it 0700 as root
    for name in _ETC:
        if Path("/etc", name).exists():
            mounts += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    for name in ("passwd", "group", "hosts"):
        mounts += ["--ro-bind", str(given / name), f"/etc/{name}"]
    # /tmp first: a Python environment or the grader's folder under the host's /tmp is bound inside it
    mounts += ["--size", str(limits.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
    outside_usr = [p for p in pythons if not p.is_relative_to("/usr")]
    for parent in _parents([*outside_usr, ipc]):
        mounts += ["--perms", "0755", "--dir", parent]
    for path in outside_usr:
        mounts += ["--ro-bind", str(path), str(path)]
    mounts += ["--bind", str(ipc), str(ipc)]
    for path in hidden:  # e.g. the submissions, were they inside the Python environment
        path = path.resolve()
        if any(path.is_relative_to(p) for p in pythons):
            mounts += ["--tmpfs", str(path)]
    mounts += ["--perms", "0755", "--dir", "/home",
               "--size", str(limits.work_bytes), "--perms", "0777", "--tmpfs", WORK_DIR,  # the kernel's, as root or not
               "--ro-bind", str(given / "submission.ipynb"), f"{WORK_DIR}/submission.ipynb"]
    env = ["--clearenv", "--setenv", "PATH", f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
           "--setenv", "HOME", WORK_DIR, "--setenv", "LANG", "C.UTF-8", "--setenv", "USER", "student",
           "--setenv", "IPYTHONDIR", f"{WORK_DIR}/.ipython", "--setenv", "MPLCONFIGDIR", f"{WORK_DIR}/.matplotlib"]
    for name in PASSED_ENV:
        if name in os.environ:
            env += ["--setenv", name, os.environ[name]]
    namespaces = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                  "--hostname", "sandbox", "--die-with-parent", "--new-session", "--chdir", WORK_DIR]
    limited = ["prlimit", f"--nproc={limits.processes}", f"--fsize={limits.work_bytes}",
               f"--as={limits.address_space_bytes}", f"--cpu={cpu_seconds}", "--core=0", "--", *command]
    unprivileged = ["--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    if os.geteuid() != 0:  # one bubblewrap, as this user, in a user namespace of its own
        return [binary, *unprivileged, "--cap-drop", "ALL", *namespaces, *mounts, *env, "--", *limited]
    # Root: the first bubblewrap mounts (it can read what the kernel may only see) and keeps just the
    # capabilities setpriv needs to become HOST_UID with none; the second disables user namespaces.
    return [binary, "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
            "--cap-add", "CAP_SETPCAP", *namespaces, *mounts, *env, "--",
            "setpriv", f"--reuid={HOST_UID}", f"--regid={HOST_UID}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--",
            # a /dev of its own: device nodes bound from outside a user namespace do not open inside it
            binary, *unprivileged, "--bind", "/", "/", "--dev", "/dev", "--size", str(limits.shm_bytes),
            "--tmpfs", "/dev/shm", "--chdir", WORK_DIR, "--", *limited]


class Watch:
    """Watches one sandbox from the grader's side: every ``interval`` seconds the resident memory and
    number of all processes under ``pid``, the shared folder's contents and the wall clock. Past a limit
    it kills them all and keeps the reason (Chinese, for the row)."""

    def __init__(self, shared: Path, limits: Limits = LIMITS, wall_seconds: float = 3600.0,
                 interval: float = 0.05) -> None:
        self.shared, self.limits, self.wall_seconds, self.interval = shared, limits, wall_seconds, interval
        self.reason: str | None = None
        self.peak_bytes = 0
        self._pid: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="batchlab-grade-watch")
        self._start = time.monotonic()

    def watch(self, pid: int) -> None:
        """Start watching the sandbox whose outermost process is ``pid``."""
        self._pid = pid
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the sandbox ended) and kill whatever of it is left."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.kill()

    def kill(self) -> None:
        """Kill the sandbox's processes: its outermost process and everything under it."""
        import psutil

        for proc in self._family():
            try:
                proc.kill()
            except psutil.Error:
                pass

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
        resident = 0
        for proc in family:
            try:
                resident += proc.memory_info().rss
            except psutil.Error:
                pass
        self.peak_bytes = max(self.peak_bytes, resident)
        if resident > self.limits.memory_bytes:
            return f"所有进程合计占用内存超过 {self.limits.memory_bytes / 2**30:g} GiB，已停止"
        return self._shared_over()

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


def remove_tree(path: Path) -> None:
    """Remove ``path`` however deep or strange what a notebook left there (``shutil.rmtree`` recurses
    once per level and a notebook can nest thousands)."""
    if os.geteuid() != 0:  # a folder the kernel made read-only must become writable to be emptied
        subprocess.run(["chmod", "-R", "u+rwx", str(path)], stderr=subprocess.DEVNULL, check=False)
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], stderr=subprocess.DEVNULL, check=False)
