"""The matmul benchmark (batchlab.measure.matmul) and its CLI: positive numbers for the asked shapes, a harness
that reports the calls' own time, checked inputs. Small k/n everywhere, to stay fast on a 2-core CPU. Speed
claims (M = 128 several times faster per FLOP than M = 1; the harness as fast as a bare loop) are measured by
benchmarks/bench.py against its budgets, not asserted here."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from batchlab.apps import cli
from batchlab.apps.cli import main
from batchlab.measure.matmul import (DEFAULT_MS, DTYPES, DeviceCeilings, MatmulBench, MatmulTiming,
                                   _cpu_has_fp16_kernel, bench_matmul, efficiency, measure_ceilings)
from batchlab.formulas.precision import ELEMENT_BYTES
from batchlab.formulas.roofline import matmul_flops

ROW_KEYS = {"m", "k", "n", "seconds", "tflops"}


def test_bench_returns_positive_numbers_for_the_requested_shapes():
    report = bench_matmul([1, 3, 16], k=64, n=128, device="cpu", repeats=2, min_seconds=0.002)
    assert isinstance(report, MatmulBench) and report.threads == torch.get_num_threads()
    assert report.device == "cpu" and report.dtype == "float32" and report.device_name
    assert (report.repeats, report.min_seconds) == (2, 0.002)
    assert [(r.m, r.k, r.n) for r in report.results] == [(1, 64, 128), (3, 64, 128), (16, 64, 128)]
    for row in report.results:
        assert isinstance(row, MatmulTiming) and row.seconds > 0 and row.tflops > 0
        assert row.tflops == pytest.approx(matmul_flops(row.m, 64, 128) / row.seconds / 1e12)
    record = report.as_record()  # what --json prints: plain dicts and lists
    assert [set(r) for r in record["results"]] == [ROW_KEYS] * 3 and record["results"][0]["m"] == 1
    assert json.loads(json.dumps(record)) == record
    fractions = efficiency(report.results)
    assert max(fractions) == 1.0 and all(0 < f <= 1 for f in fractions)


def test_dtypes_match_the_roofline_table_and_bfloat16_runs():
    assert set(DTYPES) == set(ELEMENT_BYTES) and DEFAULT_MS == (1, 2, 4, 8, 16, 32, 64, 128)
    assert cli._BENCH_MS == DEFAULT_MS  # the CLI's copy, kept torch-free for --help
    report = bench_matmul([2], k=32, n=32, dtype="bfloat16", device="cpu", repeats=1, min_seconds=0.001)
    assert report.dtype == "bfloat16" and report.results[0].tflops > 0


def test_float16_runs_or_is_refused_clearly():
    if _cpu_has_fp16_kernel():
        assert bench_matmul([2], 32, 32, "float16", "cpu", 1, 0.001).results[0].seconds > 0
    else:  # no oneDNN fp16 kernel: torch's fallback is ~1000× slower than fp32, not a hardware curve
        with pytest.raises(ValueError, match="dtype = 'float16'：这台 CPU 没有 float16 矩阵乘法内核"):
            bench_matmul([2], 32, 32, "float16", "cpu")


def test_the_harness_reports_the_calls_own_time(monkeypatch):
    """What the harness adds is nothing: on a clock that only the calls advance (1 ms each, and every third
    timed region stalled by 50 ms, as a busy machine does), it reports 1 ms per call, from samples of calls that
    together last at least min_seconds. (That it agrees with a bare loop on a real CPU, and that the lecture's
    M = 128 runs several times faster per FLOP than M = 1, are speed claims: benchmarks/bench.py reports them.)"""
    import batchlab.measure.matmul as matmul

    clock = {"now": 0.0, "regions": 0}

    class Region:
        seconds = None

        def __enter__(self):
            self.start = clock["now"]
            return self

        def __exit__(self, *exc):
            clock["regions"] += 1
            if clock["regions"] % 3 == 0:
                clock["now"] += 0.05
            self.seconds = clock["now"] - self.start

    calls = []

    def one_call():
        clock["now"] += 1e-3
        calls.append(1)

    monkeypatch.setattr(matmul, "timed_region", lambda device: Region())
    monkeypatch.setattr(matmul, "synchronize", lambda device: None)
    seconds, per_sample = matmul._seconds_per_call(one_call, torch.device("cpu"), repeats=5, min_seconds=0.1)
    assert seconds == pytest.approx(1e-3) and per_sample * 1e-3 >= 0.1
    assert len(calls) >= 5 * per_sample  # five samples of that many calls (plus the calibration)


def test_measure_ceilings_gives_both_roofs_and_their_ridge():
    ceilings = measure_ceilings("cpu", size=256, copy_mib=8, repeats=2, min_seconds=0.002)
    assert isinstance(ceilings, DeviceCeilings) and ceilings.device == "cpu" and ceilings.matmul_size == 256
    assert ceilings.peak_flops > 0 and ceilings.memory_bandwidth > 0 and ceilings.copy_seconds > 0
    assert ceilings.copy_bytes == 2 * 8 * 2**20
    assert ceilings.ridge_point == pytest.approx(ceilings.peak_flops / ceilings.memory_bandwidth)
    assert ceilings.peak_flops == pytest.approx(matmul_flops(256, 256, 256) / ceilings.matmul_seconds)
    assert ceilings.as_record()["ridge_point"] == ceilings.ridge_point


@pytest.mark.parametrize("call, message", [
    (lambda: bench_matmul([1], dtype="int8"), "dtype = 'int8'：只能取 'float32', 'bfloat16', 'float16' 之一"),
    (lambda: bench_matmul([], device="cpu"), r"ms = \[\]：至少要给一个 m"),
    (lambda: bench_matmul([0], device="cpu"), "m = 0：必须是 ≥ 1 的整数"),
    (lambda: bench_matmul([1], k=-1, device="cpu"), "k = -1：必须是 ≥ 1 的整数"),
    (lambda: bench_matmul([1], device="cpu", min_seconds=0), "min_seconds = 0：必须在 1e-06 到 1 之间"),
    (lambda: measure_ceilings("cpu", dtype="int8"), "dtype = 'int8'"),
    (lambda: efficiency([]), r"results = \[\]"),
])
def test_bad_input_raises_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "batchlab", "bench-matmul", *args], capture_output=True, text=True)


def test_cli_json_schema():
    proc = run_cli("--m", "1", "8", "--k", "256", "--n", "256", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert {"device", "dtype", "results"} <= set(report) and report["dtype"] == "float32"
    assert [r["m"] for r in report["results"]] == [1, 8]
    for row in report["results"]:
        assert set(row) == ROW_KEYS and (row["k"], row["n"]) == (256, 256) and row["seconds"] > 0


def test_cli_bad_dtype_exits_2_with_one_line():
    proc = run_cli("--dtype", "int8")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "dtype = 'int8'" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_text_table(capsys):
    assert main(["bench-matmul", "--m", "2", "4", "--k", "64", "--n", "64", "--device", "cpu",
                 "--repeats", "1", "--min-seconds", "0.001"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("device  cpu") and "TFLOP/s" in lines[1] and "of best" in lines[1]
    assert [line.split()[:3] for line in lines[2:]] == [["2", "64", "64"], ["4", "64", "64"]]
    assert any(line.endswith("100.0%") for line in lines[2:])


def test_a_hopeless_benchmark_is_refused_after_the_probe_without_timing_the_large_shapes(monkeypatch):
    """The duration bound comes from a small probe call: a request whose lower bound is already past the limit
    never multiplies its large shapes (bf16 on a CPU took minutes to calibrate before it was refused)."""
    import batchlab.measure.matmul as matmul

    rows = []
    real = torch.matmul

    def counting(a, b, **kwargs):
        rows.append(a.shape[0])
        return real(a, b, **kwargs)

    monkeypatch.setattr(matmul.torch, "matmul", counting)
    with pytest.raises(ValueError, match="超过了上限 1e-06 s"):
        bench_matmul([512, 1024], k=64, n=64, device="cpu", repeats=1, min_seconds=1e-6, max_seconds=1e-6)
    assert rows[-2:] == [64, 64] and max(rows) == 64  # the probe (kernel selection + a timed call), nothing larger
    rows.clear()
    assert bench_matmul([512, 1024], k=64, n=64, device="cpu", repeats=1, min_seconds=1e-6).results
    probe = rows.index(64)
    assert rows[probe:probe + 4] == [64, 64, 512, 1024]  # then each m once, smallest first, before the samples


def test_the_cli_multiplies_in_the_training_dtype_of_the_device():
    from batchlab.measure.matmul import training_dtype

    assert training_dtype("cpu") == "float32" and training_dtype(torch.device("meta")) == "bfloat16"
