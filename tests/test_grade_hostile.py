"""Hostile submissions: a class folder where students try to forge a grade, outlive the grader, escape
the sandbox, read what is not theirs, exhaust the machine or forge rows on the instructor's screen.

The class is graded by the CLI as whoever runs the tests and, when that is root (CI), a second time as
an unprivileged account (a teacher's own login), so both ways the sandbox is built are attacked. Every
attack that succeeds makes its notebook raise an exception named ``Leaked…``, so a row's status says
which; what happens outside the sandbox (files, the host name, a host socket, processes, memory) is
checked from here. The honest notebook answers 4.1-1 right and 4.1-2 wrong: every honest score is 1.
Slow: one sandboxed kernel per notebook."""
from __future__ import annotations

import csv
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from batchlab.apps.sandbox import LIMITS
from batchlab.ui.exercises import EXERCISES
from booktools import ROOT

pytestmark = pytest.mark.slow

HONEST = ['from batchlab.ui.exercises import ask, check', 'ask("4.1-1")\ncheck("4.1-1", 8)',
          'ask("4.1-2")\ncheck("4.1-2", 3)']
CHAPTER_4_1 = [i for i in EXERCISES if i.startswith("4.1-")]  # the columns of a class that hands in chapter 4.1
TOTAL = 1 + len(CHAPTER_4_1)  # the index of 总分 in a row
HONEST_ROW = ["1", *["0"] * (len(CHAPTER_4_1) - 1), "1", "ok"]
ALL = ", ".join(f'"{i}"' for i in CHAPTER_4_1)
FORGERS = {
    # one line each, none using expected(): the verdict is the grader's, not the kernel's
    "patch_judge": "import batchlab.ui.exercises as e\ne.judge = lambda *a, **k: True\n"
                   f"for i in ({ALL}): e.check(i, 0)",
    "patch_answers": "import batchlab.ui.exercises as e\n"
                     f"e.answers = lambda: {{i: True for i in ({ALL})}}",
    "print_marker": f'print("batchlab-grade-answers:" + str({{i: 1 for i in ({ALL})}}).replace("\'", \'"\'))',
    "hook": "import json\nget_ipython().events.register('pre_run_cell', lambda *a: print("
            f"'batchlab-grade-answers:' + json.dumps({{i: 'A' for i in ({ALL})}})))",
    # asks every exercise of the book: must not add columns for the classmates
    "inflate": "from batchlab.ui.exercises import EXERCISES\n" + "\n".join(
        f'ask("{i}")' for i in ("4.2-1", "4.3-1", "4.4-1", "4.5-1", "4.6-1")),
}
MARK = f"batchlab-hostile-{os.getpid()}"
ABSTRACT = f"\0batchlab-teacher-{os.getpid()}"  # the host's abstract socket (per run: two runs may overlap)
# a cell gets 30 s: the memory hog needs its children to fill ~4 GiB before then, which on 2 cores shared with
# another test worker (a chapter training under nbval) took longer than 15 s in 3 of 5 full runs
TIMEOUT, NOTEBOOK_TIMEOUT = 30, 60
UNPRIVILEGED = 1_666_000_077  # the teacher's account in the second run (no login has it)

LEAK = "def leak(what):\n    raise type('Leaked' + what, (Exception,), {})()\n"
# a class graded through the package with a given number of sandboxes at once, as the CLI's --jobs does:
# python -c GRADE DIR TIMEOUT NOTEBOOK_TIMEOUT CSV JOBS
GRADE = ("import sys\nfrom pathlib import Path\nfrom batchlab.apps.grade import grade_class, grade_table\n"
         "from batchlab.apps.grade_report import write_csv\n"
         "grades = grade_class(Path(sys.argv[1]), int(sys.argv[2]), notebook_timeout=int(sys.argv[3]),"
         " jobs=int(sys.argv[5]))\nwrite_csv(Path(sys.argv[4]), *grade_table(grades))")


