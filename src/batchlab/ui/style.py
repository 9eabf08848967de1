"""Figure style and the Chinese font setup every chapter uses, plus the shared plots."""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import matplotlib as mpl
from matplotlib import font_manager

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .schedules import Timeline

__all__ = ["CJK_FONTS", "setup", "find_cjk_font", "plot_pipeline_timeline", "plot_estimate_error"]

# Noto Sans CJK SC first (Debian fonts-noto-cjk, Binder's apt.txt); JP is the same .ttc seen by older
# matplotlib, which read only face 0; the rest are what Windows/macOS readers already have.
CJK_FONTS: tuple[str, ...] = (
    "Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC", "Source Han Sans CN",
    "WenQuanYi Zen Hei", "Microsoft YaHei", "PingFang SC", "Heiti SC", "SimHei",
)

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")


def find_cjk_font() -> str | None:
    """Name of the first installed font from :data:`CJK_FONTS`, or None."""
    installed = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONTS if name in installed), None)


def setup(dpi: int = 110) -> str | None:
    """Apply the book's style; return the CJK font used (None, with one warning, if none is found)."""
    font = find_cjk_font()
    mpl.rcParams.update({
        "figure.dpi": dpi,
        "savefig.dpi": dpi,
        "figure.figsize": (7.0, 3.6),
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.prop_cycle": mpl.cycler(color=PALETTE),
        # CJK fonts often lack U+2212 (the minus sign): use the ASCII hyphen instead.
        "axes.unicode_minus": False,
    })
    if font is None:
        warnings.warn(
            "no Chinese font found: labels will show as boxes. Install one, e.g. "
            "`sudo apt-get install fonts-noto-cjk`, then restart the kernel.",
            stacklevel=2,
        )
        return None
    mpl.rcParams["font.sans-serif"] = [font, *CJK_FONTS, "DejaVu Sans"]
    mpl.rcParams["font.family"] = "sans-serif"
    return font


def _new_axes(ax: "Axes | None", figsize: tuple[float, float] | None = None) -> tuple["Figure", "Axes"]:
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax.figure, ax
    return plt.subplots(figsize=figsize)


def plot_pipeline_timeline(timeline: "Timeline", ax: "Axes | None" = None, title: str | None = None) -> "Figure":
    """Gantt chart of a simulated pipeline step: one row per stage, one colour per micro-batch;
    forward boxes light, backward boxes dark, gaps are the bubble."""
    p = timeline.pipeline_stages
    fig, ax = _new_axes(ax, figsize=(9, 0.55 * p + 1.4))
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
    name = {"gpipe": "GPipe", "1f1b": "1F1B"}.get(timeline.schedule, timeline.schedule)
    ax.set_title(title or f"{name}：{p} 个阶段，{timeline.num_microbatches} 个微批次，"
                 f"气泡占比 {timeline.bubble_fraction:.1%}")
    fig.tight_layout()
    return fig


def plot_estimate_error(stats: dict) -> "Figure":
    """Relative error and cosine of mini-batch gradient estimates against batch size (log axes),
    with the sampling-theory curve; ``stats`` comes from :func:`batchlab.noise.minibatch_error`."""
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    # B = N has zero error, which a log axis cannot show.
    keep = [i for i, e in enumerate(stats["rel_error_theory"]) if e > 0]
    b = [stats["batch_sizes"][i] for i in keep]
    ax1.loglog(b, [stats["rel_error"][i] for i in keep], "o-", label="实测 ‖G_B - G‖ / ‖G‖")
    ax1.loglog(b, [stats["rel_error_theory"][i] for i in keep], "k--", label="理论：√(tr Σ/B · (N-B)/(N-1)) / ‖G‖")
    ax1.set_xlabel("批大小 B")
    ax1.set_ylabel("相对误差")
    ax1.legend(fontsize=8)
    ax2.semilogx(stats["batch_sizes"], stats["cosine"], "s-", color=PALETTE[1])
    ax2.set_ylim(0, 1.02)
    ax2.set_xlabel("批大小 B")
    ax2.set_ylabel("与全量梯度的余弦相似度")
    fig.tight_layout()
    return fig


