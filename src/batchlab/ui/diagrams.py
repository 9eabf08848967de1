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
from batchlab.page.symbols import mathtext
from batchlab.ui.style import FIGURE_WIDTH, PHONE_WIDTH, check_layout, new_axes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["ANATOMY_FIGSIZE", "ANATOMY_FONTSIZE", "draw_batch_anatomy", "shown_indices"]

ANATOMY_FIGSIZE = (FIGURE_WIDTH, 4.0)
"""Inches: the book's figure width (style.FIGURE_WIDTH, the column at style.DPI), so it is shown unscaled."""
ANATOMY_FONTSIZE = 9
"""The smallest text on the diagram, in points (headers are one point larger)."""
ANATOMY_PHONE_FIGSIZE = (PHONE_WIDTH, 4.05)
"""Inches of the phone drawing: the same batch top to bottom in a phone's column."""

_B_GLOBAL = mathtext("B_global")  # the book's one rendering of the symbol: $B_\mathrm{global}$

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


def draw_batch_anatomy(plan_or_job: BatchPlan | Job, ax: "Axes | None" = None, layout: str = "desk") -> "Figure":
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

    ``layout="phone"``: the same parts top to bottom (:func:`_draw_anatomy_phone`), for a phone's column.
    """
    plan = _plan_of(plan_or_job)
    if check_layout(layout) == "phone":
        return _draw_anatomy_phone(plan, ax)
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
    ax.text(gx + gw / 2, header_y, f"全局批大小\n{_B_GLOBAL} = {B}", ha="center", va="center",
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

    ax.text(_W / 2, 2.8, f"${_B_GLOBAL[1:-1]} = b \\times d \\times m$ = {b} × {d} × {m} = {B}；"
            f"共 $d \\times p$ = {d * p} 张卡", ha="center", va="center", fontsize=head, color=_TEXT)
    if own_figure:
        fig.subplots_adjust(left=0, right=1, bottom=0, top=1)
    return fig


def _tint(color: str, amount: float = 0.55) -> str:
    """``color`` (``#rrggbb``) mixed with white: light enough to read dark text on."""
    rgb = [int(color[k:k + 2], 16) for k in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)


def _draw_anatomy_phone(plan: BatchPlan, ax: "Axes | None" = None) -> "Figure":
    """:func:`draw_batch_anatomy` top to bottom, for a phone's column: the global batch across the top;
    below it one column per drawn replica (at most two and an ellipsis) holding its logical batch, its
    micro-batches (at most four drawn) and the chain of its stages (at most four drawn); a line of words
    above each part says what it is, with its symbol and number."""
    B, b, d, m, p = (plan.global_batch, plan.micro_batch_size, plan.data_parallel, plan.num_microbatches,
                     plan.pipeline_stages)
    own_figure = ax is None
    fig, ax = new_axes(ax, figsize=ANATOMY_PHONE_FIGSIZE)
    width_in, height_in = ax.figure.get_size_inches() if own_figure else ANATOMY_PHONE_FIGSIZE
    top = _W * height_in / width_in
    ax.set_xlim(0, _W)
    ax.set_ylim(0, top)
    ax.set_axis_off()
    size, muted = ANATOMY_FONTSIZE, "#444444"

    def label(y: float, text: str, color: str = muted) -> None:
        # on white: the arrows between the parts pass behind the words
        ax.text(1.0, y, text, ha="left", va="center", fontsize=size, color=color, zorder=4,
                bbox=dict(facecolor="white", edgecolor="none", pad=0.6))

    y = top - 1.0
    _box(ax, 1.0, y - 9.0, 98.0, 9.0, f"全局批次：{_B_GLOBAL} = {B} 条序列", size=size + 1)
    y -= 13.5
    label(y, f"数据并行度 $d$ = {d}：每个副本一份逻辑批次")
    # columns: one per drawn replica, an ellipsis column a third as wide
    replicas = shown_indices(d, most=3)
    weights = [1.0 if r is not None else 0.3 for r in replicas]
    gap = 4.0
    unit = (98.0 - gap * (len(replicas) - 1)) / sum(weights)
    columns, x = [], 1.0
    for r, wgt in zip(replicas, weights):
        columns.append((r, x, wgt * unit))
        x += wgt * unit + gap
    rows_top = y - 3.5
    micro = shown_indices(m)
    stages = shown_indices(p)
    slot, box_h, step = 7.0, 6.6, 9.5
    micro_top = rows_top - 11.0 - 8.5
    stage_top = micro_top - slot * len(micro) - 9.0
    stage_y: dict[int, list[tuple[float, float, float]]] = {}  # stage → (x left, x right, y centre) per column
    for r, x0, w in columns:
        xc = x0 + w / 2
        if r is None:  # the replicas between the first and the last
            for yc in (rows_top - 5.5, micro_top - slot * len(micro) / 2, stage_top - step * len(stages) / 2):
                _ellipsis(ax, xc, yc)
            continue
        # each arrow starts under the line of words above the part it points to
        _arrow(ax, (xc, y - 2.8), (xc, rows_top))
        _box(ax, x0, rows_top - 11.0, w, 11.0, f"副本 {r}\n$b \\times m$ = {plan.samples_per_replica}", face="#e4ecf6",
             size=size)
        _arrow(ax, (xc, micro_top + 1.6), (xc, micro_top))
        for k, j in enumerate(micro):
            my = micro_top - (k + 1) * slot
            if j is None:
                _ellipsis(ax, xc, my + slot / 2, vertical=True)
            else:
                _box(ax, x0 + 3.0, my, w - 6.0, box_h, f"微批次 {j}", face=_tint(PALETTE[j % len(PALETTE)]), size=size)
        _arrow(ax, (xc, stage_top + 1.6), (xc, stage_top), width=1.3)
        for k, i in enumerate(stages):
            sy = stage_top - k * step - box_h
            if i is None:
                _ellipsis(ax, xc, sy + box_h / 2, vertical=True)
            else:
                _box(ax, x0 + 6.0, sy, w - 12.0, box_h, f"阶段 {i}", face="#f4f4f4", size=size)
                stage_y.setdefault(i, []).append((x0 + 6.0, x0 + w - 6.0, sy + box_h / 2))
            if k + 1 < len(stages):
                _arrow(ax, (xc, sy), (xc, sy - (step - box_h)))
    label(micro_top + 4.3, f"切成 $m$ = {m} 个微批次，每个 $b$ = {b} 条序列")
    label(stage_top + 4.3, f"依次流过 $p$ = {p} 个流水线阶段，每个阶段一张卡")
    if d > 1:  # the replicas' copies of one stage average their gradients (All-Reduce)
        for spans in stage_y.values():
            for (_, right, yc), (left, _, _) in zip(spans, spans[1:]):
                ax.plot([right, left], [yc, yc], color=PALETTE[3], linewidth=1.0, linestyle="--", zorder=0.5)
    bottom = stage_top - step * len(stages) - 1.0
    if d > 1:
        label(bottom, "红色虚线：同一阶段的 $d$ 张卡做梯度全归约", color=PALETTE[3])
        bottom -= 6.0
    label(bottom, f"${_B_GLOBAL[1:-1]} = b \\times d \\times m$ = {b} × {d} × {m} = {B}", color=_TEXT)
    label(bottom - 6.0, f"共 $d \\times p$ = {d * p} 张卡", color=_TEXT)
    if own_figure:
        fig.subplots_adjust(left=0, right=1, bottom=0, top=1)
    return fig
