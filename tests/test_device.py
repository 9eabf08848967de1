"""The device-layer tests run in a child process.

Faking an NPU means calling ``torch.utils.rename_privateuse1_backend("npu")``, as the real
torch_npu does. That cannot be undone, and afterwards torch treats ``npu`` as the default
accelerator everywhere (``torch.random.fork_rng`` looks for ``torch.npu``), which breaks
unrelated tests sharing the process. So the cases live in ``isolated/device_cases.py``.
"""
import re
import subprocess
import sys

from booktools import ROOT

CASES = ROOT / "tests" / "isolated" / "device_cases.py"

# The one case allowed to skip: resetting the CPU peak needs a writable /proc/self/clear_refs.
ALLOWED_SKIP = "clear_refs"


def test_device_layer_cases_pass_in_their_own_process():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist", str(CASES)],
        capture_output=True, text=True, timeout=300,
    )
    report = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, report
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary), report
    counts = dict((word, int(n)) for n, word in re.findall(r"(\d+) (\w+)", summary))
    assert set(counts) <= {"passed", "skipped", "warning", "warnings"}, report  # no failed, errors, xfailed, ...
    skip_lines = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all(ALLOWED_SKIP in line for line in skip_lines), report
    # -rs folds equal reasons into one line ("SKIPPED [n] ..."); at most that one case may skip.
    assert counts.get("skipped", 0) <= 1, report
