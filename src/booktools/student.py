"""The student's route of the README (「学生：只装 batchlab 和 CPU 版 torch」), made and measured: a fresh virtual
environment holding only the package (built from a clean copy of the project), the CPU build of torch and
JupyterLab to open the chapters; every chapter then runs headless in a kernel of that environment, from a folder
that holds the notebooks alone, so nothing of the checkout (``src/``, the tests) is on its path.

Used by ``tests/test_student_install.py`` (every chapter runs, also with every core kept busy) and by
``benchmarks/bench.py`` (part ``student``: the environment's disk size and each kernel's peak memory).

Where torch comes from: the CPU wheel, wherever this machine's pip is configured to find it — the way
``scripts/setup-env.sh`` installs ``requirements.txt`` (here ``PIP_FIND_LINKS`` / pip.conf name a folder holding
``torch-2.13.0+cpu``; a CI runner with the internet sets ``PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu``,
PyTorch's CPU index, as ``binder/requirements.txt`` does). The version is pinned with its ``+cpu`` local label, so a
machine that can only find the multi-GB CUDA build fails the install instead of making a 5 GB environment.

    python -m booktools.student VENV [NOTEBOOK ...]    # make VENV, run the chapters, print JSON
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from booktools import ROOT

CELL_TIMEOUT_S = 300
"""A cell that hangs fails the run after this many seconds (as nbval's cell timeout in scripts/test.sh)."""

EXTRA_PACKAGES = ("jupyterlab",)
"""What a student installs beside the package, to open the chapters (README: 学生的安装)."""

# Run in the student's Python: execute one chapter in a fresh kernel of that environment (nbclient, which
# JupyterLab brings) and read the kernel's own peak resident memory (VmHWM) in a last cell, as bench.py does.
_RUNNER = r"""
import json, sys, time
import nbformat
from nbclient import NotebookClient

path, workdir, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3])
nb = nbformat.read(path, as_version=4)
nb.cells.append(nbformat.v4.new_code_cell(
    "import batchlab\n"
    "with open('/proc/self/status') as fh:\n"
    "    print(next(int(l.split()[1]) * 1024 for l in fh if l.startswith('VmHWM:')), batchlab.__file__)"))
client = NotebookClient(nb, kernel_name="python3", timeout=timeout, resources={"metadata": {"path": workdir}})
start = time.perf_counter()
client.execute()
seconds = time.perf_counter() - start
peak, package = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream").split()
print(json.dumps({"seconds": seconds, "peak_rss_mb": int(peak) / 1e6, "batchlab": package}))
"""


def torch_pin() -> str:
    """The torch requirement of the student's environment: requirements.txt's version, CPU build."""
    text = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    match = re.search(r"^torch==([\w.]+)\s*$", text, re.M)
    if match is None:
        raise ValueError("requirements.txt 没有 torch==X.Y.Z 这一行")
    return f"torch=={match.group(1)}+cpu"


def project_copy(dest: Path, source: Path = ROOT) -> Path:
    """A clean copy of what the package is built from (pyproject.toml, README, licences, src/ without caches
    or egg-info; no build/ folder): a wheel built from it holds what the checkout's files say, never a file
    that an earlier ``pip install .`` left in build/ (setuptools packs build/lib as it finds it)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md", "LICENSE", "LICENSE-text"):
        shutil.copy(source / name, dest / name)
    shutil.copytree(source / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    return dest


def clean_env(venv: Path) -> dict[str, str]:
    """The environment a student's shell gives: the venv first on PATH, none of the checkout's variables
    (PYTHONPATH, VIRTUAL_ENV, BATCHLAB_*, the pytest and Jupyter ones), pip's own settings kept."""
    keep = {k: v for k, v in os.environ.items()
            if k.startswith(("PIP_", "LANG", "LC_")) or k in ("HOME", "TMPDIR", "OMP_WAIT_POLICY", "SSL_CERT_FILE")}
    return {**keep, "PATH": f"{venv / 'bin'}{os.pathsep}/usr/local/bin:/usr/bin:/bin", "PYTHONNOUSERSITE": "1"}


def disk_bytes(folder: Path) -> int:
    """Bytes the files under ``folder`` take (apparent sizes, links not followed)."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def make_env(venv: Path, python: str = sys.executable) -> dict:
    """Create ``venv`` and install the student's route into it; ``{"seconds", "disk_mb", "torch"}``."""
    start = time.perf_counter()
    subprocess.run([python, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    with tempfile.TemporaryDirectory() as tmp:
        project = project_copy(Path(tmp) / "project")
        proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                               torch_pin(), str(project), *EXTRA_PACKAGES],
                              capture_output=True, text=True, timeout=1800, env=clean_env(venv), cwd=tmp)
    if proc.returncode != 0:
        raise RuntimeError(f"学生环境安装失败（pip 退出码 {proc.returncode}）：\n{(proc.stdout + proc.stderr)[-3000:]}")
    seconds = time.perf_counter() - start
    torch = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True, check=True, env=clean_env(venv)).stdout.strip()
    return {"seconds": seconds, "disk_mb": disk_bytes(venv) / 1e6, "torch": torch}


def chapter_folder(dest: Path, notebooks: list[Path]) -> list[Path]:
    """Copies of ``notebooks`` in ``dest``, a folder with nothing else (as a student's download of them)."""
    dest.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy(nb, dest / nb.name)) for nb in notebooks]


def run_chapter(venv: Path, notebook: Path, timeout: int = CELL_TIMEOUT_S) -> dict:
    """Execute ``notebook`` top to bottom in a fresh kernel of ``venv``, from the notebook's folder:
    ``{"seconds", "peak_rss_mb", "batchlab"}`` (``batchlab``: the file the kernel imported the package from).
    A failing or hanging cell raises RuntimeError with the runner's last words."""
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", _RUNNER, str(notebook), str(notebook.parent),
                           str(timeout)], capture_output=True, text=True, env=clean_env(venv),
                          cwd=notebook.parent, timeout=timeout * 4)
    if proc.returncode != 0:
        raise RuntimeError(f"{notebook.name} 在学生环境里运行失败（退出码 {proc.returncode}）：\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@contextmanager
def busy_cores(count: int | None = None) -> Iterator[int]:
    """Keep ``count`` cores (default: all) busy with spinning processes while the block runs: the load under
    which chapter 4.5 once hung. Yields how many spin."""
    count = count or os.cpu_count() or 1
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield count
    finally:
        for proc in spinners:
            proc.kill()
        for proc in spinners:
            proc.wait()


def chapters() -> list[Path]:
    """Every chapter notebook of the toc, in its order."""
    from booktools.toc import toc_entries

    return [ROOT / f"{entry}.ipynb" for entry in toc_entries() if (ROOT / f"{entry}.ipynb").is_file()]


def main(argv: list[str] | None = None) -> int:
    """Make the environment named on the command line and run the chapters in it; print one JSON object."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("用法：python -m booktools.student VENV [NOTEBOOK ...]", file=sys.stderr)
        return 2
    venv = Path(args[0]).resolve()
    if venv.exists():
        print(f"{venv} 已经存在：学生环境要从空目录建起", file=sys.stderr)
        return 2
    report = {"env": make_env(venv)}
    with tempfile.TemporaryDirectory() as tmp:
        notebooks = chapter_folder(Path(tmp), [Path(a) for a in args[1:]] or chapters())
        report["notebooks"] = {nb.stem: run_chapter(venv, nb) for nb in notebooks}
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
