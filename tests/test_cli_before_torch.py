"""The calculator checks every value before torch loads (issue 43): a refusal comes in a fraction of a second, not
after the 2–5 s a laptop takes to import torch. Every hostile flag value of :mod:`booktools.hostile` runs in one
process where importing torch is an error the calculator cannot catch: each case is refused there, or it needs
torch to answer — and then, with torch, it is answered, not refused."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from booktools.hostile import COMBINED, answer, flag_cases

_PROBE = r"""
import contextlib, importlib.abc, io, json, sys

class TorchWanted(BaseException):  # not an Exception: main cannot turn it into a refusal
    pass

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise TorchWanted(name)
        return None

sys.meta_path.insert(0, Block())
from batchlab.apps.cli import main

verdicts = []
for argv in json.load(sys.stdin):
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    except SystemExit as exit_:
        rc = exit_.code
    except TorchWanted:
        rc = "torch"
    verdicts.append(rc)
print(json.dumps(verdicts))
"""


def verdicts_without_torch(argvs: list[list[str]]) -> list[int | str]:
    """Each command line's exit status in a process that cannot import torch, or ``"torch"`` where it tried."""
    done = subprocess.run([sys.executable, "-c", _PROBE], input=json.dumps(argvs), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def cases() -> list[list[str]]:
    """Every hostile flag value and combination but grade's (whose refusals the grading tests own)."""
    lines = [argv for command, _, _, argv in flag_cases() if command != "grade"] + list(COMBINED.values())
    return [[*argv, "--json"] for argv in lines]


def test_every_refusal_comes_before_torch_loads():
    argvs = cases()
    verdicts = verdicts_without_torch(argvs)
    assert set(verdicts) <= {0, 2, "torch"}
    wanted = [argv for argv, verdict in zip(argvs, verdicts) if verdict == "torch"]
    # only a benchmark or a measured pipeline run needs torch to answer ...
    assert all(argv[0] == "bench-matmul" or (argv[0] == "pipeline" and "--run" in argv) for argv in wanted), wanted
    assert verdicts.count(2) > 500  # the refusals ran here, without torch
    # ... and, given torch, each of them answers: none was a refusal left for after the import
    for argv in wanted:
        result = answer(argv)
        assert result.rc == 0, (argv, result.err)


def test_the_probe_sees_a_refusal_that_waits_for_torch():
    """The contrary: a device name is checked by the device layer, after torch loads (batchlab.measure.device), so
    the probe reports it as needing torch, and with torch it is a refusal — the verdict the test above forbids."""
    argv = ["device", "--device", "tpu", "--json"]
    assert verdicts_without_torch([argv, ["plan", "--global-batch", "0", "--json"]]) == ["torch", 2]
    assert answer(argv).rc == 2


@pytest.mark.parametrize("argv, reason", [
    (["bench-matmul", "--repeats", "0"], "repeats = 0：必须是 ≥ 1 的整数"),
    (["bench-matmul", "--repeats", "101"], "repeats = 101 超过了 上限 = 100"),
    (["bench-matmul", "--min-seconds", "nan"], "min_seconds = nan：必须在 1e-06 到 1 之间"),
    (["bench-matmul", "--m", "1", "0"], "m = 0：必须是 ≥ 1 的整数"),
    (["bench-matmul", "--k", "-1"], "k = -1：必须是 ≥ 1 的整数"),
    (["bench-matmul", "--n", "65537"], "n = 65537 超过了 上限 = 65536"),
    (["bench-matmul", "--m", "65536", "--k", "65536", "--n", "65536"], "2·m·k·n（最大的 m）"),
    (["pipeline", "--model", "tiny", "--global-batch", "4", "--micro-batch", "2", "--pipeline-stages", "2", "--run",
      "distributed", "--timeout", "0"], "timeout = 0.0：必须在 1 到 3,600 之间"),
])
def test_bench_and_run_flags_are_refused_before_torch_in_their_own_words(argv, reason):
    assert verdicts_without_torch([argv]) == [2]
    result = answer(argv)
    assert result.rc == 2 and reason in result.err


def test_the_cli_holds_the_benchmarks_limits():
    from batchlab.apps.cli import BENCH_LIMITS
    from batchlab.measure import matmul

    assert BENCH_LIMITS == {name: getattr(matmul, name) for name in BENCH_LIMITS}
