"""Diagrams (4.1, referred to by 4.3–4.5): the anatomy of one optimizer step's batch.

:func:`draw_batch_anatomy` draws how a global batch of :math:`B_\\text{global}` sequences is split: into
:math:`d` data-parallel replicas, each replica's logical batch into :math:`m` micro-batches of :math:`b`
sequences, each micro-batch flowing through the :math:`p` pipeline stages (one card each). Every number
on it comes from the :class:`~batchlab.formulas.batching.BatchPlan`; a large :math:`d`, :math:`m` or
:math:`p` is drawn as its first items, an ellipsis and its last.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from batchlab.formulas.batching import BatchPlan
from batchlab.formulas.job import Job
from batchlab.page.colours import PALETTE
from batchlab.ui.style import FIGURE_WIDTH, new_axes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["ANATOMY_FIGSIZE", "ANATOMY_FONTSIZE", "draw_batch_anatomy", "shown_indices"]

ANATOMY_FIGSIZE = (FIGURE_WIDTH, 4.0)
"""Inches: the book's figure width (style.FIGURE_WIDTH, the column at style.DPI), so it is shown unscaled."""
ANATOMY_FONTSIZE = 9
"""The smallest text on the diagram, in points (headers are one point larger)."""

# The drawing's own coordinates: x in [0, 100], y in [0, 100 · height / width].
_W = 100.0
_GREY, _EDGE, _TEXT = "#eeeeee", "#555555", "#222222"


def shown_indices(n: int, most: int = 4) -> list[int | None]:
    """Which of ``n`` items a diagram draws: all when ``n <= most``; else the first ``most - 2``, None
    (drawn as an ellipsis) and the last."""
    if n <= most:
        return list(range(n))
    return [*range(most - 2), None, n - 1]


def _plan_of(plan_or_job: BatchPlan | Job) -> BatchPlan:
    if isinstance(plan_or_job, Job):
        return plan_or_job.plan
    if isinstance(plan_or_job, BatchPlan):
        return plan_or_job
    raise TypeError(f"需要 BatchPlan 或 Job，得到的是 {type(plan_or_job).__name__}")


def _box(ax: "Axes", x: float, y: float, w: float, h: float, text: str = "", face: str = _GREY,
         size: float = ANATOMY_FONTSIZE, **text_kw) -> None:
    """A rounded box with centred text; (x, y) is its lower-left corner."""
    from matplotlib.patches import FancyBboxPatch

    pad = min(w, h) * 0.12
    ax.add_patch(FancyBboxPatch((x + pad, y + pad), w - 2 * pad, h - 2 * pad,
                                boxstyle=f"round,pad={pad:.3f},rounding_size={pad:.3f}",
                                facecolor=face, edgecolor=_EDGE, linewidth=0.9))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, color=_TEXT,
                linespacing=1.25, **text_kw)


def _arrow(ax: "Axes", start: tuple[float, float], end: tuple[float, float], style: str = "-|>",
           width: float = 1.0, color: str = _EDGE, dashed: bool = False) -> None:
    from matplotlib.patches import FancyArrowPatch

    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=9, linewidth=width,
                                 color=color, linestyle="--" if dashed else "-", shrinkA=0, shrinkB=0))


def _ellipsis(ax: "Axes", x: float, y: float, vertical: bool = False) -> None:
    ax.text(x, y, "…", ha="center", va="center", fontsize=ANATOMY_FONTSIZE + 3, color=_TEXT,
            rotation=90 if vertical else 0)


