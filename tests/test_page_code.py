"""Code blocks as a reader sees them (issue 42 item 6): at 1280 px no code block is wider than its box (4.8's
command hid its --rampup-batch-size option, the one the text is about); on a 390 px phone a command wraps, so
it shows whole; a shell command is marked as one (a fence without a language was coloured as Python).
"""
from __future__ import annotations

import re

import nbformat
import pytest

from booktools import browser as chromium, layout
from booktools.toc import resolve_entry, toc_entries
from tests.book_pages import PAGES

SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
COMMAND = re.compile(r"^(?:\$ |python -m |pip |bash |npm |jupyter-book |\.venv/)")
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
WIDE = chromium.script("wide_code")   # the code blocks wider than their box


def fences() -> list[tuple[str, str, str]]:
    """(page, language, first line) of every fenced code block a reader sees in prose: the Markdown pages and
    the notebooks' Markdown cells."""
    out = []
    for entry in toc_entries():
        for path in resolve_entry(entry)[:1]:
            if path.suffix == ".ipynb":
                text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
            else:
                text = path.read_text(encoding="utf-8")
            out += [(entry, lang.strip(), body.split("\n", 1)[0]) for lang, body in FENCE.findall(text)]
    return out


def unmarked_commands(blocks: list[tuple[str, str, str]]) -> list[str]:
    return [f"{page}：命令 `{first[:50]}` 的代码块标为 “{lang or '（无）'}”，应为 bash"
            for page, lang, first in blocks if COMMAND.match(first) and lang not in SHELL_LANGUAGES]


def test_a_shell_command_is_marked_as_one():
    blocks = fences()
    assert any(COMMAND.match(first) for _, _, first in blocks), "no command block found"
    faults = unmarked_commands(blocks)
    assert not faults, "\n".join(faults)
    assert unmarked_commands([("x", "", "python -m batchlab plan --model gpt2-xl")])   # the check can fail


@pytest.mark.parametrize("width", ["1280", "390"])
def test_no_code_block_is_wider_than_its_box(built, browser, width):
    """At 1280 px no code block of any page scrolls sideways; at 390 px no command block does (Python keeps
    its lines and scrolls on a phone). Without page.css 4.8's command runs past its box at 1280 px."""
    selector = "article div.highlight pre" if width == "1280" else (
        "article :is(.highlight-bash, .highlight-shell, .highlight-sh, .highlight-console) pre")
    wide = {}
    context = chromium.offline_context(browser, viewport=layout.VIEWPORTS[width])
    try:
        tab = context.new_page()
        for doc in PAGES:
            tab.goto(built.page(doc).as_uri(), wait_until="load")
            found = tab.evaluate(WIDE, selector)
            if found:
                wide[doc] = found
    finally:
        context.close()
    assert not wide, wide
    if width == "1280":
        context = chromium.offline_context(browser, viewport=layout.VIEWPORTS[width])
        chromium.refuse_stylesheet(context, "page.css")
        try:
            tab = context.new_page()
            tab.goto(built.page("book/4.8-batch-during-training").as_uri(), wait_until="load")
            assert any("--rampup-batch-size" in t or "python -m batchlab plan" in t
                       for t in tab.evaluate(WIDE, selector))
        finally:
            context.close()