__all__ += ["plot_gradient_cloud", "plot_variance_curve"]


def _batch_index(batch_sizes: list[int], batch_size: int, what: str) -> int:
    try:
        return list(batch_sizes).index(batch_size)
    except ValueError:
        raise ValueError(f"batch size {batch_size!r} is not among the {what}'s batch sizes "
                         f"{list(batch_sizes)}") from None


def plot_gradient_cloud(cloud: dict, batch_size: int, ax: "Axes | None" = None) -> "Figure":
    """Scatter of the mini-batch gradient estimates G_B for one B around the full gradient G, in the
    plane of :func:`batchlab.noise.gradient_cloud`. The axis limits cover the clouds of *all* batch
    sizes, so moving B shows the cloud shrink instead of the axes rescaling.

    Called again on the same ``ax`` with the same ``cloud``, it only moves the points: no new
    artists or ticks, which keeps an interactive redraw cheap."""
    import numpy as np

    i = _batch_index(cloud["batch_sizes"], batch_size, "cloud")
    pts = cloud["points"][i]
    title = f"B = {batch_size}：{len(pts)} 个小批量梯度估计的散布"
    state = getattr(ax, "_batchlab_cloud", None)
    if state is not None and state["cloud"] is cloud:
        state["scatter"].set_offsets(pts)
        ax.set_title(title)
        return ax.figure
    own_figure = ax is None
    fig, ax = _new_axes(ax, figsize=(4.6, 4.0))
    every = np.concatenate([*cloud["points"], cloud["center"][None, :], np.zeros((1, 2))])
    lo, hi = every.min(axis=0), every.max(axis=0)
    # One scale on both axes (a round cloud must look round), a little margin, G and 0 inside.
    half = 0.56 * (hi - lo).max()
    mid = 0.5 * (hi + lo)
    scatter = ax.scatter(pts[:, 0], pts[:, 1], s=9, alpha=0.45, color=PALETTE[0], linewidths=0,
                         label="小批量估计 G_B", zorder=2)
    cx, cy = cloud["center"]
    arrow = ax.annotate("", xy=(cx, cy), xytext=(0.0, 0.0),
                        arrowprops=dict(arrowstyle="->", color="black", lw=1.4), zorder=3)
    (star,) = ax.plot([cx], [cy], marker="*", markersize=14, color=PALETTE[3], linestyle="none",
                      label="全量梯度 G", zorder=4)
    ax.set_xlim(mid[0] - half, mid[0] + half)
    ax.set_ylim(mid[1] - half, mid[1] + half)
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel("沿 G 方向的分量（e1）")
    ax.set_ylabel("横向散布最大的方向（e2）")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left")
    ax._batchlab_cloud = {"cloud": cloud, "scatter": scatter, "on_top": [arrow, star]}
    if own_figure:
        fig.tight_layout()
    return fig


