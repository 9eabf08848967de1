"""JavaScript lives in .js files, and every .js file of the repository compiles.

* **Compiles**: each .js file (book/_js/, the build tools' src/booktools/js/, the tests' tests/js/; not
  what is vendored or built: book/_vendor, .cache, _build, .venv, node_modules) is compiled, not run,
  by the headless Chromium the page tests use (V8's parser: `new Function`; Chromium is a test
  dependency that scripts/setup-env.sh installs, Node is not). A file loaded by name for Playwright
  (`booktools.browser.script`) must moreover be one function expression, which is what
  `evaluate`/`wait_for_function` take and call. tests/fixtures/js/ holds files broken on purpose, and
  the same check fails on each.
* **No JavaScript in Python strings** (the rule, on every .py file outside tests/fixtures/): a string
  handed to Playwright to run (`evaluate`, `evaluate_all`, `evaluate_handle`, `eval_on_selector(_all)`,
  `wait_for_function`, `add_init_script`), directly or through a module constant, is one short
  expression (one line, at most 60 characters, no `;`, no `{`, no `function`): anything longer is a
  file under js/, loaded with `script(name)`. Nor may any other string constant (docstrings aside) look
  like JavaScript code (an arrow function with a body, `function (`, `const x =`, `document.query…(`).
  tests/fixtures/js_in_python.py holds what the rule must catch.
"""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from booktools import ROOT, browser as chromium

TESTS_JS = ROOT / "tests" / "js"
SCRIPT_FOLDERS = (chromium.JS, TESTS_JS)  # the scripts Playwright runs, one function expression each
NOT_OURS = {".git", ".venv", ".cache", "_build", "node_modules", "__pycache__", ".hypothesis", ".pytest_cache",
            ".ipynb_checkpoints", ".jupyter_cache"}
VENDORED = ROOT / "book" / "_vendor"
FIXTURES = ROOT / "tests" / "fixtures"


def files(suffixes: tuple[str, ...], skip: tuple[Path, ...] = ()) -> list[Path]:
    """The repository's files ending in ``suffixes``, without what is not ours (NOT_OURS, book/_vendor,
    ``skip``)."""
    found = []
    for folder, dirs, names in os.walk(ROOT):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if d not in NOT_OURS and not d.endswith(".egg-info")
                         and here / d not in (VENDORED, *skip))
        found += [here / n for n in sorted(names) if n.endswith(suffixes)]
    return found


def js_files() -> list[Path]:
    """Every .js file of ours (tests/fixtures/js/ holds broken ones on purpose: see test_a_broken_file_fails)."""
    return files((".js", ".mjs", ".cjs"), (FIXTURES,))


# ----------------------------------------------------------------------------- compiling
def kind(path: Path) -> str:
    """'expression' for a script Playwright runs (loaded by name), else 'script' (a page's own file)."""
    return "expression" if path.parent in SCRIPT_FOLDERS else "script"


@pytest.fixture(scope="module")
def tab(browser):
    context = chromium.offline_context(browser)
    try:
        yield context.new_page()  # about:blank: nothing of ours loaded
    finally:
        context.close()


def compile_errors(tab, kinds: dict[Path, str]) -> dict[str, str]:
    """{file: V8's message} for each file of ``kinds`` ({path: kind}) that does not compile as its kind."""
    check = chromium.script("compile_error", TESTS_JS)
    errors = {p.as_posix(): tab.evaluate(check, [p.read_text(encoding="utf-8"), k]) for p, k in kinds.items()}
    return {p: e for p, e in errors.items() if e is not None}


def test_the_js_files_are_found():
    found = {p.relative_to(ROOT).as_posix() for p in js_files()}
    assert {"book/_js/live.js", "src/booktools/js/measure_layout.js", "tests/js/compile_error.js"} <= found
    assert not [p for p in found if p.startswith(("book/_vendor/", ".cache/", "_build/", ".venv/", "tests/fixtures/"))]
    assert kind(chromium.JS / "measure_layout.js") == "expression" and kind(ROOT / "book/_js/live.js") == "script"


def test_every_js_file_compiles(tab):
    assert compile_errors(tab, {p: kind(p) for p in js_files()}) == {}


