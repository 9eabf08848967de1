"""The test suite's own rules (issue 27 §4): a shared helper has one import path, the repository root one name.

tests/ is a package, so a module of it is ``tests.<name>``: a bare ``from test_html import …`` would load a
second module object with caches of its own (the one-build-per-process cache was split that way). The
fixtures come from tests/conftest.py by name, never imported; the root is ``booktools.ROOT``, not
recomputed from a file's path.
"""
from __future__ import annotations

import ast

from booktools import ROOT

TESTS = ROOT / "tests"
FIXTURES = TESTS / "fixtures"  # submissions and samples, some broken on purpose
MODULES = {p.stem for p in TESTS.glob("*.py")} - {"__init__", "conftest"}  # `conftest` is the root's


def import_problems(source: str, where: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
        for name in names:
            if name.split(".")[0] in MODULES:
                found.append(f"{where}:{node.lineno}: import {name} as tests.{name}")
            elif name == "tests.conftest":
                found.append(f"{where}:{node.lineno}: a fixture is named by the test, not imported from {name}")
        if isinstance(node, ast.Attribute) and node.attr in ("parent", "parents") and _own_path(node.value):
            found.append(f"{where}:{node.lineno}: the repository root is booktools.ROOT")
    return found


def _own_path(node: ast.AST) -> bool:
    """``Path(__file__)`` or ``Path(__file__).resolve()``: the file's own path, from which the root is recomputed."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "resolve":
        node = node.func.value
    return (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Path"
            and [getattr(a, "id", None) for a in node.args] == ["__file__"])


def _sources():
    for path in sorted([*TESTS.rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]):
        if FIXTURES not in path.parents:
            yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")



def test_every_test_imports_a_shared_helper_one_way_and_names_the_root_once():
    assert [line for where, source in _sources() for line in import_problems(source, where)] == []


def test_the_rules_catch_a_second_import_path_and_a_recomputed_root():
    assert import_problems("from test_html import built\n", "x") != []
    assert import_problems("import book_pages\n", "x") != []
    assert import_problems("from tests.conftest import built\n", "x") != []
    assert import_problems("ROOT = Path(__file__).resolve().parents[1]\n", "x") != []
    assert import_problems("from tests.book_pages import PAGES\nfrom conftest import ROUND_MARK\n", "x") == []
