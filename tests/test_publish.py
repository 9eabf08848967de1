"""Launch routes and publishing: Binder's environment, the Colab set-up cell, the GitHub Pages workflow.

None of Binder, Colab or GitHub can be reached from the tests, so these check what each of them will
read: binder/ against requirements.txt (same versions; torch the CPU build), the Colab cell's behaviour
with the installs patched out, and the workflow against the README's build command.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest
import yaml
from packaging.utils import canonicalize_name
from packaging.version import Version

from booktools import ROOT, colab_cell
from booktools.toc import toc_entries

REQUIREMENTS = ROOT / "requirements.txt"
BINDER = ROOT / "binder"
WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"
SETUP_ENV = ROOT / "scripts" / "setup-env.sh"
BUILD_BOOK = ROOT / "scripts" / "build-book.sh"
CONFIG = ROOT / "_config.yml"
CPU_LOCAL = "cpu"  # torch's local version label on PyTorch's CPU index (2.13.0+cpu)
NOTEBOOKS = [ROOT / f"{e}.ipynb" for e in toc_entries() if (ROOT / f"{e}.ipynb").is_file()]


# --------------------------------------------------------------------------- requirements files
class Requirements:
    """What pip reads from a requirements file, `-r` includes followed."""

    def __init__(self) -> None:
        self.pins: dict[str, list[str]] = {}  # canonical name -> every `==` version given for it
        self.editables: list[str] = []
        self.index_urls: list[str] = []
        self.other: list[str] = []  # lines that pin nothing (a drift risk: pip picks any version)


def read_requirements(path: Path, into: Requirements | None = None) -> Requirements:
    reqs = into or Requirements()
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        option, _, value = line.partition(" ")
        value = value.strip()
        if option in ("-r", "--requirement"):
            read_requirements((path.parent / value).resolve(), reqs)  # relative to the including file
        elif option in ("-e", "--editable"):
            reqs.editables.append(value)
        elif option in ("--extra-index-url", "--index-url", "-i"):
            reqs.index_urls.append(value)
        elif "==" in line and not line.startswith("-"):
            name, version = (s.strip() for s in line.split("==", 1))
            reqs.pins.setdefault(canonicalize_name(name), []).append(version)
        else:
            reqs.other.append(line)
    return reqs


def binder_drift(requirements: Path, binder_requirements: Path) -> list[str]:
    """How Binder's environment would differ from requirements.txt (empty: identical)."""
    base, binder = read_requirements(requirements), read_requirements(binder_requirements)
    problems = [f"requirements.txt pins {name} more than once: {vs}" for name, vs in base.pins.items()
                if len(vs) > 1]
    torch = canonicalize_name("torch")
    for name, (want, *_) in base.pins.items():
        for got in binder.pins.get(name, []):
            if got == want:
                continue
            g, w = Version(got), Version(want)
            if not (name == torch and g.public == w.public and g.local == CPU_LOCAL and w.local is None):
                problems.append(f"Binder pins {name}=={got}, requirements.txt {name}=={want}")
    problems += [f"Binder pins {name}, which requirements.txt does not" for name in binder.pins
                 if name not in base.pins]
    if not any(Version(v).local == CPU_LOCAL for v in binder.pins.get(torch, [])):
        problems.append(f"Binder's torch is not the CPU build: {binder.pins.get(torch)}")
    if not any("download.pytorch.org/whl/cpu" in url for url in binder.index_urls):
        problems.append(f"Binder does not use PyTorch's CPU index: {binder.index_urls}")
    if "." not in binder.editables:
        problems.append(f"Binder does not install the package (-e .): {binder.editables}")
    problems += [f"Binder installs an unpinned requirement: {line}" for line in binder.other]
    return problems


def _python_of_setup_env() -> str:
    """The Python version scripts/setup-env.sh insists on, as "3.11"."""
    m = re.search(r"sys\.version_info\[:2\] != \((\d+), (\d+)\)", SETUP_ENV.read_text(encoding="utf-8"))
    assert m, "scripts/setup-env.sh no longer states its Python version as sys.version_info[:2] != (X, Y)"
    return f"{m.group(1)}.{m.group(2)}"


def _setup_env_font() -> str:
    m = re.search(r"missing\+=\((fonts-[a-z0-9-]+)\)", SETUP_ENV.read_text(encoding="utf-8"))
    assert m, "scripts/setup-env.sh no longer names the font package it installs"
    return m.group(1)


