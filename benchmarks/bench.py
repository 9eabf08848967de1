"""Speed budgets of the book, measured on this machine: `python benchmarks/bench.py [--strict]`.

Budgets live here, not in timed tests: timings on a shared 2-core machine vary by ±10% and spike,
so the test suite asserts behaviour and this script reports speed (``--strict`` exits 1 when a
budget is exceeded, for a quiet machine). Each row: what a reader waits for, measured, budget.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# seconds; a notebook's budget includes starting its kernel
BUDGETS = {
    "cli plan (process start to exit)": 0.5,
    "BatchCalculator update": 0.05,
    "NoiseExplorer batch-size change": 0.1,
    "notebook 4.1 top to bottom": 30.0,
    "notebook 4.2 top to bottom": 20.0,
}


def best_of(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bench_cli() -> float:
    cmd = [sys.executable, "-m", "batchlab", "plan", "--global-batch", "64", "--micro-batch", "2",
           "--pipeline-stages", "4", "--data-parallel", "2", "--json"]
    return best_of(lambda: subprocess.run(cmd, check=True, capture_output=True), repeat=3)


def bench_calculator() -> float:
    from batchlab.widgets import BatchCalculator

    calc = BatchCalculator()
    values = iter(range(2, 10_000, 2))
    return best_of(lambda: setattr(calc.controls["global_batch"], "value", 2 * next(values)), repeat=20)


def bench_explorer() -> float:
    import matplotlib

    matplotlib.use("Agg")
    from batchlab import plotting
    from batchlab.data import make_corpus
    from batchlab.model import TinyGPT, get_config
    from batchlab.noise import gradient_cloud, minibatch_error, per_sample_grads
    from batchlab.widgets import NoiseExplorer

    plotting.setup()  # as the chapter does: Chinese glyphs, no per-glyph warnings
    data = make_corpus(256, 16, seed=0)
    ps = per_sample_grads(TinyGPT(get_config("nano")), data.inputs, data.targets)
    sizes = [1, 2, 4, 8, 16, 32, 64, 128]
    cycle = iter(sizes * 10)
    # Outside a kernel the explorer's Output widget prints its images; keep the report readable.
    with contextlib.redirect_stdout(io.StringIO()):
        explorer = NoiseExplorer(gradient_cloud(ps, sizes), minibatch_error(ps, sizes))
        return statistics.median(
            best_of(lambda: setattr(explorer.controls["batch_size"], "value", next(cycle)), repeat=1)
            for _ in range(20))


def bench_notebook(name: str) -> float:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "book" / name, as_version=4)
    t = time.perf_counter()
    NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(ROOT / "book")}}).execute()
    return time.perf_counter() - t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 if any budget is exceeded")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    measured = {
        "cli plan (process start to exit)": bench_cli(),
        "BatchCalculator update": bench_calculator(),
        "NoiseExplorer batch-size change": bench_explorer(),
        "notebook 4.1 top to bottom": bench_notebook("4.1-definition.ipynb"),
        "notebook 4.2 top to bottom": bench_notebook("4.2-convergence.ipynb"),
    }
    over = [k for k, v in measured.items() if v > BUDGETS[k]]
    if args.json:
        print(json.dumps({k: {"seconds": v, "budget": BUDGETS[k]} for k, v in measured.items()}, indent=2))
    else:
        for k, v in measured.items():
            print(f"{k:<36} {v:8.3f} s   budget {BUDGETS[k]:>6.2f} s   {'OVER' if k in over else 'ok'}")
    return 1 if (over and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
