"""Convergence figures (4.2): evaluation loss against steps and against samples seen."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_training_curves"]


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