# --------------------------------------------------------------------------- Binder
def test_binder_pins_the_same_versions_as_requirements():
    assert read_requirements(REQUIREMENTS).pins, "requirements.txt pins nothing"
    assert binder_drift(REQUIREMENTS, BINDER / "requirements.txt") == []


MUTATIONS = {
    # name: (edit of the copied binder/requirements.txt, text the drift report must contain)
    "another numpy": (lambda s: s + "numpy==2.4.5\n", "numpy==2.4.5"),
    "older torch": (lambda s: s.replace("torch==2.13.0+cpu", "torch==2.12.0+cpu"), "torch==2.12.0+cpu"),
    "CUDA torch": (lambda s: s.replace("torch==2.13.0+cpu", "torch==2.13.0+cu130"), "torch==2.13.0+cu130"),
    "no CPU index": (lambda s: re.sub(r"(?m)^--extra-index-url.*\n", "", s), "CPU index"),
    "extra package": (lambda s: s + "rich==14.0.0\n", "rich"),
    "unpinned": (lambda s: s + "scipy\n", "unpinned requirement: scipy"),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_binder_drift_is_caught(tmp_path, mutation):
    """A mutated copy of binder/ fails the comparison, naming what drifted."""
    shutil.copy(REQUIREMENTS, tmp_path / "requirements.txt")
    shutil.copytree(BINDER, tmp_path / "binder")
    edit, expected = MUTATIONS[mutation]
    binder_req = tmp_path / "binder" / "requirements.txt"
    original = binder_req.read_text(encoding="utf-8")
    assert binder_drift(tmp_path / "requirements.txt", binder_req) == []  # the copy starts identical
    binder_req.write_text(edit(original), encoding="utf-8")
    assert binder_req.read_text(encoding="utf-8") != original, f"mutation {mutation!r} changed nothing"
    problems = binder_drift(tmp_path / "requirements.txt", binder_req)
    assert any(expected in p for p in problems), problems


def test_requirements_drift_reaches_binder(tmp_path):
    """Binder includes requirements.txt, so a new pin there is Binder's too (and torch must follow)."""
    shutil.copy(REQUIREMENTS, tmp_path / "requirements.txt")
    shutil.copytree(BINDER, tmp_path / "binder")
    text = (tmp_path / "requirements.txt").read_text(encoding="utf-8")
    (tmp_path / "requirements.txt").write_text(text.replace("torch==2.13.0\n", "torch==2.14.0\n"),
                                               encoding="utf-8")
    problems = binder_drift(tmp_path / "requirements.txt", tmp_path / "binder" / "requirements.txt")
    assert any("torch==2.13.0+cpu" in p and "torch==2.14.0" in p for p in problems), problems


def test_binder_system_packages_and_python():
    assert _setup_env_font() in colab_cell.apt_packages(BINDER / "apt.txt")
    runtime = (BINDER / "runtime.txt").read_text(encoding="utf-8").strip()
    assert runtime == f"python-{_python_of_setup_env()}", (
        f"binder/runtime.txt says {runtime!r}; scripts/setup-env.sh requires Python {_python_of_setup_env()}")


# --------------------------------------------------------------------------- Colab set-up cell
def _run_cell(source: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        exec(compile(source, "<colab-setup cell>", "exec"), {"__name__": "__main__"})
    return out.getvalue()


def _forbid(*_args, **_kwargs):
    raise AssertionError("the Colab cell tried to install something outside Colab")


def test_colab_cell_is_a_silent_no_op_elsewhere(monkeypatch):
    """Locally (and on Binder) the cell runs no command, imports nothing heavy and prints nothing."""
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    for name in ("run", "Popen", "call", "check_call", "check_output"):
        monkeypatch.setattr(subprocess, name, _forbid)
    monkeypatch.setattr(os, "system", _forbid)
    monkeypatch.setattr(importlib.util, "find_spec", _forbid)
    assert _run_cell(colab_cell.cell_source()) == ""


class FakeColab:
    """google.colab for one test: records the widget-manager switch; commands are recorded, not run."""

    def __init__(self, monkeypatch, *, batchlab_installed: bool, font_installed: bool) -> None:
        self.commands: list[list[str]] = []
        self.added_fonts: list[str] = []
        self.widget_manager = 0
        # a file matplotlib does not know yet (this machine's real font is registered already)
        font = "/usr/share/fonts/opentype/noto/NotoSansCJK-FreshOnColab.ttc"
        self._fonts = [font] if font_installed else []
        google, colab = types.ModuleType("google"), types.ModuleType("google.colab")
        output = types.ModuleType("google.colab.output")
        output.enable_custom_widget_manager = self._enable
        colab.output, google.colab = output, colab
        for name, module in (("google", google), ("google.colab", colab), ("google.colab.output", output)):
            monkeypatch.setitem(sys.modules, name, module)
        real_find_spec = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (
            real_find_spec(name, *a) if name != colab_cell.PACKAGE or batchlab_installed else None))
        monkeypatch.setattr(subprocess, "run", self._run)
        monkeypatch.setattr(os, "system", _forbid)
        import glob
        monkeypatch.setattr(glob, "glob", lambda pattern, **kw: list(self._fonts))
        from matplotlib import font_manager
        monkeypatch.setattr(font_manager.fontManager, "addfont", self.added_fonts.append)
        self._font = font

    def _enable(self) -> None:
        self.widget_manager += 1

    def _run(self, cmd, *args, **kwargs):
        self.commands.append(list(cmd))
        if cmd[:2] == ["apt-get", "install"]:
            self._fonts = [self._font]  # what installing fonts-noto-cjk leaves on disk
        return subprocess.CompletedProcess(cmd, 0)


def test_colab_cell_installs_what_colab_lacks(monkeypatch):
    colab = FakeColab(monkeypatch, batchlab_installed=False, font_installed=False)
    assert _run_cell(colab_cell.cell_source()) == ""
    repo = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))["repository"]
    pip, update, install = colab.commands
    assert pip[:4] == [sys.executable, "-m", "pip", "install"]
    target = pip[-1]
    assert target.startswith(f"{colab_cell.PACKAGE} @ git+") and repo["url"] in target, target
    assert target.endswith(f"@{repo['branch']}"), target
    assert update[:2] == ["apt-get", "update"]
    assert install[:2] == ["apt-get", "install"] and _setup_env_font() in install, install
    assert colab.added_fonts == [colab._font], "the new font was not registered with matplotlib"
    assert colab.widget_manager == 1


