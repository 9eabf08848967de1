"""The memory explorer (4.3), declared once: its controls, its summary and its chart.

Every number comes from :func:`batchlab.formulas.memory.stage_memory` of a
:class:`~batchlab.formulas.job.Job` the controls make (its validation is the explorer's).
"""
from __future__ import annotations

import html
from dataclasses import replace
from typing import NamedTuple

from batchlab.formulas.job import GIB, LIMITS, RECOMPUTE_MODES, Job
from batchlab.formulas.memory import MemoryReport, activation_basis, stage_memory
from batchlab.formulas.pipeline_schedules import SCHEDULES
from batchlab.formulas.precision import PRECISIONS, default_precision
from batchlab.formulas.presets import PRESETS, get_config
from batchlab.formulas.pipeline_schedules import schedule_label
from batchlab.lecture.case import CASE_STUDY
from batchlab.page.colours import MEASURED_COLOUR, OVERFLOW_COLOUR, PALETTE, css_ink
from batchlab.page.spec import (CHART_FONT, NARROW_PX, PHONE_CHART_PX, Control, Explorer, NotebookLayout, Panel, axis_top,
                                labelled, responsive, text_px)
from batchlab.page.valid import JobMaker, chunk_control, count_control, settle

__all__ = ["MEMORY_PARTS", "memory_unit", "share_text", "render_memory_summary_html", "seq_len_options",
           "memory_title", "memory_chart", "MemoryView", "MemoryExplorer", "MODEL_SETTINGS"]

MODEL_SETTINGS = ("seq_len", "precision", "dropout", "pipeline_stages")
"""What a change of model sets to that model's own values (its context, default precision and dropout, no
more stages than layers); returning to the chapter's model restores the chapter's values."""

LABELLED_STAGES = 8
"""Up to this many stages each bar is named 阶段 i; beyond, the bars are numbered (the axis is named 流水线阶段).
Their shares over them are laid out by the chart's width (:func:`_share_labels`): at 9 stages on a phone
they ran together (「37.5%33.3%31.1%…」)."""

MEMORY_PARTS = (
    ("参数", PALETTE[0], lambda st: st.states.parameters, True),
    ("梯度", PALETTE[1], lambda st: st.states.gradients, True),
    ("优化器状态", PALETTE[2], lambda st: st.states.optimizer, True),
    ("激活值", PALETTE[4], lambda st: st.activation_bytes, True),
    ("重计算工作区", PALETTE[8], lambda st: st.working_bytes, False),
)
"""What each stage's bar stacks, bottom to top: (label, colour, bytes of a StageMemory, shown when all
zero?). The working set exists only with recomputation."""


def memory_unit(largest_bytes: float) -> tuple[str, float]:
    """GiB, or MiB when everything shown is under 1 GiB (the book's tiny models)."""
    return ("GiB", GIB) if largest_bytes >= GIB else ("MiB", GIB / 1024)


def share_text(value: float, digits: int = 1) -> str:
    """A share of the device's memory: ``36.6%`` (``37%`` with no ``digits``), or ``<0.1%`` for a speck."""
    least = 10 ** -(digits + 2)
    return f"{value:.{digits}%}" if value >= least else f"<{least:.{digits}%}"


def _few(counts: list[int]) -> str:
    """``4、3、2、1``; long lists shortened to their ends."""
    if len(set(counts)) == 1 and len(counts) > 1:
        return f"都是 {counts[0]}"
    shown = [str(c) for c in counts]
    return "、".join(shown if len(shown) <= 8 else [*shown[:3], "…", *shown[-2:]])


def render_memory_summary_html(report: MemoryReport) -> str:
    """The explorer's one-line summary; every number is read from ``report`` and its job, and it names the
    attention the activations assume (:func:`~batchlab.formulas.memory.activation_basis`)."""
    plan, schedule, v = report.job.plan, report.job.schedule, report.job.virtual_stages
    peaks = report.peak_bytes_per_stage
    worst = peaks.index(max(peaks))
    capacity = report.device_memory_bytes
    unit, scale = memory_unit(max(capacity, *peaks))
    verdict = (f'<b style="color:{css_ink("fit")}">放得下</b>' if report.fits else
               f'<b style="color:{css_ink("overflow")}">放不下</b>'
               f"（超出 {(peaks[worst] - capacity) / scale:.2f} {unit}）")
    warn = "" if plan.enough_microbatches else (
        f'<br><span style="color:{css_ink("warning")}">微批次数 {plan.num_microbatches} 少于阶段数 {plan.pipeline_stages}：'
        "流水线填不满</span>")
    return (
        f"<div>最满的是阶段 {worst}：峰值 <b>{peaks[worst] / scale:.2f} {unit}</b>，占设备显存"
        f"（{capacity / scale:.4g} {unit}）的 <b>{share_text(report.peak_memory_fraction)}</b>，{verdict}；"
        f"每个副本 m = <b>{plan.num_microbatches}</b> 个微批次，{html.escape(schedule_label(schedule, v))}"
        + (" 下各阶段同时保存的微批次数：" if v == 1 else
           f"下各卡同时保存的模型段（每段 {report.job.model.n_layer // (plan.pipeline_stages * v)} 层）激活数：")
        + f"{_few([st.in_flight for st in report.stages])}；"
        f"{html.escape(activation_basis(report.job.attention))}{warn}</div>"
    )


