"""What an explorer is, declared once for its two renderings: the ipywidgets explorer of a notebook
(:class:`batchlab.ui.explorer_widget.ExplorerWidget` turns any declaration into widgets, laid out as its
:class:`NotebookLayout` says, and draws with its ``drawing`` function) and the live explorer of the
published page (``book/_js/live.js`` turns the same declaration into HTML controls, and Pyodide runs
this package in the reader's browser).

An explorer holds its *context* — the data the chapter handed it (a job, a measured rate curve) — and
answers, for the *values* of its controls, one :class:`Panel`: the summary both renderings show word for
word, an ECharts option for the browser's chart (data and a description, no drawing commands) and the
formula's own result, from which the notebook draws its matplotlib figure. Pure Python: no numpy, no
matplotlib, no ipywidgets.
"""
from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from batchlab.page.colours import css_ink
from batchlab.page.numbers import count

__all__ = ["Control", "Panel", "NotebookLayout", "Explorer", "render_error_html", "CHART_FONT", "NARROW_PX", "responsive",
           "axis_top", "legend_rows", "legend_height", "text_px", "labelled", "PHONE_CHART_PX",
           "LIVE_CLASS", "shown", "FIELD_WORDS", "NOTE_CLASS", "Refusal"]

LIVE_CLASS = "batchlab-live"
"""The class of the line that marks an explorer in a page (``batchlab.ui.controls.kernel_notice`` writes
it; src/booktools/live.py looks for it in a notebook, book/_js/live.js in the page)."""

CHART_FONT = '"Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei", sans-serif'
"""The browser charts' font: the page's Chinese font first, so CJK and Latin text are drawn alike."""


NARROW_PX = 520
"""A chart narrower than this (a phone's column) gets the ``narrow`` layout of :func:`responsive`."""
PHONE_CHART_PX = 300
"""The narrowest chart the page draws (a 360 px phone's column, less the explorer's box): a phone layout
leaves room for its legend and title as they wrap at this width."""
CHART_TEXT_PX = 13
"""The charts' text size (their ``textStyle``), in CSS pixels."""
LEGEND_ROW_PX = 24
"""A legend row's height (ECharts: a 14 px symbol or a line of text, 10 px apart)."""
TITLE_LINE_PX = 18
"""A phone title's line height at 12 px (a line of text is 17 px tall: lines nearer would overlap)."""


def text_px(text: str, size: float = CHART_TEXT_PX) -> float:
    """About how wide ``text`` is drawn at ``size`` px: a CJK character is square, others 0.6 of it (a
    little wider than the Latin average, so a row estimated to fit does)."""
    return sum(size if ord(ch) >= 0x2E80 else 0.6 * size for ch in text)


def legend_rows(names: list[str], width: float) -> int:
    """The rows ECharts wraps a legend of ``names`` into across ``width`` px (each entry a 25 px symbol,
    5 px, its name; 10 px between entries; 5 px padding each side)."""
    rows, used = 1, 0.0
    for name in names:
        item = 30 + text_px(name)
        if used and used + 10 + item > width - 10:
            rows, used = rows + 1, item
        else:
            used += (10 if used else 0) + item
    return rows


def axis_top(value: float, ticks: int = 5) -> tuple[float, float]:
    """A value axis' top at or above ``value`` and its tick interval: the interval a round 1, 2 or 5 × 10ⁿ
    giving at most ``ticks`` steps, the top a whole number of them (ECharts labels a top that is not a tick
    beside the tick under it: 80 and 85 overlapped). Nothing to show (0): the top 1 in steps of 0.2."""
    if not value > 0:
        return 1.0, 0.2
    magnitude = 10 ** math.floor(math.log10(value / ticks))
    interval = next(round(m * magnitude, 12) for m in (1, 2, 5, 10) if value / (m * magnitude) <= ticks)
    return round(math.ceil(value / interval - 1e-9) * interval, 10), interval


def labelled(count: int, label_px: float, plot_px: float, keep: int = 0) -> list[bool]:
    """Which of ``count`` evenly spaced labels, each ``label_px`` wide, to show across ``plot_px`` px so that
    none touches the next: every one when they fit, else every k-th, counted from ``keep`` (the one that
    matters most), which is always shown."""
    stride = max(1, math.ceil((label_px + 4) / (plot_px / max(count, 1))))
    return [(i - keep) % stride == 0 for i in range(count)]


