"""Figures of chapter 4.6: what one change of batch moves, and loss against samples early and late."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Sequence

from batchlab.formulas.effects import EFFECTS
from batchlab.lecture.ramp_verdict import ramp_verdict, step_saving
from batchlab.lecture.verdicts import UNCHANGED_TOLERANCE
from batchlab.page.numbers import count, listed, percent

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_what_moves", "plot_early_late", "plot_lr_sweep", "plot_ramp", "ramp_table"]


def _wrap(title: str, width: int = 9) -> str:
    """A panel title in two lines when it is long: broken at its first space or （ after ``width`` // 2."""
    if len(title) <= width:
        return title
    cuts = [i for i, ch in enumerate(title) if ch in " （" and i >= width // 2]
    if not cuts:
        return title
    i = cuts[0]
    return title[:i] + "\n" + title[i + (title[i] == " "):]


def plot_what_moves(ratios: Mapping[str, Mapping[str, float]], tolerance: float = UNCHANGED_TOLERANCE,
                    layout: str = "desk") -> "Figure":
    """One panel per quantity of :data:`batchlab.formulas.effects.EFFECTS` (three to a row, two on a
    phone), one bar per change (new / old, log axis, the change named under its bar), the grey band the
    ±``tolerance`` inside which a quantity counts as unchanged."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    from batchlab.page.colours import PALETTE
    from batchlab.ui.style import check_layout, figure_width

    if not ratios:
        raise ValueError("ratios 为空：至少给出一种改变")
    phone = check_layout(layout) == "phone"
    keys = [k for k in EFFECTS if all(k in r for r in ratios.values())]
    cols = min(2 if phone else 3, len(keys))
    rows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(figure_width(layout), (2.45 if phone else 2.75) * rows + 0.2), sharey=True, squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(keys):]:
        fig.delaxes(ax)
    names = list(ratios)
    low = min(v for r in ratios.values() for v in r.values())
    high = max(v for r in ratios.values() for v in r.values())
    # whole powers of two only, at most five of them: log ticks otherwise crowd each other
    lo_exp, hi_exp = math.floor(math.log2(low)), math.ceil(math.log2(high))
    step = max(1, math.ceil((hi_exp - lo_exp + 1) / 5))
    ticks = [2.0 ** e for e in range(lo_exp, hi_exp + 1, step)]
    for ax, key in zip(axes.flat, keys):
        values = [ratios[name][key] for name in names]
        ax.axhspan(1 - tolerance, 1 + tolerance, color="0.85", zorder=0)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.bar(range(len(names)), values, color=[PALETTE[i % len(PALETTE)] for i in range(len(names))], width=0.6)
        for i, v in enumerate(values):
            ax.annotate(f"×{v:.2f}", (i, v), xytext=(0, 3 if v >= 1 else -3), textcoords="offset points",
                        ha="center", va="bottom" if v >= 1 else "top", fontsize=9)
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_locator(FixedLocator(ticks))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:g}")
        # on a phone each change's name on two lines (微批次⏎×2): two names side by side in half a column
        ax.set_xticks(range(len(names)), [n.replace(" ", "\n", 1) if phone else n for n in names])
        ax.tick_params(axis="x", length=0)
        ax.grid(axis="x", visible=False)
        ax.set_xlim(-0.6, len(names) - 0.4)
        ax.set_title(_wrap(EFFECTS[key]), fontsize=10)
    axes[0, 0].set_ylim(2 ** (lo_exp - 0.45), 2 ** (hi_exp + 0.45))
    for row in axes[:, 0]:
        row.set_ylabel("改变后 / 改变前")
    return fig


def _same_until(histories: Sequence, split: int, tolerance: float) -> list[list[int]]:
    """Groups (two or more) of runs whose evaluations before ``split`` samples differ by at most
    ``tolerance`` (same samples seen): runs that share their start and differ only after it, whose
    curves lie on one another there."""
    def early(h) -> dict:
        return {n: loss for n, loss in zip(h.eval_samples, h.eval_loss) if 0 < n < split}

    groups: list[list[int]] = []
    for i, h in enumerate(histories):
        mine = early(h)
        for group in groups:
            theirs = early(histories[group[0]])
            shared = mine.keys() & theirs.keys()
            if len(shared) >= 2 and all(abs(mine[n] - theirs[n]) <= tolerance for n in shared):
                group.append(i)
                break
        else:
            groups.append([i])
    return [g for g in groups if len(g) > 1]


def plot_early_late(histories: Sequence, labels: Sequence[str], split: int, floor: float | None = None,
                    layout: str = "desk") -> "Figure":
    """Eval loss against samples seen: the whole run (log axis) and, on its own scale, the part after
    ``split`` samples, where small differences in the final loss are visible. Runs that the eye cannot
    tell apart before ``split`` (one start, remedies that change little or nothing before it) are said to
    lie on one another there, in the panel.
    Side by side on a desk, stacked on a phone."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from batchlab.page.colours import PALETTE
    from batchlab.ui.style import LINESTYLES, MARKERS, check_layout, figure_width, plain_log_ticks

    if len(histories) != len(labels):
        raise ValueError(f"{len(histories)} 次运行却有 {len(labels)} 个标签：每次运行一个标签")
    phone = check_layout(layout) == "phone"
    fig, (whole, late) = plt.subplots(*((2, 1) if phone else (1, 2)), figsize=(figure_width(layout), 6.8 if phone else 3.9),
                                      layout="constrained")
    for i, (h, label) in enumerate(zip(histories, labels)):
        look = dict(color=PALETTE[i % len(PALETTE)], ls=LINESTYLES[i % len(LINESTYLES)], lw=1.6)
        points = [(n, loss) for n, loss in zip(h.eval_samples, h.eval_loss) if n > 0]
        whole.plot(*zip(*points), label=label, **look)
        tail = [(n, loss) for n, loss in points if n >= split]
        late.plot(*zip(*tail), marker=MARKERS[i % len(MARKERS)], ms=4, **look)
    whole.set_xscale("log")
    samples = [n for h in histories for n in h.eval_samples if n > 0]
    plain_log_ticks(whole.xaxis, min(samples), max(samples), most=4 if phone else 5)
    whole.axvline(split, color="0.5", ls="--", lw=1)
    losses = [loss for h in histories for loss in h.eval_loss]
    # closer than 1.5 % of the panel's height (a few pixels, about the lines' width): a reader cannot
    # tell the curves apart, so the figure says they lie on one another
    for group in _same_until(histories, split, 0.015 * (max(losses) - min(losses))):
        first = histories[group[0]]
        # an arrow from the empty lower left of the panel (every curve falls from above it) to the
        # shared curve, a third of the way to the split on the log axis
        start = min(n for n in first.eval_samples if n > 0)
        at, height = next((n, loss) for n, loss in zip(first.eval_samples, first.eval_loss)
                          if n >= start * (split / start) ** 0.35)
        whole.annotate(f"{split} 条之前\n这 {len(group)} 条曲线几乎重合", (at, height), xytext=(0.04, 0.1),
                       textcoords="axes fraction", ha="left", va="bottom", fontsize=9, color="0.25",
                       arrowprops=dict(arrowstyle="-", color="0.4", lw=0.8))
    if floor is not None:
        whole.axhline(floor, color="k", ls=":", lw=1)
    whole.set_title("全程（对数横轴）")
    late.set_title(f"后期：{split} 条样本之后")
    late.xaxis.set_major_locator(MaxNLocator(4))  # sample counts are wide: four ticks do not touch
    late.xaxis.set_major_formatter(lambda v, _pos: str(count(round(v))))
    for ax in (whole, late):
        ax.set_xlabel("已见样本数（序列）")
        if phone or ax is whole:
            ax.set_ylabel("验证集损失")
    ncol = 1 if phone else 2 if len(labels) > 3 else len(labels)
    fig.legend(loc="outside lower center", ncol=ncol, frameon=False)
    return fig


def plot_lr_sweep(final_loss: Mapping[int, Mapping[float, float]], floor: float | None = None,
                  clip: float = 2.5, layout: str = "desk") -> "Figure":
    """Final eval loss against learning rate (log axis), one line per batch size; a star on each line's
    best rate. Losses above ``clip`` × the best loss (diverged runs) are drawn at that height as ▲ with
    their value, so they do not flatten the interesting part; neighbouring ▲ of one line share one label
    (their values, each once), each line's labels on their own height. The legend sits below the axes,
    over no point."""
    import matplotlib.pyplot as plt

    from batchlab.page.colours import PALETTE
    from batchlab.ui.style import LINESTYLES, MARKERS, check_layout, figure_width

    if not final_loss:
        raise ValueError("final_loss 为空：至少给出一个批大小的扫描结果")
    phone = check_layout(layout) == "phone"
    fig, ax = plt.subplots(figsize=(figure_width(layout), 4.2 if phone else 3.8), layout="constrained")
    ceiling = clip * min(v for losses in final_loss.values() for v in losses.values())
    for i, (batch, losses) in enumerate(sorted(final_loss.items())):
        rates = sorted(losses)
        colour = PALETTE[i % len(PALETTE)]
        ax.plot(rates, [min(losses[r], ceiling) for r in rates], marker=MARKERS[i % len(MARKERS)], ms=5,
                ls=LINESTYLES[i % len(LINESTYLES)], color=colour, label=f"B = {batch}")
        runs: list[list[float]] = []  # neighbouring clipped rates of this line
        for k, r in enumerate(rates):
            if losses[r] > ceiling:
                ax.plot([r], [ceiling], marker="^", ms=9, color=colour)
                if runs and rates[k - 1] == runs[-1][-1]:
                    runs[-1].append(r)
                else:
                    runs.append([r])
        for run in runs:
            values = list(dict.fromkeys(f"{losses[r]:.1f}" for r in run))  # each value once
            at = run[0] * (run[-1] / run[0]) ** 0.5
            ax.annotate("、".join(values), (at, ceiling), xytext=(0, 7 + 12 * i), textcoords="offset points",
                        fontsize=9, ha="center", va="bottom", color=colour)
        best = min(rates, key=losses.get)
        ax.plot([best], [losses[best]], marker="*", ms=14, color=colour, mec="k")
    if floor is not None:
        ax.axhline(floor, color="k", ls=":", lw=1, label="损失下限（熵率）")
    ax.set_xscale("log")
    ax.set_ylim(top=ceiling * (1.12 + 0.06 * len(final_loss)))  # room for the diverged runs' labels
    ax.set_xlabel("学习率")
    ax.set_ylabel("相同样本预算后的验证损失" if not phone else "相同样本预算后\n的验证损失")
    fig.legend(loc="outside lower center", ncol=len(final_loss) + (floor is not None) if not phone else 2,
               frameon=False)
    return fig


def plot_ramp(histories: Sequence, labels: Sequence[str], target: float | None = None, late: int = 1024,
              layout: str = "desk") -> "Figure":
    """Batch-size ramps against a constant batch, both against samples seen: the eval loss after ``late``
    samples (where the runs race to the dotted ``target``) and the batch each step took (stairs, log₂ axis).
    Side by side on a desk, stacked on a phone."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

    from batchlab.page.colours import PALETTE
    from batchlab.ui.style import LINESTYLES, check_layout, figure_width

    if not histories or len(histories) != len(labels):
        raise ValueError(f"{len(histories)} 次运行却有 {len(labels)} 个标签：至少一次运行，每次运行一个标签")
    phone = check_layout(layout) == "phone"
    fig, (loss_ax, batch_ax) = plt.subplots(*((2, 1) if phone else (1, 2)),
                                            figsize=(figure_width(layout), 6.6 if phone else 3.9),
                                            layout="constrained")
    for i, (h, label) in enumerate(zip(histories, labels)):
        look = dict(color=PALETTE[i % len(PALETTE)], ls=LINESTYLES[i % len(LINESTYLES)], lw=1.6)
        points = [(n, loss) for n, loss in zip(h.eval_samples, h.eval_loss) if n >= late]
        loss_ax.plot(*zip(*points), label=label, **look)
        starts = [0, *h.samples_seen[:-1]]
        batch_ax.step([*starts, h.samples_seen[-1]], [*h.batch_sizes, h.batch_sizes[-1]], where="post", **look)
    if target is not None:
        loss_ax.axhline(target, color="k", ls=":", lw=1)
        # at the left, where every run is still above the target: the label stays clear of the curves
        loss_ax.annotate("目标", (0.0, target), xycoords=("axes fraction", "data"), xytext=(4, 3),
                         textcoords="offset points", ha="left", va="bottom", fontsize=9)
    # the start is far above the end: drawn whole, the early fall would flatten the part the runs race in
    loss_ax.set_xlim(late, max(h.samples_seen[-1] for h in histories))
    sizes = sorted({b for h in histories for b in h.batch_sizes})
    batch_ax.set_yscale("log", base=2)
    batch_ax.yaxis.set_major_locator(FixedLocator([b for b in sizes if b & (b - 1) == 0] or sizes))
    batch_ax.yaxis.set_minor_locator(NullLocator())
    batch_ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:g}")
    loss_ax.set_title(f"验证损失（{count(late)} 条样本之后）")
    batch_ax.set_title("每步的批大小")
    for ax in (loss_ax, batch_ax):
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.xaxis.set_major_formatter(lambda v, _pos: str(count(round(v))))
        ax.set_xlabel("已见样本数（序列）")
    loss_ax.set_ylabel("验证集损失")
    batch_ax.set_ylabel("批大小（序列）")
    fig.legend(loc="outside lower center", ncol=1 if phone else 2, frameon=False)
    return fig


def ramp_table(histories: Mapping[str, Sequence], reach: Mapping[str, Sequence[int | None]], baseline: str):
    """4.6's ramp verdict table: per plan (one row, the seeds' values joined by 、) the steps
    and samples it took to reach the target (:func:`~batchlab.measure.train.steps_to_target`, given as
    ``reach``; — where a run never reached it), the share of ``baseline``'s steps saved and the verdict of
    :func:`~batchlab.lecture.ramp_verdict.ramp_verdict` (the baseline's own row reads 对照)."""
    from batchlab.ui.tables import text_table

    if baseline not in histories or set(reach) != set(histories):
        raise ValueError(f"histories 与 reach 须列出同样的做法，并包含对照 {baseline!r}")
    base = reach[baseline]

    def row(name: str) -> list:
        steps = reach[name]
        samples = [h.samples_seen[s - 1] if s else "—" for h, s in zip(histories[name], steps)]
        saved = [None if name == baseline else step_saving(s, b) for s, b in zip(steps, base)]
        return [name, listed(s or "—" for s in steps), listed(samples),
                listed("—" if x is None else percent(x, 0) for x in saved),
                "对照" if name == baseline else ramp_verdict(steps, base)]

    # five columns: a sixth (the steps each run took in all) pushed the verdict off a 1280 px column
    return text_table(["做法", "到目标的步数", "到目标的样本数", "少用的步数", "判定"],
                      [row(name) for name in histories])
