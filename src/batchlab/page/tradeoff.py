"""The bubble-versus-matmul explorer (4.4, 4.5), declared once: its controls, its summary and its chart.

Every number comes from :func:`batchlab.formulas.throughput.model_step` and
:func:`batchlab.formulas.tune.tune` (which uses the 4.3 memory model) of the job the controls make, at
the matmul rates of ``curve`` (this device's measured rates, or a preset's roofline).
"""
from __future__ import annotations

import html
from dataclasses import replace
from typing import NamedTuple

from batchlab.formulas.job import LIMITS, Job
from batchlab.formulas.memory import activation_basis
from batchlab.formulas.pipeline_schedules import SCHEDULES
from batchlab.formulas.roofline import RateCurve
from batchlab.formulas.throughput import StepModel, model_step
from batchlab.formulas.pipeline_schedules import schedule_label
from batchlab.formulas.tune import tune
from batchlab.lecture.case import CASE_STUDY
from batchlab.page.colours import OVERFLOW_COLOUR, PALETTE, css_ink
from batchlab.page.spec import (CHART_FONT, NARROW_PX, PHONE_CHART_PX, Control, Explorer, NotebookLayout, Panel, axis_top,
                                labelled, responsive, text_px)
from batchlab.page.numbers import percent, seconds, throughput
from batchlab.page.valid import JobMaker, chunk_control, count_control, settle

__all__ = ["render_tradeoff_html", "tradeoff_chart", "TradeoffView", "TradeoffExplorer"]


def render_tradeoff_html(job: Job, step: StepModel, result: dict, curve: RateCurve) -> str:
    """The explorer's summary: the schedule, m, the bubble, the matmul's rows and efficiency, the modelled
    step and tokens/s, whether it fits, the fastest micro-batch size that fits, and — when another schedule
    (or virtual-stage count) is faster — which and why (:func:`~batchlab.formulas.tune.schedule_reason`)."""
    current = next(c for c in result["candidates"] if c["micro_batch_size"] == job.micro_batch_size)
    best = result["recommended"]
    memory = "放得下" if current["fits"] else f'<b style="color:{css_ink("error")}">放不下</b>'
    other = result["best_schedule"]
    better = (other is not None and (other["schedule"], other["virtual_stages"]) != (job.schedule, job.virtual_stages))
    return (
        f"<div>{html.escape(schedule_label(job.schedule, job.virtual_stages))}：m = <b>{step.num_microbatches}</b>，"
        f"气泡占比 <b>{step.bubble_fraction:.1%}</b>；每个矩阵乘法 M = "
        f"{step.micro_batch_size} × {job.seq_len} = {step.rows} 行，效率 <b>{step.matmul_efficiency:.0%}</b>"
        f"（{html.escape(curve.name)}）；模型估计每步 {seconds(step.step_seconds)}，"
        f"<b>{throughput(step.tokens_per_second, False)}</b> tokens/s；显存{memory}（{activation_basis(job.attention)}）"
        + (f"；模型下最快且放得下的微批次大小：<b>{best['micro_batch_size']}</b>" if best
           else f"；没有放得下的微批次大小。{html.escape(result['suggestion'] or '')}")
        + (f"<br>换调度更快：{html.escape(result['schedule_reason'])}" if better else "")
        + "</div>")


def tradeoff_chart(candidates: list[dict], current: int) -> dict:
    """The browser's chart of :func:`batchlab.ui.pipeline.plot_tradeoff`: modelled tokens/s for every
    runnable micro-batch size, each point labelled with its bubble fraction (every k-th where the points
    crowd, the current choice always: laid out for the narrowest desk chart and, through the phone's media
    query, for the narrowest phone); sizes that do not fit in red, the current choice ringed, the fastest
    that fits starred."""
    sizes = [str(c["micro_batch_size"]) for c in candidates]
    chosen_at = next(i for i, c in enumerate(candidates) if c["micro_batch_size"] == current)

    def points(width: float) -> list[dict]:
        shown = labelled(len(candidates), text_px("100%"), width - 88, chosen_at)  # the grid's margins: 72 + 16
        return [{"value": round(c["tokens_per_second"], 1),
                 "label": {"show": show, "formatter": percent(c["bubble_fraction"], 0)},
                 "itemStyle": {"color": PALETTE[0] if c["fits"] else OVERFLOW_COLOUR},
                 "symbol": "circle" if c["fits"] else "triangle"} for c, show in zip(candidates, shown)]

    fitting = [c for c in candidates if c["fits"]]
    chosen = candidates[chosen_at]
    series = [
        {"type": "line", "name": "模型估计的 tokens/s（红三角：放不下）", "color": "#888888", "symbolSize": 9,
         "label": {"show": True, "position": "top", "color": "#4d4d4d"}, "data": points(NARROW_PX)},
        {"type": "scatter", "name": "当前选择", "symbolSize": 22, "z": 4,
         "itemStyle": {"color": "rgba(0,0,0,0)", "borderColor": OVERFLOW_COLOUR, "borderWidth": 2},
         "data": [[str(current), round(chosen["tokens_per_second"], 1)]]},
    ]
    if fitting:
        best = max(fitting, key=lambda c: c["tokens_per_second"])
        series.append({"type": "scatter", "name": "模型下最快（放得下）", "symbol": "diamond", "symbolSize": 16,
                       "color": PALETTE[1], "z": 3,
                       "data": [[str(best["micro_batch_size"]), round(best["tokens_per_second"], 1)]]})
    top, interval = axis_top(max(c["tokens_per_second"] for c in candidates) * 1.15)  # room for the labels
    return responsive({
        "textStyle": {"fontFamily": CHART_FONT, "fontSize": 13},
        "aria": {"enabled": True},
        "title": {"text": "每个微批次大小的模型估计吞吐（点上数字：气泡占比）", "left": "center", "textStyle": {"fontSize": 14}},
        "legend": {"bottom": 0},
        "tooltip": {"trigger": "axis"},
        "grid": {"left": 72, "right": 16, "top": 48, "bottom": 72},
        "xAxis": {"type": "category", "data": sizes, "name": "微批次大小", "nameLocation": "middle", "nameGap": 26},
        "yAxis": {"type": "value", "name": "tokens/s", "nameLocation": "middle", "nameGap": 52, "min": 0,
                  "max": top, "interval": interval},
        "series": series,
    }, {"series": [{"data": points(PHONE_CHART_PX)}]})


