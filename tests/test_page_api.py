"""The API reference (book/api.md): autodoc reads batchlab's docstrings into one page of the book, built with
it under the strict build (tests/test_html.py) and measured at 390 and 1280 px with every other page
(tests/test_page_layout.py). Here: every module of the package is on it, a name a chapter uses has its
anchor and is found by the book's search, and every link inside the built book lands on a page and an
anchor that exist. Also: no chapter reads a file under tests/ (teaching data is package data).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

from booktools import ROOT
from booktools import browser as chromium
from booktools.toc import resolve_entry, toc_entries
from tests.book_pages import PAGES

API_PAGE = "book/api"
API_SOURCE = ROOT / f"{API_PAGE}.md"
AUTOMODULE = re.compile(r"^\.\. automodule:: (\S+)$", re.MULTILINE)
LAYERS = ["formulas", "lecture", "measure", "page", "ui", "apps"]  # bottom to top, the page's order
LOOKED_UP = "batchlab.formulas.memory.stage_memory"  # a name 4.3 uses


def package_modules() -> list[str]:
    """Every module of batchlab but ``__main__`` (importing it runs the CLI); the package itself is the
    notebooks' one import (``import batchlab as bl``) and its table of names."""
    src = ROOT / "src"
    names = [".".join(p.with_suffix("").relative_to(src).parts).removesuffix(".__init__")
             for p in (src / "batchlab").rglob("*.py")]
    return sorted(n for n in names if n != "batchlab.__main__")


def test_every_module_is_on_the_api_page_once_in_layer_order():
    listed = AUTOMODULE.findall(API_SOURCE.read_text(encoding="utf-8"))
    assert len(listed) == len(set(listed)), "a module is documented twice (autodoc: duplicate object warnings)"
    missing, stale = sorted(set(package_modules()) - set(listed)), sorted(set(listed) - set(package_modules()))
    assert not missing and not stale, (
        f"book/api.md：缺少模块 {missing}，或列出了已不存在的模块 {stale}（每个模块一个 automodule，按层排列）")
    assert listed[0] == "batchlab", "book/api.md starts with the notebooks' import, the package itself"
    layers = [name.split(".")[1] for name in listed[1:]]
    assert layers == sorted(layers, key=LAYERS.index), "book/api.md lists the layers bottom to top"


def test_the_api_page_is_in_the_book():
    assert API_PAGE in PAGES


def test_a_name_has_its_anchor_on_the_api_page(built):
    soup = built.soup(API_PAGE)
    entry = soup.find(id=LOOKED_UP)
    assert entry is not None and entry.name == "dt", f"api.html 没有 #{LOOKED_UP}"
    assert "stage_memory" in entry.get_text()
    # every documented module imported (a failed import leaves no module target)
    for module in AUTOMODULE.findall(API_SOURCE.read_text(encoding="utf-8")):
        assert soup.find(id=f"module-{module}") is not None, f"api.html：模块 {module} 没有被 autodoc 读入"


