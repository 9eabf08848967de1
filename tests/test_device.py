"""The device-layer tests run in a child process.

Faking an NPU means calling ``torch.utils.rename_privateuse1_backend("npu")``, as the real
torch_npu does. That cannot be undone, and afterwards torch treats ``npu`` as the default
accelerator everywhere (``torch.random.fork_rng`` looks for ``torch.npu``), which breaks
unrelated tests sharing the process. So the cases live in ``isolated/device_cases.py``.
"""
import subprocess
import sys
from pathlib import Path

CASES = Path(__file__).parent / "isolated" / "device_cases.py"


def test_device_layer_cases_pass_in_their_own_process():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(CASES)],
        capture_output=True, text=True, timeout=300,
    )
    report = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, report
    assert " passed" in proc.stdout and "failed" not in proc.stdout and "skipped" not in proc.stdout, report
