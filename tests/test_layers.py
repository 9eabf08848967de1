"""The package's layers, stated as rules on paths and read from the source with ``ast`` (nothing
imported): a folder's name says its layer, and each rule names what files under it may import.

* ``formulas/`` — plain numbers in, numbers out: imports nothing of batchlab but ``formulas``, and no
  torch, numpy or plotting (so the same files run in a notebook, the CLI and a browser).
* ``lecture/`` — the 原文's claims and the criteria that decide them: formulas only, the same
  external limits.
* ``measure/`` — torch on the reader's device: formulas and lecture below it; never ``ui`` or ``apps``,
  no plotting or widgets.
* ``page/`` — what the published page runs in the reader's browser too (the explorers' declarations,
  colours, numbers): the standard library, formulas, lecture and itself only — no torch, numpy, plotting or
  widgets (Pyodide has none of them here; book/_js/live.js ships this folder whole).
* ``ui/`` — figures, the explorers' widgets, exercises, tables: formulas, lecture and page; never
  ``measure`` (explorers stay torch-free and fast) or ``apps``.
* ``apps/`` (and ``__main__``) — the CLI and grading join the two arms.

Then: no import circle (function-local imports count), no file over 400 lines, one import path per
name (nobody imports a name from a module that only re-imports it), and by running them, that the
formulas, the lecture and the CLI's start answer without torch.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import batchlab
from booktools import ROOT

PACKAGE = Path(batchlab.__file__).parent
NO_TORCH = {"torch", "numpy", "matplotlib", "ipywidgets", "IPython", "PIL", "psutil"}
# folder → (batchlab folders it may import, external packages it may not)
RULES: dict[str, tuple[set[str], set[str]]] = {
    "formulas": ({"formulas"}, NO_TORCH),
    "lecture": ({"formulas", "lecture"}, NO_TORCH),
    "measure": ({"formulas", "lecture", "measure"}, {"matplotlib", "ipywidgets", "IPython"}),
    "page": ({"formulas", "lecture", "page"}, NO_TORCH),
    "ui": ({"formulas", "lecture", "page", "ui"}, {"torch"}),
    "apps": ({"formulas", "lecture", "measure", "page", "ui", "apps"}, set()),
    "__main__": ({"apps"}, set()),
    "__init__": (set(), NO_TORCH),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def folder_of(module: str) -> str:
    """The layer folder of a dotted batchlab module name (``__init__`` for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(source: str, module: str, is_package: bool = False) -> tuple[set[str], set[str]]:
    """(batchlab modules, other top-level packages) that ``source`` imports anywhere in its body,
    function-local imports included; ``module`` is its dotted name."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    internal, external = set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                (internal if alias.name.split(".")[0] == "batchlab" else external).add(
                    alias.name if alias.name.startswith("batchlab") else alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
                name = ".".join(base)
            else:
                name = node.module or ""
            if name.split(".")[0] == "batchlab":
                # `from batchlab.formulas import memory` names a module; `from ... import f` a name in it
                for alias in node.names:
                    candidate = f"{name}.{alias.name}"
                    internal.add(candidate if candidate in MODULES else name)
            else:
                external.add(name.split(".")[0])
    return internal, external


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def violations(module: str, source: str) -> list[str]:
    """What the rules of :data:`RULES` say is wrong with ``module``'s imports."""
    folder = folder_of(module)
    allowed, forbidden = RULES[folder]
    internal, external = imports_of(source, module, MODULES.get(module, Path()).name == "__init__.py")
    found = [f"{module} imports {name}: {folder}/ must not use it" for name in sorted(external & forbidden)]
    for name in sorted(internal - {"batchlab"}):
        if folder_of(name) not in allowed:
            found.append(f"{module} imports {name}: {folder}/ may import only {sorted(allowed)}")
    return found


def test_every_file_is_under_a_layer_folder():
    assert {folder_of(m) for m in MODULES} <= set(RULES), sorted(MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_path_rules(module):
    assert violations(module, MODULES[module].read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("module, source, expect", [
    ("batchlab.formulas.noise", "import torch\n", "imports torch: formulas/ must not use it"),
    ("batchlab.formulas.noise", "def f():\n    import numpy as np\n", "imports numpy: formulas/ must not use it"),
    ("batchlab.formulas.batching", "from batchlab.lecture.case import CASE_STUDY\n", "may import only ['formulas']"),
    ("batchlab.formulas.batching", "from ..measure.model import GPT\n", "imports batchlab.measure.model"),
    ("batchlab.measure.noise", "from batchlab.ui.noise import NoiseExplorer\n", "imports batchlab.ui.noise"),
    ("batchlab.ui.noise", "def f():\n    from batchlab.measure import noise\n", "imports batchlab.measure.noise"),
    ("batchlab.ui.memory", "import torch\n", "imports torch: ui/ must not use it"),
    ("batchlab.page.memory", "def chart():\n    import matplotlib.pyplot as plt\n",
     "imports matplotlib: page/ must not use it"),
    ("batchlab.page.memory", "from batchlab.ui.style import FIGURE_WIDTH\n", "may import only ['formulas', 'lecture', 'page']"),
    ("batchlab.ui.memory", "from batchlab.page.memory import MemoryView\n", None),
    ("batchlab.lecture.audit", "from ..formulas.memory import stage_memory\n", None),
    ("batchlab.apps.cli", "from batchlab.measure.model import GPT\nfrom batchlab.ui import style\n", None),
])
def test_the_rules_catch_what_they_must(module, source, expect):
    found = violations(module, source)
    if expect is None:
        assert found == []
    else:
        assert any(expect in line for line in found), found


def _graph() -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        internal, _ = imports_of(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
        graph[module] = {m for m in internal if m in MODULES and m != module}
    return graph


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` as a list of modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_circle():
    assert find_circle(_graph()) is None


def test_the_circle_finder_finds_one():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def test_no_file_over_400_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}


def _defined(path: Path) -> set[str]:
    """Names a module defines itself (not the ones it imports)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def borrowed_imports(source: str, where: str) -> list[str]:
    """``from batchlab.X import name`` where X does not define ``name`` itself (a re-export)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("batchlab"):
            path = MODULES.get(node.module)
            if path is None:
                continue
            defined = _defined(path)
            for alias in node.names:
                if f"{node.module}.{alias.name}" not in MODULES and alias.name not in defined:
                    found.append(f"{where}: {alias.name} from {node.module}, which only re-imports it")
    return found


def _sources():
    """Every file that imports batchlab: the package, tests, benchmarks and the notebooks' code."""
    import nbformat
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]:
        yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        code = "\n".join(c.source for c in cells if c.cell_type == "code")
        yield str(path.relative_to(ROOT)), "\n".join(l for l in code.splitlines() if not l.lstrip().startswith(("%", "!")))


def test_one_import_path_per_name():
    found = [line for where, source in _sources() for line in borrowed_imports(source, where)]
    assert found == []


def test_a_re_export_is_caught():
    assert borrowed_imports("from batchlab.formulas.memory import GPTConfig\n", "x") != []
    assert borrowed_imports("from batchlab.formulas.presets import GPTConfig\n", "x") == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if folder_of(m) in ("formulas", "lecture", "page"))
                         + ["batchlab.apps.cli"])
def test_torch_free_modules_run_without_torch(module):
    code = (f"import sys, {module}; "
            "print(sorted(m for m in ('torch', 'numpy', 'matplotlib', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