class TradeoffView(NamedTuple):
    """What the explorer answers for one set of values (its panel's ``result``): the job the controls
    make, its :func:`~batchlab.formulas.throughput.model_step` and its :func:`~batchlab.formulas.tune.tune`
    answer; :func:`batchlab.ui.pipeline.draw_tradeoff_explorer` draws it."""

    job: Job
    step: StepModel
    tuned: dict


class TradeoffExplorer(Explorer):
    """Global batch, micro-batch size, stages, data parallelism, schedule and virtual stages (model chunks
    per device, for interleaved 1F1B and ZB-V) → m, the bubble, the matmul
    efficiency at M = micro × seq rows (from ``curve``), the modelled step time and tokens/s of every
    micro-batch size that divides the batch, and the fastest that fits. ``job`` (default: the lecture's
    case) gives the model, sequence length, memory settings and the controls' starting values. Invalid input
    answers its rule's one line (the notebook keeps the last figure)."""

    name = "tradeoff"
    layout = NotebookLayout(label_px=150, width_px=260, widths=(("schedule", None),),
                            rows=(("global_batch", "micro_batch_size"), ("pipeline_stages", "data_parallel")))
    VALUES = ("global_batch", "micro_batch_size", "pipeline_stages", "data_parallel", "schedule", "virtual_stages")
    """The job fields the controls set (the rest come from ``job``)."""
    drawing = "batchlab.ui.pipeline.draw_tradeoff_explorer"

    def __init__(self, curve: RateCurve, job: Job = CASE_STUDY.job) -> None:
        if not isinstance(job, Job):
            raise ValueError(f"job = {job!r}：必须是 Job（batchlab.formulas.job.Job）")
        self.curve, self.job = curve, job
        self.make = JobMaker(self._build)

    def initial_values(self) -> dict:
        return {n: getattr(self.job, n) for n in self.VALUES}

    def _build(self, values: dict) -> Job:
        """The job these values describe (the job's checks refuse an invalid one: ValueError); ``make``
        is this, remembered (:class:`~batchlab.page.valid.JobMaker`)."""
        return replace(self.job, **{n: values[n] for n in self.initial_values()})

    def controls(self, values: dict) -> list[Control]:
        """The controls; micro-batch size, stages and data parallelism offer only the values that make a
        valid job with the other values (:mod:`batchlab.page.valid`), recomputed after every change."""
        layers = self.job.model.n_layer

        def counts(name: str, label: str) -> Control:
            return count_control(self.make, values, name, label, layers, wide=False)

        return [
            Control("global_batch", "全局批大小", "int", 1, LIMITS["global_batch"][1]),
            counts("micro_batch_size", "微批次大小"),
            counts("pipeline_stages", "流水线阶段数 (PP)"),
            counts("data_parallel", "数据并行度 (DP)"),
            Control("schedule", "流水线调度", "buttons", options=tuple((label, key) for key, label in SCHEDULES.items()),
                    wide=True),  # four buttons: a whole row, not wrapped in half of one
            chunk_control(self.make, values, "虚拟阶段数 (v)", layers),
        ]

    def follow(self, values: dict, changed: str) -> dict:
        """A change that leaves no valid job moves the fewest other counts to their nearest valid values."""
        return settle(self.make, values, changed, self.job.model.n_layer)

    def follow_reason(self, before: dict, after: dict, changed: str) -> str:
        return "（让配置仍然有效）"

    def compute(self, values: dict) -> Panel:
        try:
            job = self.make(self.check_values(values))
        except ValueError as err:
            return self.refused(values, err)
        tuned = tune(job, self.curve)
        step = model_step(job, self.curve)
        return Panel(render_tradeoff_html(job, step, tuned, self.curve),
                     tradeoff_chart(tuned["candidates"], job.micro_batch_size), result=TradeoffView(job, step, tuned))

    def context(self) -> dict:
        curve = self.curve
        return {"job": self.job.as_record(),
                "curve": {"rows": list(curve.rows), "flops_per_second": list(curve.flops_per_second),
                          "name": curve.name}}

    @classmethod
    def from_context(cls, context: dict) -> "TradeoffExplorer":
        c = context["curve"]
        return cls(RateCurve(tuple(c["rows"]), tuple(c["flops_per_second"]), c["name"]),
                   Job.from_record(context["job"]))