def _bottom_room(option: dict, width: float) -> int:
    """The grid's bottom margin that holds, below the plot, the x axis' name and a legend at the bottom
    wrapped at ``width`` px."""
    axis = option.get("xAxis") if isinstance(option.get("xAxis"), dict) else {}
    name = axis.get("nameGap", 15) + 18 if axis.get("name") and axis.get("nameLocation") == "middle" else 28
    legend = option.get("legend")
    if not isinstance(legend, dict) or legend.get("bottom") != 0:
        return name
    return name + legend_height([s["name"] for s in option.get("series", []) if s.get("name")], width)


def legend_height(names: list[str], width: float) -> int:
    """The height a legend of ``names`` at the chart's bottom takes across ``width`` px."""
    return 6 + LEGEND_ROW_PX * legend_rows(names, width)


def responsive(option: dict, narrow: dict | None = None) -> dict:
    """An ECharts option with a media query: ``option`` everywhere, and on a chart narrower than
    :data:`NARROW_PX` its title wrapped and smaller, the plot lower (and ``narrow``'s changes). A chart of
    one plot keeps its x axis' name clear of a legend at the bottom: its grid's bottom margin is made to hold
    them as they wrap on the narrowest desk chart and on the narrowest phone (:data:`PHONE_CHART_PX`), and
    its phone title's lines (:data:`TITLE_LINE_PX`) are held above the plot."""
    title_width = PHONE_CHART_PX - 20
    phone = {"title": {"textStyle": {"fontSize": 12, "width": title_width, "overflow": "break",
                                      "lineHeight": TITLE_LINE_PX}},
             "grid": {"top": 72}}
    grid = option.get("grid")
    if isinstance(grid, dict):
        title = option.get("title", {}).get("text", "") if isinstance(option.get("title"), dict) else ""
        lines = math.ceil(text_px(title, 12) / title_width) if title else 0
        phone["grid"] = {"top": max(72, 8 + lines * TITLE_LINE_PX + 22),
                         "bottom": max(grid.get("bottom", 0), _bottom_room(option, PHONE_CHART_PX))}
        grid = {**grid, "bottom": max(grid.get("bottom", 0), _bottom_room(option, NARROW_PX))}
        if title and text_px(title, 14) > NARROW_PX - 20:  # a title longer than the narrowest desk chart wraps
            option = {**option, "title": {**option["title"], "textStyle": {
                **option["title"].get("textStyle", {}), "width": NARROW_PX - 20, "overflow": "break", "lineHeight": 20}}}
            grid["top"] = max(grid.get("top", 0), 8 + math.ceil(text_px(title, 14) / (NARROW_PX - 20)) * 20 + 22)
        option = {**option, "grid": grid}
    return {"baseOption": option, "media": [{"query": {"maxWidth": NARROW_PX}, "option": {**phone, **(narrow or {})}}]}


NOTE_CLASS = "bl-note"
"""The class of the line that names what else a moved control changed (:meth:`Explorer.moved`)."""

FIELD_WORDS = {
    "num_microbatches": "微批次数 m",
    "n_positions": "最长序列长度",
    "n_layer": "层数",
}
"""Names of a job's derived quantities that a formula's refusal may mention, in the reader's words (the
controls' own names become their labels: :meth:`Explorer.reader_words`)."""


def shown(value: object) -> str:
    """A value as a refusal shows it to a reader: whole numbers in the book's format (1,000,000,000,000,
    not 1000000000000 or 1e12), other numbers as written, text in 「」, nothing as 空的."""
    if value is None or value == [] or value == {}:
        return "空的"
    if isinstance(value, (bool, list, dict)):
        return f"「{json.dumps(value, ensure_ascii=False)[:20]}」"
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 1e18:
        value = int(value)
    if isinstance(value, int):
        return count(value)
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value).strip()
    return "空的" if not text else f"「{text[:20]}」"


def _bound(x: float) -> str:
    return count(int(x)) if float(x).is_integer() else f"{x:g}"


class Refusal(ValueError):
    """A value a control refuses, already in the reader's words (:meth:`Control.refusal`)."""


def render_error_html(message: str) -> str:
    """An explorer's visible message for invalid input (never a traceback)."""
    return f'<div style="color:{css_ink("error")}"><b>配置无效：</b>{html.escape(message)}</div>'


