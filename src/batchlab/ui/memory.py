"""Memory figures and the memory explorer's drawing (4.3).

Every number comes from :func:`batchlab.formulas.memory.stage_memory` of a
:class:`~batchlab.formulas.job.Job` (the controls make one; its validation is the explorer's); this module only stacks the parts of each stage's peak into bars, marks
what does not fit; the explorer (declared in :mod:`batchlab.page.memory`) redraws it when a control moves.
The memory model is pure math, so a change is recomputed in full each time.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from batchlab.formulas.memory import MemoryReport
from batchlab.page.colours import MEASURED_COLOUR, OVERFLOW_COLOUR, PALETTE
from batchlab.page.memory import MEMORY_PARTS, MemoryView, memory_unit, share_text
from batchlab.ui.names import name
from batchlab.ui.style import check_layout, clear_artists, explorer_panels, figure_width, new_axes, phone_title

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_stage_memory", "plot_schedule_memory", "plot_memory_by_batch",
           "plot_memory_audit", "draw_memory_explorer"]

def plot_stage_memory(report: MemoryReport, ax: "Axes | None" = None,
                      measured: Sequence[float | None] | None = None, title: str | None = None,
                      legend: bool = True, layout: str = "desk") -> "Figure":
    """Stacked bars, one per pipeline stage, of the peak memory in ``report`` (from
    :func:`batchlab.formulas.memory.stage_memory`): parameters, gradients, optimizer states, activations and,
    with recomputation, the working set of the layer being recomputed. A dashed line marks the
    device's capacity; over each bar its peak as a share of that capacity, in red when the stage does
    not fit, with the part above the line hatched in red.

    ``measured``: one measured peak in bytes per stage (None where not measured), drawn as black
    markers. Values are in GiB, or in MiB when everything is under 1 GiB. Draws on ``ax`` when given
    (an interactive caller clears and reuses it); otherwise on a new pyplot figure as wide as the
    book's column. The legend sits below the axes (``legend=False``: none, for a caller that draws one
    for several panels). ``layout``: the desk column or a phone's (two legend columns, a title in two lines).
    """
    stages = report.stages
    phone = check_layout(layout) == "phone"
    if measured is not None and len(measured) != len(stages):
        raise ValueError(f"measured has {len(measured)} values but the report has {len(stages)} stages: "
                         "give one (or None) per stage")
    own_figure = ax is None
    fig, ax = new_axes(ax, figsize=(figure_width(layout), 4.6 if phone else 4.2))
    capacity = report.device_memory_bytes
    peaks = report.peak_bytes_per_stage
    measured = list(measured) if measured is not None else [None] * len(stages)
    shown = [v for v in measured if v is not None]
    unit, scale = memory_unit(max([capacity, *peaks, *shown]))
    x = list(range(len(stages)))
    many = len(stages) > 12
    width = 0.7

    handles = []  # legend, top to bottom: capacity, overflow, measured, then the stack as it is drawn
    bottoms = [0.0] * len(stages)
    for label, colour, part, always in MEMORY_PARTS:
        values = [part(st) / scale for st in stages]
        if not always and not any(values):
            continue
        handles.insert(0, ax.bar(x, values, width, bottom=bottoms, color=colour, label=label, linewidth=0))
        bottoms = [b + v for b, v in zip(bottoms, values)]
    top_handles = [ax.axhline(capacity / scale, color="0.25", ls="--", lw=1.2, zorder=4,
                              label=f"设备显存 {capacity / scale:.4g} {unit}")]
    over = [i for i, st in enumerate(stages) if st.peak_bytes > capacity]
    if over:
        top_handles.append(ax.bar(
            [x[i] for i in over], [(peaks[i] - capacity) / scale for i in over], width, bottom=capacity / scale,
            facecolor="none", edgecolor=OVERFLOW_COLOUR, hatch="///", linewidth=1.5, zorder=3,
            label="超出显存的部分"))
    if shown:
        points = [(i, v / scale) for i, v in enumerate(measured) if v is not None]
        top_handles += ax.plot([p[0] for p in points], [p[1] for p in points], "D", color=MEASURED_COLOUR,
                               ms=5 if many else 7, zorder=5, label="实测峰值")

    for i, st in enumerate(stages):
        marker_on_top = measured[i] is not None and measured[i] / scale > bottoms[i]
        top = measured[i] / scale if marker_on_top else bottoms[i]
        red = i in over
        ax.annotate(share_text(st.peak_bytes / capacity), (x[i], top), xytext=(0, 7 if marker_on_top else 2),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8.5 if many else 9,
                    rotation=90 if many else 0,
                    color=OVERFLOW_COLOUR if red else "0.2", fontweight="bold" if red else "normal")

    ax.set_ylim(0, max([capacity, *peaks, *shown]) / scale * (1.3 if many else 1.15))
    ax.set_xlim(-0.6, len(stages) - 0.4)
    ticks = x[::1 if len(stages) <= 12 else 4]
    ax.set_xticks(ticks, [f"阶段 {i}" if len(stages) <= 8 else str(i) for i in ticks])
    ax.set_xlabel("流水线阶段")
    ax.set_ylabel(f"峰值显存 ({unit})")
    ax.grid(axis="x", visible=False)
    ax.set_title(phone_title(title or "各流水线阶段的峰值显存（最满的阶段占设备显存 "
                             f"{share_text(report.peak_memory_fraction)}）", layout), y=1.0)
    if legend:
        # below the axes, left to right in rows: capacity, overflow, measured, then the stack top down
        from matplotlib.transforms import offset_copy

        # its top 34 pt under the axes: under the tick labels and the axis label, whatever the axes' size
        ax.legend(handles=top_handles + handles, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                  bbox_transform=offset_copy(ax.transAxes, fig=fig, y=-34, units="points"),
                  ncol=2 if phone else 4, borderaxespad=0, frameon=False, columnspacing=1.2, handlelength=1.6)
    if own_figure:
        fig.tight_layout()
    return fig


def plot_schedule_memory(reports: Mapping[str, MemoryReport], layout: str = "desk") -> "Figure":
    """:func:`plot_stage_memory` of several reports (one job under different schedules, say), one
    panel a row on one memory scale, titled by ``reports``' keys, with one legend below them all."""
    import matplotlib.pyplot as plt
    if not reports:
        raise ValueError("reports 为空：至少给出一个显存报告")
    phone = check_layout(layout) == "phone"
    fig, axes = plt.subplots(len(reports), 1, figsize=(figure_width(layout), (2.6 if phone else 2.5) * len(reports)
                                                       + (1.5 if phone else 0.9)), sharey=True,
                             sharex=True, layout="constrained", squeeze=False)
    tops = []
    for ax, (name, report) in zip(axes[:, 0], reports.items()):
        plot_stage_memory(report, ax=ax, title=name, legend=False, layout=layout)
        tops.append(ax.get_ylim()[1])  # each call fits the shared axis to its own report
        ax.set_xlabel("")
    axes[0, 0].set_ylim(0, max(tops))
    axes[-1, 0].set_xlabel("流水线阶段")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: (not labels[i].startswith("设备显存"), -i))
    fig.legend([handles[i] for i in order], [labels[i] for i in order], loc="outside lower center",
               ncol=2 if phone else 4,
               frameon=False, columnspacing=1.2, handlelength=1.6)
    return fig


