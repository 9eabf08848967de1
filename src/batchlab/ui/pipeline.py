"""Pipeline figures and the bubble-versus-matmul explorer's drawing (4.1, 4.4): timelines (simulated or
measured), the modelled throughput of every micro-batch size, and the figure of the explorer (declared in
:mod:`batchlab.page.tradeoff`) that ties them to the memory model."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from matplotlib.ticker import NullLocator

from batchlab.formulas.pipeline_schedules import (BACKWARD_PER_FORWARD, SCHEDULES, bubble_fraction, pipeline_timeline,
                                                  schedule_label)
from batchlab.page.colours import PALETTE
from batchlab.page.tradeoff import TradeoffView
from batchlab.ui.style import check_layout, clear_artists, explorer_panels, figure_width, new_axes, phone_title

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from batchlab.formulas.pipeline_schedules import Timeline

__all__ = ["MAX_DRAWN_OPS", "plot_pipeline_timeline", "plot_pipeline_timelines", "plot_schedule_comparison",
           "plot_tradeoff", "draw_tradeoff_explorer", "needs_key", "legend_handles"]

_NULL_LOCATOR = NullLocator()

BOX_MARK = {"F": "前", "B": "反", "W": "权"}
"""What a drawn box says for a forward, a backward (with a split backward: the input gradient) and a weight
gradient operation (the schedule's own kinds are F, B and W)."""
KIND_ALPHA = {"F": 0.45, "B": 0.95, "W": 0.7}
"""How opaque each kind's boxes are, in the micro-batch's colour: forward light, backward dark, weight gradient
between, so the kinds read apart even without the box labels."""
CHUNK_HATCH = ("", "////", "....", "xxxx")
"""The hatching of a device's model chunk 0, 1, 2, 3 (then again): interleaved and ZB-V chunks read apart."""

MAX_DRAWN_OPS = 2048
"""The explorer draws a step's timeline only up to this many forward and backward bars (2·p·m)."""


def plot_pipeline_timeline(timeline: "Timeline", ax: "Axes | None" = None, title: str | None = None,
                           unit: str = "时间（以一次前向计算为单位）", labels: bool | None = None,
                           layout: str = "desk") -> "Figure":
    """Gantt chart of a pipeline step (simulated or measured): one row per stage, one colour per
    micro-batch; forward boxes light, backward boxes dark, weight-gradient boxes (a split backward) between,
    a device's second, third … model chunk hatched (:data:`CHUNK_HATCH`); gaps are the bubble. A figure
    of its own keys the kinds and chunks when there is a W or a second chunk.
    ``unit`` labels the time axis (measured timelines are in seconds); ``labels`` writes 前0, 反0, 权0, …
    (forward, backward, weight gradient) in the boxes — not "B", which the book keeps for a batch size — (default: when there are at most 80 boxes,
    beyond which they are unreadable and slow to draw; a box too narrow for its number stays blank). On
    a phone (``layout``) the stages are numbered without 阶段 and a long title takes two lines."""
    p = timeline.pipeline_stages
    own_figure = ax is None
    phone = check_layout(layout) == "phone"
    fig, ax = new_axes(ax, figsize=(figure_width(layout), 0.55 * p + 1.4))
    labels = len(timeline.ops) <= 80 if labels is None else labels
    # One collection per (stage, kind) instead of one bar per op: a step of p·m ops redraws in
    # milliseconds, which the explorer needs.
    many = len(timeline.ops) > 256  # too many micro-batches to tell apart: draw busy spans, one colour per kind
    groups: dict[tuple[int, str, int], list] = {}
    for op in sorted(timeline.ops, key=lambda o: o.start):
        groups.setdefault((op.stage, op.kind, op.chunk), []).append(op)
    for (stage, kind, chunk), ops in groups.items():
        hatch = CHUNK_HATCH[chunk % len(CHUNK_HATCH)] or None
        if many:
            spans: list[list[float]] = []
            for op in ops:  # merge ops that follow each other without a gap
                if spans and op.start <= spans[-1][1] + 1e-12:
                    spans[-1][1] = op.end
                else:
                    spans.append([op.start, op.end])
            ax.broken_barh([(a, b - a) for a, b in spans], (stage - 0.4, 0.8), facecolors=PALETTE[0],
                           alpha=KIND_ALPHA[kind], edgecolor="white", linewidth=0, hatch=hatch)
            continue
        ax.broken_barh([(op.start, op.end - op.start) for op in ops], (stage - 0.4, 0.8),
                       facecolors=[PALETTE[op.microbatch % len(PALETTE)] for op in ops], alpha=KIND_ALPHA[kind],
                       edgecolor="white", linewidth=0.6, hatch=hatch)
    if labels:
        # A box narrower than "前10" at 8.5 pt shows the micro-batch alone (its shade says which kind).
        span = max(op.end for op in timeline.ops) * 1.1
        points_per_unit = ax.get_position().width * fig.get_figwidth() * 72 / span
        narrowest = {kind: min((op.end - op.start for op in timeline.ops if op.kind == kind), default=0)
                     * points_per_unit for kind in BOX_MARK}
        digits = 8.5 * 0.6 * len(str(timeline.num_microbatches - 1)) + 1
        roomy = {kind: narrowest[kind] >= 8.5 + digits for kind in BOX_MARK}
        for op in timeline.ops:
            if narrowest[op.kind] < digits:  # not even the number fits: the colour says which micro-batch
                continue
            ax.text((op.start + op.end) / 2, op.stage, f"{BOX_MARK[op.kind] if roomy[op.kind] else ''}{op.microbatch}",
                    ha="center", va="center", fontsize=8.5)
    # beyond 8 rows, plain numbers: 16 rows of Chinese tick labels cost a third of a redraw
    ax.set_yticks(range(p), [f"阶段 {s}" if p <= 8 and not phone else str(s) for s in range(p)])
    if phone or p > 8:
        ax.set_ylabel("阶段")
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.grid(False)
    ax.set_title(phone_title(title or f"{schedule_label(timeline.schedule, timeline.virtual_stages)}：{p} 个阶段，"
                             f"{timeline.num_microbatches} 个微批次，气泡占比 {timeline.idle_fraction:.1%}", layout))
    if own_figure:  # a caller that passes ``ax`` lays out (and keys) its own figure
        bottom = 0.0
        if needs_key([timeline]):  # below the time axis, in a band of its own that tight_layout keeps clear
            handles = legend_handles([timeline])
            columns = 2 if phone else len(handles)
            bottom = (-(-len(handles) // columns) * 0.22 + 0.1) / fig.get_figheight()
            fig.legend(handles=handles, loc="lower center", ncol=columns, fontsize=8.5, frameon=False)
        fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


def needs_key(timelines: Sequence["Timeline"]) -> bool:
    """Whether a key of the kinds and chunks says more than the boxes: a weight gradient or a second chunk."""
    return any(op.kind == "W" or op.chunk for t in timelines for op in t.ops)


def legend_handles(timelines: Sequence["Timeline"]) -> list:
    """Legend handles for what ``timelines`` draw: each kind present (B named the input gradient when W is
    split off) and each model chunk beyond the first."""
    from matplotlib.patches import Patch

    kinds = {op.kind for t in timelines for op in t.ops}
    chunks = sorted({op.chunk for t in timelines for op in t.ops})
    split = "W" in kinds and any(op.kind == "B" for t in timelines if not any(o.kind == "W" for o in t.ops)
                                 for op in t.ops)  # whole backwards beside split ones
    names = {"F": "前向", "B": "反向（零气泡：输入梯度）" if split else "反向（输入梯度）" if "W" in kinds else "反向",
             "W": "权重梯度"}
    handles = [Patch(facecolor=PALETTE[0], alpha=KIND_ALPHA[k], label=names[k]) for k in "FBW" if k in kinds]
    if len(chunks) > 1:  # outlined, not grey: a grey box would read as micro-batch 7's colour
        handles += [Patch(facecolor="white", edgecolor="0.35", hatch=CHUNK_HATCH[c % len(CHUNK_HATCH)],
                          label=f"第 {c + 1} 段模型") for c in chunks]
    return handles


def plot_pipeline_timelines(timelines: Sequence["Timeline"], titles: Sequence[str] | None = None,
                            units: Sequence[str] | None = None, labels: bool | None = None,
                            layout: str = "desk") -> "Figure":
    """:func:`plot_pipeline_timeline` of several steps, one row each, as wide as the book's column (or a
    phone's: ``layout``); ``titles`` and ``units`` (one per timeline) default to that function's."""
    import matplotlib.pyplot as plt

    if not timelines:
        raise ValueError("timelines 为空：至少给出一条时间线")
    for name, given in (("titles", titles), ("units", units)):
        if given is not None and len(given) != len(timelines):
            raise ValueError(f"{name} 有 {len(given)} 项，时间线有 {len(timelines)} 条：每条一项")
    extra = 0.3 if check_layout(layout) == "phone" else 0.0  # a two-line title
    heights = [0.42 * t.pipeline_stages + 0.9 + extra for t in timelines]
    fig, axes = plt.subplots(len(timelines), 1, figsize=(figure_width(layout), sum(heights) + 0.2), squeeze=False,
                             gridspec_kw={"height_ratios": heights}, layout="constrained")
    for i, (ax, timeline) in enumerate(zip(axes[:, 0], timelines)):
        kwargs = {"unit": units[i]} if units is not None else {}
        plot_pipeline_timeline(timeline, ax=ax, title=titles[i] if titles is not None else None, labels=labels,
                               layout=layout, **kwargs)
    return fig


COMPARED_SCHEDULES: tuple[tuple[str, int], ...] = (("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2),
                                                   ("zero-bubble", 2))
"""The (schedule, v) pairs :func:`plot_schedule_comparison` draws by default: the four schedules, zero bubble
as ZB-V."""


def plot_schedule_comparison(pipeline_stages: int, num_microbatches: int,
                             schedules: Sequence[tuple[str, int]] = COMPARED_SCHEDULES,
                             layout: str = "desk") -> "Figure":
    """The same step — p stages' worth of layers, m micro-batches, the same work — under each (schedule, v) of
    ``schedules``, one timeline above another on one time axis, each titled with its bubble fraction
    (:func:`~batchlab.formulas.pipeline_schedules.bubble_fraction`, which its timeline agrees with). A chunk
    of v per device costs 1/v of a stage, so every panel does the same work; time is in one stage's forward."""
    p, m = pipeline_stages, num_microbatches
    timelines = [pipeline_timeline(s, p, m, 1 / v, BACKWARD_PER_FORWARD / v, virtual_stages=v) for s, v in schedules]
    titles = [f"{schedule_label(s, v)}：气泡 {bubble_fraction(p, m, s, v):.1%}" for s, v in schedules]
    fig = plot_pipeline_timelines(timelines, titles=titles, units=["时间（以一个阶段的一次前向为单位）"] * len(timelines),
                                  labels=False, layout=layout)
    end = max(t.makespan for t in timelines)
    for ax in fig.axes:
        ax.set_xlim(0, end * 1.02)
        if ax is not fig.axes[-1]:
            ax.set_xlabel("")
    phone = check_layout(layout) == "phone"
    fig.suptitle(f"同一步：{p} 个阶段，{m} 个微批次", fontsize=10.5)
    if needs_key(timelines):
        fig.legend(handles=legend_handles(timelines), loc="outside lower center", ncol=2 if phone else 5, fontsize=8.5,
                   frameon=False)
    return fig


def plot_tradeoff(candidates: list[dict], current: int, ax: "Axes | None" = None,
                  layout: str = "desk") -> "Figure":
    """Modelled tokens/s against micro-batch size, one point per candidate of
    :func:`batchlab.formulas.tune.tune`: the current choice circled, the best that fits starred, sizes that do not
    fit in memory crossed in red. Each point is labelled with its bubble fraction, above the point and
    clear of the circle and the star."""
    colours = PALETTE
    fig, ax = new_axes(ax, figsize=(figure_width(layout, 0.75), 3.6))
    sizes = [c["micro_batch_size"] for c in candidates]
    rates = [c["tokens_per_second"] for c in candidates]
    ax.plot(sizes, rates, "-", color="0.6", lw=1)
    for c in candidates:
        ax.plot([c["micro_batch_size"]], [c["tokens_per_second"]], "o" if c["fits"] else "x", ms=6,
                color=colours[0] if c["fits"] else colours[3], mew=2)
        ax.annotate(f"{c['bubble_fraction']:.0%}", (c["micro_batch_size"], c["tokens_per_second"]), xytext=(0, 10),
                    textcoords="offset points", ha="center", va="bottom", fontsize=9, color="0.3")
    fitting = [c for c in candidates if c["fits"]]
    if fitting:
        best = max(fitting, key=lambda c: c["tokens_per_second"])
        ax.plot([best["micro_batch_size"]], [best["tokens_per_second"]], "*", ms=16, color=colours[1],
                label="模型下最快（放得下）")
    chosen = next(c for c in candidates if c["micro_batch_size"] == current)
    ax.plot([current], [chosen["tokens_per_second"]], "o", ms=13, mfc="none", mec=colours[3], mew=2, label="当前选择")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(b) for b in sizes])
    ax.xaxis.set_minor_locator(_NULL_LOCATOR)
    ax.set_xlim(min(sizes) / 1.5, max(sizes) * 1.5)
    ax.yaxis.set_major_formatter(_thousands)
    ax.set_xlabel("微批次大小（点上数字：气泡占比）")
    ax.set_ylabel("模型估计的 tokens/s")
    ax.set_ylim(0, max(rates) * 1.25)
    ax.legend(loc="lower left")
    return fig


def _thousands(value: float, _pos: int) -> str:
    """``150k`` for 150 000: a tick label a third as wide."""
    return f"{value / 1000:g}k" if value else "0"


_TRADEOFF_MARGINS = dict(left=0.1, right=0.99, bottom=0.15, top=0.91, wspace=0.45)
"""The desk drawing's margins: the gap between the panels holds the timeline's stage names (阶段 0) clear of
the trade-off panel (at 0.3 they crowded it)."""


def draw_tradeoff_explorer(figure: "Figure", view: TradeoffView, layout: str = "desk") -> None:
    """The bubble-versus-matmul explorer's figure (:class:`batchlab.page.tradeoff.TradeoffExplorer` names
    it) on ``figure``: :func:`plot_tradeoff` of every micro-batch size on the left, the step's modelled
    timeline on the right (up to :data:`MAX_DRAWN_OPS` bars: beyond, the bubble by its formula). The two
    axes are made on the first call, then cleared and redrawn. On a phone (``layout="phone"``, drawn once
    on a new figure) the timeline sits below, both in the phone's drawing, laid out by matplotlib."""
    phone = explorer_panels(figure, layout, 2, desk_height=3.6, phone_height=6.6, margins=_TRADEOFF_MARGINS,
                            width_ratios=[1, 1.15])
    left, right = figure.axes
    for ax in (left, right):
        clear_artists(ax)
    job, step = view.job, view.step
    plot_tradeoff(view.tuned["candidates"], job.micro_batch_size, ax=left, layout=layout)
    p, m, v = job.pipeline_stages, step.num_microbatches, job.virtual_stages
    if 2 * p * m * v <= MAX_DRAWN_OPS:
        right.set_axis_on()
        forward = step.slot_seconds / (1 + BACKWARD_PER_FORWARD) / v  # one chunk's: 1/v of the stage's
        timeline = pipeline_timeline(job.schedule, p, m, forward_time=forward,
                                     backward_time=BACKWARD_PER_FORWARD * forward, virtual_stages=v)
        plot_pipeline_timeline(timeline, ax=right, unit="模型估计的时间（秒）", labels=False,
                               title=f"{schedule_label(job.schedule, v)}：m = {m}，气泡 {timeline.idle_fraction:.1%}",
                               layout=layout)
    else:  # thousands of bars say nothing at this size, and take seconds to draw
        right.set_axis_off()
        right.text(0.5, 0.5, f"m = {m:,} 个微批次：\n时间线太长，不画\n{schedule_label(job.schedule, v)} "
                   f"的气泡占比按公式\n= {step.bubble_fraction:.2%}", ha="center", va="center", transform=right.transAxes)
    if not phone:
        figure.subplots_adjust(**_TRADEOFF_MARGINS)
    figure.canvas.draw()
