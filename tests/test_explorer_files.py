"""What an explorer is made of (issue 27): its declaration, one module of ``batchlab/page`` named by the
explorer, and one drawing function in ``batchlab/ui`` — nothing else of the package names it. The notebook
side is the one generic widget (``ui/explorer_widget.py``, which names no explorer) applied to the
declaration; the page finds the declaration by itself (``page/web.py`` lists none). A chapter reaches the
explorer as ``bl.<Name>``, one entry in the notebooks' table of names (``batchlab/__init__.py``). So
adding an explorer touches these files and no other.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from batchlab.page import web
from booktools import ROOT

SRC = ROOT / "src"
# explorer (the one name of its declaration) → the files of src/ it is made of
FILES = {
    "BatchExplorer": {"batchlab/page/batch.py", "batchlab/__init__.py"},
    "MemoryExplorer": {"batchlab/page/memory.py", "batchlab/ui/memory.py", "batchlab/__init__.py"},
    "TradeoffExplorer": {"batchlab/page/tradeoff.py", "batchlab/ui/pipeline.py", "batchlab/__init__.py"},
    "NoiseExplorer": {"batchlab/page/noise.py", "batchlab/ui/noise.py", "batchlab/__init__.py"},
}


def naming(pattern: str, root: Path = SRC) -> set[str]:
    """The files under ``root`` (src/: the package and the build tools) whose text matches ``pattern``."""
    found = re.compile(pattern)
    return {p.relative_to(root).as_posix() for p in sorted(root.rglob("*.py"))
            if found.search(p.read_text(encoding="utf-8"))}


def made_of(cls: type) -> set[str]:
    """The files that name the explorer's declaration (its class or its module) or its drawing function."""
    module = cls.__module__
    patterns = [rf"\b{cls.__name__}\b", rf"\b{re.escape(module)}\b"]
    if cls.drawing is not None:
        patterns.append(rf"\b{cls.drawing.rsplit('.', 1)[1]}\b")
    files = set().union(*(naming(p) for p in patterns))
    return files - {"batchlab/page/__init__.py"}  # the package's docstring may name a module


def test_every_explorer_of_the_page_is_listed_here():
    assert {cls.__name__ for cls in web.EXPLORERS.values()} == set(FILES)


@pytest.mark.parametrize("name", sorted(FILES))
def test_an_explorer_is_its_declaration_and_one_drawing_function(name):
    cls = next(c for c in web.EXPLORERS.values() if c.__name__ == name)
    declared_in = cls.__module__.replace(".", "/") + ".py"
    assert declared_in == f"batchlab/page/{cls.name}.py"  # one module, named by the explorer
    if cls.drawing is not None:  # the drawing function lives in ui and is where the declaration says
        module, function = cls.drawing.rsplit(".", 1)
        drawn_in = module.replace(".", "/") + ".py"
        assert module.startswith("batchlab.ui.") and f"def {function}(" in (SRC / drawn_in).read_text(encoding="utf-8")
    assert made_of(cls) == FILES[name]


def test_the_generic_parts_name_no_explorer():
    generic = ["batchlab/ui/explorer_widget.py", "batchlab/ui/controls.py", "batchlab/page/web.py",
               "batchlab/page/spec.py"]
    for path in generic:
        text = (SRC / path).read_text(encoding="utf-8")
        named = [n for n in FILES if n in text] + [c.drawing for c in web.EXPLORERS.values()
                                                     if c.drawing and c.drawing in text]
        assert named == [], (path, named)


def test_the_count_can_fail(tmp_path):
    """A file that names an explorer outside its own files is counted."""
    (tmp_path / "batchlab").mkdir()
    (tmp_path / "batchlab" / "extra.py").write_text("from batchlab.page.memory import MemoryExplorer\n")
    (tmp_path / "batchlab" / "other.py").write_text("import batchlab.page.numbers\n")
    assert naming(r"\bMemoryExplorer\b", tmp_path) == {"batchlab/extra.py"}
