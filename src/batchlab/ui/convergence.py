"""Convergence figures (4.1, 4.2): training loss against steps, evaluation loss against steps and against
samples seen, and the steps–samples trade-off. Each draws a desk or a phone layout (``layout``, see
:data:`batchlab.ui.style.LAYOUTS`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_loss_curve", "plot_training_curves", "plot_steps_samples"]

STEPS_LOG_SPREAD = 8
"""A steps axis turns logarithmic when the longest run takes this many times the steps of the shortest:
on a linear axis the short runs (B = 128: 16 steps of 256) are a few pixels at its left edge."""


def plot_loss_curve(losses: Sequence[float], floor: float, batch_size: int, layout: str = "desk") -> "Figure":
    """Training loss of one run against the optimizer step (from 1), with the entropy-rate floor dashed."""
    import matplotlib.pyplot as plt

    from batchlab.ui.style import figure_width

    fig, ax = plt.subplots(figsize=(figure_width(layout, 0.86), 3.0), layout="constrained")
    ax.plot(range(1, len(losses) + 1), losses, label=f"训练损失（B = {batch_size}）")
    ax.axhline(floor, color="k", ls="--", label="熵率：损失下限")
    ax.set_xlabel("更新步数")
    ax.set_ylabel("交叉熵（奈特/token）")
    ax.legend(loc="upper right")  # the loss falls: the upper right is empty
    return fig


def plot_training_curves(histories: list, labels: list[str], floor: float | None = None,
                         by_samples: bool = True, title: str | None = None, layout: str = "desk") -> "Figure":
    """Eval loss of several runs against optimizer steps, and (``by_samples``) against samples seen
    on a log axis; ``histories`` are :class:`batchlab.measure.train.History` objects recorded with
    ``eval_data``. ``floor`` draws the entropy-rate line. The steps axis is logarithmic when the runs'
    lengths differ :data:`STEPS_LOG_SPREAD`-fold; each evaluation is a marker, so a short run stays
    visible. On a phone the two panels are stacked."""
    import matplotlib.pyplot as plt

    from batchlab.page.colours import PALETTE
    from batchlab.ui.style import LINESTYLES, MARKERS, figure_width, plain_log_ticks

    if len(histories) != len(labels):
        raise ValueError(f"{len(histories)} histories but {len(labels)} labels: give one label per run")
    phone = layout == "phone"
    width = figure_width(layout)
    if by_samples:
        fig, (ax1, ax2) = plt.subplots(*((2, 1) if phone else (1, 2)), figsize=(width, 6.4 if phone else 3.9),
                                       sharey=True, layout="constrained")
    else:
        fig, ax1 = plt.subplots(figsize=(width, 3.6 if phone else 3.9), layout="constrained")
        ax2 = None
    longest = max(max(h.eval_step) for h in histories)
    shortest = min(max(h.eval_step) for h in histories)
    log_steps = longest >= STEPS_LOG_SPREAD * max(shortest, 1)
    for i, (h, label) in enumerate(zip(histories, labels)):
        # colour, line style and marker: curves that lie on each other stay apart
        look = dict(color=PALETTE[i % len(PALETTE)], ls=LINESTYLES[i % len(LINESTYLES)], lw=1.6,
                    marker=MARKERS[i % len(MARKERS)], ms=3.5)
        # step 0 (and, by samples, no samples yet) has no place on a log axis
        steps = [(s, loss) for s, loss in zip(h.eval_step, h.eval_loss) if s > 0 or not log_steps]
        ax1.plot(*zip(*steps), label=label, **look)
        if ax2 is not None:
            points = [(n, loss) for n, loss in zip(h.eval_samples, h.eval_loss) if n > 0]
            ax2.plot(*zip(*points), **look)
    for ax in (ax1, ax2):
        if ax is not None and floor is not None:
            ax.axhline(floor, color="k", ls=":", lw=1)
    ax1.set_xlabel("参数更新步数" + ("（对数轴）" if log_steps else ""))
    ax1.set_ylabel("验证集损失")
    if log_steps:
        ax1.set_xscale("log")
        plain_log_ticks(ax1.xaxis, 1, longest, most=4 if phone else 5)
    if ax2 is not None:
        ax2.set_xlabel("已见样本数（序列，对数轴）")
        ax2.set_xscale("log")
        samples = [n for h in histories for n in h.eval_samples if n > 0]
        plain_log_ticks(ax2.xaxis, min(samples), max(samples), most=4 if phone else 5)
        if phone:
            ax2.set_ylabel("验证集损失")
    if title:
        fig.suptitle(title)
    wide = max(map(len, labels)) > 12
    ncol = min(len(labels), (2 if wide else 4) if not phone else (1 if wide else 2))
    fig.legend(loc="outside lower center", ncol=ncol, frameon=False)
    return fig


def plot_steps_samples(batch_sizes: list[int], steps: list[float], fit: dict[str, float],
                       layout: str = "desk") -> "Figure":
    """McCandlish et al.'s trade-off (S/S_min − 1)(E/E_min − 1) = 1 on log–log axes, with the measured
    runs (steps S to a target, samples E = B·S) placed by ``fit`` from
    :func:`batchlab.formulas.scaling.fit_steps_samples`."""
    import matplotlib.pyplot as plt

    from batchlab.page.colours import PALETTE
    from batchlab.page.symbols import mathtext
    from batchlab.ui.style import figure_width, plain_log_ticks

    phone = layout == "phone"
    fig, ax = plt.subplots(figsize=(figure_width(layout, 0.8), 3.6 if phone else 3.9), layout="constrained")
    placed = [(b, b * s / fit["e_min"] - 1, s / fit["s_min"] - 1) for b, s in zip(batch_sizes, steps)]
    placed = [(b, x, y) for b, x, y in placed if x > 0 and y > 0]  # at or below a minimum: not on a log axis
    xs = [x for _, x, _ in placed] or [1.0]
    lo, hi = min(xs + [1 / y for _, _, y in placed]) / 2, max(xs + [1 / y for _, _, y in placed]) * 2
    grid = [lo * (hi / lo) ** (k / 80) for k in range(81)]
    s_min, e_min = (mathtext(name).strip("$") for name in ("S_min", "E_min"))  # the book's one rendering
    ax.loglog(grid, [1 / x for x in grid], "k--", lw=1.2, label=f"$(S/{s_min}-1)(E/{e_min}-1)=1$")
    for b, x, y in placed:
        ax.loglog([x], [y], "o", color=PALETTE[0], ms=7)
        ax.annotate(f"B = {b}", (x, y), xytext=(6, 4), textcoords="offset points", fontsize=9)
    plain_log_ticks(ax.xaxis, lo, hi, most=4 if phone else 6)
    plain_log_ticks(ax.yaxis, 1 / hi, 1 / lo, most=5)
    ax.set_xlabel(f"$E/{e_min}-1$（多用的样本）")
    ax.set_ylabel(f"$S/{s_min}-1$（多走的步数）")
    b_noise = f"拟合 {mathtext('B_noise')} ≈ {fit['b_noise']:.0f}"
    ax.set_title(f"步数与样本的权衡\n（{b_noise}）" if phone else f"步数与样本的权衡（{b_noise}）")
    ax.legend(loc="lower left")
    return fig