def plot_memory_by_batch(batch_sizes: Sequence[int], state_bytes: Sequence[float],
                         activation_bytes: Sequence[float], seq_len: int, layout: str = "desk") -> "Figure":
    """One stacked bar per batch size B: the model states (parameters, gradients, optimizer), which
    do not depend on B, under the activations measured for B sequences of ``seq_len`` tokens; MiB."""
    import matplotlib.pyplot as plt
    if not (len(batch_sizes) == len(state_bytes) == len(activation_bytes)):
        raise ValueError("batch_sizes、state_bytes、activation_bytes 的长度必须相同")
    fig, ax = plt.subplots(figsize=(figure_width(layout), 3.5))
    names = [str(b) for b in batch_sizes]
    states = [v / 2**20 for v in state_bytes]
    ax.bar(names, states, color="0.7", label="参数 + 梯度 + Adam 状态")
    ax.bar(names, [a / 2**20 for a in activation_bytes], bottom=states, color=PALETTE[4], label="激活值（实测）")
    ax.set(xlabel=f"批大小 $B$（序列长度 {seq_len}）", ylabel="MiB")
    ax.grid(axis="x", visible=False)
    ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


_MODE_STYLE = {"none": ("o", PALETTE[0]), "selective": ("s", PALETTE[1]), "full": ("^", PALETTE[2])}


def plot_memory_audit(before: Mapping, after: Mapping, reported: tuple[float, float], before_label: str,
                      after_label: str, layout: str = "desk") -> "Figure":
    """The 4.5 audit: each setting of ``before`` (a key → the fullest stage's memory fraction before
    the change) against the same key of ``after``, the diagonal where nothing changes, and the pair
    the lecture reports as a star."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    keys = [k for k in before if k in after]
    if not keys:
        raise ValueError("before 与 after 没有共同的设置")
    phone = check_layout(layout) == "phone"
    fig, ax = plt.subplots(figsize=(figure_width(layout, 0.8), 4.0 if phone else 4.9))
    ax.scatter([before[k] for k in keys], [after[k] for k in keys], s=22, color=PALETTE[0], alpha=0.8,
               label=f"显存模型的 {len(keys)} 种设置")
    top = max(max(before[k] for k in keys), max(after[k] for k in keys), *reported)
    ax.plot([0, top], [0, top], color="0.4", lw=1.2, ls="--", label="调整前后相等")
    ax.scatter([reported[0]], [reported[1]], marker="*", s=260, color=PALETTE[1], edgecolor="k", linewidth=0.6,
               label=f"原文报告：{reported[0]:.0%} → {reported[1]:.0%}", zorder=3)
    ax.set(xlabel=phone_title(before_label, layout, most=20), ylabel=after_label)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


def draw_memory_explorer(figure: "Figure", view: MemoryView, layout: str = "desk") -> None:
    """The memory explorer's figure (:class:`batchlab.page.memory.MemoryExplorer` names it): one axes of
    :func:`plot_stage_memory` on ``figure``, made on the first call and then cleared and redrawn, with fixed
    margins (not tight_layout, recomputed per change otherwise; the legend sits below). On a phone
    (``layout="phone"``, drawn once on a new figure) the phone's drawing, laid out by matplotlib."""
    explorer_panels(figure, layout, 1, desk_height=4.4, phone_height=4.8,
                    margins=dict(left=0.1, right=0.98, bottom=0.25, top=0.92))
    ax = figure.axes[0]
    clear_artists(ax)
    plot_stage_memory(view.report, ax=ax, measured=view.measured, title=view.title, layout=layout)
    figure.canvas.draw()