def escape(base: Path) -> list[str]:
    """Cells that each raise Leaked… if the sandbox lets them read, write or reach what is not theirs."""
    subs, secret = base / "subs", base / "secret.txt"
    return [
        LEAK + "import subprocess\nsubprocess.run(['mount', '-o', 'remount,bind,rw', '/'], capture_output=True)\n"
        f"try:\n    open({str(subs / 'classmate.ipynb')!r}, 'w').write('{{}}')\nexcept OSError:\n    pass\n"
        "else:\n    leak('RewroteClassmate')",
        LEAK + f"for name, path in [('Shadow', '/etc/shadow'), ('Classmate', {str(subs / 'classmate.ipynb')!r}),"
        f" ('Secret', {str(secret)!r})]:\n"
        "    try:\n        open(path, 'rb').read(1)\n    except OSError:\n        continue\n    leak(name)",
        # the folders above its own socket folder exist inside, empty but for the way down to it
        LEAK + f"import os\nif os.path.exists({str(subs)!r}) or set(os.listdir({str(base)!r})) != {{'tmp'}}:\n"
        "    leak('SeesSubmissions')\nif 'BATCHLAB_TEACHER_SECRET' in os.environ:\n    leak('Environment')",
        # the folders above its socket folder are its own, in memory: whether this write succeeds there or
        # not, the host's file must not appear (checked from outside)
        LEAK + f"try:\n    open({str(base / 'planted.txt')!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
        "try:\n    open('/proc/sys/kernel/hostname', 'w').write('pwned')\nexcept OSError:\n    pass\n"
        "else:\n    leak('Hostname')",
        LEAK + "import socket\nfor path in [" + repr(str(base / "teacher.sock")) + "]:\n"
        "    s = socket.socket(socket.AF_UNIX)\n    try:\n        s.connect(path)\n"
        "        s.sendall(b'secret')\n    except OSError:\n        continue\n    leak('Socket')\n"
        f"s = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({ABSTRACT!r})\nexcept OSError:\n    pass\n"
        "else:\n    leak('AbstractSocket')",
        LEAK + "import subprocess\nif subprocess.run(['unshare', '-U', 'true']).returncode == 0:\n"
        "    leak('UserNamespace')\n"
        "caps = [l for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapPrm', 'CapBnd'))]\n"
        "if any(int(l.split()[1], 16) for l in caps):\n    leak('Capabilities')\n"
        "import os\nif os.getuid() == 0:\n    leak('Root')",
    ]


def exhaust() -> dict[str, list[str]]:
    """Notebooks that try to use more than a notebook's share: each cell raises Leaked… past its limit."""
    fill = ("def fill(path, limit):\n    n = 0\n    try:\n        with open(path, 'wb') as f:\n"
            "            while n <= limit:\n                f.write(b'x' * 2**20)\n                f.flush()\n"
            "                n += 2**20\n    except OSError:\n        pass\n    return n\n")
    return {
        "disk": [LEAK + fill + f"if fill('big', 1024 * 2**20) > {LIMITS.work_bytes}:\n    leak('WorkFolder')\n"
                 f"if fill('/tmp/big', 512 * 2**20) > {LIMITS.tmp_bytes}:\n    leak('Tmp')\n"
                 f"if fill('/dev/shm/big', 256 * 2**20) > {LIMITS.shm_bytes}:\n    leak('Shm')"],
        "deep_dirs": [LEAK + "import os\nfor top in ('.', '/tmp'):\n    os.chdir(top)\n    for _ in range(3000):\n"
                      "        os.mkdir('d')\n        os.chdir('d')\nos.chdir(os.path.expanduser('~'))"],
        "fork_storm": [LEAK + "import os, time\nborn = 0\nfor _ in range(100000):\n    try:\n        pid = os.fork()\n"
                       "    except OSError:\n        break\n    if pid == 0:\n"
                       f"        os.execvp('sleep', ['sleep', '30', '{MARK}'])\n"
                       f"    born += 1\nif born >= {LIMITS.processes}:\n    leak('Processes')"],
        "memory_hog": ["import subprocess, sys, time\nchildren = [subprocess.Popen([sys.executable, '-c', "
                       "'import time; x = b\"x\" * (2800 * 2**20); time.sleep(60)']) for _ in range(3)]\n"
                       "time.sleep(30)"],
        "huge_output": ["import sys\nchunk = 'x' * 2**20\nfor _ in range(300):\n    sys.stdout.write(chunk)"],
        "many_slow_cells": [f"import time\ntime.sleep({TIMEOUT - 0.5})"] * 100,
        "deep_shared": ["import os\nfrom ipykernel.connect import get_connection_file\n"
                        "os.chdir(os.path.dirname(get_connection_file()))\nfor _ in range(3000):\n"
                        "    os.mkdir('d')\n    os.chdir('d')\nimport time\ntime.sleep(3)  # the grader looks every 0.05 s"],
    }


def _notebook(path: Path, extra: list[str]) -> None:
    nbformat.write(new_notebook(cells=[new_code_cell(s) for s in HONEST + extra]), path)


