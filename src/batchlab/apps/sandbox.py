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
* with **no network**, its own process, IPC and host-name namespaces, no keyring and an environment
  cleared to :data:`PASSED_ENV` — bubblewrap itself starts with that short list (:func:`launch_env`), so
  no ``/proc/*/environ`` a kernel can read holds the grader's variables — and limits on processes, file
  size and address space per process;
* in a **cgroup of its own** where the machine offers one (:mod:`batchlab.apps.cgroups`): its memory,
  counted by the kernel (memfd files, shared memory and in-memory folders included), and its number of
  processes; where none can be had, a seccomp filter (:mod:`batchlab.apps.seccomp`) refuses the memory
  no process owns, and the watcher sums its processes' resident memory;
* watched by the grader (:class:`batchlab.apps.watch.Watch`): that memory, the number of processes, the files in its
  in-memory folders and in the one host folder it shares (the kernel's sockets), and a wall-clock
  budget; past any of them the whole sandbox is killed and the row says which.

Nothing here imports torch; the grader (``apps.grade``) uses these pieces.
"""
from __future__ import annotations

import functools
import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from batchlab.apps.cgroups import Box
from batchlab.apps.seccomp import filter_program, syscall_number

__all__ = ["HOST_UID", "SANDBOX_UID", "Limits", "LIMITS", "PASSED_ENV", "WORK_DIR", "bwrap", "python_paths",
           "host_uid", "launch_env", "sandbox_argv", "prepare_run", "hand_over", "seal", "Watch", "remove_tree"]

HOST_UID = 1_666_000_013
"""The account a kernel runs as on the host when ``grade`` is started by root: no login has it, so no
file of anyone's is its own, and the process limit counts only the sandbox's processes. Sandboxes
running at once (``grade --jobs``) each get the next id (:func:`host_uid`)."""
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
    inodes: int = 65_536
    """Files and folders in its in-memory folders together (1.2 million empty files hold about 1 GiB of
    the kernel's memory; a chapter makes a few dozen)."""


LIMITS = Limits()
_SECCOMP_FD = 10  # the descriptor the launcher hands bubblewrap its seccomp program on


def host_uid(slot: int = 0) -> int:
    """The host account of the sandbox in ``slot`` (0 … jobs − 1) when ``grade`` runs as root: each
    sandbox running at once has its own, so one notebook's processes never count against another's."""
    return HOST_UID + slot


def launch_env() -> dict[str, str]:
    """The environment bubblewrap itself starts with: a search path, a locale and :data:`PASSED_ENV`,
    nothing else of the grader's (bubblewrap's own process is readable inside the sandbox). OpenMP's idle
    threads sleep unless the instructor says otherwise: kernels graded side by side (``--jobs``) would
    otherwise spin against each other's threads for the same cores (the numbers are unchanged)."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "OMP_WAIT_POLICY": "PASSIVE"}
    env.update({name: os.environ[name] for name in PASSED_ENV if name in os.environ})
    return env


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
    done = subprocess.run(probe, capture_output=True, text=True, check=False, env=launch_env())
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


def prepare_run(run: Path, submission: bytes, slot: int = 0, refuse_memory: bool = True) -> Path:
    """Lay out the grader's folder for one notebook and return the folder the kernel shares with it.

    ``run/given`` holds, read-only for the kernel, the submission's copy and the sandbox's ``/etc/passwd``,
    ``group`` and ``hosts``; ``run/ipc`` (returned) is the one host folder the kernel may write, for the
    connection file and the kernel's sockets (:class:`Watch` keeps it small). As root, ``ipc`` belongs to
    :func:`host_uid` of ``slot``. ``run/seccomp.bpf``, outside the sandbox, is its seccomp program
    (:func:`~batchlab.apps.seccomp.filter_program`; ``refuse_memory`` where no cgroup counts memory)."""
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
    (run / "seccomp.bpf").write_bytes(filter_program(refuse_memory))
    if os.geteuid() == 0:
        os.chown(ipc, host_uid(slot), host_uid(slot))
    return ipc


def hand_over(path: Path, slot: int = 0) -> None:
    """Let the kernel's account read ``path`` (a file the grader wrote into the shared folder as root)."""
    if os.geteuid() == 0:
        os.chown(path, host_uid(slot), host_uid(slot))


def seal(ipc: Path) -> None:
    """Once the kernel is listening, take the shared folder and its files back (as root): the kernel keeps
    its sockets open but can no longer write a byte to the host's disk. Run by another user, the kernel
    is that user and could take them back, so :class:`Watch` watches the folder instead."""
    if os.geteuid() != 0:
        return
    for path in (ipc, *ipc.iterdir()):
        os.chown(path, 0, 0, follow_symlinks=False)
    ipc.chmod(0o755)


# Run first, as the grader's child: joins the sandbox's cgroups, takes a new, empty session keyring (the
# grader's is not passed on), hands bubblewrap its seccomp program on a known descriptor, becomes it.
_LAUNCHER = ("import ctypes, os, sys\n"
             "keyctl, program, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])\n"
             "for procs in sys.argv[4:4 + n]:\n"
             "    with open(procs, 'w') as f:\n"
             "        f.write(str(os.getpid()))\n"
             "ctypes.CDLL(None, use_errno=True).syscall(keyctl, 1, None)  # KEYCTL_JOIN_SESSION_KEYRING, anonymous\n"
             f"os.dup2(os.open(program, os.O_RDONLY), {_SECCOMP_FD})\n"
             "os.execvp(sys.argv[4 + n], sys.argv[4 + n:])\n")


def _bound_roots(pythons: Sequence[Path]) -> list[Path]:
    """Every host folder the sandbox sees, read-only: a folder inside one of them must be hidden."""
    roots = [Path("/usr"), *pythons, *(Path("/etc", name) for name in _ETC)]
    roots += [Path("/", name) for name in _TOP_LEVEL if not Path("/", name).is_symlink()]
    return [r for r in roots if r.exists()]


def sandbox_argv(run: Path, command: Sequence[str], limits: Limits = LIMITS, cpu_seconds: int = 24 * 3600,
                 hidden: Sequence[Path] = (), slot: int = 0, box: Box | None = None) -> list[str]:
    """The command line that runs ``command`` in the sandbox (see the module's docstring) for the folder
    ``run`` laid out by :func:`prepare_run`; ``run/ipc`` is bound at its own path. ``hidden`` are host
    folders covered by an empty one should they lie inside something bound (the submissions, say).
    ``slot``: which of the sandboxes running at once (:func:`host_uid`); ``box``: its cgroup, if any.
    Started with :func:`launch_env`. Raises RuntimeError without bubblewrap."""
    binary = bwrap()
    pythons = python_paths()
    launcher = [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(syscall_number("keyctl")),
                str(run / "seccomp.bpf"), str(len(box.procs()) if box else 0), *(box.procs() if box else []),
                *(box.prefix() if box else [])]
    seccomp = ["--seccomp", str(_SECCOMP_FD)]
    given, ipc = run / "given", run / "ipc"
    # /proc/keys would list the descriptions of the keys the grader's account may view
    mounts: list[str] = ["--proc", "/proc", "--ro-bind", "/dev/null", "/proc/keys", "--ro-bind", "/dev/null",
                         "/proc/key-users", "--dev", "/dev", "--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm",
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
    for path in hidden:  # e.g. the submissions, were they under /usr or inside the Python environment
        path = path.resolve()
        if any(path.is_relative_to(p) for p in _bound_roots(pythons)):
            mounts += ["--tmpfs", str(path)]
    mounts += ["--perms", "0755", "--dir", "/home",
               "--size", str(limits.work_bytes), "--perms", "0777", "--tmpfs", WORK_DIR,  # the kernel's, as root or not
               "--ro-bind", str(given / "submission.ipynb"), f"{WORK_DIR}/submission.ipynb"]
    env = ["--clearenv", "--setenv", "HOME", WORK_DIR, "--setenv", "USER", "student",
           "--setenv", "IPYTHONDIR", f"{WORK_DIR}/.ipython", "--setenv", "MPLCONFIGDIR", f"{WORK_DIR}/.matplotlib"]
    for name, value in launch_env().items():
        env += ["--setenv", name, value]
    namespaces = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                  "--hostname", "sandbox", "--die-with-parent", "--new-session", "--chdir", WORK_DIR]
    limited = ["prlimit", f"--nproc={limits.processes}", f"--fsize={limits.work_bytes}",
               f"--as={limits.address_space_bytes}", f"--cpu={cpu_seconds}", "--core=0", "--", *command]
    unprivileged = ["--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    if os.geteuid() != 0:  # one bubblewrap, as this user, in a user namespace of its own
        return [*launcher, binary, *unprivileged, "--cap-drop", "ALL", *namespaces, *mounts, *env, *seccomp, "--",
                *limited]
    # Root: the first bubblewrap mounts (it can read what the kernel may only see) and keeps just the
    # capabilities setpriv needs to become HOST_UID with none; the second disables user namespaces.
    uid = host_uid(slot)
    return [*launcher, binary, "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
            "--cap-add", "CAP_SETPCAP", *namespaces, *mounts, *env, *seccomp, "--",
            "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--",
            # a /dev of its own: device nodes bound from outside a user namespace do not open inside it
            binary, *unprivileged, "--bind", "/", "/", "--dev", "/dev", "--size", str(limits.shm_bytes),
            "--tmpfs", "/dev/shm", "--chdir", WORK_DIR, "--", *limited]


def remove_tree(path: Path) -> None:
    """Remove ``path`` however deep or strange what a notebook left there (``shutil.rmtree`` recurses
    once per level and a notebook can nest thousands)."""
    if os.geteuid() != 0:  # a folder the kernel made read-only must become writable to be emptied
        subprocess.run(["chmod", "-R", "u+rwx", str(path)], stderr=subprocess.DEVNULL, check=False)
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], stderr=subprocess.DEVNULL, check=False)
