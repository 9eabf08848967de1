"""Figure and tables of chapter 4.8's 「bf16 下的梯度累积：累积的精度」: the error of summing gradients in each
precision, the verdict per accumulator, and what it does to a short run's loss.

The measured errors agree across CPU kernels to about 1% (the fp32 backward rounds differently, so a few
terms land on another bf16 neighbour), so a table shows one significant figure, or below float32's rounding
level only that; the verdicts are identical."""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from batchlab.lecture.accumulation_precision import (ACCUMULATORS, LOSS_TOLERANCE, equivalence_tolerance,
                                                      loss_curve_gap, same_loss_curve, verdicts_by_accumulator)
from batchlab.lecture.verdicts import VERDICT
from batchlab.page.numbers import Formatted, float_gap

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from batchlab.ui.tables import Table

__all__ = ["ACCUMULATOR_SHORT", "plot_accumulation_error", "error_reading", "accumulation_table", "training_table"]

ACCUMULATOR_SHORT: dict[str, str] = {
    "fp32": "fp32 训练",
    "bf16": "bf16 缓冲",
    "bf16-kahan": "bf16 + Kahan",
    "bf16-fp32-main": "fp32 主梯度",
}
"""A legend's name for each of :data:`~batchlab.lecture.accumulation_precision.ACCUMULATORS` (the long
names, :data:`~batchlab.lecture.accumulation_precision.ACCUMULATOR_LABELS`, do not fit a phone's legend)."""

PANEL_TITLES = ("梯度累积：m 个微批次", "数据并行 All-Reduce：d 个副本")
"""What each panel sums: one replica's micro-batches, or the replicas' gradients around a ring."""


def plot_accumulation_error(accumulation: Mapping[str, Mapping[int, float]],
                            allreduce: Mapping[str, Mapping[int, float]] | None = None,
                            layout: str = "desk") -> "Figure":
    """Relative error against the float64 sum, log-log, one line per accumulator ({name: {m: error}}, as
    :func:`batchlab.measure.accumulation.accumulation_error` returns); with ``allreduce`` a second panel
    for the all-reduce over d replicas. The dashed line is the bf16 criterion 2u
    (:func:`~batchlab.lecture.accumulation_precision.equivalence_tolerance`). An error of exactly 0 (fp32
    summing one term rounds nothing) has no place on a log axis and is left out. Side by side on a desk,
    stacked on a phone."""
    import matplotlib.pyplot as plt

    from batchlab.page.colours import PALETTE
    from batchlab.ui.style import LINESTYLES, MARKERS, check_layout, figure_width, plain_log_ticks

    phone = check_layout(layout) == "phone"
    panels = [accumulation] if allreduce is None else [accumulation, allreduce]
    for errors in panels:
        unknown = set(errors) - set(ACCUMULATORS)
        if not errors or unknown:
            raise ValueError(f"误差表应以 {list(ACCUMULATORS)} 为键，收到 {sorted(errors)}")
    shape = (len(panels), 1) if phone else (1, len(panels))
    height = (3.3 * len(panels) + 0.9) if phone else 3.9
    fig, axes = plt.subplots(*shape, figsize=(figure_width(layout), height), squeeze=False, sharey=True,
                             layout="constrained")
    tolerance = equivalence_tolerance("bfloat16")
    counts = sorted({m for errors in panels for by_m in errors.values() for m in by_m})
    for ax, errors, title, symbol in zip(axes.flat, panels, PANEL_TITLES, ("m", "d")):
        for i, name in enumerate(ACCUMULATORS):
            if name not in errors:
                continue
            ms = [m for m in sorted(errors[name]) if errors[name][m] > 0]
            ax.plot(ms, [errors[name][m] for m in ms], color=PALETTE[i % len(PALETTE)],
                    ls=LINESTYLES[i % len(LINESTYLES)], marker=MARKERS[i % len(MARKERS)], lw=1.6, ms=5,
                    label=ACCUMULATOR_SHORT[name])
        ax.axhline(tolerance, color="k", ls="--", lw=1.0, label="判据 2u（bf16）")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plain_log_ticks(ax.xaxis, counts[0], counts[-1], most=7)
        ax.set_xlabel(symbol)
        ax.set_title(title)
    for row in axes[:, 0]:
        row.set_ylabel("相对 float64 的误差")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2 if phone else 5, frameon=False)
    return fig


def error_reading(error: float) -> Formatted:
    """A measured relative error as a table shows it: below float32's rounding level
    (:data:`~batchlab.lecture.verdicts.FLOAT32_ROUNDING`) only "< 10⁻⁶" (its digits change with the CPU;
    the table's text says it is float32's rounding, which in a column of its own would wrap every cell),
    else one significant figure (2.2e-3 → 2×10⁻³)."""
    return float_gap(error, figures=1, say_why=False)


def accumulation_table(accumulation: Mapping[str, Mapping[int, float]],
                       allreduce: Mapping[str, Mapping[int, float]]) -> "Table":
    """One row per accumulator: its error at the smallest and largest m, its verdict over every m
    (:func:`~batchlab.lecture.accumulation_precision.verdicts_by_accumulator`), then the same for the
    all-reduce at the largest d."""
    from batchlab.ui.tables import text_table

    verdicts, ring_verdicts = verdicts_by_accumulator(accumulation), verdicts_by_accumulator(allreduce)
    first = min(min(by_m) for by_m in accumulation.values())
    last = max(max(by_m) for by_m in accumulation.values())
    most = max(max(by_d) for by_d in allreduce.values())
    rows = [[ACCUMULATOR_SHORT[name], error_reading(accumulation[name][first]),
             error_reading(accumulation[name][last]), verdicts[name], error_reading(allreduce[name][most]),
             ring_verdicts[name]] for name in ACCUMULATORS if name in accumulation and name in allreduce]
    return text_table(["累加方式", f"误差 m = {first}", f"m = {last}", "累积等价", f"All-Reduce d = {most}",
                       "All-Reduce 等价"], rows)


def training_table(curves: Mapping[str, Sequence[float]], reference: str = "fp32",
                   tolerance: float = LOSS_TOLERANCE) -> "Table":
    """One row per run of :func:`batchlab.measure.accumulation.accumulation_training` besides ``reference``:
    the largest per-step loss difference from it (below ``tolerance`` only that: the digits change with the
    CPU) and whether it is the same curve (:func:`~batchlab.lecture.accumulation_precision.same_loss_curve`)."""
    from batchlab.ui.tables import text_table

    if reference not in curves:
        raise ValueError(f"没有参照运行 {reference!r}：收到 {sorted(curves)}")
    rows = []
    for name, curve in curves.items():
        if name == reference:
            continue
        gap = loss_curve_gap(curve, curves[reference])
        rows.append([ACCUMULATOR_SHORT[name], f"< {tolerance}" if gap < tolerance else f"{gap:.2f}",
                     VERDICT[same_loss_curve(curve, curves[reference], tolerance)]])
    return text_table(["累加方式", f"每步损失与 {ACCUMULATOR_SHORT[reference]}之差（最大）", "同一条损失曲线"], rows)
