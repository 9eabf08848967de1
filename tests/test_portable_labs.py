"""Every chapter passes nbval on every CPU a student has, not only on the one its outputs were made on.

ATen picks its vector kernels (DEFAULT, AVX2, AVX512) by the CPU, and they round differently: a number
a chapter shows must not depend on that (measured floats are compared to two decimals by
tests/nbval-sanitize.cfg, gaps at rounding level read "< 10⁻⁶（float32 舍入）"). Here nbval runs every
chapter notebook of _toc.yml once per kernel set, forced with ``ATEN_CPU_CAPABILITY``, in a child pytest
(``-n 2 --dist loadfile``: each notebook whole on one worker). The set this process gets anyway is left
to the main nbval run of scripts/test.sh (``book``), and a set the CPU lacks is skipped; a failure names
the notebook and cell.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from booktools import ROOT
from booktools.toc import resolve_entry, toc_entries

SANITIZE = ROOT / "tests" / "nbval-sanitize.cfg"
CAPABILITIES = ("default", "avx2", "avx512")
FAILED = re.compile(r"^FAILED (\S+::Cell \d+)", re.MULTILINE)

def chapters() -> list[Path]:
    """The notebooks _toc.yml lists, in its order."""
    return [path for entry in toc_entries() for path in resolve_entry(entry)[:1] if path.suffix == ".ipynb"]


def environment(capability: str | None) -> dict[str, str]:
    """This process's environment for a child, with ATen forced to ``capability`` (None: left to the CPU)
    and without the variables that tie it to this pytest run (its xdist worker, its current test)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT_TEST")) and k != "ATEN_CPU_CAPABILITY"}
    env["OMP_WAIT_POLICY"] = "PASSIVE"  # as scripts/test.sh: idle OpenMP threads sleep, two workers share 2 cores
    if capability is not None:
        env["ATEN_CPU_CAPABILITY"] = capability
    elif "ATEN_CPU_CAPABILITY" in os.environ:  # the main run's own setting
        env["ATEN_CPU_CAPABILITY"] = os.environ["ATEN_CPU_CAPABILITY"]
    return env


def kernels(capability: str | None) -> str:
    """The kernel set ATen really uses under ``capability`` (it falls back when the CPU lacks it)."""
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                         env=environment(capability), capture_output=True, text=True, check=True, timeout=120)
    return out.stdout.strip().upper()


def test_the_toc_lists_every_chapter_notebook():
    assert [p.name for p in chapters()] == sorted(p.name for p in (ROOT / "book").glob("4.*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("capability", CAPABILITIES)
def test_every_chapter_passes_nbval_under(capability):
    forced, main = kernels(capability), kernels(None)
    if forced != capability.upper():
        pytest.skip(f"this CPU has no {capability} kernels (ATen uses {forced})")
    if forced == main:
        pytest.skip(f"{forced} is this machine's own kernel set: the main nbval run of scripts/test.sh covers it")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "--color=no", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile",
         "--nbval", "--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE), "--nbval-cell-timeout", "300",
         *(str(p.relative_to(ROOT)) for p in chapters())],
        cwd=ROOT, env=environment(capability), capture_output=True, text=True, timeout=3600)
    cells = FAILED.findall(run.stdout)
    assert run.returncode == 0 and not cells, (
        f"nbval under ATEN_CPU_CAPABILITY={capability} (this machine: {main}) failed in "
        f"{', '.join(cells) or 'no cell (see the output)'} (nbval counts code cells from 0):\n{run.stdout[-8000:]}\n{run.stderr[-2000:]}")
