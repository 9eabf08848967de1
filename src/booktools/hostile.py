"""Hostile input for the calculator and the explorers, shared by ``tests/test_bounds.py`` (which checks what
each answers) and ``benchmarks/bench.py`` (which times it against a budget).

* :func:`flag_cases` — every numeric flag of every command, one hostile value at a time (the rest at a
  working base);
* :data:`COMBINED` — flags whose product is the cost: each within its own bound, together far past what a
  run may spend (issue 26), each refused before it runs or answered from a formula;
* :func:`answer` — one command line run in this process: exit status, stdout, stderr, seconds;
* :func:`control_values` — an explorer control's own bounds and values between them.
"""
from __future__ import annotations

import contextlib
import functools
import io
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HOSTILE", "BASE", "FLAGS", "MULTI", "RUN_FLAGS", "COMBINED", "flag_cases", "Answer", "answer", "control_values"]

HOSTILE = ["0", "-1", "1", "3", "7", "1000", str(2**31), str(2**63), "1e30", "1e-10", "nan", "inf", "-inf", "abc"]
"""Values a reader (or a script) may type for a number."""
BASE = {
    "plan": ["--global-batch", "64", "--micro-batch", "2", "--pipeline-stages", "4", "--data-parallel", "2"],
    "tune": ["--global-batch", "64", "--pipeline-stages", "4", "--data-parallel", "2"],
    "pipeline": ["--model", "tiny", "--n-layer", "4", "--seq-len", "64", "--global-batch", "32", "--micro-batch", "4",
                 "--pipeline-stages", "4"],
    "bench-matmul": ["--m", "1", "2", "--k", "256", "--n", "256", "--repeats", "2", "--min-seconds", "0.001"],
    "grade": ["{class}"],
}
"""A working command line of each command, which :func:`flag_cases` changes one flag of."""
FLAGS = {
    "plan": ["--global-batch", "--micro-batch", "--pipeline-stages", "--data-parallel", "--seq-len", "--n-layer",
             "--d-model", "--n-head", "--grad-accum", "--device-memory-gib", "--tokens-per-second", "--peak-tflops",
             "--virtual-stages", "--tensor-parallel", "--context-parallel"],
    "tune": ["--global-batch", "--micro-batch", "--pipeline-stages", "--data-parallel", "--seq-len", "--n-layer",
             "--d-model", "--n-head", "--device-memory-gib", "--peak-tflops", "--bandwidth-tbs", "--virtual-stages",
             "--tensor-parallel", "--context-parallel"],
    "pipeline": ["--global-batch", "--micro-batch", "--pipeline-stages", "--data-parallel", "--seq-len", "--n-layer",
                 "--d-model", "--n-head", "--dropout", "--timeout", "--virtual-stages", "--tensor-parallel",
                 "--context-parallel"],
    "bench-matmul": ["--m", "--k", "--n", "--repeats", "--min-seconds"],
    "grade": ["--timeout", "--notebook-timeout"],
}
MULTI = {"plan": {"--rampup-batch-size": ("16", "16", "6000")}}
"""Flags that take several numbers, with a working value of each: :func:`flag_cases` puts every hostile value (and
10³⁰ written out) in each place in turn, the others at their working value."""
RUN_FLAGS = ("--seq-len", "--d-model", "--n-layer", "--n-head", "--dropout")
"""Pipeline flags that only matter to a measured run: their cases add ``--run local``."""

