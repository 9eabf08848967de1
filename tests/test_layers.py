"""The math layer answers without torch, and so does the CLI (a presentation module whose `plan`
must answer instantly): neither may import torch, matplotlib or ipywidgets."""
import subprocess
import sys

import pytest

MATH_MODULES = ["batchlab.checks", "batchlab.presets", "batchlab.batching", "batchlab.schedules", "batchlab.scaling", "batchlab.cli"]


@pytest.mark.parametrize("module", MATH_MODULES)
def test_math_layer_imports_no_torch_and_no_presentation(module):
    code = (f"import sys, {module}; "
            "print(sorted(m for m in ('torch', 'matplotlib', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
