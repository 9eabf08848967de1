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
