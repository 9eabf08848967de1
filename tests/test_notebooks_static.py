"""Static checks on the saved chapter notebooks (no kernel, no build).

The HTML book and the nbval tests both rely on what is *saved* in each notebook:
outputs from one clean top-to-bottom run, no errors, no stray warnings (font
warnings in particular: a missing CJK glyph means boxes in the figures), the
chapter heading, and the ipywidgets state that the static page embeds.

Fix most failures with `scripts/execute-notebooks.sh book/<chapter>.ipynb`.
A cell whose stderr output is intended must carry the cell tag `allow-stderr`.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from booktools import ROOT
from booktools.toc import WIDGET_STATE, WIDGET_VIEW, resolve_entry, toc_entries

FONT_WARNING = re.compile(r"Glyph|missing from (current )?font|findfont", re.IGNORECASE)
SECTION_FROM_NAME = re.compile(r"^(\d+\.\d+)-")


def toc_notebooks() -> list[Path]:
    return [f for e in toc_entries() for f in resolve_entry(e) if f.suffix == ".ipynb"]


NOTEBOOKS = toc_notebooks()
NB_IDS = [str(p.relative_to(ROOT)) for p in NOTEBOOKS]


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _code_cells(nb):
    return [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def test_toc_entries_exist_once():
    entries = toc_entries()
    assert entries, "_toc.yml lists no files"
    problems = []
    for e in entries:
        hits = resolve_entry(e)
        if len(hits) != 1:
            problems.append(f"{e}: {[str(h.relative_to(ROOT)) for h in hits] or 'no such .ipynb/.md'}")
    assert not problems, "toc entries must name exactly one existing file:\n" + "\n".join(problems)
    assert len(set(entries)) == len(entries), f"duplicate toc entries: {entries}"


def test_toc_lists_notebooks():
    assert NOTEBOOKS, "_toc.yml lists no .ipynb chapter"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_notebook_is_valid(path):
    nbformat.validate(_read(path))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_executed_in_order(path):
    """One clean Run-All: non-empty code cells numbered 1, 2, 3, ... top to bottom."""
    nb = _read(path)
    cells = [(i, c) for i, c in _code_cells(nb) if c.source.strip()]
    assert cells, f"{path.name} has no code cells"
    counts = [c.get("execution_count") for _, c in cells]
    unexecuted = [i for (i, c) in cells if c.get("execution_count") is None]
    assert not unexecuted, f"{path.name}: code cells {unexecuted} were never executed"
    assert counts == list(range(1, len(counts) + 1)), (
        f"{path.name}: execution counts {counts} are not 1..{len(counts)} "
        "(re-run the whole notebook from a fresh kernel)")
    for i, c in _code_cells(nb):
        if not c.source.strip():
            assert not c.get("outputs"), f"{path.name}: empty cell {i} has outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_no_error_outputs(path):
    errors = [
        (i, f"{o.get('ename')}: {o.get('evalue')}")
        for i, c in _code_cells(_read(path))
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors, f"{path.name}: saved error outputs {errors}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_no_stderr_outputs(path):
    """No stderr at all unless the cell is tagged `allow-stderr`; font warnings never."""
    bad = []
    for i, c in _code_cells(_read(path)):
        allowed = "allow-stderr" in (c.get("metadata", {}).get("tags") or [])
        for o in c.get("outputs", []):
            if o.get("output_type") != "stream" or o.get("name") != "stderr":
                continue
            text = o.get("text", "")
            if FONT_WARNING.search(text):
                bad.append((i, "font warning", text.strip()[:200]))
            elif not allowed:
                bad.append((i, "stderr (tag the cell `allow-stderr` if intended)", text.strip()[:200]))
    assert not bad, f"{path.name}: " + "\n".join(map(str, bad))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_chapter_heading_matches_file_name(path):
    m = SECTION_FROM_NAME.match(path.name)
    assert m, f"{path.name}: chapter notebooks are named '<4.N>-<slug>.ipynb'"
    section = m.group(1)
    md = [c for c in _read(path).cells if c.cell_type == "markdown"]
    assert md, f"{path.name}: no markdown cell"
    first_line = md[0].source.lstrip().splitlines()[0] if md[0].source.strip() else ""
    assert re.match(rf"^# {re.escape(section)}(\s|$)", first_line), (
        f"{path.name}: first markdown cell must start with '# {section} ', got {first_line!r}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_widget_state_saved(path):
    """Every displayed widget has its model state saved, so the static page can draw it."""
    nb = _read(path)
    views = [
        (i, o["data"][WIDGET_VIEW].get("model_id"))
        for i, c in _code_cells(nb)
        for o in c.get("outputs", [])
        if WIDGET_VIEW in o.get("data", {})
    ]
    if not views:
        return
    state = (nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}) or {}).get("state", {})
    assert state, (f"{path.name}: {len(views)} widget views but no saved widget state in "
                   f"metadata.widgets[{WIDGET_STATE!r}]")
    missing = [(i, mid) for i, mid in views if mid not in state]
    assert not missing, f"{path.name}: widget views without saved state (cell, model_id): {missing}"


# --------------------------------------------------------------------------- figures and tables
# myst-nb wraps a code cell's display outputs in a <figure> with this caption (cell metadata
# "mystnb": {"figure": {"caption": "...", "name": "fig-..."}}). It wraps *every* display output of
# the cell, so a captioned cell must show its figure and nothing else (no table, no widget).
IMAGE = "image/png"
DISPLAY_OUTPUTS = ("display_data", "execute_result")
CJK = re.compile(r"[\u4e00-\u9fff]")
PRINTED_TABLE = re.compile(r"\bprint\(\s*text_table\(")


def _figure_options(cell) -> dict:
    return (cell.get("metadata", {}).get("mystnb") or {}).get("figure") or {}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_figures_have_chinese_captions(path):
    bad = []
    for i, c in _code_cells(_read(path)):
        shown = [o for o in c.get("outputs", []) if o.get("output_type") in DISPLAY_OUTPUTS]
        figure = _figure_options(c)
        if not any(IMAGE in o.get("data", {}) for o in shown):
            if figure:
                bad.append((i, "caption metadata on a cell without a figure"))
            continue
        if not CJK.search(str(figure.get("caption", ""))):
            bad.append((i, 'figure without a Chinese caption (metadata "mystnb": {"figure": {"caption": ...}})'))
        if not str(figure.get("name", "")).startswith("fig-"):
            bad.append((i, 'figure without a name "fig-..." to refer to it by'))
        if len(shown) != 1:
            bad.append((i, f"{len(shown)} display outputs: the caption would wrap all of them; "
                           "give the figure a cell of its own"))
    assert not bad, f"{path.name}: " + "\n".join(map(str, bad))


def test_figure_names_are_unique_across_the_book():
    names = [_figure_options(c).get("name") for p in NOTEBOOKS for _, c in _code_cells(_read(p))]
    names = [n for n in names if n]
    assert len(names) == len(set(names)), f"figure names used twice: {sorted({n for n in names if names.count(n) > 1})}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_tables_are_displayed_not_printed(path):
    """print() turns a table into monospaced text; display() gives the book its HTML <table>."""
    printed = [i for i, c in _code_cells(_read(path)) if PRINTED_TABLE.search(c.source)]
    assert not printed, f"{path.name}: cells {printed} print(text_table(...)); use display(text_table(...))"
