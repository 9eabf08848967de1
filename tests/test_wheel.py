"""What a student installs: the wheel built from pyproject.toml holds the package ``batchlab`` and its data,
not the build tools (``src/booktools``); grading's dependencies are the extra ``batchlab[grade]``.

The wheel is built offline from a copy of the project (``pip wheel --no-deps --no-build-isolation
--no-index``, with the setuptools requirements.txt pins), so the test writes nothing into the repository.
"""
from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from batchlab.apps.grade import GRADE_MODULES
from booktools import ROOT

PACKAGE = ROOT / "src" / "batchlab"
# the modules grading imports (its kernel, report and sandbox included)
GRADE_FILES = sorted((PACKAGE / "apps").glob("grade*.py")) + [PACKAGE / "apps" / "sandbox.py"]


def _dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    project = tmp_path_factory.mktemp("project")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    # the whole src/, build tools included: the configuration, not the copy, must leave them out
    shutil.copytree(ROOT / "src", project / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(project), "--no-deps", "--no-build-isolation",
                           "--no-index", "--quiet", "--wheel-dir", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (built,) = out.glob("batchlab-*.whl")
    with zipfile.ZipFile(built) as archive:
        yield archive


def _metadata(wheel: zipfile.ZipFile):
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return Parser().parsestr(wheel.read(name).decode("utf-8"))


def test_the_wheel_holds_batchlab_only(wheel):
    names = wheel.namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"batchlab", f"batchlab-{_metadata(wheel)['Version']}.dist-info"}, sorted(tops)
    assert not [n for n in names if "booktools" in n]
    # every module of the package, and nothing else that is Python
    modules = {str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py")}
    assert {n for n in names if n.endswith(".py")} == modules


def test_the_teaching_data_is_package_data(wheel):
    samples = sorted(str(p.relative_to(PACKAGE.parent)) for p in (PACKAGE / "measure" / "samples").glob("*.txt"))
    assert samples and set(samples) <= set(wheel.namelist())


def test_the_grade_extra_is_what_grading_imports(wheel):
    meta = _metadata(wheel)
    assert "grade" in meta.get_all("Provides-Extra")
    requires = meta.get_all("Requires-Dist")
    extra = {_dist(re.split(r"[<>=!~;\s\[]", r)[0]) for r in requires if re.search(r"extra\s*==\s*['\"]grade['\"]", r)}
    base = {_dist(re.split(r"[<>=!~;\s\[]", r)[0]) for r in requires if "extra" not in r}
    owners = importlib.metadata.packages_distributions()
    # GRADE_MODULES (what grade checks before it starts) are exactly the extra's distributions
    assert {_dist(d) for m in GRADE_MODULES for d in owners[m]} == extra
    # and every third-party module grading imports comes from batchlab's dependencies or the extra
    imported = set()
    for path in GRADE_FILES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
    third_party = sorted(imported - set(sys.stdlib_module_names) - {"batchlab"})
    assert third_party, "grading imports no third-party module: the scan is broken"
    unowned = {m: owners[m] for m in third_party if not {_dist(d) for d in owners[m]} & (base | extra)}
    assert not unowned, f"grading imports modules no declared dependency provides: {unowned}"


def test_the_build_tools_come_from_the_checkout():
    """booktools is not installed: the editable install of requirements.txt puts src/ on the path."""
    import booktools

    assert Path(booktools.__file__).resolve().parent == ROOT / "src" / "booktools"
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.distribution("booktools")
