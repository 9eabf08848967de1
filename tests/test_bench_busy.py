"""bench-matmul on a busy machine (issue 43): it reports how far each shape's repeated samples spread and says, in
one Chinese line, when the machine was too busy to measure — by one criterion (batchlab.measure.matmul.too_busy),
tested here on timings fed to it, quiet and busy, so that the verdict flips."""
from __future__ import annotations

import json

import pytest

import batchlab.measure.matmul as matmul
from batchlab.apps.cli import main
from batchlab.measure.matmul import BUSY_RATIO, spread, too_busy

QUIET = [[1.00e-3, 1.01e-3, 1.03e-3, 1.02e-3, 1.00e-3], [4.0e-3, 4.1e-3, 4.0e-3, 4.2e-3, 4.0e-3]]
"""Two shapes' samples on a quiet machine: within a few per cent of each other."""
INTERRUPTED = [QUIET[0], [4.0e-3, 9.0e-3, 4.0, 4.0, 12.0e-3]]
"""The same, with most samples of the second shape interrupted (two by 1000×, as on a shared 2-core VM): their
median is 3× the best."""


def test_spread_is_the_slowest_over_the_fastest():
    assert spread([1.0, 1.0]) == 1.0 and spread([2.0, 1.0, 1.5]) == 2.0


def test_interrupted_samples_make_the_machine_too_busy_and_quiet_ones_do_not():
    assert too_busy(QUIET, load_average=0.3, cores=2) is None
    said = too_busy(INTERRUPTED, load_average=0.3, cores=2)
    assert said.startswith("机器太忙，测不准：同一形状各次采样的中位数是最快一次的 3.0 倍（超过 1.5 倍）") and "\n" not in said


def test_the_median_decides_not_one_outlier():
    """One interrupted sample among five is what taking the best is for: the median stays near the best."""
    one_slow = [[1.0, 1.0, 1.02, 1.01, 50.0]]
    assert too_busy(one_slow, None, 2) is None
    at_the_ratio = [[1.0, BUSY_RATIO, BUSY_RATIO, BUSY_RATIO, 1.0]]  # the median exactly at the ratio: not past it
    past_the_ratio = [[1.0, 1.01 * BUSY_RATIO, 1.01 * BUSY_RATIO, 2.0, 1.0]]
    assert too_busy(at_the_ratio, None, 2) is None and too_busy(past_the_ratio, None, 2) is not None


def test_a_load_that_fills_every_core_makes_the_machine_too_busy():
    assert too_busy(QUIET, load_average=1.9, cores=2) is None
    said = too_busy(QUIET, load_average=2.0, cores=2)
    assert said == "机器太忙，测不准：开始时的负载 2.0 已占满 2 个 CPU 核，这些数字反映的是别的进程，不是硬件；请在空闲时重测"


def test_one_sample_cannot_disagree():
    assert too_busy([[1.0], [5.0]], None, 2) is None


@pytest.fixture
def fed(monkeypatch):
    """bench-matmul on timings fed to it: ``fed(samples, load)`` makes every shape's samples ``samples[i]`` (in the
    order the shapes are timed) and the load average ``load``."""

    def feed(samples: list[list[float]], load: float) -> None:
        rows = iter(samples)
        monkeypatch.setattr(matmul, "_samples_per_call", lambda fn, device, repeats, min_seconds: (next(rows), 1))
        monkeypatch.setattr(matmul.os, "getloadavg", lambda: (load, load, load))

    return feed


ARGV = ["bench-matmul", "--m", "1", "8", "--k", "64", "--n", "64", "--repeats", "5", "--min-seconds", "0.001",
        "--device", "cpu"]


def test_the_cli_reports_the_spread_and_stays_quiet_on_a_quiet_machine(fed, capsys):
    fed(QUIET, 0.2)
    assert main([*ARGV, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["spread"] == [spread(row) for row in QUIET] and report["busy"] is None
    assert report["samples"] == QUIET and [r["seconds"] for r in report["results"]] == [min(row) for row in QUIET]
    fed(QUIET, 0.2)
    assert main(ARGV) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "波动（最慢/最快）" in captured.out.splitlines()[1]
    rows = captured.out.splitlines()[2:]
    assert len(rows) == 2 and "1.03×" in rows[0] and "1.05×" in rows[1]


def test_the_cli_says_in_one_line_when_the_machine_was_too_busy(fed, capsys):
    fed(INTERRUPTED, 0.2)
    assert main([*ARGV, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["busy"] == too_busy(INTERRUPTED, 0.2, report["cores"]) is not None
    fed(INTERRUPTED, 0.2)
    assert main(ARGV) == 0
    captured = capsys.readouterr()
    assert captured.err == f"python -m batchlab bench-matmul: 注意：{report['busy']}\n"
    assert captured.out.splitlines()[0].startswith("device  cpu")  # the table is still printed, with the warning