def plot_variance_curve(stats: dict, batch_size: int, ax: "Axes | None" = None) -> "Figure":
    """E‖G_B − G‖² against B on log–log axes: measured points, the sampling-theory curve
    tr(Σ)/B · (N − B)/(N − 1) and the chosen B marked. ``stats`` comes from
    :func:`batchlab.noise.minibatch_error`; B = N (zero error) cannot sit on a log axis and is left out.

    Called again on the same ``ax`` with the same ``stats``, it only moves the marker."""
    i = _batch_index(stats["batch_sizes"], batch_size, "stats")
    keep = [j for j, e in enumerate(stats["sq_error_theory"]) if e > 0]
    # The marker sits on the measured point; at B = N it goes to the bottom edge of the plot.
    y_mark = stats["sq_error"][i] if i in keep else None
    state = getattr(ax, "_batchlab_variance", None)
    if state is not None and state["stats"] is stats:
        state["vline"].set_xdata([batch_size, batch_size])
        state["marker"].set_data([batch_size] if y_mark else [], [y_mark] if y_mark else [])
        return ax.figure
    own_figure = ax is None
    fig, ax = _new_axes(ax, figsize=(4.6, 4.0))
    b = [stats["batch_sizes"][j] for j in keep]
    ax.loglog(b, [stats["sq_error_theory"][j] for j in keep], "k--", lw=1.2,
              label="理论 tr(Σ)/B · (N-B)/(N-1)")
    if "sq_error_iid" in stats:  # the plain 1/B law of infinite data, for comparison
        ax.loglog(b, [stats["sq_error_iid"][j] for j in keep], ":", color="0.5", lw=1.2, label="1/B 直线 tr(Σ)/B")
    ax.loglog(b, [max(stats["sq_error"][j], 1e-300) for j in keep], "o", color=PALETTE[0], ms=5,
              label="实测 E‖G_B - G‖²")
    vline = ax.axvline(batch_size, color=PALETTE[3], lw=1.0, alpha=0.7)
    (marker,) = ax.plot([batch_size] if y_mark else [], [y_mark] if y_mark else [], "o", ms=11, mfc="none",
                        mec=PALETTE[3], mew=2, label="当前 B")
    # The vertical line may move to B = N, off the plotted points: keep every listed B in view.
    ax.set_xlim(min(stats["batch_sizes"]) / 1.5, max(stats["batch_sizes"]) * 1.5)
    # The batch sizes themselves as ticks (1, 2, 4, … read better than 10⁰, 10¹), and no minor ticks:
    # they add nothing here and cost a third of each interactive redraw.
    from matplotlib.ticker import NullLocator

    if len(stats["batch_sizes"]) <= 12:
        ax.set_xticks(stats["batch_sizes"], [str(v) for v in stats["batch_sizes"]])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("批大小 B")
    ax.set_ylabel("E‖G_B - G‖²")
    ax.set_title("误差随 B 按 1/B 下降")
    ax.legend(fontsize=8, loc="lower left")
    ax._batchlab_variance = {"stats": stats, "vline": vline, "marker": marker}
    if own_figure:
        fig.tight_layout()
    return fig


__all__ += ["updated_artists"]


def updated_artists(ax: "Axes") -> list:
    """The artists that a repeated :func:`plot_gradient_cloud` or :func:`plot_variance_curve` call on
    ``ax`` changes (points, marker, title), plus those that must stay on top of them, in drawing
    order; everything else on ``ax`` stays as drawn. An interactive caller can draw the rest once
    and redraw only these (blitting)."""
    out = []
    if getattr(ax, "_batchlab_cloud", None) is not None:
        out += [ax._batchlab_cloud["scatter"], *ax._batchlab_cloud["on_top"], ax.title]
    if getattr(ax, "_batchlab_variance", None) is not None:
        out += [ax._batchlab_variance["vline"], ax._batchlab_variance["marker"]]
    return out


def plot_training_curves(histories: list, labels: list[str], floor: float | None = None,
                         by_samples: bool = True, title: str | None = None) -> "Figure":
    """Eval loss of several runs against optimizer steps, and (``by_samples``) against samples seen
    on a log axis; ``histories`` are :class:`batchlab.train.History` objects recorded with
    ``eval_data``. ``floor`` draws the entropy-rate line."""
    import matplotlib.pyplot as plt

    if len(histories) != len(labels):
        raise ValueError(f"{len(histories)} histories but {len(labels)} labels: give one label per run")
    if by_samples:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    else:
        fig, ax1 = plt.subplots(figsize=(6, 3.4))
        ax2 = None
    for h, label in zip(histories, labels):
        ax1.plot(h.eval_step, h.eval_loss, label=label)
        if ax2 is not None:
            # Step 0 (no samples yet) has no place on a log axis.
            points = [(s * h.config["batch_size"], loss) for s, loss in zip(h.eval_step, h.eval_loss) if s > 0]
            ax2.plot(*zip(*points), label=label)
    for ax in (ax1, ax2):
        if ax is not None and floor is not None:
            ax.axhline(floor, color="k", ls=":", lw=1)
    ax1.set_xlabel("参数更新步数")
    ax1.set_ylabel("验证集损失")
    if ax2 is not None:
        ax2.set_xlabel("已见样本数（序列）")
        ax2.set_xscale("log")
    ax1.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