@dataclass(frozen=True)
class Control:
    """One control: its value's name (a keyword of the explorer's formula), the Chinese label a reader
    sees and what it accepts.

    ``kind``: ``"int"`` (a whole number typed in a box, ``minimum``–``maximum``), ``"float"`` (a decimal
    in a box, with ``step``), ``"slider"`` (a whole number dragged over ``minimum``–``maximum``),
    ``"steps"`` (one of ``options``, dragged along a slider), ``"choice"`` (one of ``options`` from a
    list) or ``"buttons"`` (one of a few ``options``, as buttons).
    ``options`` pairs each label with its value. ``wide``: the control takes a whole row.
    """

    name: str
    label: str
    kind: str
    minimum: float | None = None
    maximum: float | None = None
    step: float | None = None
    options: tuple[tuple[str, Any], ...] = ()
    wide: bool = False

    KINDS: ClassVar[tuple[str, ...]] = ("int", "float", "slider", "steps", "choice", "buttons")

    def __post_init__(self) -> None:
        if self.kind not in self.KINDS:
            raise ValueError(f"kind = {self.kind!r}：可选 {', '.join(self.KINDS)}")
        if (self.kind in ("steps", "choice", "buttons")) != bool(self.options):
            raise ValueError(f"{self.name}：选择类控件需要 options，数值类控件不要")

    def accepts(self, value: object) -> bool:
        """Is ``value`` one of the options, or a number of the right kind within the range?"""
        if self.options:
            return any(value == v and type(value) is type(v) or (isinstance(v, float) and isinstance(value, int)
                                                                 and not isinstance(value, bool) and value == v)
                       for _, v in self.options)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        if self.kind in ("int", "slider") and not (isinstance(value, int) or value.is_integer()):
            return False
        return self.minimum <= value <= self.maximum

    def display(self, value: object) -> str:
        """``value`` as this control shows it: its option's label, or the number in the book's format."""
        for label, v in self.options:
            if v == value and type(v) is type(value):
                return label
        if self.options and all(label == str(v) for label, v in self.options) and isinstance(value, int):
            return str(value)  # a value of a slider of plain numbers (a sequence length), written as its stops are
        return shown(value)

    def refusal(self, value: object) -> str:
        """Why this control refuses ``value``, with its Chinese label and the book's numbers."""
        text = shown(value)
        now = f"（现在是{text if text == '空的' or text.startswith('「') else ' ' + text}）"
        if self.options:
            labels = [label for label, _ in self.options]
            listed = "、".join(labels if len(labels) <= 8 else [*labels[:3], "…", *labels[-2:]])
            return f"{self.label}只能选 {listed} 之一{now}"
        what = "整数" if self.kind in ("int", "slider") else "数"
        return f"{self.label}须是 {_bound(self.minimum)} 到 {_bound(self.maximum)} 之间的{what}{now}"

    def as_record(self) -> dict:
        """The declaration as JSON-ready data (for the browser)."""
        return {"name": self.name, "label": self.label, "kind": self.kind, "minimum": self.minimum,
                "maximum": self.maximum, "step": self.step, "options": [list(o) for o in self.options],
                "wide": self.wide}


@dataclass
class Panel:
    """What an explorer shows for one set of values: ``summary_html`` (or the error message when the
    values are refused: then ``error`` holds the rule's wording and ``chart`` is None), the browser's
    ``chart`` (an ECharts option) and ``result``, the formula's answer the notebook draws from."""

    summary_html: str
    chart: dict | None = None
    error: str | None = None
    result: Any = None