_TINY = ["--model", "tiny", "--micro-batch", "1", "--seq-len", "1", "--d-model", "4"]
_TINY_RUN = ["--run", "local", *_TINY]
COMBINED: dict[str, list[str]] = {
    # issue 26: each flag within its bound, the product not
    "2²⁰ micro-batches of one token": ["pipeline", "--pipeline-stages", "2", "--global-batch", "1048576", *_TINY_RUN],
    # 25 heads of width 1: the s² scores outgrow memory while the FLOPs (the three steps of a local run) fit
    "1,024 tokens at width 25 (s² scores)": ["pipeline", "--model", "gpt2-xl", "--n-layer", "8", "--d-model", "25",
                                             "--seq-len", "1024", "--global-batch", "1", "--micro-batch", "1",
                                             "--pipeline-stages", "1", "--precision", "fp32", "--dropout", "0",
                                             "--run", "local"],
    # found probing the same way
    "2¹⁷ micro-batches, one process per stage": ["pipeline", "--pipeline-stages", "2", "--global-batch", "131072",
                                                 "--run", "distributed", *_TINY],
    "16 stages × 1,000 micro-batches": ["pipeline", "--pipeline-stages", "16", "--n-layer", "16", "--global-batch",
                                        "1000", *_TINY_RUN],
    "width 4,000 (weights of gigabytes)": ["pipeline", "--pipeline-stages", "2", "--global-batch", "2", "--run", "local",
                                           *_TINY[:-2], "--d-model", "4000"],
    "2¹⁶ sequences of 64 tokens per micro-batch": ["pipeline", "--pipeline-stages", "2", "--model", "tiny",
                                                   "--global-batch", "131072", "--micro-batch", "65536", "--run",
                                                   "local", "--seq-len", "64"],
    "GPipe simulated at 1,024 stages": ["pipeline", "--schedule", "gpipe", "--pipeline-stages", "1024", "--n-layer",
                                        "1024", "--global-batch", "1", "--micro-batch", "1"],
    "GPipe at 10⁸ stages (one number each)": ["pipeline", "--schedule", "gpipe", "--pipeline-stages", "100000000",
                                              "--n-layer", "100000000", "--global-batch", "1", "--micro-batch", "1"],
    "1F1B at 2²⁰ micro-batches over 1,024 stages": ["pipeline", "--pipeline-stages", "1024", "--n-layer", "1024",
                                                    "--global-batch", "1048576", "--micro-batch", "1"],
    "tune: 240 divisors, nothing fits, every remedy": ["tune", "--model", "gpt2-xl", "--global-batch", "720720",
                                                      "--pipeline-stages", "1", "--device-memory-gib", "0.001"],
    "tune: 2²⁰ sequences over 48 stages": ["tune", "--model", "gpt2-xl", "--global-batch", "1048576",
                                           "--pipeline-stages", "48", "--device-memory-gib", "0.001"],
    "plan: 2²⁰ micro-batches over 48 GPipe stages": ["plan", "--global-batch", "1048576", "--micro-batch", "1",
                                                     "--pipeline-stages", "48", "--schedule", "gpipe"],
    # issue 30: the schedules' chunks and the tensor/context degrees multiply the same way
    "interleaved: 64 chunks × 16 stages × 2²⁰ micro-batches": ["pipeline", "--schedule", "interleaved-1f1b",
                                                              "--virtual-stages", "64", "--pipeline-stages", "16",
                                                              "--n-layer", "1024", "--global-batch", "1048576",
                                                              "--micro-batch", "1"],
    "zero-bubble run over 2¹⁷ micro-batches": ["pipeline", "--schedule", "zero-bubble", "--pipeline-stages", "2",
                                               "--global-batch", "131072", "--run", "distributed", *_TINY],
    "tune: every schedule and v over 1,024 layers": ["tune", "--model", "tiny", "--n-layer", "1024", "--d-model",
                                                     "4", "--global-batch", "720720", "--pipeline-stages", "64"],
    # issue 31: a ramp's stages are one job each
    "plan: a ramp of 2²⁰ stages": ["plan", "--global-batch", "1048576", "--micro-batch", "1",
                                  "--rampup-batch-size", "1", "1", "1000"],
    "plan: a ramp of 1,024 stages to 2²⁰ micro-batches under ZB-V": [
        "plan", "--global-batch", "1048576", "--micro-batch", "1", "--pipeline-stages", "48", "--n-layer", "96",
        "--schedule", "zero-bubble", "--virtual-stages", "2", "--rampup-batch-size", "1024", "1024", str(2**53)],
    "plan: t · p · d · cp = 6·10⁸ devices": ["plan", "--global-batch", "1048576", "--micro-batch", "1",
                                            "--data-parallel", "1024", "--pipeline-stages", "48", "--tensor-parallel",
                                            "25", "--context-parallel", "512", "--sequence-parallel"],
    "bench-matmul: 20,000 values of m": ["bench-matmul", "--m", *map(str, range(1, 20001)), "--k", "64", "--n", "64",
                                         "--repeats", "1", "--min-seconds", "0.000001"],
    "bench-matmul: 2,000 × m = 1": ["bench-matmul", "--m", *["1"] * 2000, "--k", "64", "--n", "64", "--repeats", "1",
                                    "--min-seconds", "0.000001"],
    "bench-matmul: k × n = 2³⁰ (4 GiB)": ["bench-matmul", "--m", "1", "--k", "65536", "--n", "16384", "--repeats", "1",
                                          "--min-seconds", "0.000001"],
    "bench-matmul: m × (k + n) = 2³³": ["bench-matmul", "--m", "65536", "--k", "1", "--n", "65536"],
}
"""Command lines whose flags multiply, by what they try (``--json`` is added when run)."""