def test_colab_cell_installs_nothing_already_there(monkeypatch):
    colab = FakeColab(monkeypatch, batchlab_installed=True, font_installed=True)
    assert _run_cell(colab_cell.cell_source()) == ""
    assert colab.commands == []
    assert colab.widget_manager == 1


def test_colab_cell_follows_the_configured_repository(tmp_path):
    """A fork edits `repository:` in _config.yml only; the cell's install URL follows it."""
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    config["repository"] = {**config["repository"], "url": "https://github.com/reader/fork", "branch": "dev"}
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    source = colab_cell.cell_source(tmp_path / "_config.yml")
    assert "git+https://github.com/reader/fork@dev" in source
    assert "batch-size-book" not in source
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://example.org/x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="repository.url"):
        colab_cell.cell_source(tmp_path / "_config.yml")


def _first_cell_problem(path: Path) -> str | None:
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0] if nb.cells else None
    if first is None or first.cell_type != "code" or first.source != colab_cell.cell_source():
        return "does not start with the canonical Colab cell"
    if set(first.metadata.get("tags") or []) != set(colab_cell.TAGS):
        return f"first cell's tags are {first.metadata.get('tags')}, want {colab_cell.TAGS}"
    if first.get("outputs"):
        return "the Colab cell has saved outputs (it must print nothing)"
    tagged = [i for i, c in enumerate(nb.cells) if colab_cell.TAG in (c.metadata.get("tags") or [])]
    if tagged != [0]:
        return f"cells tagged {colab_cell.TAG}: {tagged}"
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_starts_with_the_colab_cell(path):
    problem = _first_cell_problem(path)
    assert problem is None, (
        f"{path.name}: {problem}; run .venv/bin/python -m booktools.colab_cell --apply "
        f"{path.relative_to(ROOT)}")


def _counts(nb) -> list[int | None]:
    return [c.get("execution_count") for c in nb.cells if c.cell_type == "code" and c.source.strip()]


@pytest.mark.parametrize("path", NOTEBOOKS[:1], ids=[p.name for p in NOTEBOOKS[:1]])
def test_apply_inserts_once_refreshes_and_keeps_one_clean_run(tmp_path, path):
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    original = nbformat.read(path, as_version=4)
    others = [c for c in original.cells if colab_cell.TAG not in (c.metadata.get("tags") or [])]
    colab_cell.apply(copy, colab_cell.cell_source())
    assert _first_cell_problem(copy) is None
    once = copy.read_bytes()
    assert colab_cell.apply(copy, colab_cell.cell_source()) is False and copy.read_bytes() == once
    nb = nbformat.read(copy, as_version=4)
    assert [c.source for c in nb.cells[1:]] == [c.source for c in others], "other cells changed"
    if all(n is not None for n in _counts(nb)):  # a committed run stays numbered 1..N
        assert _counts(nb) == list(range(1, len(_counts(nb)) + 1)), _counts(nb)
    # a stale cell (e.g. written before a fork changed _config.yml) is refreshed in place
    nb.cells[0].source = nb.cells[0].source.replace("batch-size-book", "old-name")
    nbformat.write(nb, copy)
    assert colab_cell.apply(copy, colab_cell.cell_source()) is True
    assert copy.read_bytes() == once


