"""Batch arithmetic (4.1): the global-batch calculator as a notebook widget.

Its controls, summary and chart are declared once in :mod:`batchlab.ui.explorers.batch` (the published
page runs the same declaration live); the widget only gathers inputs and shows the panel. Like every
demo, it is a ``VBox`` subclass exposing its controls (``.controls``) and its displayed result, so tests
can move a control and read what the reader would see.
"""
from __future__ import annotations

import ipywidgets as widgets

from batchlab.formulas.batching import BatchPlan
from batchlab.lecture.case import CASE_STUDY
from batchlab.ui.controls import kernel_notice, make_widget
from batchlab.ui.explorers.batch import BatchExplorer

__all__ = ["BatchCalculator"]


class BatchCalculator(widgets.VBox):
    """Global-batch calculator: set micro-batch, stages, data parallel and global batch (and,
    optionally, a stated 梯度累积步数) and see both formulas or why the mix is invalid. Defaults to
    the lecture's case study."""

    def __init__(self, global_batch: int = CASE_STUDY.job.global_batch,
                 micro_batch_size: int = CASE_STUDY.job.micro_batch_size,
                 pipeline_stages: int = CASE_STUDY.job.pipeline_stages,
                 data_parallel: int = CASE_STUDY.job.data_parallel, stated_grad_accum: int = 0) -> None:
        self.explorer = BatchExplorer(global_batch, micro_batch_size, pipeline_stages, data_parallel,
                                      stated_grad_accum)
        values = self.explorer.initial_values()
        style, layout = {"description_width": "190px"}, widgets.Layout(width="340px")
        self.controls = {c.name: make_widget(c, values[c.name], style, layout)
                         for c in self.explorer.controls(values)}
        self.result = widgets.HTML()
        for control in self.controls.values():
            control.observe(self._update, names="value")
        super().__init__([kernel_notice(self.explorer), *self.controls.values(), self.result])
        self._update()

    def _update(self, _change: object = None) -> None:
        panel = self.explorer.compute({name: c.value for name, c in self.controls.items()})
        self.plan: BatchPlan | None = panel.result
        self.result.value = panel.summary_html
