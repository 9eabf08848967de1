"""Figure style, the Chinese font setup every chapter uses, and what every figure and widget shares."""
from __future__ import annotations

import html
import warnings
from typing import TYPE_CHECKING

import matplotlib as mpl
from matplotlib import font_manager

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["CJK_FONTS", "PALETTE", "setup", "find_cjk_font", "new_axes", "render_error_html", "clear_artists",
           "canvas_png",
           "show_png"]

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


def new_axes(ax: "Axes | None", figsize: tuple[float, float] | None = None) -> tuple["Figure", "Axes"]:
    """``ax``'s figure and ``ax``, or a new pyplot figure with one axes of ``figsize``."""
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax.figure, ax
    return plt.subplots(figsize=figsize)


def render_error_html(message: str) -> str:
    """A widget's visible message for invalid input (never a traceback)."""
    return f'<div style="color:#b00020"><b>配置无效：</b>{html.escape(message)}</div>'


def clear_artists(ax: "Axes") -> None:
    """Remove what was drawn on ``ax`` (lines, bars, collections, texts, legend) but keep its axis and
    tick objects: an explorer that redraws this way skips rebuilding them, which ``ax.clear()`` costs
    about a fifth of a redraw."""
    for artist in [*ax.lines, *ax.collections, *ax.texts, *ax.patches]:
        artist.remove()
    ax.containers.clear()  # the bar containers' patches are gone with ax.patches
    if ax.get_legend() is not None:
        ax.get_legend().remove()


def canvas_png(figure: "Figure") -> bytes:
    """What ``figure``'s Agg canvas holds now (draw it first), as PNG bytes. Compression level 1: three
    times faster than the default for ~30 % more bytes, which an interactive redraw wants."""
    import io

    from PIL import Image as PILImage

    width, height = figure.canvas.get_width_height()
    buffer = io.BytesIO()
    PILImage.frombuffer("RGBA", (width, height), figure.canvas.buffer_rgba(), "raw", "RGBA", 0, 1).save(
        buffer, format="png", compress_level=1)
    return buffer.getvalue()


def show_png(output, png: bytes) -> None:
    """Replace what an ``ipywidgets.Output`` shows with the image ``png``."""
    from IPython.display import Image, clear_output, display

    with output:
        clear_output(wait=True)
        display(Image(data=png, format="png"))
