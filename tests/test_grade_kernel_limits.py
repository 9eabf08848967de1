"""Hostile submissions of the third round (issue 41), graded as root and as an unprivileged teacher
account: memory no process owns (memfd files written, never mapped; System V segments touched and
detached), a flood of empty files, the grader's environment and keyring looked for from every ``/proc``
entry, ``fallocate`` in the shared folder, and cells tagged ``raises-exception`` that run out of time.
Graded one at a time (``jobs=1``), so the host's memory may drop by one notebook's limit at most.
Slow: one sandboxed kernel per notebook."""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import nbformat
import psutil
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from batchlab.apps import cgroups, seccomp
from batchlab.apps.sandbox import LIMITS
from tests.test_grade_hostile import HONEST, HONEST_ROW, LEAK, TOTAL, UNPRIVILEGED, _as_teacher

pytestmark = pytest.mark.slow

# a cell gets 60 s: 5 GiB written on two cores shared with other test workers took over 30 s once
TIMEOUT, NOTEBOOK_TIMEOUT = 60, 150
SECRET_NAME = "BATCHLAB_TEACHER_TOKEN"
KEY = "batchlab-teacher-key"
MODES = ["invoker", "teacher"] if os.geteuid() == 0 else ["invoker"]
_N = {name: seccomp.syscall_number(name) for name in ("add_key", "request_key", "keyctl")}

# the grader's own session keyring holds the teacher's key (an SSH login with pam_keyinit, a service)
WITH_KEY = ("import ctypes, os, sys\nl = ctypes.CDLL(None, use_errno=True)\n"
            f"l.syscall({_N['keyctl']}, 1, b'batchlab-teacher-session')\n"
            f"assert l.syscall({_N['add_key']}, b'user', b'{KEY}', b'hunter2', 7, -3) >= 0, ctypes.get_errno()\n"
            "os.execv(sys.argv[1], sys.argv[1:])")
# the class graded through the package, one notebook at a time (the CLI's default is one per core)
GRADE = ("import sys\nfrom pathlib import Path\nfrom batchlab.apps.grade import grade_class, grade_table\n"
         "from batchlab.apps.grade_report import write_csv\n"
         "grades = grade_class(Path(sys.argv[1]), int(sys.argv[2]), notebook_timeout=int(sys.argv[3]), jobs=1)\n"
         "write_csv(Path(sys.argv[4]), *grade_table(grades))")

MEMFD_HOG = ("import os, time\nfds, chunk = [], b'x' * 2**26\nfor i in range(20):  # 5 GiB in files no process maps\n"
             "    fd = os.memfd_create(f'm{i}')\n    for _ in range(4):\n        os.write(fd, chunk)\n"
             "    fds.append(fd)\ntime.sleep(10)")
SYSV_HOG = ("import ctypes, time\nl = ctypes.CDLL(None, use_errno=True)\nl.shmat.restype = ctypes.c_void_p\n"
            "for i in range(20):  # 20 segments of 256 MiB: attach, touch, detach\n"
            "    sid = l.shmget(0, 256 * 2**20, 0o1600)\n    if sid < 0:\n        raise OSError(ctypes.get_errno(), 'shmget')\n"
            "    p = l.shmat(sid, None, 0)\n    ctypes.memset(p, 1, 256 * 2**20)\n    l.shmdt(ctypes.c_void_p(p))\n"
            "time.sleep(10)")
INODE_FLOOD = ("import os\nfor top in ('/tmp', os.path.expanduser('~')):\n    os.chdir(top)\n"
               "    for i in range(600_000):\n        open(f'f{i}', 'w').close()")
SECRETS = LEAK + (
    "import ctypes, glob\n"
    f"for path in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline') + glob.glob('/proc/*/task/*/environ'):\n"
    "    try:\n        data = open(path, 'rb').read()\n    except OSError:\n        continue\n"
    f"    if b'{SECRET_NAME}' in data or b'instructor-token' in data:\n        leak('Environment')\n"
    "l = ctypes.CDLL(None, use_errno=True)\n"
    f"if l.syscall({_N['request_key']}, b'user', b'{KEY}', None, 0) >= 0:\n    leak('KeyRead')\n"
    "try:\n    listed = open('/proc/keys').read()\nexcept OSError:\n    listed = ''\n"
    f"if '{KEY}' in listed:\n    leak('KeyListed')\n"
    "for ring in (-3, -4, -5):  # session, user, user session: where the next student's kernel would look\n"
    f"    if l.syscall({_N['add_key']}, b'user', b'batchlab-student-key', b'x', 1, ring) >= 0:\n        leak('KeyAdded')")