def _class(base: Path) -> Path:
    subs = base / "subs"
    subs.mkdir()
    (base / "sentinel.txt").write_text("keep", encoding="utf-8")
    (base / "secret.txt").write_text("the teacher's password", encoding="utf-8")
    (base / "secret.txt").chmod(0o600)
    for name, code in FORGERS.items():
        _notebook(subs / f"{name}.ipynb", [code])
    for name in ("honest", "classmate", "new\nline", '=HYPERLINK("evil.invalid","click")', "\x1b[2Kwipe"):
        _notebook(subs / f"{name}.ipynb", [])
    _notebook(subs / "daemon.ipynb", [
        # a child in its own session and a double-forked grandchild, both meant to outlive grading
        f"import subprocess\nsubprocess.Popen(['sleep', '600', '{MARK}'], start_new_session=True)",
        f"import os\nif os.fork() == 0:\n    if os.fork() == 0:\n        os.execvp('sleep', ['sleep', '601', '{MARK}'])\n"
        "    os._exit(0)"])
    _notebook(subs / "vandal.ipynb", [
        f"import os, shutil\nfor p in ({str(base / 'sentinel.txt')!r}, {str(subs / 'honest.ipynb')!r}):\n"
        "    try:\n        os.remove(p)\n    except OSError as err:\n        print(type(err).__name__)",
        f"open({str(base / 'planted.txt')!r}, 'w').write('x')"])
    _notebook(subs / "hog.ipynb", [  # asks for 16 GiB at once: refused inside its notebook, nowhere else
        "try:\n    block = bytearray(16 * 2**30)  # calloc: no page is touched either way\n"
        "except MemoryError:\n    pass\nelse:\n    raise RuntimeError('no memory limit')"])
    _notebook(subs / "deaf.ipynb", [
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
        'check("4.1-3", 7 / 15)'])
    _notebook(subs / "escape.ipynb", escape(base))
    for name, cells in exhaust().items():
        _notebook(subs / f"{name}.ipynb", cells)
    _notebook(subs / "forged_rows.ipynb", [
        'raise type("Err\\nfake_student 1 1 1 1 1 1 6 ok", (Exception,), {})()',
        'raise type("\\x1b[3A\\x1b[2K\\rhonest 1 1 1 1 1 1 6 ok", (Exception,), {})()'])
    _notebook(subs / "no_answers.ipynb", ["import batchlab.ui.exercises as e\n"
                                          "def boom():\n    raise RuntimeError('no')\ne.answers = boom"])
    (subs / "deep_json.ipynb").write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    with open(subs / "sparse.ipynb", "wb") as f:  # 1 GiB on paper, nothing on disk
        f.truncate(2**30)
    (subs / "link.ipynb").symlink_to(subs / "classmate.ipynb")
    return subs


class Sampler(threading.Thread):
    """Peak resident memory, sampled every 20 ms while grading runs: of the grading process itself, and
    of it and every process under it (the sandboxes) together."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.grader_peak, self.family_peak = pid, 0, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            try:
                family = [psutil.Process(self.pid), *psutil.Process(self.pid).children(recursive=True)]
            except psutil.Error:
                continue
            grader, total = 0, 0
            for proc in family:
                try:
                    rss, line = proc.memory_info().rss, " ".join(proc.cmdline())
                except psutil.Error:
                    continue
                total += rss
                if "batchlab" in line and "ipykernel" not in line:  # the grader (and its wrapper, tiny)
                    grader = max(grader, rss)
            self.grader_peak, self.family_peak = max(self.grader_peak, grader), max(self.family_peak, total)


def _as_teacher(argv: list[str]) -> list[str]:
    """``argv`` run as an unprivileged account, with /root (0700 here) replaced by an empty folder
    holding only the Python installation, as a teacher's own machine would have it."""
    python_root = Path(sys.base_prefix).resolve()
    wrap = ["bwrap", "--dev-bind", "/", "/"]
    if python_root.is_relative_to("/root"):
        wrap += ["--perms", "0755", "--tmpfs", "/root"]
        for parent in reversed(python_root.relative_to("/root").parents[:-1]):  # bubblewrap would make them 0700
            wrap += ["--perms", "0755", "--dir", str(Path("/root", parent))]
        wrap += ["--ro-bind", str(python_root), str(python_root)]
    return [*wrap, "--", "setpriv", f"--reuid={UNPRIVILEGED}", f"--regid={UNPRIVILEGED}", "--clear-groups",
            "--", *argv]