@dataclass(frozen=True)
class NotebookLayout:
    """How a notebook lays out an explorer's controls, as data (the page lays them out from
    :attr:`Control.wide`). ``label_px``: the width of every control's label; ``width_px``: every control's
    width (None: the widget's own); ``widths``: (name, px or None) pairs that differ from it; ``rows``: names
    of controls that share a row (each row in the place of its first control; a control in no row has a row
    of its own). Rows stay within the book's 760 px column (tests/test_figures_legible.py measures them)."""

    label_px: int
    width_px: int | None = None
    widths: tuple[tuple[str, int | None], ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()

    def width(self, name: str) -> str | None:
        """The CSS width of the control ``name`` (None: the widget's own)."""
        px = dict(self.widths).get(name, self.width_px)
        return None if px is None else f"{px}px"

    def grouped(self, names: list[str]) -> list[list[str]]:
        """``names`` (in declared order) as rows of controls."""
        shared = {name: row for row in self.rows for name in row}
        out = []
        for name in names:
            row = shared.get(name, (name,))
            if row[0] == name:
                out.append([n for n in row if n in names])
        return out


class Explorer:
    """The declaration of one explorer (a subclass in a module of this folder, named by its ``name``).

    ``values`` are the controls' values by name. ``controls(values)`` lists the controls (their options
    may depend on other values: a model's sequence lengths); ``follow(values, changed)`` returns the values
    after the control ``changed`` moved (a new model resets the controls that depend on it; the default
    keeps them); ``compute(values)`` answers the :class:`Panel`. ``context()`` is the data the explorer was
    made with, as JSON-ready data, and ``from_context`` makes the same explorer again from it.
    """

    name: ClassVar[str] = ""
    layout: ClassVar[NotebookLayout] = NotebookLayout(label_px=150)
    """How the notebook lays out the controls."""
    drawing: ClassVar[str | None] = None
    """The notebook's drawing function, as ``"module.function"`` (None: no figure): called as
    ``function(figure, panel.result)`` with one matplotlib Figure, kept from change to change, it draws the
    result on that figure's Agg canvas; ``layout="phone"`` (the first drawing, on a new figure) draws it for a
    phone's column. Named, not imported: this layer imports no ``batchlab.ui``."""

    def initial_values(self) -> dict:
        raise NotImplementedError

    def controls(self, values: dict) -> list[Control]:
        raise NotImplementedError

    def follow(self, values: dict, changed: str) -> dict:
        return dict(values)

    def follow_reason(self, before: dict, after: dict, changed: str) -> str:
        """Why :meth:`follow` moved other controls, in a few words for the note (empty: no reason given)."""
        return ""

    def moved(self, values: dict, changed: str) -> tuple[dict, str]:
        """The values after the control ``changed`` moved (:meth:`follow`) and the note, as HTML, that names
        every other control it moved, old → new, so nothing changes silently (empty when none moved). Both
        renderings show the note above the summary."""
        after = self.follow(values, changed)
        try:
            controls = {c.name: c for c in self.controls(after)}
        except (ValueError, TypeError, KeyError):  # controls of a refused value: compute() says which
            return after, ""
        items = [f"{c.label} {c.display(values.get(n))} → {c.display(after.get(n))}"
                 for n, c in controls.items() if n != changed and values.get(n) != after.get(n)]
        if not items or changed not in controls:
            return after, ""
        moved = controls[changed]
        reason = self.follow_reason(values, after, changed)
        return after, (f'<div class="{NOTE_CLASS}" style="color:{css_ink("muted")}">{html.escape(moved.label)}改为 '
                       f"{html.escape(moved.display(after.get(changed)))}，随之改变：{html.escape('；'.join(items))}"
                       f"{html.escape(reason)}</div>")

    def reader_words(self, message: str, values: dict) -> str:
        """A formula's refusal in the reader's words: each control's name replaced by its label (and the
        names of :data:`FIELD_WORDS`), whole numbers of five digits or more in the book's format."""
        try:
            words = {c.name: c.label for c in self.controls(values)}
        except (ValueError, TypeError, KeyError):
            words = {}
        words.update(FIELD_WORDS)
        names = "|".join(re.escape(n) for n in sorted(words, key=len, reverse=True))
        message = re.sub(rf"(?<![A-Za-z_])({names})(?![A-Za-z_])", lambda m: words[m.group(1)], message)
        return re.sub(r"(?<![\d.,])\d{5,}(?![\d.])", lambda m: count(int(m.group())), message)

    def refused(self, values: dict, err: ValueError) -> Panel:
        """The panel of refused values: the rule's one line, in the reader's words (:meth:`reader_words`)."""
        message = str(err) if isinstance(err, Refusal) else self.reader_words(str(err), values)
        return Panel(render_error_html(message), error=message)

    def compute(self, values: dict) -> Panel:
        raise NotImplementedError

    def context(self) -> dict:
        raise NotImplementedError

    @classmethod
    def from_context(cls, context: dict) -> "Explorer":
        raise NotImplementedError

    def check_values(self, values: dict) -> dict:
        """``values`` limited to this explorer's controls, each within its declared range or options;
        else ValueError saying, with the control's label, what it takes and what it got
        (:meth:`Control.refusal`; the browser sends what a reader typed)."""
        if not isinstance(values, dict):
            raise ValueError("values：必须是 JSON 对象（名字 → 值）")
        checked = {}
        for control in self.controls(values):
            value = values.get(control.name)
            if not control.accepts(value):
                raise Refusal(control.refusal(value))
            if control.options:  # the option itself (JSON writes the rate 1.0 as 1)
                value = next(v for _, v in control.options if v == value)
            checked[control.name] = int(value) if control.kind in ("int", "slider") else (
                float(value) if control.kind == "float" else value)
        return checked
