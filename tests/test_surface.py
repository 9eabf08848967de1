"""The notebooks' one import (issue 27 §3): ``import batchlab as bl``, then ``bl.<name>``.

``batchlab.SURFACE`` names, for each public name a chapter uses, the one module that defines it. These
tests hold the table to the chapters and to the package: every ``bl.<name>`` a chapter uses is in it,
each entry is defined (not re-imported) where the table says, nothing in the package imports a name
through the surface, and reaching a formula through it does not import torch.
"""
from __future__ import annotations

import ast
import subprocess
import sys

import nbformat
import pytest

import batchlab
from booktools import ROOT
from tests.test_layers import MODULES, _defined, imports_of

CHAPTERS = sorted((ROOT / "book").glob("4.*.ipynb"))


def chapter_code(path) -> str:
    cells = nbformat.read(path, as_version=4).cells
    code = "\n".join(c.source for c in cells if c.cell_type == "code"
                     and "colab-setup" not in c.metadata.get("tags", []))
    return "\n".join("" if l.lstrip().startswith(("%", "!")) else l for l in code.splitlines())


def surface_uses(source: str) -> tuple[set[str], list[str]]:
    """(names used as ``bl.<name>``, other ways ``source`` imports batchlab)."""
    used, other = set(), []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "bl":
            used.add(node.attr)
        elif isinstance(node, ast.Import):
            other += [f"import {a.name} as {a.asname}" for a in node.names
                      if a.name.startswith("batchlab") and (a.name, a.asname) != ("batchlab", "bl")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("batchlab"):
            other.append(f"from {node.module} import …")
    return used, other


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_chapter_imports_batchlab_once_as_bl(path):
    used, other = surface_uses(chapter_code(path))
    assert other == []
    assert used - set(batchlab.__all__) == set(), "bl.<name> not in batchlab.SURFACE"


def test_the_checker_sees_other_imports_and_unknown_names():
    used, other = surface_uses("import batchlab as bl\nfrom batchlab.formulas.job import Job\nbl.nonsense(1)")
    assert other == ["from batchlab.formulas.job import …"] and used == {"nonsense"}


def test_every_surface_name_is_used_by_a_chapter():
    """The surface is what the chapters use, not a second copy of the package."""
    used = set().union(*(surface_uses(chapter_code(p))[0] for p in CHAPTERS))
    assert set(batchlab.__all__) - used == set()


@pytest.mark.parametrize("module, names", sorted(batchlab.SURFACE.items()))
def test_each_name_is_defined_where_the_surface_says(module, names):
    dotted = f"batchlab.{module}"
    for name in names:
        if f"{dotted}.{name}" in MODULES:
            continue   # a module (bl.style)
        assert name in _defined(MODULES[dotted]), f"{name} is not defined in {dotted}"


def test_names_are_unique_across_the_surface():
    names = [n for names in batchlab.SURFACE.values() for n in names]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "batchlab"))
def test_the_package_never_imports_through_the_surface(module):
    internal, _ = imports_of(MODULES[module].read_text(encoding="utf-8"), module,
                             MODULES[module].name == "__init__.py")
    assert "batchlab" not in internal


def test_a_formula_through_the_surface_imports_no_torch():
    code = ("import sys, batchlab as bl; bl.stage_memory, bl.CASE_STUDY, bl.percent; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'stage_memroy'"):
        batchlab.stage_memroy  # noqa: B018