MODES = ["invoker", "teacher"] if os.geteuid() == 0 else ["invoker"]


@pytest.fixture(scope="module", params=MODES)
def graded(request):
    teacher = request.param == "teacher"
    base = Path(tempfile.mkdtemp(prefix="batchlab-hostile-"))
    base.chmod(0o755)
    subs = _class(base)
    (base / "tmp").mkdir()
    if teacher:
        subprocess.run(["chown", "-R", "--no-dereference", f"{UNPRIVILEGED}:{UNPRIVILEGED}", str(base)], check=True)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(base / "teacher.sock"))
    server.listen()
    server.settimeout(0.1)
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(ABSTRACT)
    abstract.listen()
    abstract.settimeout(0.1)
    hostname = Path("/proc/sys/kernel/hostname").read_text()
    classmate = (subs / "classmate.ipynb").read_bytes()
    out = base / "grades.csv"
    argv = [sys.executable, "-m", "batchlab", "grade", str(subs), "--timeout", str(TIMEOUT),
            "--notebook-timeout", str(NOTEBOOK_TIMEOUT), "--csv", str(out)]
    env = {**os.environ, "IPYTHONDIR": str(base / "instructor-ipython"), "BATCHLAB_TEACHER_SECRET": "x",
           "TMPDIR": str(base / "tmp")}  # the grader's own folders, apart from any other test's
    proc = subprocess.Popen(_as_teacher(argv) if teacher else argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    sampler = Sampler(proc.pid)
    sampler.start()
    stdout, stderr = proc.communicate(timeout=1200)
    sampler.done.set()
    sampler.join()
    connections = 0
    for listener in (server, abstract):
        try:
            listener.accept()
            connections += 1
        except (TimeoutError, OSError):
            pass
        listener.close()
    rows = {r[0]: r for r in csv.reader(out.read_text(encoding="utf-8-sig").splitlines())} if out.exists() else {}
    yield {"rc": proc.returncode, "stdout": stdout, "stderr": stderr, "rows": rows, "base": base, "subs": subs,
           "connections": connections, "hostname": hostname, "classmate": classmate, "sampler": sampler,
           "teacher": teacher}
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def graded_one_at_a_time():
    """The same hostile class, as root or whoever runs the tests, graded one notebook at a time."""
    base = Path(tempfile.mkdtemp(prefix="batchlab-hostile-serial-"))
    base.chmod(0o755)
    subs = _class(base)
    (base / "tmp").mkdir()
    out = base / "grades.csv"
    env = {**os.environ, "IPYTHONDIR": str(base / "instructor-ipython"), "TMPDIR": str(base / "tmp")}
    proc = subprocess.run([sys.executable, "-c", GRADE, str(subs), str(TIMEOUT), str(NOTEBOOK_TIMEOUT), str(out), "1"],
                          capture_output=True, text=True, env=env, timeout=1800)
    rows = {r[0]: r for r in csv.reader(out.read_text(encoding="utf-8-sig").splitlines())} if out.exists() else {}
    yield proc, rows
    shutil.rmtree(base, ignore_errors=True)


def test_sandboxes_at_once_give_the_rows_of_one_at_a_time(graded, graded_one_at_a_time):
    """The CLI's default here runs two sandboxes at once (two cores, memory for more): every row, limits
    and attacks included, is the row of a serial run."""
    if graded["teacher"]:
        pytest.skip("compared once, as whoever runs the tests (the teacher's rows differ where its mode does)")
    proc, rows = graded_one_at_a_time
    assert proc.returncode == 0, proc.stderr
    assert "同时运行 1 个沙箱" in proc.stderr.splitlines()[0]
    at_once = int(re.search(r"同时运行 (\d+) 个沙箱", graded["stderr"].splitlines()[0]).group(1))
    assert at_once >= 2 or len(os.sched_getaffinity(0)) == 1, graded["stderr"]
    # which cell the whole notebook's wall-clock budget ends in follows the kernel's start time, not the
    # number of sandboxes (two serial runs on a loaded machine differ there too): that number is left out
    def same(row: list[str] | None) -> list[str] | None:
        return row and [*row[:-1], re.sub(r"^超限：单元格 \d+ 运行时整份作业", "超限：单元格 N 运行时整份作业", row[-1])]

    differ = {name: (row, rows.get(name)) for name, row in graded["rows"].items() if same(rows.get(name)) != same(row)}
    assert differ == {} and len(rows) == len(graded["rows"])
    assert same(["x", "超限：单元格 5 运行时整份作业运行超过 60 秒"]) != same(["x", "超限：单元格 5 运行时内存超过 4 GiB"])


def test_every_honest_row_is_graded_and_unchanged(graded):
    rows = graded["rows"]
    assert graded["rc"] == 0, graded["stderr"]
    assert rows["学生"] == ["学生", *CHAPTER_4_1, "总分", "状态"]
    for name in ("honest", "classmate", "new\\nline", "'=HYPERLINK(\"evil.invalid\",\"click\")", "\\x1b[2Kwipe"):
        assert rows[name][1:] == HONEST_ROW, rows.get(name)
    assert (graded["subs"] / "classmate.ipynb").read_bytes() == graded["classmate"]
    for name in FORGERS:  # patch_judge also overwrote its own right answer with 0s: it scores 0
        assert int(rows[name][TOTAL]) <= 1, rows[name]


@pytest.mark.parametrize("teacher", [False, True] if os.geteuid() == 0 else [False])
def test_a_chapter_runs_whole_in_the_sandbox(teacher):
    """Chapter 4.1 as a student hands it in (its exercises unanswered), graded with the default limits:
    every cell runs, torch, figures and widgets included (a first root sandbox could not open /dev/urandom)."""
    base = Path(tempfile.mkdtemp(prefix="batchlab-chapter-"))
    base.chmod(0o755)
    (base / "subs").mkdir()
    shutil.copy(ROOT / "book" / "4.1-definition.ipynb", base / "subs" / "chapter.ipynb")
    if teacher:
        subprocess.run(["chown", "-R", f"{UNPRIVILEGED}:{UNPRIVILEGED}", str(base)], check=True)
    argv = [sys.executable, "-m", "batchlab", "grade", str(base / "subs"), "--json"]
    try:
        proc = subprocess.run(_as_teacher(argv) if teacher else argv, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["rows"] == [["chapter", *[0] * len(CHAPTER_4_1), 0, "ok"]]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_no_attack_leaked_anything(graded):
    leaked = {name: row[-1] for name, row in graded["rows"].items() if "Leaked" in row[-1]}
    assert leaked == {}
    assert graded["rows"]["escape"][1:] == HONEST_ROW
    assert graded["connections"] == 0  # neither the host's socket file nor its abstract socket answered
    assert Path("/proc/sys/kernel/hostname").read_text() == graded["hostname"]


def test_nothing_written_outside_the_sandbox(graded):
    base, rows = graded["base"], graded["rows"]
    assert (base / "sentinel.txt").read_text(encoding="utf-8") == "keep"
    assert (graded["subs"] / "honest.ipynb").exists() and not (base / "planted.txt").exists()
    # the vandal's removals failed (it cannot see them); its write, if it succeeded, stayed in the sandbox
    assert rows["vandal"][1:-1] == HONEST_ROW[:-1]
    assert not (base / "instructor-ipython").exists()  # grading history stays out of the instructor's IPython
    assert sorted(p.name for p in base.iterdir()) == ["grades.csv", "secret.txt", "sentinel.txt", "subs",
                                                      "teacher.sock", "tmp"]
    assert list((base / "tmp").iterdir()) == []  # every notebook's folder removed, however deep


def test_nothing_a_notebook_started_is_left(graded):
    leftovers = [p.info for p in psutil.process_iter(["pid", "cmdline"])
                 if MARK in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []


def test_limits_stop_a_notebook_and_say_which(graded):
    rows = graded["rows"]
    assert rows["memory_hog"][-1].startswith("超限：") and "内存超过 4 GiB" in rows["memory_hog"][-1]
    assert rows["many_slow_cells"][-1].startswith("超限：") and f"超过 {NOTEBOOK_TIMEOUT} 秒" in rows["many_slow_cells"][-1]
    # as root the grader takes the shared folder back once the kernel listens (the first mkdir fails);
    # run by a teacher's account the kernel is that account, so the watcher stops it instead
    assert (rows["deep_shared"][-1].startswith("出错：单元格 4 抛出 PermissionError") if os.geteuid() == 0
            and not graded["teacher"] else
            rows["deep_shared"][-1].startswith("超限：") and "共用的文件夹" in rows["deep_shared"][-1]), rows["deep_shared"]
    for name in ("disk", "deep_dirs", "fork_storm", "hog"):  # refused inside their own notebook: no Leaked
        assert rows[name][1:-1] == HONEST_ROW[:-1], rows[name]
    assert rows["hog"][-1] == "ok"
    for name in ("memory_hog", "many_slow_cells"):  # their answers never left the kernel
        assert rows[name][TOTAL] == "0"
    # grading and its sandboxes together: three 2.8 GB children stopped near the 4 GiB budget, not at 8.4 GB
    # (the grader looks every 0.05 s; three processes allocating at once can pass the line by about a GiB)
    assert graded["sampler"].family_peak < LIMITS.memory_bytes + 2 * 2**30


def test_what_a_notebook_prints_costs_the_grader_nothing(graded):
    rows = graded["rows"]
    assert rows["huge_output"][1:-1] == HONEST_ROW[:-1], rows["huge_output"]
    assert rows["sparse"][1:] == ["0"] * TOTAL + ["未批改：文件有 1,024 MiB，超过 16 MiB 的上限（一章连同图也不到 1 MiB）"]
    assert graded["sampler"].grader_peak < 600 * 2**20  # 300 MiB printed, a 1 GiB file handed in


def test_one_broken_file_costs_only_its_row(graded):
    rows = graded["rows"]
    assert rows["deep_json"][1:] == ["0"] * TOTAL + ["不是 notebook：JSON 嵌套过深，不是 Jupyter 保存的文件"]
    assert rows["link"][-1] == "未批改：这是一个符号链接，只批改文件夹里的普通文件"
    assert rows["no_answers"][1:] == ["0"] * TOTAL + ["出错：读答案的单元格抛出 RuntimeError"]
    assert rows["deaf"][-1].startswith(f"中断无效：单元格 4 运行超过 {TIMEOUT} 秒且不响应中断")
    assert rows["deaf"][TOTAL] == "0"  # its answers never left the kernel


def test_no_student_string_forges_a_row(graded):
    stdout, rows = graded["stdout"], graded["rows"]
    assert "\x1b" not in stdout and "\r" not in stdout
    table = stdout.split("\n\n")[0].splitlines()
    assert len(table) == len(rows)  # the header and one line per file: no line added
    assert not [line for line in table if line.startswith(("fake_student", "honest 1 1 1"))]
    assert "Err\\nfake_student 1 1 1 1 1 1 6 ok" in rows["forged_rows"][-1]
    assert "\\x1b[3A\\x1b[2K\\rhonest" in rows["forged_rows"][-1]
    with open(graded["base"] / "grades.csv", encoding="utf-8-sig", newline="") as f:
        cells = [cell for row in csv.reader(f) for cell in row]
    assert not [c for c in cells if c.startswith(("=", "+", "-", "@", "\t", "\r"))]


@pytest.fixture
def slow_class(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    _notebook(subs / "a_honest.ipynb", [])
    _notebook(subs / "b_slow.ipynb", ["import time\ntime.sleep(60)"])
    _notebook(subs / "c_honest.ipynb", [])
    return subs


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_cleanly_and_writes_nothing(slow_class, tmp_path, signum):
    """Ctrl-C (or SIGTERM) while the slow notebook runs: every sandbox ends, nothing is written. The
    grader's main thread only waits on the sandboxes' threads, so the signal never lands inside
    nbclient's own clean-up (under load it once did, and nbclient's ``assert self.km`` failed)."""
    out = tmp_path / "grades.csv"
    proc = subprocess.Popen([sys.executable, "-m", "batchlab", "grade", str(slow_class), "--csv", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kernels: set[int] = set()
    deadline = time.monotonic() + 120  # at most 2 min until the second (slow) notebook's kernel runs
    while len(kernels) < 2 and time.monotonic() < deadline and proc.poll() is None:
        try:
            family = psutil.Process(proc.pid).children(recursive=True)
            kernels |= {p.pid for p in family if "ipykernel_launcher" in " ".join(p.cmdline())}
        except psutil.Error:
            pass
        time.sleep(0.05)
    time.sleep(3)
    sandbox = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.splitlines()[-1].startswith("python -m batchlab grade: 已中断：3 份中批改完")
    assert "Traceback" not in stderr and stdout == "" and not out.exists()
    assert sandbox and not [p for p in sandbox if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_the_teacher_account_of_the_second_run_is_nobody_s():
    """The unprivileged run's account must not be a real one (its files would be the sandbox's)."""
    with pytest.raises(KeyError):
        pwd.getpwuid(UNPRIVILEGED)