def seq_len_options(n_positions: int, extra: int | None = None) -> list[int]:
    """The sequence lengths the explorer offers: powers of two up to ``n_positions``, ``n_positions``
    itself and ``extra`` (a starting value that is not a power of two)."""
    options = {1 << k for k in range(n_positions.bit_length()) if 1 << k <= n_positions} | {n_positions}
    if extra is not None:
        options.add(extra)
    return sorted(options)


def memory_title(job: Job) -> str:
    """The figure's title: the job the bars belong to."""
    tensor = "" if job.tensor_parallel == 1 else (
        f"，张量并行 t = {job.tensor_parallel}{' + 序列并行' if job.sequence_parallel else ''}")
    return (f"{job.model.name}，{schedule_label(job.schedule, job.virtual_stages)}，{job.pipeline_stages} 个阶段"
            f"{tensor}，m = {job.num_microbatches}，微批次 {job.micro_batch_size} × 序列 {job.seq_len}")


def _share_labels(stages: list, capacity: float, width: float) -> tuple[list[dict], bool]:
    """Each bar's share label on a chart ``width`` px wide: ``36.6%`` where it fits over its bar, ``37%``
    where that does, else upright and on every k-th bar (the fullest always); a share of ten devices or
    more is ``>999%`` (the summary has the number). Answers the labels and whether they stand upright."""
    shares = [st.peak_bytes / capacity for st in stages]
    band = (width - 76) / len(stages)  # the plot (the grid's margins: 60 + 16) shared by the bars
    digits = 1 if text_px("100.0%") + 4 <= band else 0
    upright = text_px("100%") + 4 > band
    fullest = shares.index(max(shares))
    shown = labelled(len(stages), 17, width - 76, fullest) if upright else [True] * len(stages)
    labels = [{"show": show, "position": "top", "formatter": share_text(s, digits) if s < 10 else ">999%",
               "color": OVERFLOW_COLOUR if s > 1 else "#333",
               **({"rotate": 90, "align": "left", "verticalAlign": "middle"} if upright else {})}
              for s, show in zip(shares, shown)]
    return labels, upright


