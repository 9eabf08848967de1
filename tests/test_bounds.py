"""Every value a flag or a control accepts is answered or refused with one Chinese line (the rule of untrusted
input), and so is every combination whose product is the cost: a run is refused before it starts when its
estimated cost (:mod:`batchlab.formulas.budget`) is over the budget, and a run that is answered was estimated
within it. The cases are :mod:`booktools.hostile`'s; how long each takes is ``benchmarks/bench.py``'s budget
(``hostile_*``), not a pass criterion here: a SIGALRM at many times that budget only keeps a hang from
holding the suite."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import warnings
from dataclasses import fields

import pytest
import torch  # imported once here: the cases exercise what a value costs, not torch's import

from batchlab.formulas.budget import BENCH_BUDGET, RUN_BUDGET, BenchCost, RunCost, over_budget
from booktools.hostile import COMBINED, answer, control_values, flag_cases

HANG_S = 120
"""A case still running after this long hangs (the slowest answer the CLI accepts is a 10 s benchmark)."""


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread while these cases run: pytest-xdist's other worker shares the two cores, and two
    2-thread torch processes on two cores slow each other down many-fold. Restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class _Hung(Exception):
    pass


def _alarm(*_):
    raise _Hung


def run(argv: list[str]):
    """:func:`booktools.hostile.answer`, failing the case if it has not answered after :data:`HANG_S`."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_S)
    try:
        return answer(argv)
    except _Hung:
        pytest.fail(f"{argv[:12]} hung: no answer after {HANG_S} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def assert_answered_or_refused(result) -> dict | None:
    """The JSON report of an answer, or None for a refusal: exit 2 and one Chinese line, no traceback."""
    if result.rc == 0:
        assert result.out.strip() and "Infinity" not in result.out and "NaN" not in result.out
        return json.loads(result.out)
    assert result.rc == 2 and result.out == "" and result.err.count("\n") == 1, (result.rc, result.err[-500:])
    assert result.err.startswith("python -m batchlab") and "Traceback" not in result.err
    message = result.err.split("error: ", 1)[1]
    assert any("\u4e00" <= ch <= "\u9fff" for ch in message), f"not in Chinese: {result.err}"
    return None


def assert_within_budget(report: dict) -> None:
    """A run that was answered had been estimated within its budget (the cost it reports)."""
    cost = report.get("estimated_cost")
    if report.get("run") in ("local", "distributed"):
        assert over_budget(RunCost(**cost), RUN_BUDGET) == [], cost
    elif "results" in report:  # bench-matmul
        assert over_budget(BenchCost(**cost), BENCH_BUDGET) == [], cost
    else:
        assert cost is None  # formulas and the simulator: no run


@pytest.mark.parametrize("command, flag, value, argv", flag_cases(),
                         ids=[f"{c}{f}={v}" for c, f, v, _ in flag_cases()])
def test_every_flag_value_is_answered_or_refused_in_one_line(command, flag, value, argv):
    report = assert_answered_or_refused(run([*argv, "--json"]))
    if report is not None:
        assert_within_budget(report)


# What each combined case must meet: the quantity named in its refusal, or None where it is answered.
REFUSED_FOR = {
    "2²⁰ micro-batches of one token": "前向和反向操作数",
    "1,024 tokens at width 25 (s² scores)": "估计同时占用的内存",
    "2¹⁷ micro-batches, one process per stage": "前向和反向操作数",
    "16 stages × 1,000 micro-batches": "前向和反向操作数",
    "width 4,000 (weights of gigabytes)": "估计同时占用的内存",
    "2¹⁶ sequences of 64 tokens per micro-batch": "估计训练 FLOPs",
    "GPipe simulated at 1,024 stages": None,
    "GPipe at 10⁸ stages (one number each)": "n_layer = 100000000 超过了 上限",
    "1F1B at 2²⁰ micro-batches over 1,024 stages": None,
    "tune: 240 divisors, nothing fits, every remedy": None,
    "tune: 2²⁰ sequences over 48 stages": None,
    "plan: 2²⁰ micro-batches over 48 GPipe stages": None,
    "interleaved: 64 chunks × 16 stages × 2²⁰ micro-batches": None,
    "zero-bubble run over 2¹⁷ micro-batches": "前向和反向操作数",
    "tune: every schedule and v over 1,024 layers": None,
    "plan: a ramp of 2²⁰ stages": "爬升阶段数 (global_batch − rampup_start) / rampup_increment + 1 = 1048576 超过了 上限",
    "plan: a ramp of 1,024 stages to 2²⁰ micro-batches under ZB-V": None,
    "plan: t · p · d · cp = 6·10⁸ devices": None,
    "bench-matmul: 20,000 values of m": "要测的 m 的个数",
    "bench-matmul: 2,000 × m = 1": "要测的 m 的个数",
    "bench-matmul: k × n = 2³⁰ (4 GiB)": "矩阵占用的内存",
    "bench-matmul: m × (k + n) = 2³³": "矩阵占用的内存",
}


def test_every_combined_case_has_its_expectation():
    assert set(REFUSED_FOR) == set(COMBINED)


@pytest.mark.parametrize("label", list(COMBINED))
def test_flags_that_multiply_are_refused_by_their_cost_or_answered(label):
    report = assert_answered_or_refused(result := run([*COMBINED[label], "--json"]))
    expected = REFUSED_FOR[label]
    if expected is None:
        assert report is not None, result.err
        assert_within_budget(report)
    else:
        assert report is None and expected in result.err, result.err
        if "上限" in expected:
            return
        # the line names the quantity, its estimate, the budget and the flags that reduce it
        assert "，超过了上限 " in result.err and "：请减小 --" in result.err


def test_the_refusal_names_what_reduces_each_quantity():
    from batchlab.formulas.budget import check_budget

    for budget, cls in ((RUN_BUDGET, RunCost), (BENCH_BUDGET, BenchCost)):
        for f in fields(cls):
            over = cls(**{g.name: getattr(budget, g.name) + (1 if g.name == f.name else 0) for g in fields(cls)})
            assert over_budget(over, budget) == [f.name]
            with pytest.raises(ValueError) as refused:
                check_budget(over, budget, {name: f"--{name}" for name in f.metadata["reduce"]})
            line = str(refused.value)
            assert "\n" not in line and line.startswith(f.metadata["label"])
            assert all(f"--{name}" in line for name in f.metadata["reduce"])
        assert check_budget(budget, budget) is budget  # at the budget is within it


def test_a_closed_pipe_is_no_error(tmp_path):
    proc = subprocess.run(f"{sys.executable} -m batchlab tune --global-batch 64 --pipeline-stages 4 "
                          "--data-parallel 2 | head -1", shell=True, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout.startswith("模型")


_NOISE: dict = {}


def _noise_data():
    """A gradient cloud and its statistics from a tiny GPT (measured once; the explorer only reads them)."""
    if not _NOISE:
        from batchlab.formulas.presets import get_config
        from batchlab.measure.data import make_corpus
        from batchlab.measure.model import GPT
        from batchlab.measure.noise import gradient_cloud, minibatch_error, per_sample_grads

        data = make_corpus(64, 16, seed=1)
        grads = per_sample_grads(GPT(get_config("tiny")), data.inputs, data.targets, chunk_size=32)
        sizes = [1, 2, 4, 8, 16, 32, 64]
        _NOISE.update(cloud=gradient_cloud(grads, sizes, num_draws=50, seed=0),
                      stats=minibatch_error(grads, sizes, 50, 0))
    return _NOISE["cloud"], _NOISE["stats"]


def _explorers():
    from batchlab.formulas.roofline import RateCurve
    from batchlab.page.batch import BatchExplorer
    from batchlab.page.memory import MemoryExplorer
    from batchlab.page.noise import NoiseExplorer
    from batchlab.page.tradeoff import TradeoffExplorer
    from batchlab.ui.explorer_widget import ExplorerWidget

    curve = RateCurve((1024, 2048, 4096, 8192), (1e12, 2e12, 2.5e12, 2.6e12), "test")
    return {"BatchExplorer": lambda: ExplorerWidget(BatchExplorer()),
            "MemoryExplorer": lambda: ExplorerWidget(MemoryExplorer()),
            "TradeoffExplorer": lambda: ExplorerWidget(TradeoffExplorer(curve)),
            "NoiseExplorer": lambda: ExplorerWidget(NoiseExplorer(*_noise_data()))}


@pytest.mark.parametrize("name", ["BatchExplorer", "MemoryExplorer", "TradeoffExplorer", "NoiseExplorer"])
def test_every_control_value_is_answered(name):
    """Each control at its own bounds and between them: the explorer redraws or shows one message (how long
    that takes is bench.py's ``widget_extreme_ms``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for control_name in list(_explorers()[name]().controls):
            for value in control_values(_explorers()[name]().controls[control_name]):
                explorer = _explorers()[name]()
                explorer.controls[control_name].value = value
                error = getattr(explorer, "error", None)
                assert error is None or (error.count("\n") == 0 and any("\u4e00" <= ch <= "\u9fff" for ch in error))
