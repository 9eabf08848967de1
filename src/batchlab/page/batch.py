"""The global-batch calculator (4.1), declared once: its controls, its summary and its chart.

It only gathers inputs and calls :func:`batchlab.formulas.batching.plan_batch`; it holds no formula.
"""
from __future__ import annotations

import html

from batchlab.formulas.batching import GRAD_ACCUM_READINGS, BatchPlan, plan_batch
from batchlab.formulas.job import LIMITS
from batchlab.formulas.pipeline_schedules import bubble_fraction
from batchlab.lecture.case import CASE_STUDY
from batchlab.page.colours import PALETTE, css_ink
from batchlab.page.spec import CHART_FONT, Control, Explorer, NotebookLayout, Panel, responsive
from batchlab.page.numbers import percent

__all__ = ["BatchExplorer", "render_plan_html", "MAX_STAGES"]

MAX_STAGES = 1_000_000
"""The largest pipeline-stage count the calculator takes (its arithmetic is instant at any size)."""


def render_plan_html(plan: BatchPlan) -> str:
    """The calculator's result panel: both formulas, the derived counts, the bubble."""
    lecture = plan.lecture_formula()
    lecture_line = (
        f"<code>{html.escape(lecture)}</code>" if lecture else
        f"无法写成整数：num_microbatches = {plan.num_microbatches} 不是 pipeline_stages = "
        f"{plan.pipeline_stages} 的整数倍"
    )
    reading = ("未给出梯度累积步数，已由全局批大小推出" if plan.grad_accum_reading is None
               else f"符合{GRAD_ACCUM_READINGS[plan.grad_accum_reading]}")
    warn = "" if plan.enough_microbatches else (
        f'<li style="color:{css_ink("warning")}">微批次数 {plan.num_microbatches} 少于阶段数 {plan.pipeline_stages}：'
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


def bubble_chart(plan: BatchPlan) -> dict:
    """The bubble fraction against the number of micro-batches at this stage count, the plan's point
    marked: how far more micro-batches would shrink the idle share."""
    p, m = plan.pipeline_stages, plan.num_microbatches
    last = max(4 * p, 2 * m, 8)
    counts = sorted({max(1, round(last * k / 60)) for k in range(1, 61)} | {m})
    return responsive({
        "textStyle": {"fontFamily": CHART_FONT, "fontSize": 13},
        "aria": {"enabled": True},
        "title": {"text": f"p = {p} 个阶段时气泡占比随微批次数 m 的变化", "left": "center", "textStyle": {"fontSize": 14}},
        "grid": {"left": 64, "right": 20, "top": 44, "bottom": 48},
        "tooltip": {"trigger": "axis"},
        "xAxis": {"type": "value", "name": "每个副本的微批次数 m", "nameLocation": "middle", "nameGap": 28,
                  "min": 1, "max": last, "axisLabel": {"hideOverlap": True}},  # 1,000,000 and 2,000,000 on a phone
        "yAxis": {"type": "value", "name": "气泡占比 (%)", "nameLocation": "middle", "nameGap": 40, "min": 0, "max": 100},
        "series": [
            {"type": "line", "name": "(p-1)/(m+p-1)", "showSymbol": False, "color": PALETTE[0],
             "data": [[c, round(100 * bubble_fraction(p, c), 2)] for c in counts]},
            {"type": "scatter", "name": "当前配置", "symbolSize": 12, "color": PALETTE[3],
             "data": [[m, round(100 * plan.bubble_fraction, 2)]],
             "label": {"show": True, "position": "bottom" if plan.bubble_fraction > 0.85 else "top",  # not into the title
                       "formatter": f"m = {m}：{percent(plan.bubble_fraction)}"}},
        ],
    })


class BatchExplorer(Explorer):
    """Micro-batch size, stages, data parallel and global batch (and, optionally, a stated 梯度累积步数):
    both formulas, or why the mix is invalid. Defaults to the lecture's case study. Its panel's ``result``
    is the :class:`~batchlab.formulas.batching.BatchPlan`; the notebook draws no figure (the page draws the
    bubble chart)."""

    name = "batch"
    layout = NotebookLayout(label_px=190, width_px=340)

    def __init__(self, global_batch: int = CASE_STUDY.job.global_batch,
                 micro_batch_size: int = CASE_STUDY.job.micro_batch_size,
                 pipeline_stages: int = CASE_STUDY.job.pipeline_stages,
                 data_parallel: int = CASE_STUDY.job.data_parallel, stated_grad_accum: int = 0) -> None:
        self.start = {"global_batch": global_batch, "micro_batch_size": micro_batch_size,
                      "pipeline_stages": pipeline_stages, "data_parallel": data_parallel,
                      "stated_grad_accum": stated_grad_accum}

    def initial_values(self) -> dict:
        return dict(self.start)

    def controls(self, values: dict) -> list[Control]:
        return [
            Control("global_batch", "全局批大小 (Global Batch)", "int", 1, LIMITS["global_batch"][1]),
            Control("micro_batch_size", "微批次大小 (Micro-Batch)", "int", 1, LIMITS["micro_batch_size"][1]),
            Control("pipeline_stages", "流水线阶段数 (PP)", "int", 1, MAX_STAGES),
            Control("data_parallel", "数据并行度 (DP)", "int", 1, LIMITS["data_parallel"][1]),
            Control("stated_grad_accum", "梯度累积步数 (0=不指定)", "int", 0, LIMITS["global_batch"][1]),
        ]

    def compute(self, values: dict) -> Panel:
        try:
            v = self.check_values(values)
            plan = plan_batch(v["micro_batch_size"], v["pipeline_stages"], v["data_parallel"],
                              global_batch=v["global_batch"], stated_grad_accum=v["stated_grad_accum"] or None)
        except ValueError as err:
            return self.refused(values, err)
        return Panel(render_plan_html(plan), bubble_chart(plan), result=plan)

    def context(self) -> dict:
        return {"start": self.start}

    @classmethod
    def from_context(cls, context: dict) -> "BatchExplorer":
        return cls(**context["start"])