def memory_chart(report: MemoryReport, measured: list | None, title: str) -> dict:
    """The browser's chart of :func:`batchlab.ui.memory.plot_stage_memory`'s figure: each stage's peak
    stacked by part, the device's capacity as a dashed line (named in the legend, as the figure names it),
    each bar's share of it on top (:func:`_share_labels`, laid out for the narrowest desk chart and, through
    the phone's media query, for the narrowest phone)."""
    stages, capacity = report.stages, report.device_memory_bytes
    shown = [v for v in (measured or []) if v is not None]
    unit, scale = memory_unit(max([capacity, *report.peak_bytes_per_stage, *shown]))
    parts = [(label, colour, [part(st) / scale for st in stages])
             for label, colour, part, always in MEMORY_PARTS if always or any(part(st) for st in stages)]
    desk, desk_upright = _share_labels(stages, capacity, NARROW_PX)
    phone, phone_upright = _share_labels(stages, capacity, PHONE_CHART_PX)
    top_values = [round(v, 4) for v in parts[-1][2]]
    series = [{"type": "bar", "name": label, "stack": "memory", "color": colour, "data": [round(v, 4) for v in values],
               "barMaxWidth": 64} for label, colour, values in parts]
    # the share of the device's memory over each bar, red where the stage does not fit
    series[-1]["data"] = [{"value": v, "label": label} for v, label in zip(top_values, desk)]
    capacity_name = f"设备显存 {capacity / scale:.4g} {unit}"
    series[0]["markLine"] = {"symbol": "none", "silent": True, "lineStyle": {"type": "dashed", "color": "#404040"},
                             "label": {"show": False}, "data": [{"yAxis": round(capacity / scale, 4)}]}
    series.append({"type": "line", "name": capacity_name, "data": [], "color": "#404040", "showSymbol": False,
                   "lineStyle": {"type": "dashed"}})  # the dashed line's legend entry: a label on it hid a share
    if shown:
        series.append({"type": "scatter", "name": "实测峰值", "symbol": "diamond", "symbolSize": 11,
                       "color": MEASURED_COLOUR, "z": 5,
                       "data": [[i, round(v / scale, 4)] for i, v in enumerate(measured) if v is not None]})
    # room above the fullest bar for its share, upright on a narrow chart
    top, interval = axis_top(max([capacity, *report.peak_bytes_per_stage, *shown]) / scale
                             * (1.3 if desk_upright or phone_upright else 1.1))
    many = len(stages) > LABELLED_STAGES
    phone_series = [{} for _ in series]
    phone_series[len(parts) - 1] = {"data": [{"value": v, "label": label} for v, label in zip(top_values, phone)]}
    return responsive({
        "textStyle": {"fontFamily": CHART_FONT, "fontSize": 13},
        "aria": {"enabled": True},
        "title": {"text": title, "left": "center", "textStyle": {"fontSize": 14}},
        "legend": {"bottom": 0},
        "tooltip": {"trigger": "axis", "axisPointer": {"type": "shadow"}},
        "grid": {"left": 60, "right": 16, "top": 48, "bottom": 72},
        "xAxis": {"type": "category", "data": [str(i) if many else f"阶段 {i}" for i in range(len(stages))],
                  "name": "流水线阶段", "nameLocation": "middle", "nameGap": 26},
        "yAxis": {"type": "value", "name": f"峰值显存 ({unit})", "nameLocation": "middle", "nameGap": 40,
                  "max": top, "interval": interval},
        "series": series,
    }, {"series": phone_series})


class MemoryView(NamedTuple):
    """What the memory explorer answers for one set of values (its panel's ``result``): the
    :func:`~batchlab.formulas.memory.stage_memory` report, the measured peaks that match it (or None) and
    the figure's title; :func:`batchlab.ui.memory.draw_memory_explorer` draws it."""

    report: MemoryReport
    measured: list | None
    title: str


