"""The gradient-noise explorer (4.2), declared once: its controls, its summary and its chart.

It computes nothing about noise: the chapter's run measures the cloud of mini-batch gradients and the
error statistics with torch (:mod:`batchlab.measure.noise`) and hands them in; the explorer selects a
batch size from them and asks :func:`batchlab.formulas.scaling.scale_lr` for the learning rate. The
measured data travel to the page with the explorer (its context), so the browser redraws the reader's
own run, not a second computation.
"""
from __future__ import annotations

import html
from types import SimpleNamespace
from typing import NamedTuple, Protocol, Sequence

from batchlab.formulas.checks import one_of
from batchlab.formulas.scaling import LR_RULES, scale_lr
from batchlab.page.colours import PALETTE
from batchlab.page.numbers import learning_rate, scientific
from batchlab.page.symbols import html as symbol_html
from batchlab.page.spec import (CHART_FONT, NARROW_PX, PHONE_CHART_PX, Control, Explorer, NotebookLayout, Panel,
                                legend_height, responsive)

__all__ = ["render_noise_summary_html", "noise_chart", "NoiseView", "NoiseExplorer", "CloudLike", "ErrorStatsLike",
           "STATS_KEYS", "MIN_LR", "MAX_LR", "LR_CHOICES", "lr_choices"]

STATS_KEYS = ("batch_sizes", "rel_error", "rel_error_theory", "cosine", "sq_error", "sq_error_theory")
"""What the explorer reads of :func:`batchlab.measure.noise.minibatch_error`'s statistics (its fields)."""


class CloudLike(Protocol):
    """What the explorer reads of a :class:`batchlab.measure.noise.GradientCloud` (page/ never imports it):
    the batch sizes, one sequence of (x, y) points per size, and G's (x, y)."""

    @property
    def batch_sizes(self) -> Sequence[int]: ...

    @property
    def points(self) -> Sequence: ...

    @property
    def center(self) -> Sequence[float]: ...


class ErrorStatsLike(Protocol):
    """What the explorer reads of a :class:`batchlab.measure.noise.MinibatchError`: the fields named in
    :data:`STATS_KEYS`, each aligned with ``batch_sizes``."""

    @property
    def batch_sizes(self) -> Sequence[int]: ...

    @property
    def rel_error(self) -> Sequence[float]: ...

    @property
    def rel_error_theory(self) -> Sequence[float]: ...

    @property
    def cosine(self) -> Sequence[float]: ...

    @property
    def sq_error(self) -> Sequence[float]: ...

    @property
    def sq_error_theory(self) -> Sequence[float]: ...
MIN_LR, MAX_LR = 1e-5, 1.0
LR_CHOICES = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0)
"""The base learning rates the slider stops at, 1 and 3 per decade from :data:`MIN_LR` to :data:`MAX_LR`.
A slider of fixed values, each labelled by :func:`~batchlab.page.numbers.learning_rate` as the summary writes
it: a log slider snapped the chapter's 3e-3 to its nearest step, 10^-2.5, and the notebook's frozen view
and the PDF showed 3.2e-3 while the code set 3e-3."""


def lr_choices(base_lr: float) -> tuple[tuple[str, float], ...]:
    """The base-rate slider's stops as (label, value): :data:`LR_CHOICES`, with ``base_lr`` among them
    (inserted in order when it is not one of them), so the slider starts at exactly the value given."""
    if not (isinstance(base_lr, (int, float)) and MIN_LR <= base_lr <= MAX_LR):
        raise ValueError(f"base_lr = {base_lr!r}：必须在 {learning_rate(MIN_LR)} 到 {learning_rate(MAX_LR)} 之间")
    values = sorted({*LR_CHOICES, float(base_lr)})
    return tuple((learning_rate(v), v) for v in values)


def _plain(values) -> list:
    """An array or a list as a list of plain numbers (the chapter hands numpy arrays in)."""
    return [v.tolist() if hasattr(v, "tolist") else v for v in values]


def render_noise_summary_html(batch_size: int, rel_error: float, rel_error_theory: float, cosine: float,
                              rule: str, lr: float, base_batch: int, base_lr: float) -> str:
    """The explorer's one-line summary; every number is passed in, none is computed here."""
    return (
        f"<div>B = <b>{batch_size}</b>：噪声（相对误差 ‖{symbol_html('G_B')} − <i>G</i>‖/‖<i>G</i>‖）"
        f"= <b>{rel_error:.3f}</b>"
        f"（理论 {rel_error_theory:.3f}），与 <i>G</i> 的平均余弦 = <b>{cosine:.3f}</b>；"
        f"{LR_RULES.get(rule, html.escape(rule))}（基准 B = {base_batch}，基准学习率 {learning_rate(base_lr)}）"
        f"给出学习率 <b>{learning_rate(lr)}</b></div>"
    )


