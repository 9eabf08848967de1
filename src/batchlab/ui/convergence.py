"""Convergence figures (4.2): evaluation loss against steps and against samples seen."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_training_curves"]


def plot_training_curves(histories: list, labels: list[str], floor: float | None = None,
                         by_samples: bool = True, title: str | None = None) -> "Figure":
    """Eval loss of several runs against optimizer steps, and (``by_samples``) against samples seen
    on a log axis; ``histories`` are :class:`batchlab.measure.train.History` objects recorded with
    ``eval_data``. ``floor`` draws the entropy-rate line."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    from batchlab.page.colours import PALETTE
    from batchlab.ui.style import FIGURE_WIDTH, LINESTYLES

    if len(histories) != len(labels):
        raise ValueError(f"{len(histories)} histories but {len(labels)} labels: give one label per run")
    if by_samples:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH, 3.9), sharey=True, layout="constrained")
    else:
        fig, ax1 = plt.subplots(figsize=(FIGURE_WIDTH, 3.9), layout="constrained")
        ax2 = None
    for i, (h, label) in enumerate(zip(histories, labels)):
        # colour and line style: curves that lie on each other stay apart
        look = dict(color=PALETTE[i % len(PALETTE)], ls=LINESTYLES[i % len(LINESTYLES)], lw=1.6)
        ax1.plot(h.eval_step, h.eval_loss, label=label, **look)
        if ax2 is not None:
            # Step 0 (no samples yet) has no place on a log axis.
            points = [(n, loss) for n, loss in zip(h.eval_samples, h.eval_loss) if n > 0]
            ax2.plot(*zip(*points), **look)
    for ax in (ax1, ax2):
        if ax is not None and floor is not None:
            ax.axhline(floor, color="k", ls=":", lw=1)
    ax1.set_xlabel("参数更新步数")
    ax1.set_ylabel("验证集损失")
    if ax2 is not None:
        ax2.set_xlabel("已见样本数（序列）")
        ax2.set_xscale("log")
        ax2.xaxis.set_minor_formatter(NullFormatter())  # minor labels on a log axis overlap
    if title:
        fig.suptitle(title)
    fig.legend(loc="outside lower center", ncol=min(len(labels), 4 if max(map(len, labels)) <= 12 else 2),
               frameon=False)
    return fig


def plot_steps_samples(batch_sizes: list[int], steps: list[float], fit: dict[str, float]) -> "Figure":
    """McCandlish et al.'s trade-off (S/S_min − 1)(E/E_min − 1) = 1 on log–log axes, with the measured
    runs (steps S to a target, samples E = B·S) placed by ``fit`` from
    :func:`batchlab.formulas.scaling.fit_steps_samples`."""
    import matplotlib.pyplot as plt

    from batchlab.page.colours import PALETTE
    from batchlab.ui.style import FIGURE_WIDTH

    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH * 0.8, 3.9))
    xs = [10 ** (k / 20) for k in range(-40, 41)]
    ax.loglog(xs, [1 / x for x in xs], "k--", lw=1.2, label="(S/S_min - 1)(E/E_min - 1) = 1")
    for b, s in zip(batch_sizes, steps):
        x, y = b * s / fit["e_min"] - 1, s / fit["s_min"] - 1
        if x > 0 and y > 0:  # a point at or below a minimum has no place on a log axis
            ax.loglog([x], [y], "o", color=PALETTE[0], ms=7)
            ax.annotate(f"B = {b}", (x, y), xytext=(6, 4), textcoords="offset points", fontsize=9)
    ax.set_xlabel("E/E_min - 1（多用的样本）")
    ax.set_ylabel("S/S_min - 1（多走的步数）")
    ax.set_title(f"步数与样本的权衡（拟合 B_noise ≈ {fit['b_noise']:.0f}）")
    ax.legend(loc="upper right")
    fig.tight_layout()
    return fig
