"""The text a reader sees, for the tests that read it: prose, captions, alt text, outputs, table cells with their
column's header, widget labels — from the notebooks as stored and from the built pages. Code a reader runs
(code cells' input, inline literals), formulas (MathJax, $…$) and links' addresses are not reader text.

``notebook_texts`` needs no build; ``page_texts`` reads a built page. Each yields :class:`Seen` pieces.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
from bs4 import BeautifulSoup

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
HIDDEN_OUTPUT = {"remove-output", "remove-cell"}


@dataclass(frozen=True)
class Seen:
    """One piece of reader text: ``where`` it is, the ``text``, and for a table cell its column's ``header``."""

    where: str
    text: str
    header: str | None = None


_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.S)
_CODE = re.compile(r"`[^`\n]*`")
_LINK_URL = re.compile(r"\]\([^)]*\)")
_DIRECTIVE = re.compile(r"^(?::::?\{[^}]*\}.*|:[a-z]+:.*|```.*)$", re.M)
_ROLE = re.compile(r"\{[a-z:]+\}(?=`)")


def markdown_text(source: str) -> str:
    """What a Markdown cell shows as text: without formulas, inline code, roles, link addresses and fences'
    option lines (the Markdown emphasis markers stay: a test looks for the ones that did not render)."""
    text = _ROLE.sub("", source)
    text = _MATH.sub(" ", text)
    text = _CODE.sub(" ", text)
    text = _LINK_URL.sub("]", text)
    return _DIRECTIVE.sub("", text)


def _html_pieces(where: str, markup: str) -> list[Seen]:
    soup = BeautifulSoup(markup, "html.parser")
    return _soup_pieces(where, soup)


def _soup_pieces(where: str, soup) -> list[Seen]:
    pieces = []
    for table in soup.find_all("table"):
        headers = [th.get_text(" ", strip=True) for th in table.find_all("th")]
        for tr in table.find_all("tr"):
            for j, td in enumerate(tr.find_all("td")):
                header = headers[j] if j < len(headers) else None
                pieces.append(Seen(where, td.get_text(" ", strip=True), header))
        pieces += [Seen(where, h) for h in headers]
        table.decompose()
    for img in soup.find_all("img"):
        if img.get("alt"):
            pieces.append(Seen(f"{where} alt", img["alt"]))
    for block in soup.find_all(["p", "li", "dd", "dt", "figcaption", "caption", "pre", "h1", "h2", "h3", "h4",
                                "div", "span", "td", "th", "a"]):
        if block.find(["p", "li", "dd", "dt", "figcaption", "pre", "div", "h1", "h2", "h3", "h4"]):
            continue  # a container: its blocks are read one by one
        text = block.get_text(" ", strip=True)
        if text:
            pieces.append(Seen(where, text))
        block.decompose()
    rest = soup.get_text(" ", strip=True)
    if rest:
        pieces.append(Seen(where, rest))
    return pieces


def notebook_texts(path: Path) -> list[Seen]:
    """The reader text of a chapter as stored: its Markdown cells (``where`` ends in " md") and the outputs the
    book shows (HTML where an output has it, else its plain text); widgets' views are read from the built page."""
    pieces = []
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        where = f"{path.stem}[{index}]"
        if cell.cell_type == "markdown":
            pieces += [Seen(f"{where} md", line) for line in markdown_text(cell.source).splitlines() if line.strip()]
            continue
        if cell.cell_type != "code" or HIDDEN_OUTPUT & set(cell.get("metadata", {}).get("tags", [])):
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                continue
            if "text/html" in data:
                pieces += _html_pieces(where, "".join(data["text/html"]))
                continue
            text = output.get("text") or data.get("text/plain") or ""
            text = "".join(text) if isinstance(text, list) else text
            if text.startswith("<Figure size"):
                continue
            pieces += [Seen(where, line) for line in text.splitlines() if line.strip()]
    return pieces


# A widget model's fields a reader sees: its label, its options' labels, and the text an HTML/Label widget shows.
_WIDGET_FIELDS = ("description", "_options_labels", "value", "placeholder", "tooltip")


def widget_texts(where: str, soup) -> list[Seen]:
    """The labels and text of the page's saved widgets (the frozen explorers)."""
    pieces = []
    for script in soup.find_all("script", type=WIDGET_STATE):
        state = json.loads(script.string or "{}").get("state", {})
        for model in state.values():
            fields = model.get("state", {})
            if model.get("model_name") not in {"HTMLModel", "LabelModel", "HTMLMathModel", "DropdownModel",
                                               "ToggleButtonsModel", "SelectionSliderModel", "IntSliderModel",
                                               "FloatSliderModel", "CheckboxModel", "RadioButtonsModel",
                                               "SelectModel", "ButtonModel", "IntTextModel", "FloatTextModel",
                                               "BoundedIntTextModel", "BoundedFloatTextModel", "TextModel"}:
                continue
            for key in _WIDGET_FIELDS:
                value = fields.get(key)
                values = value if isinstance(value, list) else [value]
                for v in values:
                    if isinstance(v, str) and v.strip():
                        if key == "value" and "<" in v:
                            pieces += _html_pieces(f"{where} widget", v)
                        elif key != "value" or model["model_name"] in {"LabelModel"}:
                            pieces.append(Seen(f"{where} widget", v))
    return pieces


def page_texts(page: Path, root: Path) -> list[Seen]:
    """The reader text of a built page: its main content (code cells' input, inline literals, formulas and
    scripts left out), image alt text and the saved widgets' labels."""
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    where = str(page.relative_to(root))
    pieces = widget_texts(where, soup)
    main = soup.select_one("main") or soup
    for tag in main.select("script, style, div.cell_input, div.highlight, pre.literal-block, code, "
                           "span.math, div.math, mjx-container, .MathJax, a.headerlink, "
                           "dl.py, div.cell_output script"):
        tag.decompose()
    return pieces + _soup_pieces(where, main)