def noise_chart(cloud: dict, stats: dict, batch_size: int) -> dict:
    """The browser's chart of the notebook's two panels: the cloud of estimates G_B around G at this B
    (axes fixed over every B, so the cloud is seen to shrink), and E‖G_B − G‖² against B on log axes
    with the theory curve and this B marked. ``cloud`` and ``stats`` are the explorer's plain, JSON-ready
    copies (:meth:`NoiseExplorer.context`), keyed by the measured records' field names."""
    i = list(cloud["batch_sizes"]).index(batch_size)
    every = [p for points in cloud["points"] for p in points] + [list(cloud["center"]), [0.0, 0.0]]
    xs, ys = [p[0] for p in every], [p[1] for p in every]
    half = 0.56 * max(max(xs) - min(xs), max(ys) - min(ys))
    mid = ((max(xs) + min(xs)) / 2, (max(ys) + min(ys)) / 2)
    j = list(stats["batch_sizes"]).index(batch_size)
    keep = [k for k, e in enumerate(stats["sq_error_theory"]) if e > 0]  # B = N has no error to put on a log axis
    sizes = stats["batch_sizes"]

    def r(v: float) -> float:
        return float(f"{v:.4g}")

    # a phone stacks the two panels
    narrow = {"title": [{"left": "center", "top": 0, "textStyle": {"fontSize": 12}},
                        {"left": "center", "top": "47%", "textStyle": {"fontSize": 12}}],
              "grid": [{"left": 40, "right": 12, "top": 28, "height": "34%"},
                       {"left": 56, "right": 12, "top": "53%", "bottom": 110}]}
    option = {
        "textStyle": {"fontFamily": CHART_FONT, "fontSize": 13},
        "aria": {"enabled": True},
        "title": [{"text": f"B = {batch_size}：{len(cloud['points'][i])} 个小批量梯度估计", "left": "6%",
                   "textStyle": {"fontSize": 14}},
                  {"text": "误差随 B 按 1/B 下降", "left": "64%", "textStyle": {"fontSize": 14}}],
        "legend": {"bottom": 0},
        "tooltip": {"trigger": "item"},
        "grid": [{"left": "9%", "width": "36%", "top": 48, "bottom": 96},
                 {"left": "62%", "right": "3%", "top": 48, "bottom": 96}],
        "xAxis": [{"gridIndex": 0, "type": "value", "name": "沿 G 方向（e1）", "nameLocation": "middle", "nameGap": 24,
                   "min": r(mid[0] - half), "max": r(mid[0] + half), "axisLabel": {"show": False}},
                  {"gridIndex": 1, "type": "log", "logBase": 2, "name": "批大小 B", "nameLocation": "middle",
                   "nameGap": 30, "min": min(sizes), "max": max(sizes)}],  # clear of the ticks' numbers
        "yAxis": [{"gridIndex": 0, "type": "value", "name": "横向（e2）", "nameLocation": "middle", "nameGap": 12,
                   "min": r(mid[1] - half),
                   "max": r(mid[1] + half), "axisLabel": {"show": False}},
                  {"gridIndex": 1, "type": "log", "name": "均方误差", "nameLocation": "middle", "nameGap": 40}],
        "series": [
            {"type": "scatter", "name": "小批量梯度估计", "xAxisIndex": 0, "yAxisIndex": 0, "symbolSize": 5,
             "itemStyle": {"color": PALETTE[0], "opacity": 0.45},
             "data": [[r(x), r(y)] for x, y in cloud["points"][i]]},
            {"type": "scatter", "name": "全量梯度 G", "xAxisIndex": 0, "yAxisIndex": 0, "symbol": "diamond",
             "symbolSize": 14, "color": PALETTE[3], "z": 4, "data": [[r(v) for v in cloud["center"]]]},
            {"type": "line", "name": "理论 tr(Σ)/B · (N-B)/(N-1)", "xAxisIndex": 1, "yAxisIndex": 1, "showSymbol": False,
             "color": "#000000", "lineStyle": {"type": "dashed"},
             "data": [[sizes[k], r(stats["sq_error_theory"][k])] for k in keep]},
            {"type": "scatter", "name": "实测均方误差", "xAxisIndex": 1, "yAxisIndex": 1, "color": PALETTE[0],
             "data": [[sizes[k], r(stats["sq_error"][k])] for k in keep]},
            {"type": "scatter", "name": "当前 B", "xAxisIndex": 1, "yAxisIndex": 1, "symbolSize": 16, "z": 4,
             "itemStyle": {"color": "rgba(0,0,0,0)", "borderColor": PALETTE[3], "borderWidth": 2},
             "data": [[batch_size, r(stats["sq_error"][j])]] if j in keep else []},
        ],
    }
    # the lower plot's x axis name (30 px below it, 18 px tall) clear of the legend as it wraps
    names = [s["name"] for s in option["series"]]
    option["grid"][1]["bottom"] = max(96, 48 + legend_height(names, NARROW_PX))
    narrow["grid"][1]["bottom"] = 48 + legend_height(names, PHONE_CHART_PX)
    return responsive(option, narrow)


