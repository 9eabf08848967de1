"""The three layers and their one direction, read from the source with ``ast`` (nothing imported):
math imports neither torch nor anything above it; measurement never imports presentation; every
module of the package is listed in ``batchlab.LAYERS``. Then, by running them, that the math layer and
the CLI really answer without torch."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import batchlab

PACKAGE = Path(batchlab.__file__).parent
RANK = {"math": 0, "measurement": 1, "presentation": 2}
LAYER_OF = {module: layer for layer, modules in batchlab.LAYERS.items() for module in modules}
# What "plain numbers in, numbers out" excludes; measurement may use torch, but no UI toolkit.
FORBIDDEN = {"math": {"torch", "numpy", "matplotlib", "ipywidgets", "IPython", "PIL"},
             "measurement": {"matplotlib", "ipywidgets", "IPython"},
             "presentation": set()}


def module_file(module: str) -> Path:
    path = PACKAGE.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def imports_of(source: str, module: str) -> tuple[set[str], set[str]]:
    """(batchlab modules, other top-level packages) that ``source`` imports anywhere in its body,
    function-local imports included. ``module`` is its dotted name inside batchlab."""
    package = module.split(".") if module_file(module).name == "__init__.py" else module.split(".")[:-1]
    internal, external = set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top, _, rest = alias.name.partition(".")
                (internal.add(rest) if top == "batchlab" and rest else external.add(top))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                top, _, rest = (node.module or "").partition(".")
                if top != "batchlab":
                    external.add(top)
                    continue
                base = rest.split(".") if rest else []
            else:
                base = package[:len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            for alias in node.names:
                # `from . import x` may name a submodule; `from .m import f` names something in m.
                candidate = ".".join(base + [alias.name])
                internal.add(candidate if candidate in LAYER_OF else ".".join(base))
    internal.discard("")
    return internal, external


def violations(module: str, source: str, layer: str) -> list[str]:
    internal, external = imports_of(source, module)
    found = [f"{module} ({layer}) imports {name}" for name in sorted(external & FORBIDDEN[layer])]
    for name in sorted(internal):
        other = LAYER_OF.get(name)
        if other is None:
            found.append(f"{module} imports batchlab.{name}, which batchlab.LAYERS does not list")
        elif RANK[other] > RANK[layer]:
            found.append(f"{module} ({layer}) imports batchlab.{name} ({other}): upward")
    return found


def test_every_module_is_in_the_layer_map():
    on_disk = {".".join(p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
               for p in PACKAGE.rglob("*.py")} - {"__init__"}
    assert on_disk == set(LAYER_OF), f"missing from LAYERS: {on_disk - set(LAYER_OF)}; stale: {set(LAYER_OF) - on_disk}"


@pytest.mark.parametrize("module", sorted(LAYER_OF))
def test_imports_go_one_way(module):
    source = module_file(module).read_text(encoding="utf-8")
    assert violations(module, source, LAYER_OF[module]) == []


@pytest.mark.parametrize("module, source, expect", [
    ("sampling", "import torch\n", "sampling (math) imports torch"),
    ("sampling", "def f():\n    import numpy as np\n", "sampling (math) imports numpy"),
    ("batching", "from .model import GPT\n", "batching (math) imports batchlab.model (measurement): upward"),
    ("noise", "from .ui.noise import NoiseExplorer\n", "noise (measurement) imports batchlab.ui.noise (presentation)"),
    ("noise", "from batchlab.ui import style\n", "noise (measurement) imports batchlab.ui.style (presentation)"),
    ("ui.exercises.chapter_4_1", "from ...model import GPT\nfrom .base import Exercise\n", None),
    ("checks", "from .extra import x\n", "imports batchlab.extra, which batchlab.LAYERS does not list"),
])
def test_the_checker_catches_what_it_must(module, source, expect):
    found = violations(module, source, LAYER_OF[module])
    if expect is None:
        assert found == []
    else:
        assert any(expect in line for line in found), found


@pytest.mark.parametrize("module", [f"batchlab.{m}" for m in batchlab.LAYERS["math"]] + ["batchlab.cli"])
def test_math_layer_and_cli_run_without_torch(module):
    code = (f"import sys, {module}; "
            "print(sorted(m for m in ('torch', 'matplotlib', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
