"""Compute-efficiency figures (4.4): the matmul rate against M, and the roofline.

Numbers come from :mod:`batchlab.measure.matmul` (measured) and :mod:`batchlab.formulas.roofline` (the model);
these functions only draw them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

from batchlab.formulas.precision import element_bytes
from batchlab.formulas.roofline import MeasuredRate, arithmetic_intensity, roofline_flops
from batchlab.page.colours import PALETTE
from batchlab.ui.style import FIGURE_WIDTH, MARKERS, new_axes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_matmul_rates", "plot_roofline"]


class _MatmulRow(MeasuredRate, Protocol):
    @property
    def k(self) -> int: ...

    @property
    def n(self) -> int: ...


class _MatmulReport(Protocol):
    """What :func:`plot_matmul_rates` reads of a :class:`batchlab.measure.matmul.MatmulBench` (ui never imports it)."""

    @property
    def dtype(self) -> str: ...

    @property
    def device(self) -> str: ...

    @property
    def results(self) -> Sequence[_MatmulRow]: ...


def plot_matmul_rates(reports: Sequence[_MatmulReport], ax: "Axes | None" = None) -> "Figure":
    """Achieved TFLOP/s against M (log 2 axis) for each ``bench_matmul`` report (one line per dtype)."""
    from matplotlib.ticker import NullLocator

    fig, ax = new_axes(ax, figsize=(FIGURE_WIDTH, 3.6))
    for i, (colour, report) in enumerate(zip(PALETTE, reports)):
        rows = report.results
        ax.plot([r.m for r in rows], [r.tflops for r in rows], marker=MARKERS[i % len(MARKERS)], color=colour,
                label=f"{report.dtype}（{report.device}）")
    ms = [r.m for r in reports[0].results]
    ax.set_xscale("log", base=2)
    shown = ms if len(ms) <= 9 else ms[::2]  # wide labels such as 16384 touch beyond nine
    ax.set_xticks(shown, [str(m) for m in shown])
    ax.xaxis.set_minor_locator(NullLocator())
    first = reports[0].results[0]
    ax.set_xlabel(f"M（[M, {first.k}] × [{first.k}, {first.n}] 的行数）")
    ax.set_ylabel("实测 TFLOP/s")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left")
    return fig


def plot_roofline(peak_flops: float, bandwidth: float, points: Sequence[tuple[int, int, int, float]],
                  dtype: str = "float32", label: str = "", ax: "Axes | None" = None) -> "Figure":
    """The roofline min(peak, intensity × bandwidth) on log–log axes, with measured matmuls placed at
    their arithmetic intensity. ``points`` are (m, k, n, achieved FLOP/s)."""
    fig, ax = new_axes(ax, figsize=(FIGURE_WIDTH, 3.9))
    size = element_bytes(dtype)
    xs = [arithmetic_intensity(m, k, n, size) for m, k, n, _ in points]
    lo, hi = min(xs + [peak_flops / bandwidth]) / 3, max(xs + [peak_flops / bandwidth]) * 3
    grid = [lo * (hi / lo) ** (i / 60) for i in range(61)]
    ax.loglog(grid, [roofline_flops(x, peak_flops, bandwidth) / 1e12 for x in grid], "k-", lw=1.4,
              label=f"屋顶线{label}")
    ax.axvline(peak_flops / bandwidth, color="0.5", ls=":", lw=1, label=f"拐点 {peak_flops / bandwidth:.1f} FLOP/字节")
    ax.loglog(xs, [f / 1e12 for *_, f in points], "o", color=PALETTE[0], label="实测矩阵乘法")
    for x, (m, *_rest) in zip(xs, points):
        ax.annotate(f"M={m}", (x, _rest[-1] / 1e12), xytext=(5, -4), textcoords="offset points", fontsize=8.5,
                    va="top")
    ax.set_xlabel(f"算术强度（FLOP/字节，{dtype}）")
    ax.set_ylabel("TFLOP/s")
    ax.legend(loc="lower right")
    return fig
