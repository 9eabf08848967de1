"""Compute-efficiency figures (4.4): the matmul rate against M, and the roofline.

Numbers come from :mod:`batchlab.measure.matmul` (measured) and :mod:`batchlab.formulas.roofline` (the model);
these functions only draw them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

from batchlab.formulas.precision import element_bytes
from batchlab.formulas.roofline import MeasuredRate, arithmetic_intensity, roofline_flops
from batchlab.page.colours import PALETTE
from batchlab.ui.style import MARKERS, check_layout, figure_width, new_axes, plain_log_ticks

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


def plot_matmul_rates(reports: Sequence[_MatmulReport], ax: "Axes | None" = None,
                      layout: str = "desk") -> "Figure":
    """Achieved TFLOP/s against M (log 2 axis) for each ``bench_matmul`` report (one line per dtype)."""
    from matplotlib.ticker import NullLocator

    phone = check_layout(layout) == "phone"
    fig, ax = new_axes(ax, figsize=(figure_width(layout), 3.4 if phone else 3.6))
    for i, (colour, report) in enumerate(zip(PALETTE, reports)):
        rows = report.results
        ax.plot([r.m for r in rows], [r.tflops for r in rows], marker=MARKERS[i % len(MARKERS)], color=colour,
                label=f"{report.dtype}（{report.device}）")
    ms = [r.m for r in reports[0].results]
    ax.set_xscale("log", base=2)
    most = 5 if phone else 9  # wide labels such as 16384 touch beyond nine (five on a phone)
    shown = ms[::-(-len(ms) // most)]
    ax.set_xticks(shown, [str(m) for m in shown])
    ax.xaxis.set_minor_locator(NullLocator())
    first = reports[0].results[0]
    ax.set_xlabel(f"$M$（[$M$, {first.k}] × [{first.k}, {first.n}] 的行数）")
    ax.set_ylabel("实测 TFLOP/s")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left")
    return fig


def plot_roofline(peak_flops: float, bandwidth: float, points: Sequence[tuple[int, int, int, float]],
                  dtype: str = "float32", label: str = "", ax: "Axes | None" = None,
                  layout: str = "desk") -> "Figure":
    """The roofline min(peak, intensity × bandwidth) on log–log axes, with measured matmuls placed at
    their arithmetic intensity. ``points`` are (m, k, n, achieved FLOP/s). Both axes are labelled at
    powers of two (a log axis within one decade otherwise shows a single label)."""
    phone = check_layout(layout) == "phone"
    own_figure = ax is None
    fig, ax = new_axes(ax, figsize=(figure_width(layout), 3.6 if phone else 3.9))
    size = element_bytes(dtype)
    xs = [arithmetic_intensity(m, k, n, size) for m, k, n, _ in points]
    lo, hi = min(xs + [peak_flops / bandwidth]) / 3, max(xs + [peak_flops / bandwidth]) * 3
    grid = [lo * (hi / lo) ** (i / 60) for i in range(61)]
    ax.loglog(grid, [roofline_flops(x, peak_flops, bandwidth) / 1e12 for x in grid], "k-", lw=1.4,
              label=f"屋顶线{label}")
    ax.axvline(peak_flops / bandwidth, color="0.5", ls=":", lw=1, label=f"拐点 {peak_flops / bandwidth:.1f} FLOP/字节")
    ax.loglog(xs, [f / 1e12 for *_, f in points], "o", color=PALETTE[0], label="实测矩阵乘法")
    for i, (x, (m, *_rest)) in enumerate(zip(xs, points)):
        # below and above the points in turn: neighbours' labels do not print over each other
        ax.annotate(f"$M$={m}", (x, _rest[-1] / 1e12), xytext=(5, -4 if i % 2 == 0 else 5), textcoords="offset points",
                    fontsize=8.5, va="top" if i % 2 == 0 else "bottom")
    roof = [roofline_flops(x, peak_flops, bandwidth) / 1e12 for x in grid] + [f / 1e12 for *_, f in points]
    plain_log_ticks(ax.xaxis, lo, hi, most=5 if phone else 8)
    plain_log_ticks(ax.yaxis, min(roof), max(roof), most=5)
    ax.set_xlabel(f"算术强度（FLOP/字节，{dtype}）")
    ax.set_ylabel("TFLOP/s")
    if not own_figure:  # the caller lays out its figure
        ax.legend(loc="best")
        return fig
    # below the axes: where the points and the roof lie depends on the device, no corner is always empty
    fig.set_layout_engine("constrained")
    fig.legend(loc="outside lower center", ncol=1 if phone else 3, frameon=False)
    return fig
