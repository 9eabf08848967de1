"""The notebook side of every explorer: one widget class that turns any declaration of
:mod:`batchlab.page` into ipywidgets, so an explorer's notebook side is one line: this class applied to the
declaration, made with what the chapter measured (4.3 hands its measured peaks to the memory explorer's).

The declaration says everything particular to an explorer — its controls, how they follow one another, its
panel, how the controls are laid out (:class:`~batchlab.page.spec.NotebookLayout`) and which drawing function
draws its figure (``Explorer.drawing``); this class holds no explorer's name and no code of one.
"""
from __future__ import annotations

import importlib
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

import ipywidgets as widgets

from batchlab.page.spec import Explorer, Panel
from batchlab.ui.controls import kernel_notice, make_widget, set_options
from batchlab.ui import style
from batchlab.ui.style import PHONE_DENSITY, canvas_png, figure_png

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["ExplorerWidget", "drawing_of", "drawn_outputs"]


def drawn_outputs(png: bytes, phone: bytes | None = None) -> tuple[dict, ...]:
    """The outputs an ``ipywidgets.Output`` holds to show the figure ``png`` (with its ``phone`` drawing), in
    the one shape :func:`~batchlab.ui.style.display_drawings` gives a figure, as a value to set on the widget.

    Set, not displayed into it: displaying inside ``with output:`` makes the front end (JupyterLab, or
    nbclient when a notebook is run headless) capture the kernel's messages for the widget and send each
    captured output back to the kernel while the cell still runs, widget traffic on the shell channel that
    ``jupyter nbconvert --execute`` was seen to hang on (chapter 4.5's explorer cell, 2 of 14 loaded runs).
    A value set on the widget is one state message from the kernel and nothing back.
    """
    from IPython.utils.capture import capture_output

    with capture_output(stdout=False, stderr=False, display=True) as captured:
        style.display_drawings(png, phone)
    return tuple({"output_type": "display_data", "data": dict(o.data), "metadata": dict(o.metadata or {})}
                 for o in captured.outputs)


def drawing_of(explorer: Explorer) -> Callable[["Figure", Any], None] | None:
    """The drawing function the declaration names (``"module.function"``), or None when it draws no figure."""
    if explorer.drawing is None:
        return None
    module, function = explorer.drawing.rsplit(".", 1)
    return getattr(importlib.import_module(module), function)


class ExplorerWidget(widgets.VBox):
    """An explorer as ipywidgets: the line that says how to make it move (and carries the declaration to the
    published page), one widget per declared control laid out as the declaration says, the summary and, when
    the explorer draws, its figure.

    A moved control gives the declaration's ``follow`` its say (a new model resets the controls that depend
    on it; they change without recomputing once each, and a note above the summary names each, old → new:
    ``Explorer.moved``), then ``compute`` answers the panel: its summary is
    shown (a refused value shows its rule's one line, ``.error`` holds it, ``.result`` is None and the last
    figure stays), and its ``result`` is drawn by the declaration's drawing function on one matplotlib
    Figure, not registered with pyplot and kept from change to change; its PNG is ``.png``, shown in
    ``.output``. The first drawing (the one the notebook saves, which the published page freezes) is also
    drawn for a phone (``layout="phone"``, PNG ``.phone_png``, in the output's metadata as
    :func:`~batchlab.ui.style.show_figure` carries it); a later change draws the desk figure only. ``.controls`` maps each control's name to its widget, so tests can move a control and read
    what the reader would see.
    """

    def __init__(self, explorer: Explorer) -> None:
        self.explorer = explorer
        layout = explorer.layout
        values = explorer.initial_values()
        style = {"description_width": f"{layout.label_px}px"}
        self.controls: dict[str, widgets.Widget] = {}
        for control in explorer.controls(values):
            width = layout.width(control.name)
            self.controls[control.name] = make_widget(control, values[control.name], style,
                                                      None if width is None else widgets.Layout(width=width))
        self.summary = widgets.HTML()
        self.result: Any = None
        self.error: str | None = None
        self.png = b""
        self.phone_png = b""
        self._draw = drawing_of(explorer)
        self.figure: Figure | None = None
        self.output: widgets.Output | None = None
        if self._draw is not None:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure

            self.figure = Figure()
            FigureCanvasAgg(self.figure)
            self.output = widgets.Output()
        self._quiet = False
        self._note = ""
        for name, widget in self.controls.items():
            widget.observe(partial(self._moved, name), names="value")
        rows = [self.controls[row[0]] if len(row) == 1 else widgets.HBox([self.controls[n] for n in row])
                for row in layout.grouped(list(self.controls))]
        super().__init__([kernel_notice(explorer), *rows, self.summary, *([self.output] if self.output else [])])
        self._update()

    def values(self) -> dict:
        """The controls' values by name, as the declaration takes them."""
        return {name: widget.value for name, widget in self.controls.items()}

    def _moved(self, name: str, _change: object = None) -> None:
        if self._quiet:
            return
        values, self._note = self.explorer.moved(self.values(), name)
        self._quiet = True  # one recomputation for the whole change, not one per control it touched
        try:
            for control in self.explorer.controls(values):  # the moved one too: its options follow the others
                set_options(self.controls[control.name], control, values[control.name])
        except ValueError:  # options that depend on a refused value: compute() says which, in one line
            pass
        finally:
            self._quiet = False
        self._update()

    def _update(self) -> None:
        panel: Panel = self.explorer.compute(self.values())
        self.summary.value = self._note + panel.summary_html  # what else the change moved, then the summary
        self.error = panel.error
        if panel.error is not None:
            self.result = None
            return  # the last figure stays
        self.result = panel.result
        if self._draw is not None:
            self._draw(self.figure, panel.result)
            self.png = canvas_png(self.figure)
            # only the first drawing also gets a phone one: the saved state is what the published page
            # freezes and serves to a phone (booktools.frozen); a moved control in a live kernel redraws
            # the desk figure only, so the widget answers as fast as before
            first = not self.phone_png
            if first:
                self.phone_png = self._phone_drawing(panel.result)
            self.output.outputs = drawn_outputs(self.png, self.phone_png if first else None)

    def _phone_drawing(self, result: Any) -> bytes:
        """``result`` drawn for a phone's column on a figure of its own, as PNG."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        figure = Figure()
        FigureCanvasAgg(figure)
        self._draw(figure, result, layout="phone")
        return figure_png(figure, "phone", PHONE_DENSITY)  # sharp on a 2–3× phone screen, as a chapter figure