def test_the_search_finds_a_name(built, browser):
    raw = (built.html / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(re.fullmatch(r"\s*Search\.setIndex\((.*)\)\s*;?\s*", raw, re.DOTALL).group(1))
    module, name = LOOKED_UP.rsplit(".", 1)
    assert any(entry[4] == name for entry in index["objects"].get(module, [])), f"搜索索引里没有 {LOOKED_UP}"
    hrefs = chromium.search_results(browser, built.html / "search.html", name)
    assert any(urlsplit(h).path.endswith(f"/{API_PAGE}.html") and urlsplit(h).fragment == LOOKED_UP
               for h in hrefs), f"搜索“{name}”没有找到 {API_PAGE}.html#{LOOKED_UP}：{hrefs}"


def test_every_link_in_the_book_resolves(built):
    """Each relative <a href> of each built page names a file that exists and, with a #fragment, an
    element of that page with that id (the API page's cross-references, the toc, the glossary's links)."""
    ids: dict[Path, set[str]] = {}
    broken = []
    for page in built.pages():
        for a in built.parse(page).find_all("a", href=True):
            parts = urlsplit(a["href"])
            if parts.scheme or parts.netloc or a["href"].startswith("#") and not parts.fragment:
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.is_file():
                broken.append(f"{page.relative_to(built.html)}: {a['href']} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = {e["id"] for e in built.parse(target).find_all(id=True)}
                if unquote(parts.fragment) not in ids[target]:
                    broken.append(f"{page.relative_to(built.html)}: {a['href']} (no such anchor)")
    assert not broken, "broken links:\n" + "\n".join(broken)


# --------------------------------------------------------------------------- teaching data
READS_TESTS = re.compile(r"""(?<![\w.])(?:\.\./|\./)?tests/[\w./-]+""")


def chapter_code() -> dict[str, str]:
    """The code a reader runs: every notebook's code cells and every fenced code block of a Markdown page."""
    out = {}
    for entry in toc_entries():
        for path in resolve_entry(entry)[:1]:
            if path.suffix == ".ipynb":
                cells = nbformat.read(path, as_version=4).cells
                out[entry] = "\n".join(c.source for c in cells if c.cell_type == "code")
            else:
                out[entry] = "\n".join(re.findall(r"^```[^\n]*\n(.*?)^```", path.read_text(encoding="utf-8"),
                                                  re.MULTILINE | re.DOTALL))
    return out


def test_no_chapter_reads_a_file_under_tests():
    """A pip or Colab install has no tests/ folder: a chapter's data comes with the package
    (``batchlab.measure.npu_smi.sample_text``)."""
    found = {entry: READS_TESTS.findall(code) for entry, code in chapter_code().items()}
    assert not {e: f for e, f in found.items() if f}, f"chapters that name a path under tests/: {found}"


@pytest.mark.parametrize("code", ['open("../tests/fixtures/npu-smi-23.0-8cards.txt")',
                                  "Path('tests/fixtures/x.txt').read_text()", "parse(tests/data.csv)"])
def test_the_tests_path_check_sees_a_read(code):
    assert READS_TESTS.findall(code)


# --------------------------------------------------------------------------- the page in Chinese (issue 42 item 7)
MODULE_HEADING = re.compile(r"^### `(\S+)`\n\n(.+)\n\n```\{eval-rst\}\n\.\. automodule:: (\S+)$", re.MULTILINE)
CJK = re.compile(r"[\u3400-\u9fff]")


def test_each_module_says_what_it_does_in_chinese():
    """Under each module's heading, before its English docstring, one line in Chinese says what it is for."""
    text = API_SOURCE.read_text(encoding="utf-8")
    listed = AUTOMODULE.findall(text)
    purposes = {heading: line for heading, line, module in MODULE_HEADING.findall(text) if heading == module}
    layers = {f"batchlab.{layer}" for layer in LAYERS}
    missing = [m for m in listed[1:] if m not in layers and m not in purposes]
    assert not missing, f"book/api.md：这些模块的标题下没有一句中文说明：{missing}"
    not_chinese = {m: line for m, line in purposes.items() if len(CJK.findall(line)) < 6 or len(line) > 90}
    assert not not_chinese, not_chinese


def test_no_value_dumps_on_the_api_page(built):
    """No constant's value and no parameter's default runs longer than booktools.reader_page.LONG_VALUE
    characters in a signature (one ran for several phone screens)."""
    from booktools.reader_page import LONG_VALUE

    soup = built.soup(API_PAGE)
    values = [(dt.get("id"), ann.get_text().strip()) for dt in soup.select("dl.py.data > dt, dl.py.attribute > dt")
              for ann in dt.select("em.property") if ann.get_text().strip().startswith("=")]
    assert values, "no constant's value measured"
    long = [(name, value[:80]) for name, value in values if len(value) > LONG_VALUE + 2]
    defaults = [(d.find_parent("dt").get("id"), d.get_text()) for d in soup.select("dt.sig .default_value")
                if len(d.get_text()) > LONG_VALUE]
    assert not long and not defaults, (long[:5], defaults[:5])
    assert soup.select("dt.sig .default_value"), "no default value measured"


def test_the_value_rule_shortens_what_is_long():
    """short_values on signatures as Sphinx's Python domain writes them: a long constant value is dropped, a
    long default becomes "…", short ones stay."""
    from docutils import nodes
    from sphinx import addnodes

    from booktools.reader_page import LONG_VALUE, short_values

    def desc(value: str, default: str) -> nodes.Element:
        sig = addnodes.desc_signature()
        sig += addnodes.desc_name("X", "X")
        sig += addnodes.desc_annotation("", "", addnodes.desc_sig_space(),
                                        addnodes.desc_sig_punctuation("", "="), addnodes.desc_sig_space(),
                                        nodes.Text(value))
        sig += nodes.inline(default, default, classes=["default_value"])
        node = addnodes.desc()
        node += sig
        node += addnodes.desc_content()
        return node

    long_value, long_default = "{" + ", ".join(f"'k{i}': {i}" for i in range(20)) + "}", "(" + "x, " * 40 + ")"
    assert len(long_value) > LONG_VALUE and len(long_default) > LONG_VALUE
    node = desc(long_value, long_default)
    short_values(None, "py", "data", node[1])
    assert long_value not in node.astext() and "…" in node.astext()
    short = desc("16", "4")
    short_values(None, "py", "data", short[1])
    assert "".join(short.astext().split()) == "X=164" and short[0][-1].astext() == "4"
