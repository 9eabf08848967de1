"""The Colab set-up cell every chapter starts with: its text lives here, and only here.

Colab has no `binder/` (no apt.txt, no local package), so each chapter's first cell installs what Colab
lacks — the `batchlab` package from the repository and branch named in `_config.yml`, and the Debian
packages in `binder/apt.txt` (the CJK font) — and does nothing, printing nothing, anywhere else (so
nbval's comparison of its empty output passes locally and on Binder).

    .venv/bin/python -m booktools.colab_cell                      # print the cell
    .venv/bin/python -m booktools.colab_cell --apply book/*.ipynb # make it each first cell

`--apply` is idempotent: it inserts the cell, or refreshes it when `_config.yml` or this file changed.
Run it again after changing `repository:` in `_config.yml`; tests/test_publish.py fails until then.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import nbformat
import yaml

from booktools import ROOT

CONFIG = ROOT / "_config.yml"
APT = ROOT / "binder" / "apt.txt"
PACKAGE = "batchlab"
TAG = "colab-setup"
# remove-cell: myst-nb leaves the cell out of the HTML book, where it would only be noise.
TAGS = [TAG, "remove-cell"]
CELL_ID = TAG
# cellView "form": Colab folds the cell to its `@title` line.
METADATA = {"cellView": "form", "tags": TAGS}

# Short on purpose (a setup cell is held to 12 lines like the others): what happens after the package
# is installed — the font, the widget manager — is batchlab.ui.style.prepare_colab, tested there.
TEMPLATE = '''\
# @title 在 Google Colab 上安装本书的 {package} 包和中文字体（其他环境下这一格什么也不做）
# 由 src/booktools/colab_cell.py 生成，请勿手改。
import sys

if "google.colab" in sys.modules:
    import importlib, importlib.util, subprocess
    if importlib.util.find_spec("{package}") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                        {pip_target}], check=True)
        importlib.invalidate_caches()
    from {package}.ui.style import prepare_colab
    prepare_colab([{apt_args}])   # 中文字体，以及 ipywidgets 8 的控件管理器
'''


def repository(config: Path = CONFIG) -> tuple[str, str]:
    """(url, branch) of `repository:` in _config.yml, the one place that names them."""
    data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    repo = data.get("repository") or {}
    url, branch = str(repo.get("url") or "").rstrip("/"), str(repo.get("branch") or "")
    if not url.startswith("https://github.com/") or not branch:
        raise ValueError(f"{config.name} 的 repository.url={url!r}、repository.branch={branch!r}："
                         "需要 https://github.com/<用户>/<仓库> 形式的地址和一个分支名")
    return url, branch


def pip_target(config: Path = CONFIG) -> str:
    """The pip requirement that installs the package from the configured repository and branch."""
    url, branch = repository(config)
    return f"{PACKAGE} @ git+{url}@{branch}"


def apt_packages(apt: Path = APT) -> list[str]:
    """The Debian packages Binder installs (binder/apt.txt), which Colab must install itself."""
    names = [line.split("#", 1)[0].strip() for line in apt.read_text(encoding="utf-8").splitlines()]
    return [n for n in names if n]


def cell_source(config: Path = CONFIG, apt: Path = APT) -> str:
    """The canonical text of the Colab set-up cell."""
    def q(text: str) -> str:  # a Python string literal, in the double quotes the cell uses
        return json.dumps(text, ensure_ascii=False)

    return TEMPLATE.format(package=PACKAGE, pip_target=q(pip_target(config)),
                           apt_args=", ".join(q(p) for p in apt_packages(apt))).rstrip("\n")


def _shift_execution_counts(nb: nbformat.NotebookNode, by: int) -> None:
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.get("execution_count") is not None:
            cell.execution_count += by
        for out in cell.get("outputs", []):
            if out.get("execution_count") is not None:
                out.execution_count += by


def apply(path: Path, source: str) -> bool:
    """Make the set-up cell `path`'s first cell; return whether the file changed.

    A notebook saved from one clean run (execution counts 1..N) stays one: the inserted cell takes
    count 1 and prints nothing, exactly what re-running the notebook would save.
    """
    nb = nbformat.read(path, as_version=4)
    before = nbformat.writes(nb)
    tagged = [i for i, c in enumerate(nb.cells) if TAG in (c.get("metadata", {}).get("tags") or [])]
    if tagged and tagged != [0]:
        raise ValueError(f"{path}：标记为 {TAG} 的格子在位置 {tagged}，它只能是第 0 格且只有一个")
    if tagged:
        cell = nb.cells[0]
        cell.source, cell.outputs = source, []
        cell.metadata = {**cell.metadata, **METADATA, "tags": list(TAGS)}
    else:
        executed = any(c.get("execution_count") is not None for c in nb.cells if c.cell_type == "code")
        if executed:
            _shift_execution_counts(nb, 1)
        cell = nbformat.v4.new_code_cell(source=source, metadata=dict(METADATA, tags=list(TAGS)))
        cell.id = CELL_ID
        cell.execution_count = 1 if executed else None
        nb.cells.insert(0, cell)
    nbformat.validate(nb)
    if nbformat.writes(nb) == before:
        return False
    nbformat.write(nb, path)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.colab_cell",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--apply", nargs="+", type=Path, metavar="NOTEBOOK",
                        help="insert or refresh the cell as the first cell of each notebook")
    args = parser.parse_args(argv)
    source = cell_source()
    if not args.apply:
        print(source)
        return 0
    for path in args.apply:
        print(f"{path}: {'updated' if apply(path, source) else 'already current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
