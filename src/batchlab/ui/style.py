"""Figure style, the Chinese font setup every chapter uses, and what every figure and widget shares."""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import matplotlib as mpl
from matplotlib import font_manager

from batchlab.page.colours import PALETTE

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["CJK_FONTS", "LINESTYLES", "MARKERS", "DPI", "COLUMN_PX", "MIN_TEXT_PT", "FIGURE_WIDTH", "setup",
           "prepare_colab",
           "find_cjk_font", "new_axes", "clear_artists", "canvas_png", "show_png"]

# Noto Sans CJK SC first (Debian fonts-noto-cjk, Binder's apt.txt); JP is the same .ttc seen by older
# matplotlib, which read only face 0; the rest are what Windows/macOS readers already have.
CJK_FONTS: tuple[str, ...] = (
    "Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC", "Source Han Sans CN",
    "WenQuanYi Zen Hei", "Microsoft YaHei", "PingFang SC", "Heiti SC", "SimHei",
)

LINESTYLES = ("-", "--", "-.", ":")
"""Line styles for curves that may lie on each other: each run differs in colour and in style."""
MARKERS = ("o", "s", "^", "D", "v", "P")


DPI = 110
"""Pixels per inch of every figure the book saves (inline outputs and explorer PNGs)."""
COLUMN_PX = 760
"""The narrowest content column, in CSS pixels, the book is laid out for on a desk (a wider image is
scaled down to it)."""
MIN_TEXT_PT = 8.0
"""The smallest text a figure may show, in points at its displayed size in :data:`COLUMN_PX`."""
FIGURE_WIDTH = COLUMN_PX / DPI - 0.01
"""Inches: a figure this wide is exactly as many pixels as the column (shown unscaled, 110/96 of
its point sizes)."""

# Point sizes of the book's figures: shown at DPI in a 760 px column, 8.5 pt is ~9.7 pt on the page.
_FONT_SIZES = {"font.size": 10.0, "axes.titlesize": 10.5, "axes.labelsize": 10.0, "xtick.labelsize": 9.5,
               "ytick.labelsize": 9.5, "legend.fontsize": 9.0, "legend.title_fontsize": 9.0,
               "figure.titlesize": 11.0}


def find_cjk_font() -> str | None:
    """Name of the first installed font from :data:`CJK_FONTS`, or None."""
    installed = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONTS if name in installed), None)


def setup(dpi: int = DPI) -> str | None:
    """Apply the book's style; return the CJK font used (None, with one warning, if none is found)."""
    font = find_cjk_font()
    mpl.rcParams.update({
        "figure.dpi": dpi,
        "savefig.dpi": dpi,
        "figure.figsize": (FIGURE_WIDTH, 3.6),
        **_FONT_SIZES,
        "lines.markersize": 6.0,
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


COLAB_FONT_GLOB = "/usr/share/fonts/**/NotoSansCJK*"
"""Where Debian's fonts-noto-cjk puts its files (scripts/setup-env.sh looks for the same names)."""


def prepare_colab(apt_packages: Sequence[str] = ("fonts-noto-cjk",)) -> None:
    """On Google Colab, after the package is installed: install the Chinese font with apt when it is
    missing, register it with the matplotlib Colab has already loaded (no kernel restart), and switch on
    the widget manager ipywidgets 8 needs. The chapters' Colab cell calls it; elsewhere it is not called."""
    import glob
    import subprocess

    fonts = glob.glob(COLAB_FONT_GLOB, recursive=True)
    if not fonts:
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *apt_packages], check=True)
        fonts = glob.glob(COLAB_FONT_GLOB, recursive=True)
    known = {f.fname for f in font_manager.fontManager.ttflist}
    for path in fonts:
        if path not in known:
            font_manager.fontManager.addfont(path)
    from google.colab import output   # only on Colab

    output.enable_custom_widget_manager()

def new_axes(ax: "Axes | None", figsize: tuple[float, float] | None = None) -> tuple["Figure", "Axes"]:
    """``ax``'s figure and ``ax``, or a new pyplot figure with one axes of ``figsize``."""
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax.figure, ax
    return plt.subplots(figsize=figsize)


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
        buffer, format="png", compress_level=1, dpi=(figure.dpi, figure.dpi))  # the page's legibility check reads it
    return buffer.getvalue()


def show_png(output, png: bytes) -> None:
    """Replace what an ``ipywidgets.Output`` shows with the image ``png``."""
    from IPython.display import Image, clear_output, display

    with output:
        clear_output(wait=True)
        display(Image(data=png, format="png"))