class MemoryExplorer(Explorer):
    """Model, micro-batch size, sequence length, schedule and virtual stages, recomputation, precision,
    dropout, stages, global batch, data parallelism, tensor parallelism (and sequence parallelism) and the
    device's memory → each stage's peak memory by part.

    Starts from ``job`` (default: the lecture's case study); the job's optimizer, ZeRO-1 and attention are
    kept, the controls replace the rest. A new model resets the precision to its default, the dropout to
    the model's and the sequence lengths to its ``n_positions``. ``measured`` maps ``(model,
    micro_batch_size, seq_len, recompute)`` to measured peak bytes, one per stage (or None); they are drawn
    when the controls match the key and the stage count matches. An invalid combination answers its rule's
    one line (the notebook keeps the last figure).
    """

    name = "memory"
    # two boxes a row: three (780 px) overflow a 760 px column, and the frozen page clips them; the precision
    # and recompute labels are long: their dropdowns get the full row (a value cut off cannot be read)
    layout = NotebookLayout(label_px=150, width_px=300, widths=(
        ("micro_batch_size", 460), ("seq_len", 460), ("recompute", 560), ("precision", 560), ("schedule", None),
        ("virtual_stages", 460)),
        rows=(("model", "pipeline_stages"), ("global_batch", "data_parallel"), ("device_memory_gib", "dropout"),
              ("tensor_parallel", "sequence_parallel")))
    drawing = "batchlab.ui.memory.draw_memory_explorer"

    def __init__(self, job: Job = CASE_STUDY.job, measured: dict | None = None) -> None:
        if not isinstance(job, Job):
            raise ValueError(f"job = {job!r}：必须是 Job（batchlab.formulas.job.Job）")
        self.job = job
        self.make = JobMaker(self._build)
        self.measured = {tuple(k): list(v) for k, v in (measured or {}).items()}

    def initial_values(self) -> dict:
        job = self.job
        names = ("micro_batch_size", "seq_len", "schedule", "virtual_stages", "recompute", "precision", "dropout",
                 "pipeline_stages", "global_batch", "data_parallel", "tensor_parallel", "sequence_parallel",
                 "device_memory_gib")
        return {"model": job.model.name, **{n: getattr(job, n) for n in names}}

    def _build(self, values: dict) -> Job:
        """The job these values describe (the job's checks refuse an invalid one: ValueError); ``make``
        is this, remembered (:class:`~batchlab.page.valid.JobMaker`)."""
        fields = {n: values[n] for n in self.initial_values() if n != "model"}
        return replace(self.job, **fields, model=get_config(values["model"]))

    def controls(self, values: dict) -> list[Control]:
        """The controls; micro-batch size, stages and data parallelism offer only the values that make a
        valid job with the other values (:mod:`batchlab.page.valid`), recomputed after every change."""
        model = values.get("model")
        # a model the list does not hold: the chapter's model's ranges, and the model control refuses it
        config = get_config(model if isinstance(model, str) and model in PRESETS else self.job.model.name)
        extra = self.job.seq_len if config.name == self.job.model.name else None

        def counts(name: str, label: str) -> Control:
            return count_control(self.make, values, name, label, config.n_layer, wide=True)

        return [
            Control("model", "模型", "choice", options=tuple((name, name) for name in PRESETS)),
            counts("pipeline_stages", "流水线阶段数 (PP)"),
            counts("micro_batch_size", "微批次大小"),
            Control("seq_len", "序列长度", "steps", options=tuple(
                (str(s), s) for s in seq_len_options(config.n_positions, extra)), wide=True),
            Control("schedule", "流水线调度", "buttons", options=tuple((label, key) for key, label in SCHEDULES.items()),
                    wide=True),  # four buttons: a whole row, not wrapped in half of one
            chunk_control(self.make, values, "虚拟阶段数 (v)", config.n_layer, wide=True),
            Control("recompute", "重计算", "choice", options=tuple((label, key) for key, label in RECOMPUTE_MODES.items()),
                    wide=True),
            Control("precision", "精度", "choice", options=tuple((label, key) for key, label in PRECISIONS.items()),
                    wide=True),
            Control("global_batch", "全局批大小", "int", 1, LIMITS["global_batch"][1]),
            counts("data_parallel", "数据并行度 (DP)"),
            count_control(self.make, values, "tensor_parallel", "张量并行度 (TP)", config.n_layer),
            Control("sequence_parallel", "序列并行 (SP)", "buttons", options=(("关", False), ("开", True))),
            Control("device_memory_gib", "设备显存 (GiB)", "float", *LIMITS["device_memory_gib"], step=1.0),
            Control("dropout", "dropout 概率", "float", 0.0, 0.9, step=0.05),
        ]

    def follow(self, values: dict, changed: str) -> dict:
        """A new model brings its own :data:`MODEL_SETTINGS` (the chapter's, for the chapter's model); then
        any change that leaves no valid job moves the fewest other counts to their nearest valid values."""
        try:
            config = get_config(values["model"])
            if changed == "model":
                if config.name == self.job.model.name:
                    own = {n: self.initial_values()[n] for n in MODEL_SETTINGS}
                else:
                    own = {"seq_len": max(v for v in seq_len_options(config.n_positions) if v <= self.job.seq_len),
                           "precision": default_precision(config), "dropout": config.dropout,
                           "pipeline_stages": min(values["pipeline_stages"], config.n_layer)}
                values = {**values, **own}
            return settle(self.make, values, changed, config.n_layer)
        except (KeyError, TypeError, ValueError):  # a missing or refused value: compute() says which, in one line
            return dict(values)

    def follow_reason(self, before: dict, after: dict, changed: str) -> str:
        if changed != "model":
            return "（让配置仍然有效）"
        if after.get("model") == self.job.model.name:
            return "（回到本章的设置）"
        return f"（{after.get('model')} 自己的设置）"

    def measured_for(self, values: dict, stages: int) -> list | None:
        """The measured peaks for these values, when the chapter measured them at this stage count."""
        points = self.measured.get((values["model"], values["micro_batch_size"], values["seq_len"],
                                    values["recompute"]))
        return list(points) if points is not None and len(points) == stages else None

    def compute(self, values: dict) -> Panel:
        try:
            v = self.check_values(values)
            job = self.make(v)
        except ValueError as err:
            return self.refused(values, err)
        report = stage_memory(job)
        measured = self.measured_for(v, len(report.stages))
        title = memory_title(job)
        return Panel(render_memory_summary_html(report), memory_chart(report, measured, title),
                     result=MemoryView(report, measured, title))

    def context(self) -> dict:
        return {"job": self.job.as_record(),
                "measured": [[*key, values] for key, values in self.measured.items()]}

    @classmethod
    def from_context(cls, context: dict) -> "MemoryExplorer":
        measured = {tuple(row[:4]): row[4] for row in context["measured"]}
        return cls(Job.from_record(context["job"]), measured)
