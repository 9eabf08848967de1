"""Batch arithmetic (4.1): the global-batch calculator and its result panel.

The widget only gathers inputs and calls :func:`batchlab.formulas.batching.plan_batch`; it holds no formula.
Like every demo, it is a ``VBox`` subclass exposing its controls (``.controls``) and its displayed
result, so tests can move a control and read what the reader would see.
"""
from __future__ import annotations

import html

import ipywidgets as widgets

from batchlab.formulas.batching import GRAD_ACCUM_READINGS, BatchPlan, plan_batch
from batchlab.lecture.case import CASE_STUDY
from batchlab.ui.style import kernel_notice, render_error_html

__all__ = ["BatchCalculator", "render_plan_html"]


def render_plan_html(plan: BatchPlan) -> str:
    """The calculator's result panel: both formulas, the derived counts, the bubble."""
    lecture = plan.lecture_formula()
    lecture_line = (
        f"<code>{html.escape(lecture)}</code>" if lecture else
        f"无法写成整数：num_microbatches = {plan.num_microbatches} 不是 pipeline_stages = "
        f"{plan.pipeline_stages} 的整数倍"
    )
    reading = ("未给出梯度累积步数，已由 Global Batch 推出" if plan.grad_accum_reading is None
               else f"符合{GRAD_ACCUM_READINGS[plan.grad_accum_reading]}")
    warn = "" if plan.enough_microbatches else (
        f'<li style="color:#b06000">微批次数 {plan.num_microbatches} 少于阶段数 {plan.pipeline_stages}：'
        "流水线填不满，1F1B 调度无法运行</li>")
    return (
        "<ul>"
        f"<li>Megatron/DeepSpeed：<code>{html.escape(plan.megatron_formula())}</code></li>"
        f"<li>原文公式：{lecture_line}</li>"
        f"<li>每个数据并行副本的微批次数 num_microbatches = <b>{plan.num_microbatches}</b>，"
        f"设备数 = {plan.devices}</li>"
        f"<li>气泡占比 (p-1)/(m+p-1) = <b>{plan.bubble_fraction:.1%}</b></li>"
        f"<li>梯度累积步数：{reading}</li>{warn}"
        "</ul>"
    )


class BatchCalculator(widgets.VBox):
    """Global-batch calculator: set micro-batch, stages, data parallel and global batch (and,
    optionally, a stated 梯度累积步数) and see both formulas or why the mix is invalid. Defaults to
    the lecture's case study."""

    def __init__(self, global_batch: int = CASE_STUDY.job.global_batch,
                 micro_batch_size: int = CASE_STUDY.job.micro_batch_size,
                 pipeline_stages: int = CASE_STUDY.job.pipeline_stages,
                 data_parallel: int = CASE_STUDY.job.data_parallel, stated_grad_accum: int = 0) -> None:
        style = {"description_width": "190px"}
        layout = widgets.Layout(width="340px")

        def box(value: int, label: str, minimum: int = 1) -> widgets.BoundedIntText:
            return widgets.BoundedIntText(value=value, min=minimum, max=1_000_000, description=label,
                                          style=style, layout=layout)

        self.controls = {
            "global_batch": box(global_batch, "全局批大小 (Global Batch)"),
            "micro_batch_size": box(micro_batch_size, "微批次大小 (Micro-Batch)"),
            "pipeline_stages": box(pipeline_stages, "流水线阶段数 (PP)"),
            "data_parallel": box(data_parallel, "数据并行度 (DP)"),
            "stated_grad_accum": box(stated_grad_accum, "梯度累积步数 (0=不指定)", minimum=0),
        }
        self.result = widgets.HTML()
        for control in self.controls.values():
            control.observe(self._update, names="value")
        super().__init__([kernel_notice(), *self.controls.values(), self.result])
        self._update()

    def _update(self, _change: object = None) -> None:
        values = {name: c.value for name, c in self.controls.items()}
        values["stated_grad_accum"] = values["stated_grad_accum"] or None
        try:
            self.plan: BatchPlan | None = plan_batch(**values)
        except ValueError as err:
            self.plan = None
            self.result.value = render_error_html(str(err))
        else:
            self.result.value = render_plan_html(self.plan)
