"""Hostile submissions: a class folder where students try to forge a grade, outlive the grader, write
outside their copy, ignore interrupts or inflate the table. Graded once by the CLI (slow: one sandboxed
kernel per notebook); the honest notebook answers 4.1-1 right and 4.1-2 wrong, so every forger's honest
score is 1."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from batchlab.apps.grade import INTERRUPT_GRACE_S

pytestmark = pytest.mark.slow

HONEST = ['from batchlab.ui.exercises import ask, check', 'ask("4.1-1")\ncheck("4.1-1", 8)',
          'ask("4.1-2")\ncheck("4.1-2", 3)']
ALL = ", ".join(f'"4.1-{k}"' for k in range(1, 7))
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


def _notebook(path: Path, extra: list[str]) -> None:
    nbformat.write(new_notebook(cells=[new_code_cell(s) for s in HONEST + extra]), path)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    subs, sentinel = base / "subs", base / "sentinel.txt"
    subs.mkdir()
    sentinel.write_text("keep", encoding="utf-8")
    for name, code in FORGERS.items():
        _notebook(subs / f"{name}.ipynb", [code])
    _notebook(subs / "honest.ipynb", [])
    _notebook(subs / "daemon.ipynb", [
        # a child in its own session and a double-forked grandchild, both meant to outlive grading
        f"import subprocess\nsubprocess.Popen(['sleep', '600', '{MARK}'], start_new_session=True)",
        f"import os\nif os.fork() == 0:\n    if os.fork() == 0:\n        os.execvp('sleep', ['sleep', '601', '{MARK}'])\n"
        "    os._exit(0)"])
    _notebook(subs / "vandal.ipynb", [
        f"import os, shutil\nfor p in ({str(sentinel)!r}, {str(subs / 'honest.ipynb')!r}):\n"
        "    try:\n        os.remove(p)\n    except OSError as err:\n        print(type(err).__name__)",
        f"open({str(base / 'planted.txt')!r}, 'w').write('x')"])
    _notebook(subs / "hog.ipynb", [  # asks for 16 GiB: refused inside its notebook, nowhere else
        "try:\n    block = bytearray(16 * 2**30)  # calloc: no page is touched either way\n"
        "except MemoryError:\n    pass\nelse:\n    raise RuntimeError('no memory limit')"])
    _notebook(subs / "deaf.ipynb", [
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
        'check("4.1-3", 7 / 15)'])
    out = base / "grades.csv"
    env = {**os.environ, "IPYTHONDIR": str(base / "instructor-ipython")}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "batchlab", "grade", str(subs), "--timeout", "5", "--csv", str(out)],
                          capture_output=True, text=True, timeout=600, env=env)
    seconds = time.monotonic() - start
    rows = {r[0]: r for r in csv.reader(out.read_text(encoding="utf-8-sig").splitlines())} if out.exists() else {}
    return proc, rows, base, sentinel, seconds


def test_no_forged_score_above_the_honest_one(graded):
    proc, rows, *_ = graded
    assert proc.returncode == 0, proc.stderr
    assert rows["学生"] == ["学生", "4.1-1", "4.1-2", "4.1-3", "4.1-4", "4.1-5", "4.1-6", "总分", "状态"]
    assert rows["honest"][1:8] == ["1", "0", "0", "0", "0", "0", "1"]
    for name in FORGERS:  # patch_judge also overwrote its own right answer with 0s: it scores 0
        assert int(rows[name][7]) <= 1, rows[name]


def test_nothing_a_notebook_started_is_left(graded):
    leftovers = [p.info for p in psutil.process_iter(["pid", "cmdline"])
                 if MARK in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []


def test_nothing_written_outside_the_copy(graded):
    proc, rows, base, sentinel, _ = graded
    assert sentinel.read_text(encoding="utf-8") == "keep"
    assert (base / "subs" / "honest.ipynb").exists() and not (base / "planted.txt").exists()
    assert rows["vandal"][7] == "1" and rows["vandal"][-1].startswith("出错：单元格 5 抛出")  # the write failed
    assert not (base / "instructor-ipython").exists()  # grading history stays out of the instructor's IPython


def test_a_memory_hog_is_refused_inside_its_own_notebook(graded):
    proc, rows, *_ = graded
    assert rows["hog"][7] == "1" and rows["hog"][-1] == "ok"


def test_a_cell_that_ignores_the_interrupt_ends_its_notebook_only(graded):
    proc, rows, *_, seconds = graded
    assert rows["deaf"][-1].startswith("中断无效：单元格 4 运行超过 5 秒且不响应中断")
    assert rows["deaf"][7] == "0"  # its answers never left the kernel
    # the class did not wait on it more than its timeout and grace (kernels start in ~1–2 s each)
    assert seconds < 5 + INTERRUPT_GRACE_S + 6 * len(rows)
