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
from dataclasses import dataclass
from typing import Any, ClassVar

from batchlab.formulas.checks import between, one_of, whole
from batchlab.page.colours import ERROR_COLOUR

__all__ = ["Control", "Panel", "NotebookLayout", "Explorer", "render_error_html", "CHART_FONT", "NARROW_PX", "responsive", "LIVE_CLASS"]

LIVE_CLASS = "batchlab-live"
"""The class of the line that marks an explorer in a page (``batchlab.ui.controls.kernel_notice`` writes
it; src/booktools/live.py looks for it in a notebook, book/_js/live.js in the page)."""

CHART_FONT = '"Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei", sans-serif'
"""The browser charts' font: the page's Chinese font first, so CJK and Latin text are drawn alike."""


NARROW_PX = 520
"""A chart narrower than this (a phone's column) gets the ``narrow`` layout of :func:`responsive`."""


def responsive(option: dict, narrow: dict | None = None) -> dict:
    """An ECharts option with a media query: ``option`` everywhere, and on a chart narrower than
    :data:`NARROW_PX` its title wrapped and smaller, the plot lower (and ``narrow``'s changes)."""
    phone = {"title": {"textStyle": {"fontSize": 12, "width": NARROW_PX - 200, "overflow": "break"}},
             "grid": {"top": 72}}
    return {"baseOption": option, "media": [{"query": {"maxWidth": NARROW_PX}, "option": {**phone, **(narrow or {})}}]}


def render_error_html(message: str) -> str:
    """An explorer's visible message for invalid input (never a traceback)."""
    return f'<div style="color:{ERROR_COLOUR}"><b>配置无效：</b>{html.escape(message)}</div>'


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
    result on that figure's Agg canvas. Named, not imported: this layer imports no ``batchlab.ui``."""

    def initial_values(self) -> dict:
        raise NotImplementedError

    def controls(self, values: dict) -> list[Control]:
        raise NotImplementedError

    def follow(self, values: dict, changed: str) -> dict:
        return dict(values)

    def compute(self, values: dict) -> Panel:
        raise NotImplementedError

    def context(self) -> dict:
        raise NotImplementedError

    @classmethod
    def from_context(cls, context: dict) -> "Explorer":
        raise NotImplementedError

    def check_values(self, values: dict) -> dict:
        """``values`` limited to this explorer's controls, each within its declared range or options;
        else ValueError naming the value and the rule (the browser sends what a reader typed)."""
        checked = {}
        for control in self.controls(values):
            value = values.get(control.name)
            if control.options:
                one_of(control.name, value, [v for _, v in control.options])
            else:
                if control.kind in ("int", "slider"):
                    whole(control.name, value, minimum=int(control.minimum))
                value = between(control.name, value, control.minimum, control.maximum)
                value = int(value) if control.kind in ("int", "slider") else value
            checked[control.name] = value
        return checked
