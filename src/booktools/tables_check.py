"""Tables as a reader sees them, measured in the browser: characters per rendered line, words kept whole,
commands broken only between options, and no column out of sight on a phone.

`measure(tab)` runs js/measure_tables.js in an already loaded Playwright page (after MathJax and the
widgets have rendered, e.g. inside `booktools.render_check.check_page`) and returns a `TablesReport`.
The script cuts every table cell's text into the lines Chromium drew (each character's box from a
`Range`, grouped by line; a formula is one unit), so the checks read what is on the screen, not a
cell's width (a 3 em cell with its padding still stacked "未/复/现" one character per line):

* **short lines**: a paragraph of a cell that wraps (two lines or more, not at a forced break) with a
  line of at most `MAX_SHORT` characters: "未⏎复⏎现", "序列长⏎度", "gpt2-⏎xl".
* **broken words**: a line break inside a run of Latin letters, digits and signs (a word, a number, a
  model name or a code name: "step_c⏎ommunication", "-⏎-global-batch", "gpt2-⏎xl"), except before a
  dot or an underscore of a code name ("batchlab.formulas⏎.comm"), or between a number and its unit
  ("7.08⏎GiB").
* **split options**: a command broken between an option and its value ("--model⏎gpt2-xl"): a command
  breaks only between options.
* **columns off-screen**: a table column whose cells reach beyond what the reader sees without
  scrolling sideways (the window, cut by every box the table scrolls in), except in a comparison table
  that scrolls in its own box with its first column fixed (`bl-scroll`: `fixed_first_columns` checks it).

`TablesReport.problems()` lists each in Chinese, naming the page's cell (its table, row, column label
and text), so a failing test says what to fix.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from booktools.browser import script
from booktools.layout import CJK_CLASS

MAX_SHORT = 2   # a wrapped line of at most this many characters is a fault
NUMBER = re.compile(r"^[-+−~≈约]?[\d][\d.,]*(?:[×x]10[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)?$")
UNIT = re.compile(r"^(?:%|[A-Za-zµ]+(?:/[A-Za-z]+)?)(?:$|[^A-Za-z])")
OPTION = re.compile(r"^--?[A-Za-z][\w.-]*$")


SCROLLS = ".bl-scroll"   # booktools.tables: a comparison table that scrolls on a phone, first column fixed


def _where(cell: dict) -> str:
    label = f"「{cell['label']}」列" if cell["label"] else f"第 {cell['column'] + 1} 列"
    return f"第 {cell['table'] + 1} 个表格第 {cell['row'] + 1} 行{label}"


def _shown(lines: list[dict]) -> str:
    return "⏎".join(line["text"] for line in lines)


@dataclass
class TablesReport:
    """The tables of one page at one viewport width (see the module docstring)."""
    width: int
    cells: list[dict] = field(default_factory=list, repr=False)
    tables: list[dict] = field(default_factory=list)

    def _wrapped(self):
        """(cell, lines) for every paragraph of a cell that the browser wrapped onto several lines."""
        for cell in self.cells:
            for block in cell["blocks"]:
                if len(block) > 1:
                    yield cell, block

    def short_lines(self) -> list[tuple[dict, list[dict]]]:
        """Wrapped paragraphs with a line of at most MAX_SHORT characters (a forced break is not a wrap)."""
        out = []
        for cell, block in self._wrapped():
            runs, run = [], []
            for line in block:   # the lines between forced breaks wrap on their own
                if line["brokenBefore"] == "forced" and run:
                    runs.append(run)
                    run = []
                run.append(line)
            runs.append(run)
            if any(len(r) > 1 and min(line["chars"] for line in r) <= MAX_SHORT for r in runs):
                out.append((cell, block))
        return out

    def broken_words(self) -> list[tuple[dict, list[dict]]]:
        """Wrapped paragraphs cut inside a word, a number or a name, or between a number and its unit."""
        out = []
        for cell, block in self._wrapped():
            for before, line in zip(block, block[1:]):
                # a code name may break before a dot or an underscore (booktools.tables puts a <wbr> there)
                inside = line["brokenBefore"] == "inside" and line["text"][0] not in "._"
                unit = (line["brokenBefore"] == "space" and NUMBER.match(before["text"].split()[-1])
                        and UNIT.match(line["text"].split()[0]))
                if inside or unit:
                    out.append((cell, block))
                    break
        return out

    def split_options(self) -> list[tuple[dict, list[dict]]]:
        """Wrapped commands with an option on one line and its value on the next."""
        out = []
        for cell, block in self._wrapped():
            for before, line in zip(block, block[1:]):
                last, first = before["text"].split()[-1], line["text"].split()[0]
                if line["brokenBefore"] == "space" and OPTION.match(last) and not first.startswith("-"):
                    out.append((cell, block))
                    break
        return out

    def offscreen_columns(self) -> list[dict]:
        """Tables with a column the reader cannot see without scrolling sideways, but for a comparison table
        that scrolls in its own box with its first column fixed (`bl-scroll`, checked by `fixed_first_columns`)."""
        return [t for t in self.tables if t["offscreen"] and SCROLLS not in t["element"]]

    def problems(self) -> list[str]:
        w = f"{self.width} px 宽"
        out = [f"{w}：{_where(c)}折成每行不超过 {MAX_SHORT} 个字：{_shown(b)}" for c, b in self.short_lines()]
        out += [f"{w}：{_where(c)}在词、数或名字中间断行：{_shown(b)}" for c, b in self.broken_words()]
        out += [f"{w}：{_where(c)}的命令在选项和它的值之间断行：{_shown(b)}" for c, b in self.split_options()]
        out += [f"{w}：表格的第 {', '.join(str(i + 1) for i in t['offscreen'])} 列（共 {t['columns']} 列）"
                f"在屏幕外（可见 {t['visible'][0]}–{t['visible'][1]} px），要左右滚动才看得到：{t['element']}"
                for t in self.offscreen_columns()]
        return out


def fixed_first_columns(tab) -> list[dict]:
    """Each `bl-scroll` table that scrolls in the page loaded in `tab`: its box scrolled to the far right,
    the first column's cells that left the box's left edge (`moved`; empty when the column stays fixed)."""
    return tab.evaluate(script("fixed_first_column"))


def measure(tab, width: int | None = None) -> TablesReport:
    """Measure the tables of the page loaded in the Playwright page `tab` (see the module docstring)."""
    m = tab.evaluate(script("measure_tables"), [CJK_CLASS])
    return TablesReport(width=width or tab.viewport_size["width"], **m)
