"""Every value a flag or a control accepts answers within seconds or is refused with one Chinese line
(the rule of untrusted input). For each numeric flag of the calculator, a hostile set of values is fed
in; for each explorer control, its own bounds and values between. Each case is timed."""
from __future__ import annotations

import signal
import tempfile
import time
import warnings
from pathlib import Path

import pytest
import torch  # imported once here: the cases time what a value costs, not torch's import

from batchlab.apps.cli import CLI_BENCH_SECONDS, main

SECONDS = 5.0
# A class that handed in one non-notebook: grading it starts no kernel, so only the flags are timed.
CLASS = tempfile.mkdtemp(prefix="batchlab-bounds-")
Path(CLASS, "li.docx").write_bytes(b"PK\x03\x04")
HOSTILE = ["0", "-1", "1", "3", "7", "1000", str(2**31), str(2**63), "1e30", "1e-10", "nan", "inf", "-inf", "abc"]
BASE = {
    "plan": ["--global-batch", "64", "--micro-batch", "2", "--pipeline-stages", "4", "--data-parallel", "2"],
    "tune": ["--global-batch", "64", "--pipeline-stages", "4", "--data-parallel", "2"],
    "pipeline": ["--stages", "4", "--micro-batches", "8"],
    "bench-matmul": ["--m", "1", "2", "--k", "256", "--n", "256", "--repeats", "2", "--min-seconds", "0.001"],
    "grade": [CLASS],
}
FLAGS = {
    "plan": ["--global-batch", "--micro-batch", "--pipeline-stages", "--data-parallel", "--seq-len", "--grad-accum",
             "--device-memory-gib", "--tokens-per-second", "--peak-tflops"],
    "tune": ["--global-batch", "--micro-batch", "--pipeline-stages", "--data-parallel", "--seq-len",
             "--device-memory-gib", "--peak-tflops", "--bandwidth-tbs"],
    "pipeline": ["--stages", "--micro-batches", "--micro-batch-size", "--seq-len", "--d-model", "--timeout"],
    "bench-matmul": ["--m", "--k", "--n", "--repeats", "--min-seconds"],
    "grade": ["--timeout"],
}
CASES = [(command, flag, value) for command, flags in FLAGS.items() for flag in flags for value in HOSTILE]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread while these cases run: pytest-xdist's other worker shares the two cores, and two
    2-thread torch processes on two cores slow each other down many-fold (the timing, not the value's cost,
    would decide). Restored for the worker's next test file."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class _TooSlow(Exception):
    pass


def _alarm(*_):
    raise _TooSlow


def limit(command: str) -> float:
    """How long a command may take: SECONDS, or for bench-matmul the benchmark length the CLI accepts (it
    refuses a longer one before running it) plus its one-call-per-m duration check."""
    return CLI_BENCH_SECONDS + 2 if command == "bench-matmul" else SECONDS


def answer(argv: list[str], capsys) -> tuple[int, str, str, float]:
    """Run the CLI in this process, failing the case past 2 × its limit (a hang must not hold the suite)."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(2 * limit(argv[0])))
    start = time.perf_counter()
    try:
        try:
            rc = main(argv)
        except SystemExit as exit_:  # argparse refuses by exiting
            rc = exit_.code
    except _TooSlow:
        pytest.fail(f"{argv} did not answer within {2 * limit(argv[0]):g} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    return rc, out, err, time.perf_counter() - start


@pytest.mark.parametrize("command, flag, value", CASES)
def test_every_flag_value_answers_in_seconds_or_is_refused_in_one_line(command, flag, value, capsys):
    base = list(BASE[command])
    if flag in base:  # replace the base value of this flag (--m takes several: replace them all)
        i = base.index(flag)
        j = i + 1
        while j < len(base) and not base[j].startswith("--"):
            j += 1
        del base[i:j]
    if flag == "--run":
        return
    extra = ["--run", "local"] if command == "pipeline" and flag in ("--micro-batch-size", "--seq-len", "--d-model") \
        else []
    rc, out, err, seconds = answer([command, *base, *extra, flag, value, "--json"], capsys)
    assert seconds < limit(command), f"{flag} {value}: {seconds:.1f} s"
    if rc == 0:
        assert out.strip() and "Infinity" not in out and "NaN" not in out
    else:
        assert rc == 2 and out == "" and err.count("\n") == 1, (rc, err)
        assert err.startswith("python -m batchlab") and "Traceback" not in err
        message = err.split("error: ", 1)[1]
        assert any("\u4e00" <= ch <= "\u9fff" for ch in message), f"not in Chinese: {err}"


def test_a_closed_pipe_is_no_error(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(f"{sys.executable} -m batchlab tune --global-batch 64 --pipeline-stages 4 "
                          "--data-parallel 2 | head -1", shell=True, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout.startswith("model")


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
    from batchlab.ui.batch import BatchCalculator
    from batchlab.ui.memory import MemoryExplorer
    from batchlab.ui.noise import NoiseExplorer
    from batchlab.ui.pipeline import TradeoffExplorer

    curve = RateCurve((1024, 2048, 4096, 8192), (1e12, 2e12, 2.5e12, 2.6e12), "test")
    return {"BatchCalculator": BatchCalculator, "MemoryExplorer": MemoryExplorer,
            "TradeoffExplorer": lambda: TradeoffExplorer(curve), "NoiseExplorer": lambda: NoiseExplorer(*_noise_data())}


def _values(control) -> list:
    if hasattr(control, "options") and control.options:
        options = [o[1] if isinstance(o, tuple) else o for o in control.options]
        return [options[0], options[-1]]
    if hasattr(control, "max") and control.max is not None:
        low, high = control.min, control.max
        middle = type(high)((low + high) / 2)
        return [high, middle, low, 7 if isinstance(high, int) else type(high)(low + 0.5 * (high - low) / 3)]
    return []


@pytest.mark.parametrize("name", ["BatchCalculator", "MemoryExplorer", "TradeoffExplorer", "NoiseExplorer"])
def test_every_control_value_answers_in_seconds(name):
    """Each control at its own bounds and between them: the explorer redraws or shows one message."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for control_name in list(_explorers()[name]().controls):
            for value in _values(_explorers()[name]().controls[control_name]):
                explorer = _explorers()[name]()
                start = time.perf_counter()
                explorer.controls[control_name].value = value
                seconds = time.perf_counter() - start
                assert seconds < SECONDS, f"{name}.{control_name} = {value}: {seconds:.1f} s"
                error = getattr(explorer, "error", None)
                assert error is None or (error.count("\n") == 0 and any("\u4e00" <= ch <= "\u9fff" for ch in error))