@functools.lru_cache(maxsize=None)
def _class_dir() -> str:
    """A class that handed in one non-notebook: grading it starts no kernel, so only the flags cost anything."""
    folder = tempfile.mkdtemp(prefix="batchlab-bounds-")
    Path(folder, "li.docx").write_bytes(b"PK\x03\x04")
    return folder


def flag_cases() -> list[tuple[str, str, str, list[str]]]:
    """(command, flag, value, argv) for every flag of :data:`FLAGS` and value of :data:`HOSTILE`, and every place
    of a :data:`MULTI` flag (its value: the numbers it got)."""
    cases = []
    for command, flags in FLAGS.items():
        for flag in flags:
            base = [_class_dir() if arg == "{class}" else arg for arg in BASE[command]]
            if flag in base:  # replace the base value of this flag (--m takes several: replace them all)
                i = j = base.index(flag)
                j += 1
                while j < len(base) and not base[j].startswith("--"):
                    j += 1
                del base[i:j]
            extra = ["--run", "local"] if command == "pipeline" and flag in RUN_FLAGS else []
            cases += [(command, flag, value, [command, *base, *extra, flag, value]) for value in HOSTILE]
    for command, flags in MULTI.items():
        for flag, working in flags.items():
            for place in range(len(working)):
                for value in [*HOSTILE, str(10**30)]:
                    values = [*working[:place], value, *working[place + 1:]]
                    cases.append((command, flag, " ".join(values), [command, *BASE[command], flag, *values]))
    return cases


@dataclass(frozen=True)
class Answer:
    """What one command line gave: exit status, stdout, stderr and wall seconds."""

    rc: int
    out: str
    err: str
    seconds: float


def answer(argv: list[str]) -> Answer:
    """Run ``python -m batchlab`` with ``argv`` in this process (argparse's exits count as exit statuses)."""
    from batchlab.apps.cli import main

    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exit_:
            rc = exit_.code if isinstance(exit_.code, int) else 1
    return Answer(rc, out.getvalue(), err.getvalue(), time.perf_counter() - start)


def control_values(control) -> list:
    """An explorer control's first and last option, or its maximum, middle, minimum and a value between."""
    if getattr(control, "options", None):
        options = [o[1] if isinstance(o, tuple) else o for o in control.options]
        return [options[0], options[-1]]
    if getattr(control, "max", None) is not None:
        low, high = control.min, control.max
        middle = type(high)((low + high) / 2)
        return [high, middle, low, 7 if isinstance(high, int) else type(high)(low + 0.5 * (high - low) / 3)]
    return []