class NoiseView(NamedTuple):
    """What the explorer answers for one set of values (its panel's ``result``): the chosen B and the
    measured data as the chapter handed them in (numpy arrays there), which
    :func:`batchlab.ui.noise.draw_noise_explorer` draws."""

    batch_size: int
    cloud: CloudLike
    stats: ErrorStatsLike


class NoiseExplorer(Explorer):
    """Pick B: the cloud of mini-batch gradients around G shrinks, the error follows 1/B, and a scaling
    rule gives the learning rate for that B. ``cloud`` from :func:`batchlab.measure.noise.gradient_cloud`,
    ``stats`` from :func:`batchlab.measure.noise.minibatch_error`, for the same batch sizes."""

    name = "noise"
    # one control a row: a phone's column
    layout = NotebookLayout(label_px=110, widths=(("batch_size", 420), ("base_batch", 220)))
    drawing = "batchlab.ui.noise.draw_noise_explorer"

    def __init__(self, cloud: CloudLike, stats: ErrorStatsLike, base_batch: int = 32, base_lr: float = 3e-3,
                 lr_rule: str = "linear", batch_size: int | None = None) -> None:
        sizes = [int(b) for b in cloud.batch_sizes]
        missing = [b for b in sizes if b not in list(stats.batch_sizes)]
        if missing:
            raise ValueError(f"梯度云的批大小 {missing} 在 stats 里没有（stats 有 {list(stats.batch_sizes)}）："
                             "请用同一组批大小计算两者")
        one_of("lr_rule", lr_rule, LR_RULES)
        lr_choices(base_lr)  # a base rate the slider can show
        start = batch_size if batch_size is not None else (base_batch if base_batch in sizes else sizes[0])
        if start not in sizes:
            raise ValueError(f"batch_size = {start!r}：不在预先算好的批大小 {sizes} 之中")
        self.given = (cloud, stats)  # as handed in: what the notebook draws (the page gets the plain lists)
        self.cloud = {"batch_sizes": sizes, "points": [_plain(p) for p in cloud.points],
                      "center": _plain(cloud.center)}
        self.stats = {key: _plain(getattr(stats, key)) for key in STATS_KEYS}
        self.start = {"batch_size": start, "lr_rule": lr_rule, "base_batch": base_batch, "base_lr": base_lr}

    def initial_values(self) -> dict:
        return dict(self.start)

    def controls(self, values: dict) -> list[Control]:
        return [
            Control("batch_size", "批大小 B", "steps", options=tuple((str(b), b) for b in self.cloud["batch_sizes"]),
                    wide=True),
            Control("lr_rule", "学习率规则", "buttons", options=tuple((label, key) for key, label in LR_RULES.items())),
            Control("base_batch", "基准批大小", "int", 1, 1_000_000),
            Control("base_lr", "基准学习率", "steps", options=lr_choices(self.start["base_lr"])),
        ]

    def compute(self, values: dict) -> Panel:
        try:
            v = self.check_values(values)
            lr = scale_lr(v["base_lr"], v["base_batch"], v["batch_size"], v["lr_rule"])
        except ValueError as err:
            return self.refused(values, err)
        i = self.stats["batch_sizes"].index(v["batch_size"])
        summary = render_noise_summary_html(v["batch_size"], self.stats["rel_error"][i],
                                            self.stats["rel_error_theory"][i], self.stats["cosine"][i],
                                            v["lr_rule"], lr, v["base_batch"], v["base_lr"])
        return Panel(summary, noise_chart(self.cloud, self.stats, v["batch_size"]),
                     result=NoiseView(v["batch_size"], *self.given))

    def context(self) -> dict:
        cloud = {**self.cloud, "points": [[[float(f"{x:.5g}"), float(f"{y:.5g}")] for x, y in points]
                                          for points in self.cloud["points"]]}
        return {"cloud": cloud, "stats": self.stats, "start": self.start}

    @classmethod
    def from_context(cls, context: dict) -> "NoiseExplorer":
        # the context holds plain dicts; the explorer reads fields, as of the measured records
        return cls(SimpleNamespace(**context["cloud"]), SimpleNamespace(**context["stats"]), **context["start"])
