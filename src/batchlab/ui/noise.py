"""Gradient-noise figures and the noise explorer's drawing (4.1, 4.2).

Plots take precomputed results of :mod:`batchlab.measure.noise`; the explorer (declared in
:mod:`batchlab.page.noise`) only selects among them and redraws, so a change of B feels instant.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from batchlab.page.colours import PALETTE
from batchlab.page.noise import CloudLike, ErrorStatsLike, NoiseView
from batchlab.page.symbols import mathtext

_G_B = mathtext("G_B").strip("$")  # the book's one rendering of G_B, inside this module's formulas
from batchlab.ui.style import check_layout, explorer_panels, figure_width, new_axes, plain_log_ticks

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_estimate_error", "plot_gradient_cloud", "plot_variance_curve", "plot_noise_growth",
           "updated_artists", "draw_noise_explorer"]


def plot_estimate_error(stats: ErrorStatsLike, layout: str = "desk") -> "Figure":
    """Relative error and cosine of mini-batch gradient estimates against batch size (log axes),
    with the sampling-theory curve; ``stats`` comes from :func:`batchlab.measure.noise.minibatch_error`.
    Side by side on a desk, stacked on a phone."""
    import matplotlib.pyplot as plt

    phone = check_layout(layout) == "phone"
    fig, (ax1, ax2) = plt.subplots(*((2, 1) if phone else (1, 2)), figsize=(figure_width(layout), 6.4 if phone else 3.9),
                                   layout="constrained")
    # B = N has zero error, which a log axis cannot show.
    keep = [i for i, e in enumerate(stats.rel_error_theory) if e > 0]
    b = [stats.batch_sizes[i] for i in keep]
    ax1.loglog(b, [stats.rel_error[i] for i in keep], "o-", ms=6, label=f"实测 $\\|{_G_B}-G\\|\\,/\\,\\|G\\|$")
    ax1.loglog(b, [stats.rel_error_theory[i] for i in keep], "k--",
               label=r"理论：$\sqrt{\mathrm{tr}\,\Sigma/B\cdot(N-B)/(N-1)}\,/\,\|G\|$")
    # The plain 1/√B law (i.i.d. draws), anchored at the smallest B: the finite-population curve bends below it.
    anchor = stats.rel_error_theory[keep[0]] * b[0] ** 0.5
    ax1.loglog(b, [anchor / v ** 0.5 for v in b], ":", color="0.4", lw=1.6, label=r"$1/\sqrt{B}$ 参考线")
    ax1.set_xlabel("批大小 $B$")
    ax1.set_ylabel("相对误差")
    ax2.semilogx(stats.batch_sizes, stats.cosine, "s-", color=PALETTE[1], ms=6)
    ax2.set_ylim(0, 1.02)
    ax2.set_xlabel("批大小 $B$")
    ax2.set_ylabel("与全量梯度的余弦相似度" if not phone else "余弦相似度")
    for ax in (ax1, ax2):  # the batch sizes as ticks, every other one when there are many
        _batch_ticks(ax, stats.batch_sizes, most=5 if phone else 8)
    errors = [stats.rel_error[i] for i in keep] + [stats.rel_error_theory[i] for i in keep]
    plain_log_ticks(ax1.yaxis, min(errors), max(errors), most=4)
    fig.legend(loc="outside lower center", ncol=1 if phone else 2, frameon=False)
    return fig


def _batch_ticks(ax: "Axes", batch_sizes: list[int], most: int = 8) -> None:
    """Major ticks at the batch sizes (1, 2, 4, … read better than 10⁰, 10¹) — every other (third …) one
    beyond ``most``, so that they do not touch — and no minor ticks (they add nothing and cost redraw time)."""
    from matplotlib.ticker import NullLocator

    sizes = list(batch_sizes)
    shown = sizes[::-(-len(sizes) // most)]
    ax.set_xticks(shown, [str(v) for v in shown])
    ax.xaxis.set_minor_locator(NullLocator())


def _batch_index(batch_sizes: list[int], batch_size: int, what: str) -> int:
    try:
        return list(batch_sizes).index(batch_size)
    except ValueError:
        raise ValueError(f"batch_size = {batch_size!r}：不在{what}的批大小 {list(batch_sizes)} 之中") from None


def plot_gradient_cloud(cloud: CloudLike, batch_size: int, ax: "Axes | None" = None,
                        layout: str = "desk") -> "Figure":
    """Scatter of the mini-batch gradient estimates G_B for one B around the full gradient G, in the
    plane of :func:`batchlab.measure.noise.gradient_cloud`. The axis limits cover the clouds of *all* batch
    sizes, so moving B shows the cloud shrink instead of the axes rescaling.

    Called again on the same ``ax`` with the same ``cloud``, it only moves the points: no new
    artists or ticks, which keeps an interactive redraw cheap."""
    import numpy as np

    i = _batch_index(cloud.batch_sizes, batch_size, "梯度云")
    pts = cloud.points[i]
    title = f"B = {batch_size}：{len(pts)} 个小批量梯度估计的散布"
    state = getattr(ax, "_batchlab_cloud", None)
    if state is not None and state["cloud"] is cloud:
        state["scatter"].set_offsets(pts)
        ax.set_title(title)
        return ax.figure
    own_figure = ax is None
    fig, ax = new_axes(ax, figsize=(4.6, 4.0) if check_layout(layout) == "desk" else (figure_width(layout), 3.6))
    every = np.concatenate([*cloud.points, cloud.center[None, :], np.zeros((1, 2))])
    lo, hi = every.min(axis=0), every.max(axis=0)
    # One scale on both axes (a round cloud must look round), a little margin, G and 0 inside.
    half = 0.56 * (hi - lo).max()
    mid = 0.5 * (hi + lo)
    scatter = ax.scatter(pts[:, 0], pts[:, 1], s=9, alpha=0.45, color=PALETTE[0], linewidths=0,
                         label=f"小批量估计 {mathtext('G_B')}", zorder=2)
    cx, cy = cloud.center
    arrow = ax.annotate("", xy=(cx, cy), xytext=(0.0, 0.0),
                        arrowprops=dict(arrowstyle="->", color="black", lw=1.4), zorder=3)
    (star,) = ax.plot([cx], [cy], marker="*", markersize=14, color=PALETTE[3], linestyle="none",
                      label="全量梯度 $G$", zorder=4)
    ax.set_xlim(mid[0] - half, mid[0] + half)
    ax.set_ylim(mid[1] - half, mid[1] + half)
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel("沿 $G$ 方向的分量（$e_1$）")
    ax.set_ylabel("横向散布最大的方向（$e_2$）")
    ax.set_title(title)
    ax.legend(loc="upper left")
    ax._batchlab_cloud = {"cloud": cloud, "scatter": scatter, "on_top": [arrow, star]}
    if own_figure:
        fig.tight_layout()
    return fig


def plot_variance_curve(stats: ErrorStatsLike, batch_size: int, ax: "Axes | None" = None,
                        layout: str = "desk") -> "Figure":
    """E‖G_B − G‖² against B on log–log axes: measured points, the sampling-theory curve
    tr(Σ)/B · (N − B)/(N − 1) and the chosen B marked. ``stats`` comes from
    :func:`batchlab.measure.noise.minibatch_error`; B = N (zero error) cannot sit on a log axis and is left out.

    Called again on the same ``ax`` with the same ``stats``, it only moves the marker."""
    i = _batch_index(stats.batch_sizes, batch_size, " stats ")
    keep = [j for j, e in enumerate(stats.sq_error_theory) if e > 0]
    # The marker sits on the measured point; at B = N it goes to the bottom edge of the plot.
    y_mark = stats.sq_error[i] if i in keep else None
    state = getattr(ax, "_batchlab_variance", None)
    if state is not None and state["stats"] is stats:
        state["vline"].set_xdata([batch_size, batch_size])
        state["marker"].set_data([batch_size] if y_mark else [], [y_mark] if y_mark else [])
        return ax.figure
    own_figure = ax is None
    phone = check_layout(layout) == "phone"
    fig, ax = new_axes(ax, figsize=(figure_width(layout), 4.2) if phone else (4.6, 4.0))
    b = [stats.batch_sizes[j] for j in keep]
    ax.loglog(b, [stats.sq_error_theory[j] for j in keep], "k--", lw=1.2,
              label=r"理论 $\mathrm{tr}(\Sigma)/B\cdot(N-B)/(N-1)$")
    iid = getattr(stats, "sq_error_iid", None)
    if iid is not None:  # the plain 1/B law of infinite data, for comparison
        ax.loglog(b, [iid[j] for j in keep], ":", color="0.5", lw=1.2, label=r"$1/B$ 直线 $\mathrm{tr}(\Sigma)/B$")
    ax.loglog(b, [max(stats.sq_error[j], 1e-300) for j in keep], "o", color=PALETTE[0], ms=5,
              label=f"实测 $\\mathbb{{E}}\\|{_G_B}-G\\|^2$")
    vline = ax.axvline(batch_size, color=PALETTE[3], lw=1.0, alpha=0.7)
    (marker,) = ax.plot([batch_size] if y_mark else [], [y_mark] if y_mark else [], "o", ms=11, mfc="none",
                        mec=PALETTE[3], mew=2, label="当前 $B$")
    # The vertical line may move to B = N, off the plotted points: keep every listed B in view.
    ax.set_xlim(min(stats.batch_sizes) / 1.5, max(stats.batch_sizes) * 1.5)
    # The batch sizes themselves as ticks (1, 2, 4, … read better than 10⁰, 10¹), and no minor ticks:
    # they add nothing here and cost a third of each interactive redraw.
    from matplotlib.ticker import LogLocator, NullLocator

    _batch_ticks(ax, stats.batch_sizes, most=5 if phone else 8)
    ax.yaxis.set_major_locator(LogLocator(numticks=5))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("批大小 $B$")
    ax.set_ylabel(f"$\\mathbb{{E}}\\|{_G_B}-G\\|^2$")
    ax.set_title("误差随 $B$ 按 $1/B$ 下降")
    ax._batchlab_variance = {"stats": stats, "vline": vline, "marker": marker}
    if own_figure and phone:  # below the axes: a phone's axes have no empty corner as wide as the legend
        fig.set_layout_engine("constrained")
        fig.legend(loc="outside lower center", ncol=1, frameon=False)
        return fig
    # the error falls with B, so the upper right is empty; the axis reaches a decade higher, so that the
    # legend sits above every point there (in the lower left it covered the largest B's points)
    low, high = ax.get_ylim()
    ax.set_ylim(low, high * 10)
    ax.legend(loc="upper right")
    if own_figure:
        fig.tight_layout()
    return fig



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


def draw_noise_explorer(figure: "Figure", view: NoiseView, layout: str = "desk") -> None:
    """The gradient-noise explorer's figure (:class:`batchlab.page.noise.NoiseExplorer` names it) on
    ``figure``: the gradient cloud and the 1/B error curve at ``view.batch_size``, side by side (on a
    phone, ``layout="phone"``: stacked, drawn once on a new figure, so whole and without blitting).

    The two axes are made on the first call (fixed margins instead of tight_layout, which would be
    recomputed per change); later calls only move points (:func:`plot_gradient_cloud` and
    :func:`plot_variance_curve` on the same axes) and blit: the static part (axes, ticks, legends, curve)
    is drawn once and kept, each change restores it and draws only the moved artists — a full matplotlib
    redraw with Chinese text costs ~0.1–0.2 s on a laptop, a restore plus a few artists a few ms."""
    phone = explorer_panels(figure, layout, 2, desk_height=3.9, phone_height=7.4,
                            margins=dict(left=0.1, right=0.99, bottom=0.13, top=0.91, wspace=0.34))
    cloud_ax, curve_ax = figure.axes
    plot_gradient_cloud(view.cloud, view.batch_size, ax=cloud_ax, layout=layout)
    plot_variance_curve(view.stats, view.batch_size, ax=curve_ax, layout=layout)
    canvas = figure.canvas
    if phone:  # drawn once: the constrained layout needs every artist in the draw that places them
        canvas.draw()
        return
    moving = [a for ax in (cloud_ax, curve_ax) for a in updated_artists(ax)]
    size = canvas.get_width_height()
    background = getattr(figure, "_batchlab_background", None)
    if background is None or background[0] != size:
        for artist in moving:
            artist.set_animated(True)  # left out of the full draw: that draw is the background
        canvas.draw()
        figure._batchlab_background = (size, canvas.copy_from_bbox(figure.bbox))
        for artist in moving:
            artist.set_animated(False)  # so figure.savefig() still draws everything
    else:
        canvas.restore_region(background[1])
    for artist in moving:
        figure.draw_artist(artist)


def plot_noise_growth(trajectory, layout: str = "desk") -> "Figure":
    """B_simple along one training run (:class:`batchlab.measure.noise.NoiseTrajectory`: ``samples_seen``,
    ``b_simple`` repeats per point, ``loss``, ``subset_size``): the median of the repeats with their min–max
    band, and the probe loss beneath, both against samples seen. The x axis is linear up to the first point
    after 0 and logarithmic beyond (symlog), so that the point at initialisation keeps its place. Side by side
    on a desk, stacked on a phone."""
    import math

    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    from batchlab.lecture.noise_growth import band
    from batchlab.page.numbers import count

    phone = check_layout(layout) == "phone"
    fig, (ax1, ax2) = plt.subplots(*((2, 1) if phone else (1, 2)), figsize=(figure_width(layout), 6.4 if phone else 3.6),
                                   sharex=True, layout="constrained")
    x = list(trajectory.samples_seen)
    if len(x) != len(trajectory.b_simple) or len(x) != len(trajectory.loss):
        raise ValueError("samples_seen、b_simple 与 loss 必须一一对应")
    bands = [band(values) for values in trajectory.b_simple]
    ax1.fill_between(x, [b.low for b in bands], [b.high for b in bands], color=PALETTE[0], alpha=0.25, lw=0,
                     label=f"{len(trajectory.b_simple[0])} 份样本的最小–最大")
    ax1.plot(x, [b.median for b in bands], "o-", color=PALETTE[0], ms=5, label="中位数")
    ax1.set_ylabel(f"{mathtext('B_simple')}（每份 {trajectory.subset_size} 条）" if not phone
                   else mathtext("B_simple"))
    ax1.set_ylim(bottom=0)
    ax1.legend(loc="upper left")
    ax2.plot(x, trajectory.loss, "s-", color=PALETTE[1], ms=5)
    ax2.set_ylabel("验证集损失")
    positive = [v for v in x if v > 0]
    for ax in (ax1, ax2):
        if positive:  # 0 (initialisation) one doubling's width left of the first point, the rest on a log scale
            ax.set_xscale("symlog", linthresh=min(positive), linscale=math.log10(2))
        shown = x[::-(-len(x) // (4 if phone else 7))]
        ax.set_xticks(shown, [str(count(v)) for v in shown])
        ax.xaxis.set_minor_locator(NullLocator())
    for ax in ((ax2,) if phone else (ax1, ax2)):
        ax.set_xlabel("已见样本数（序列，0 之后为对数轴）" if not phone else "已见样本数（0 之后为对数轴）")
    return fig
