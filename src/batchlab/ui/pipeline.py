"""Pipeline figures: the Gantt chart of a schedule's timeline (4.1, 4.4)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..pipeline_schedules import SCHEDULES
from .style import PALETTE, new_axes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..pipeline_schedules import Timeline

__all__ = ["plot_pipeline_timeline"]


def plot_pipeline_timeline(timeline: "Timeline", ax: "Axes | None" = None, title: str | None = None) -> "Figure":
    """Gantt chart of a simulated pipeline step: one row per stage, one colour per micro-batch;
    forward boxes light, backward boxes dark, gaps are the bubble."""
    p = timeline.pipeline_stages
    fig, ax = new_axes(ax, figsize=(9, 0.55 * p + 1.4))
    for op in timeline.ops:
        colour = PALETTE[op.microbatch % len(PALETTE)]
        ax.barh(op.stage, op.end - op.start, left=op.start, height=0.8, color=colour,
                alpha=0.45 if op.kind == "F" else 0.95, edgecolor="white", linewidth=0.6)
        ax.text((op.start + op.end) / 2, op.stage, f"{op.kind}{op.microbatch}", ha="center",
                va="center", fontsize=7)
    ax.set_yticks(range(p), [f"阶段 {s}" for s in range(p)])
    ax.invert_yaxis()
    ax.set_xlabel("时间（以一次前向计算为单位）")
    ax.grid(False)
    name = SCHEDULES.get(timeline.schedule, timeline.schedule)
    ax.set_title(title or f"{name}：{p} 个阶段，{timeline.num_microbatches} 个微批次，"
                 f"气泡占比 {timeline.idle_fraction:.1%}")
    fig.tight_layout()
    return fig
