"""ipywidgets demos. Widgets only gather inputs and call batchlab functions; they hold no formula.

Each demo is a ``VBox`` subclass that exposes its controls (``.controls``) and its displayed result,
so tests can move a control and read what the reader would see.
"""
from __future__ import annotations

import html

import ipywidgets as widgets

from .batching import BatchPlan, plan_batch

__all__ = ["BatchCalculator", "render_plan_html", "render_error_html"]


def render_error_html(message: str) -> str:
    return f'<div style="color:#b00020"><b>配置无效：</b>{html.escape(message)}</div>'


def render_plan_html(plan: BatchPlan) -> str:
    """The calculator's result panel: both conventions, the derived counts, the bubble."""
    seed = plan.seed_formula()
    seed_line = (
        f"{html.escape(seed)}" if seed else
        f"无法写成整数：num_microbatches = {plan.num_microbatches} 不是 pipeline_stages = "
        f"{plan.pipeline_stages} 的整数倍"
    )
    convention = {"seed": "与种子文本公式一致（梯度累积按“填满流水线的次数”计）",
                  "megatron": "与 Megatron/DeepSpeed 约定一致（梯度累积 = 微批次数）",
                  "derived": "未给出梯度累积步数，已由 Global Batch 推出"}[plan.convention]
    warn = "" if plan.fills_pipeline else (
        f'<li style="color:#b06000">微批次数 {plan.num_microbatches} 少于阶段数 {plan.pipeline_stages}：'
        "流水线填不满，1F1B 调度无法运行</li>")
    return (
        "<ul>"
        f"<li>Megatron/DeepSpeed：<code>{html.escape(plan.megatron_formula())}</code></li>"
        f"<li>种子文本：<code>{seed_line}</code></li>"
        f"<li>每个数据并行副本的微批次数 num_microbatches = <b>{plan.num_microbatches}</b>，"
        f"设备数 = {plan.devices}</li>"
        f"<li>气泡占比 (p-1)/(m+p-1) = <b>{plan.bubble_fraction:.1%}</b></li>"
        f"<li>梯度累积步数：{convention}</li>{warn}"
        "</ul>"
    )


class BatchCalculator(widgets.VBox):
    """Global-batch calculator: set micro-batch, stages, data parallel and global batch (and,
    optionally, gradient-accumulation steps) and see both conventions or why the mix is invalid."""

    def __init__(self, global_batch: int = 64, micro_batch_size: int = 2, pipeline_stages: int = 4,
                 data_parallel: int = 2, grad_accum_steps: int = 0) -> None:
        style = {"description_width": "150px"}
        layout = widgets.Layout(width="300px")

        def box(value: int, label: str, minimum: int = 1) -> widgets.BoundedIntText:
            return widgets.BoundedIntText(value=value, min=minimum, max=1_000_000, description=label,
                                          style=style, layout=layout)

        self.controls = {
            "global_batch": box(global_batch, "Global Batch"),
            "micro_batch_size": box(micro_batch_size, "Micro-Batch Size"),
            "pipeline_stages": box(pipeline_stages, "流水线阶段数 (PP)"),
            "data_parallel": box(data_parallel, "数据并行度 (DP)"),
            "grad_accum_steps": box(grad_accum_steps, "梯度累积步数 (0=不指定)", minimum=0),
        }
        self.result = widgets.HTML()
        for control in self.controls.values():
            control.observe(self._update, names="value")
        super().__init__([*self.controls.values(), self.result])
        self._update()

    def _update(self, _change: object = None) -> None:
        values = {name: c.value for name, c in self.controls.items()}
        values["grad_accum_steps"] = values["grad_accum_steps"] or None
        try:
            self.plan: BatchPlan | None = plan_batch(**values)
        except ValueError as err:
            self.plan = None
            self.result.value = render_error_html(str(err))
        else:
            self.result.value = render_plan_html(self.plan)
