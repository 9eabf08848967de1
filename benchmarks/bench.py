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
sys.path.insert(0, str(ROOT / "tests"))
from booktoc import toc_entries  # noqa: E402  (the one _toc.yml reader, shared with the tests)

NOTEBOOK_BUDGET = 20.0  # seconds per chapter, kernel start included


def best_of(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bench_cli() -> float:
    from batchlab.case import CASE_STUDY

    cmd = [sys.executable, "-m", "batchlab", "plan", "--global-batch", str(CASE_STUDY.global_batch),
           "--micro-batch", str(CASE_STUDY.micro_batch_size), "--pipeline-stages", str(CASE_STUDY.pipeline_stages),
           "--data-parallel", str(CASE_STUDY.data_parallel), "--json"]
    return best_of(lambda: subprocess.run(cmd, check=True, capture_output=True), repeat=3)


def bench_calculator() -> float:
    from batchlab.ui.batch import BatchCalculator

    calc = BatchCalculator()
    values = iter(range(2, 10_000, 2))
    return best_of(lambda: setattr(calc.controls["global_batch"], "value", 2 * next(values)), repeat=20)


def bench_explorer() -> float:
    import matplotlib

    matplotlib.use("Agg")
    from batchlab.data import make_corpus
    from batchlab.model import GPT, get_config
    from batchlab.noise import gradient_cloud, minibatch_error, per_sample_grads
    from batchlab.ui import style
    from batchlab.ui.noise import NoiseExplorer

    style.setup()  # as the chapter does: Chinese glyphs, no per-glyph warnings
    data = make_corpus(256, 16, seed=0)
    ps = per_sample_grads(GPT(get_config("pico")), data.inputs, data.targets)
    sizes = [1, 2, 4, 8, 16, 32, 64, 128]
    with contextlib.redirect_stdout(io.StringIO()):
        explorer = NoiseExplorer(gradient_cloud(ps, sizes), minibatch_error(ps, sizes))
    return _median_change(explorer, "batch_size", sizes)


def _median_change(explorer, control: str, values: list) -> float:
    """Median seconds of 20 changes of ``explorer.controls[control]``, cycling through ``values``."""
    cycle = iter(values * 20)
    # Outside a kernel an explorer's Output widget prints its images; keep the report readable.
    with contextlib.redirect_stdout(io.StringIO()):
        return statistics.median(
            best_of(lambda: setattr(explorer.controls[control], "value", next(cycle)), repeat=1)
            for _ in range(20))


def bench_memory_explorer() -> float:
    import matplotlib

    matplotlib.use("Agg")
    from batchlab.ui import style
    from batchlab.ui.memory import MemoryExplorer

    style.setup()
    with contextlib.redirect_stdout(io.StringIO()):
        explorer = MemoryExplorer()
    return _median_change(explorer, "micro_batch_size", [1, 2, 4, 8, 16, 32])


def bench_tradeoff_explorer() -> float:
    import matplotlib

    matplotlib.use("Agg")
    from batchlab.throughput import RateCurve
    from batchlab.ui import style
    from batchlab.ui.pipeline import TradeoffExplorer

    style.setup()
    curve = RateCurve((1024, 2048, 4096, 8192), (1e12, 2e12, 2.5e12, 2.6e12), "bench")
    with contextlib.redirect_stdout(io.StringIO()):
        explorer = TradeoffExplorer(curve)
    return _median_change(explorer, "micro_batch_size", [1, 2, 4, 8, 16, 32])


def bench_notebook(path: Path) -> float:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    t = time.perf_counter()
    NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(ROOT / "book")}}).execute()
    return time.perf_counter() - t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 if any budget is exceeded")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    # (what a reader waits for, its budget in seconds, how to measure it): each name written once
    rows = [
        ("cli plan (process start to exit)", 0.5, bench_cli),
        ("BatchCalculator update", 0.05, bench_calculator),
        ("NoiseExplorer batch-size change", 0.1, bench_explorer),
        ("MemoryExplorer micro-batch change", 0.1, bench_memory_explorer),
        ("TradeoffExplorer micro-batch change", 0.1, bench_tradeoff_explorer),
    ]
    for entry in toc_entries():
        notebook = ROOT / f"{entry}.ipynb"
        if notebook.is_file():
            rows.append((f"notebook {notebook.stem} top to bottom", NOTEBOOK_BUDGET,
                         lambda notebook=notebook: bench_notebook(notebook)))
    report = {name: {"seconds": measure(), "budget": budget} for name, budget, measure in rows}
    over = [name for name, r in report.items() if r["seconds"] > r["budget"]]
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name, r in report.items():
            print(f"{name:<44} {r['seconds']:8.3f} s   budget {r['budget']:>6.2f} s   {'OVER' if name in over else 'ok'}")
    return 1 if (over and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