def test_apply_refuses_a_misplaced_cell(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 4.9 x"),
                                         nbformat.v4.new_code_cell("1", metadata={"tags": colab_cell.TAGS})])
    path = tmp_path / "4.9-x.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(ValueError, match=colab_cell.TAG):
        colab_cell.apply(path, colab_cell.cell_source())


# --------------------------------------------------------------------------- GitHub Pages
def _workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{WORKFLOW} is not a YAML mapping"
    return data


def _steps(data: dict) -> list[tuple[str, dict]]:
    return [(job, step) for job, spec in data["jobs"].items() for step in spec.get("steps", [])]


def _readme_build_command() -> str:
    """README.md's build command: the first command of its ```bash blocks that runs scripts/build-book.sh
    (the student's route comes before it)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.DOTALL)
    assert blocks, "README.md has no ```bash block"
    commands = [line.strip() for b in blocks for line in b.splitlines() if line.strip() and not line.startswith("#")]
    return next((c for c in commands if str(BUILD_BOOK.relative_to(ROOT)) in c), commands[0])


def _build_output_dir() -> str:
    """Where scripts/build-book.sh's `jupyter-book build` writes the HTML (JB1: <out>/_build/html)."""
    script = BUILD_BOOK.read_text(encoding="utf-8")
    m = re.search(r"jupyter-book build (\S+)([^\n]*)", script)
    assert m, "scripts/build-book.sh no longer runs `jupyter-book build`"
    out = re.search(r"--path-output[ =](\S+)", m.group(2))
    assert "cd \"$(dirname \"$0\")/..\"" in script, "build-book.sh no longer builds from the repository root"
    return os.path.normpath(os.path.join(out.group(1) if out else m.group(1), "_build", "html"))


def test_pages_workflow_triggers_and_permissions():
    data = _workflow()
    on = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on:` key as True
    branch = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))["repository"]["branch"]
    assert "main" in on["push"]["branches"] and branch in on["push"]["branches"], on
    assert "workflow_dispatch" in on
    permissions = data.get("permissions") or {}
    assert permissions.get("pages") == "write" and permissions.get("id-token") == "write", permissions


def test_pages_workflow_runs_the_readme_build():
    command = _readme_build_command()
    assert str(BUILD_BOOK.relative_to(ROOT)) in command, f"README's first command is now {command!r}"
    steps = _steps(_workflow())
    runs = [line.strip() for _, s in steps for line in str(s.get("run", "")).splitlines()]
    assert command in runs, f"no workflow step runs {command!r}: {runs}"
    python = [s["with"]["python-version"] for _, s in steps if str(s.get("uses", "")).startswith(
        "actions/setup-python")]
    assert python == [_python_of_setup_env()], python
    font_runs = [r for r in runs if "apt-get install" in r]
    assert font_runs and all(p in font_runs[0] for p in colab_cell.apt_packages(BINDER / "apt.txt")), runs
    binder_index = read_requirements(BINDER / "requirements.txt").index_urls
    pip_index = [s.get("env", {}).get("PIP_EXTRA_INDEX_URL") for _, s in steps if "run" in s and
                 command in s["run"]]
    assert pip_index and pip_index[0] in binder_index, (pip_index, binder_index)


def test_pages_workflow_uploads_the_build_output_and_deploys():
    data = _workflow()
    steps = _steps(data)
    uploads = [(job, s) for job, s in steps if str(s.get("uses", "")).startswith(
        "actions/upload-pages-artifact@")]
    assert len(uploads) == 1, uploads
    build_job, upload = uploads[0]
    assert os.path.normpath(upload["with"]["path"]) == _build_output_dir()
    deploys = [job for job, s in steps if str(s.get("uses", "")).startswith("actions/deploy-pages@")]
    assert len(deploys) == 1, deploys
    needs = data["jobs"][deploys[0]].get("needs")
    assert build_job in ([needs] if isinstance(needs, str) else needs or []), needs
    assert data["jobs"][deploys[0]]["environment"]["name"] == "github-pages"