def draw_batch_anatomy(plan_or_job: BatchPlan | Job, ax: "Axes | None" = None) -> "Figure":
    """One optimizer step's batch: global batch → data-parallel replicas → micro-batches → pipeline
    stages, labelled with the book's terms and symbols and the numbers of ``plan_or_job`` (a
    :class:`~batchlab.formulas.batching.BatchPlan` or a :class:`~batchlab.formulas.job.Job`).

    Left to right: the global batch of :math:`B_\\text{global}` sequences; one row per data-parallel
    replica (at most two drawn, else the first, an ellipsis and the last), each holding a logical batch of :math:`b \\times m`
    sequences; that batch's micro-batches (coloured as in the pipeline timelines of
    :mod:`batchlab.ui.pipeline`; at most four drawn); and the chain of :math:`p` stages, one card each,
    that every micro-batch passes through in turn (at most four drawn). Dashed lines join the same stage
    of different replicas, whose gradients an All-Reduce averages. All indices count from 0, as the
    timelines' micro-batch numbers and the glossary's stage index :math:`i` do.
    """
    plan = _plan_of(plan_or_job)
    B, b, d, m, p = (plan.global_batch, plan.micro_batch_size, plan.data_parallel, plan.num_microbatches,
                     plan.pipeline_stages)
    own_figure = ax is None
    fig, ax = new_axes(ax, figsize=ANATOMY_FIGSIZE)
    width_in, height_in = ax.figure.get_size_inches() if own_figure else ANATOMY_FIGSIZE
    top = _W * height_in / width_in
    ax.set_xlim(0, _W)
    ax.set_ylim(0, top)
    ax.set_axis_off()
    head = ANATOMY_FONTSIZE + 1

    # columns: global batch | replica's logical batch | micro-batches | pipeline stages (cards)
    gx, gw = 1.0, 12.0
    rx, rw = 18.0, 15.0
    mx, mw = 38.0, 13.0
    sx0, sx1 = 59.0, 99.0
    body_top, body_bottom = top - 11.0, 7.5

    header_y = top - 5.0
    ax.text(gx + gw / 2, header_y, f"全局批大小\n$B_{{\\mathrm{{global}}}}$ = {B}", ha="center", va="center",
            fontsize=head, color=_TEXT, linespacing=1.35)
    ax.text(rx + rw / 2, header_y, f"数据并行度\n$d$ = {d}", ha="center", va="center", fontsize=head,
            color=_TEXT, linespacing=1.35)
    ax.text(mx + mw / 2, header_y, f"微批次数 $m$ = {m}\n微批次大小 $b$ = {b}", ha="center", va="center",
            fontsize=head, color=_TEXT, linespacing=1.35)
    ax.text((sx0 + sx1) / 2, header_y, f"流水线阶段数 $p$ = {p}\n每个阶段一张卡", ha="center", va="center",
            fontsize=head, color=_TEXT, linespacing=1.35)

    # the global batch
    _box(ax, gx, body_bottom, gw, body_top - body_bottom, f"{B}\n条序列", face=_GREY)

    # rows: one per drawn replica; an ellipsis row is a third as tall
    replicas = shown_indices(d, most=3)
    weights = [1.0 if r is not None else 0.35 for r in replicas]
    gap = 4.0 if d > 1 else 0.0
    unit = (body_top - body_bottom - gap * (len(replicas) - 1)) / sum(weights)
    rows: list[tuple[int | None, float, float]] = []  # (replica, bottom, height)
    y = body_top
    for r, wgt in zip(replicas, weights):
        rows.append((r, y - wgt * unit, wgt * unit))
        y -= wgt * unit + gap

    stages = shown_indices(p)
    arrow_gap = 3.2
    sw = min((sx1 - sx0 - arrow_gap * (len(stages) - 1)) / len(stages), 10.0)
    stage_x = [sx0 + k * (sw + arrow_gap) for k in range(len(stages))]
    stage_boxes: dict[int, list[tuple[float, float, float]]] = {}  # drawn stage → (x centre, bottom, top) per row
    micro = shown_indices(m)

    for r, y0, h in rows:
        yc = y0 + h / 2
        if r is None:
            for x in (rx + rw / 2, mx + mw / 2, *(x + sw / 2 for x in stage_x)):
                _ellipsis(ax, x, yc, vertical=True)
            continue
        _arrow(ax, (gx + gw, yc), (rx, yc))
        _box(ax, rx, y0, rw, h, f"副本 {r}\n逻辑批次\n$b \\times m$ = {plan.samples_per_replica}",
             face="#e4ecf6")
        # the logical batch split into micro-batches
        slot = min(h / len(micro), 6.0)
        for k, j in enumerate(micro):
            my = yc + len(micro) * slot / 2 - (k + 1) * slot
            if j is None:
                _ellipsis(ax, mx + mw / 2, my + slot / 2, vertical=True)
                continue
            ax.plot([rx + rw, mx], [yc, my + slot / 2], color=_EDGE, linewidth=0.7)
            _box(ax, mx, my, mw, slot, f"微批次 {j}", face=_tint(PALETTE[j % len(PALETTE)]))
        # the micro-batches enter stage 0 one after another and pass through every stage
        sh = min(h * 0.55, 11.0)
        sy = yc - sh / 2
        _arrow(ax, (mx + mw + 0.5, yc), (stage_x[0], yc), width=1.3)
        ax.text((mx + mw + stage_x[0]) / 2 + 0.3, yc + 1.2, "依次\n送入", ha="center", va="bottom",
                fontsize=ANATOMY_FONTSIZE, color=_TEXT, linespacing=1.1)
        for k, (i, x) in enumerate(zip(stages, stage_x)):
            if i is None:
                _ellipsis(ax, x + sw / 2, yc)
            else:
                _box(ax, x, sy, sw, sh, f"阶段 {i}", face="#f4f4f4")
                stage_boxes.setdefault(i, []).append((x + sw / 2, sy, sy + sh))
            if k + 1 < len(stages):
                _arrow(ax, (x + sw, yc), (x + sw + arrow_gap, yc))

    # replicas' copies of one stage average their gradients (All-Reduce)
    if d > 1:
        for i, spans in stage_boxes.items():
            for (xc, above, _), (_, _, below) in zip(spans, spans[1:]):  # rows run top to bottom
                ax.plot([xc, xc], [above, below], color=PALETTE[3], linewidth=1.0, linestyle="--", zorder=0.5)
        first, second = rows[0], rows[1]
        ax.text((sx0 + sx1) / 2, (first[1] + second[1] + second[2]) / 2, "同一阶段的 $d$ 张卡：梯度全归约",
                ha="center", va="center", fontsize=ANATOMY_FONTSIZE, color=PALETTE[3],
                bbox=dict(facecolor="white", edgecolor="none", pad=1.0))

    ax.text(_W / 2, 2.8, f"$B_{{\\mathrm{{global}}}} = b \\times d \\times m$ = {b} × {d} × {m} = {B}；"
            f"共 $d \\times p$ = {d * p} 张卡", ha="center", va="center", fontsize=head, color=_TEXT)
    if own_figure:
        fig.subplots_adjust(left=0, right=1, bottom=0, top=1)
    return fig


def _tint(color: str, amount: float = 0.55) -> str:
    """``color`` (``#rrggbb``) mixed with white: light enough to read dark text on."""
    rgb = [int(color[k:k + 2], 16) for k in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)
