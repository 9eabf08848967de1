"""What a student installs: the wheel built from pyproject.toml holds the package ``batchlab`` and its data,
not the build tools (``src/booktools``); grading's dependencies are the extra ``batchlab[grade]``.

The wheel is built offline from a copy of the project (``pip wheel --no-deps --no-build-isolation
--no-index``, with the setuptools requirements.txt pins), so the test writes nothing into the repository.
"""
from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from batchlab.apps.grade import GRADE_MODULES
from booktools import ROOT
from booktools.student import project_copy

PACKAGE = ROOT / "src" / "batchlab"
# the modules grading imports (its kernel, report and sandbox included)
GRADE_FILES = sorted((PACKAGE / "apps").glob("grade*.py")) + [PACKAGE / "apps" / "sandbox.py"]


def _dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build_wheel(project: Path, out: Path) -> Path:
    """The wheel pip builds from ``project`` into ``out``, offline."""
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(project), "--no-deps", "--no-build-isolation",
                           "--no-index", "--quiet", "--wheel-dir", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (built,) = out.glob("batchlab-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    # a clean copy (booktools.student.project_copy, which the student's install uses too): the whole src/, build
    # tools included (the configuration, not the copy, must leave them out), and no build/ folder
    project = project_copy(tmp_path_factory.mktemp("project") / "batchlab")
    with zipfile.ZipFile(build_wheel(project, tmp_path_factory.mktemp("wheel"))) as archive:
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


def test_the_wheel_carries_the_code_licence(wheel):
    meta = _metadata(wheel)
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    (licence,) = [n for n in wheel.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert wheel.read(licence).decode("utf-8") == (ROOT / "LICENSE").read_text(encoding="utf-8")


def test_a_stale_build_folder_stays_out_of_the_wheel(tmp_path):
    """A file an earlier ``pip install .`` left in build/ goes into the next wheel built in place (setuptools
    packs build/lib as it finds it); the clean copy the wheel is built from has no build/, so it stays out.
    ``/build/`` is ignored by git, so it never shows as a change either."""
    checkout = tmp_path / "checkout"
    project_copy(checkout)
    stale = checkout / "build" / "lib" / "batchlab" / "stale_module.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("PLANTED = True\n", encoding="utf-8")
    in_place = zipfile.ZipFile(build_wheel(checkout, tmp_path / "in-place"))
    assert "batchlab/stale_module.py" in in_place.namelist()   # the trap is real
    clean = zipfile.ZipFile(build_wheel(project_copy(tmp_path / "clean", source=checkout), tmp_path / "clean-wheel"))
    assert "batchlab/stale_module.py" not in clean.namelist()
    ignored = subprocess.run(["git", "check-ignore", "-q", "build/lib/batchlab/stale_module.py"], cwd=ROOT)
    assert ignored.returncode == 0, ".gitignore does not cover build/"


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
