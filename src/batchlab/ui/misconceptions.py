"""Figures of chapter 4.6: what one change of batch moves, and loss against samples early and late."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Sequence

from batchlab.formulas.effects import EFFECTS
from batchlab.lecture.verdicts import UNCHANGED_TOLERANCE

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_what_moves", "plot_early_late", "plot_lr_sweep"]


def plot_what_moves(ratios: Mapping[str, Mapping[str, float]], tolerance: float = UNCHANGED_TOLERANCE) -> "Figure":
    """One panel per quantity of :data:`batchlab.formulas.effects.EFFECTS`, one bar per change (new / old, log
    axis), the grey band the ±``tolerance`` inside which a quantity counts as unchanged."""
    import matplotlib.pyplot as plt

    from batchlab.ui.style import PALETTE

    if not ratios:
        raise ValueError("ratios 为空：至少给出一种改变")
    keys = [k for k in EFFECTS if all(k in r for r in ratios.values())]
    fig, axes = plt.subplots(1, len(keys), figsize=(1.75 * len(keys) + 1.2, 3.4), sharey=True)
    names = list(ratios)
    for ax, key in zip(axes, keys):
        values = [ratios[name][key] for name in names]
        ax.axhspan(1 - tolerance, 1 + tolerance, color="0.85", zorder=0)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.bar(range(len(names)), values, color=[PALETTE[i % len(PALETTE)] for i in range(len(names))], width=0.6)
        for i, v in enumerate(values):
            ax.annotate(f"×{v:.2f}", (i, v), xytext=(0, 3 if v >= 1 else -11), textcoords="offset points",
                        ha="center", fontsize=8)
        ax.set_yscale("log", base=2)
        ax.set_xticks([])
        ax.set_title(EFFECTS[key], fontsize=9)
    low = min(v for r in ratios.values() for v in r.values())
    high = max(v for r in ratios.values() for v in r.values())
    axes[0].set_ylim(2 ** (math.floor(math.log2(low)) - 0.3), 2 ** (math.ceil(math.log2(high)) + 0.3))
    axes[0].set_ylabel("改变后 / 改变前")
    handles = [plt.Rectangle((0, 0), 1, 1, color=PALETTE[i % len(PALETTE)]) for i in range(len(names))]
    fig.legend(handles, names, loc="lower center", ncol=len(names), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def plot_early_late(histories: Sequence, labels: Sequence[str], split: int, floor: float | None = None) -> "Figure":
    """Eval loss against samples seen: the whole run (log axis) and, on its own scale, the part after
    ``split`` samples, where small differences in the final loss are visible."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    if len(histories) != len(labels):
        raise ValueError(f"{len(histories)} 次运行却有 {len(labels)} 个标签：每次运行一个标签")
    fig, (whole, late) = plt.subplots(1, 2, figsize=(9, 3.4))
    for h, label in zip(histories, labels):
        points = [(n, loss) for n, loss in zip(h.eval_samples, h.eval_loss) if n > 0]
        whole.plot(*zip(*points), label=label)
        tail = [(n, loss) for n, loss in points if n >= split]
        late.plot(*zip(*tail), marker=".", label=label)
    whole.set_xscale("log")
    whole.xaxis.set_minor_formatter(NullFormatter())  # minor labels on a log axis overlap
    whole.axvline(split, color="0.5", ls="--", lw=1)
    if floor is not None:
        whole.axhline(floor, color="k", ls=":", lw=1)
    whole.set_title("全程（对数横轴）", fontsize=10)
    late.set_title(f"后期：{split} 条样本之后", fontsize=10)
    for ax in (whole, late):
        ax.set_xlabel("已见样本数（序列）")
    whole.set_ylabel("验证集损失")
    whole.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_lr_sweep(final_loss: Mapping[int, Mapping[float, float]], floor: float | None = None,
                  clip: float = 2.5) -> "Figure":
    """Final eval loss against learning rate (log axis), one line per batch size; a star on each line's
    best rate. Losses above ``clip`` × the best loss (diverged runs) are drawn at that height as ▲ with
    their value, so they do not flatten the interesting part."""
    import matplotlib.pyplot as plt

    from batchlab.ui.style import PALETTE

    if not final_loss:
        raise ValueError("final_loss 为空：至少给出一个批大小的扫描结果")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ceiling = clip * min(v for losses in final_loss.values() for v in losses.values())
    for i, (batch, losses) in enumerate(sorted(final_loss.items())):
        rates = sorted(losses)
        colour = PALETTE[i % len(PALETTE)]
        ax.plot(rates, [min(losses[r], ceiling) for r in rates], marker="o", color=colour, label=f"B = {batch}")
        for r in rates:
            if losses[r] > ceiling:
                ax.plot([r], [ceiling], marker="^", ms=9, color=colour)
                ax.annotate(f"{losses[r]:.1f}", (r, ceiling), xytext=(6, -4), textcoords="offset points", fontsize=8)
        best = min(rates, key=losses.get)
        ax.plot([best], [losses[best]], marker="*", ms=14, color=colour, mec="k")
    if floor is not None:
        ax.axhline(floor, color="k", ls=":", lw=1, label="损失下限（熵率）")
    ax.set_xscale("log")
    ax.set_xlabel("学习率")
    ax.set_ylabel("相同样本预算后的验证损失")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