FALLOCATE = LEAK + (
    "import ctypes, os\nfrom ipykernel.connect import get_connection_file\n"
    "l = ctypes.CDLL(None, use_errno=True)\n"
    "try:\n    fd = os.open(os.path.join(os.path.dirname(get_connection_file()), 'big'), os.O_RDWR | os.O_CREAT)\n"
    "except OSError:\n    fd = None  # as root the shared folder is the grader's again\n"
    "if fd is not None and l.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(3 * 2**30)) == 0:  # KEEP_SIZE\n"
    "    leak('Fallocate')")


def _notebook(path: Path, extra: list[str], tags: dict[int, list[str]] | None = None) -> None:
    cells = [new_code_cell(s) for s in HONEST + extra]
    for index, cell_tags in (tags or {}).items():
        cells[index].metadata["tags"] = cell_tags
    nbformat.write(new_notebook(cells=cells), path)


class Available(threading.Thread):
    """The least memory the host had available while grading ran (sampled every 20 ms)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.least = psutil.virtual_memory().available
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            self.least = min(self.least, psutil.virtual_memory().available)


@pytest.fixture(scope="module", params=MODES)
def graded(request):
    teacher = request.param == "teacher"
    base = Path(tempfile.mkdtemp(prefix="batchlab-limits-"))
    base.chmod(0o755)
    subs = base / "subs"
    subs.mkdir()
    (base / "tmp").mkdir()
    _notebook(subs / "honest.ipynb", [])
    for name, code in (("memfd_hog", MEMFD_HOG), ("sysv_hog", SYSV_HOG), ("inode_flood", INODE_FLOOD),
                       ("secrets", SECRETS), ("fallocate", FALLOCATE)):
        _notebook(subs / f"{name}.ipynb", [code])
    # a cell the student tags as meant to fail still times out, and an error it raises still counts
    _notebook(subs / "tagged_timeout.ipynb", ["import time\ntime.sleep(3600)", "raise ValueError('meant?')"],
              tags={3: ["raises-exception"], 4: ["raises-exception"]})
    (subs / "loop.ipynb").symlink_to("loop.ipynb")
    if teacher:
        subprocess.run(["chown", "-R", "--no-dereference", f"{UNPRIVILEGED}:{UNPRIVILEGED}", str(base)], check=True)
    out = base / "grades.csv"
    argv = [sys.executable, "-c", WITH_KEY, sys.executable, "-c", GRADE, str(subs), str(TIMEOUT),
            str(NOTEBOOK_TIMEOUT), str(out)]
    env = {**os.environ, SECRET_NAME: "instructor-token", "TMPDIR": str(base / "tmp")}
    available = Available()
    available.start()
    proc = subprocess.run(_as_teacher(argv) if teacher else argv, capture_output=True, text=True, env=env,
                          timeout=1200)
    available.done.set()
    available.join()
    rows = {r[0]: r for r in csv.reader(out.read_text(encoding="utf-8-sig").splitlines())} if out.exists() else {}
    yield {"proc": proc, "rows": rows, "teacher": teacher, "least": available.least, "base": base}
    shutil.rmtree(base, ignore_errors=True)


def test_the_class_is_graded_and_the_honest_row_unchanged(graded):
    assert graded["proc"].returncode == 0, graded["proc"].stderr
    assert graded["rows"]["honest"][1:] == HONEST_ROW
    line = graded["proc"].stderr.splitlines()[0]  # which of the two limits it used, in one line
    assert ("没有可用的 cgroup" in line) == (graded["teacher"] or not cgroups.counting().kind), line


def test_memory_no_process_owns_ends_the_notebook_and_says_the_limit(graded):
    rows = graded["rows"]
    for name in ("memfd_hog", "sysv_hog"):
        status = rows[name][-1]
        assert status.startswith("超限：") and "4 GiB" in status, (name, status)
        assert rows[name][TOTAL] == "0", rows[name]
    # one notebook at a time: the host lost at most one notebook's limit (plus the grader and noise)
    before = psutil.virtual_memory().available
    assert before - graded["least"] < LIMITS.memory_bytes + 2 * 2**30


def test_a_flood_of_empty_files_is_stopped_at_the_inode_cap(graded):
    status = graded["rows"]["inode_flood"][-1]
    assert status.startswith("超限：") and f"{LIMITS.inodes:,} 个文件" in status, status


def test_no_secret_of_the_grader_is_readable_and_no_key_is_left(graded):
    rows = graded["rows"]
    for name in ("secrets", "fallocate"):
        assert rows[name][1:] == HONEST_ROW, rows[name]
    keys = Path("/proc/keys").read_text()
    assert "batchlab-student-key" not in keys


def test_a_tagged_cell_does_not_hide_a_timeout(graded):
    status = graded["rows"]["tagged_timeout"][-1]
    assert status.startswith(f"超时：单元格 4 运行超过 {TIMEOUT} 秒，已中断；单元格 5 抛出 ValueError"), status


def test_a_file_linking_to_itself_is_one_row(graded):
    assert graded["rows"]["loop"][-1] == "未批改：这是一个符号链接，只批改文件夹里的普通文件"