def _loaded_by_name() -> set[str]:
    """The names of every ``script("name", …)`` call in the repository's Python."""
    return {call.args[0].value for p in files((".py",), (FIXTURES,))
            for call in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(call, ast.Call) and getattr(call.func, "attr", getattr(call.func, "id", None)) == "script"
            and call.args and isinstance(call.args[0], ast.Constant)}


def test_every_script_loaded_by_name_exists_and_every_tool_script_is_loaded():
    names = _loaded_by_name()
    assert {n for n in names if not any((f / f"{n}.js").is_file() for f in SCRIPT_FOLDERS)} == set()
    assert {p.stem for p in chromium.JS.glob("*.js")} - names == set()
    assert {p.stem for p in TESTS_JS.glob("*.js")} - names == set()


@pytest.mark.parametrize("name, as_kind, error", [
    ("bad_token", "script", "SyntaxError"),
    ("unclosed", "script", "SyntaxError"),
    ("two_statements", "script", None),
    ("two_statements", "expression", "SyntaxError"),  # not one expression: not what evaluate() takes
    ("not_a_function", "expression", "not a function"),
])
def test_a_broken_file_fails(tab, name, as_kind, error):
    """tests/fixtures/js/: files broken on purpose (not among js_files())."""
    path = FIXTURES / "js" / f"{name}.js"
    found = compile_errors(tab, {path: as_kind}).get(path.as_posix())
    assert (found is None) if error is None else (found is not None and error in found), found


# ----------------------------------------------------------------------------- no JavaScript in Python
RUNS_JS = {"evaluate": 0, "evaluate_all": 0, "evaluate_handle": 0, "wait_for_function": 0,
           "add_init_script": 0, "eval_on_selector": 1, "eval_on_selector_all": 1}
JS_KEYWORDS = ("expression", "script")
SHORT = 60
LOOKS_LIKE_JS = re.compile(r"=>\s*\{|\bfunction\s*\w*\s*\(|\b(?:const|let|var)\s+\w+\s*=(?!=)"
                           r"|\bdocument\.(?:querySelector|getElement|createElement)\w*\(")


def short_expression(text: str) -> bool:
    return len(text) <= SHORT and not any(c in text for c in "\n;{") and "function" not in text


def _text(node: ast.AST) -> str | None:
    """The text of a string literal (an f-string's fixed parts), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "…" for v in node.values)
    return None


def js_in_python(source: str, where: str) -> list[str]:
    """Where ``source`` (a Python file) keeps JavaScript in a string (see the module docstring)."""
    tree = ast.parse(source)
    constants = {t.id: _text(n.value) for n in tree.body if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name) and _text(n.value) is not None}
    docstrings = {id(n.value) for n in ast.walk(tree)  # a bare string statement: a (attribute) docstring
                  if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RUNS_JS:
            position = RUNS_JS[node.func.attr]
            args = node.args[position:position + 1] + [k.value for k in node.keywords if k.arg in JS_KEYWORDS]
            for arg in args:
                text = _text(arg) if not isinstance(arg, ast.Name) else constants.get(arg.id)
                if text is not None and not short_expression(text):
                    found.append(f"{where}:{node.lineno}: .{node.func.attr}() is given JavaScript in a string "
                                 f"({text.strip()[:40]!r}…): put it in a js/ file, load it with script(name)")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and LOOKS_LIKE_JS.search(node.value)):
            found.append(f"{where}:{node.lineno}: a string that looks like JavaScript ({node.value.strip()[:40]!r}…)")
    return found


def test_no_javascript_in_python_strings():
    found = [line for p in files((".py",), (FIXTURES,))
             for line in js_in_python(p.read_text(encoding="utf-8"), p.relative_to(ROOT).as_posix())]
    assert found == []


def test_the_rule_catches_javascript_in_strings():
    sample = FIXTURES / "js_in_python.py"
    found = js_in_python(sample.read_text(encoding="utf-8"), "sample")
    caught = {int(line.split(":")[1]) for line in found}
    marked = {n for n, line in enumerate(sample.read_text(encoding="utf-8").splitlines(), 1) if "# caught" in line}
    assert caught == marked, found
