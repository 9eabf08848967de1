"""Figure style, the Chinese font setup every chapter uses, and what every figure and widget shares."""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import matplotlib as mpl
from matplotlib import font_manager

from batchlab.page.colours import PALETTE

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["CJK_FONTS", "LINESTYLES", "MARKERS", "DPI", "COLUMN_PX", "MIN_TEXT_PT", "FIGURE_WIDTH", "explorer_panels", "setup",
           "prepare_colab", "LAYOUTS", "PHONE_PX", "PHONE_WIDTH", "PHONE_DENSITY", "PHONE_METADATA", "figure_width",
           "check_layout", "figure_png", "PNG_COLOURS", "compact_png", "show_figure", "display_drawings", "plain_log_ticks", "phone_title",
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

LAYOUTS = ("desk", "phone")
"""The two drawings of every book figure: ``desk`` for the 760 px column (also what Jupyter and the PDF
show), ``phone`` for a phone's column (stacked panels, fewer ticks, shorter labels), served to a narrow
screen by the page (booktools.picture)."""
PHONE_PX = 358
"""The content column, in CSS pixels, of a 390 px phone: a phone figure is at most this wide (its PNG
:data:`PHONE_DENSITY` times as many pixels), so it is shown at its own size and its smallest text stays
8.5 × 110/96 ≈ 9.7 pt."""
PHONE_DENSITY = 2
"""Image pixels per CSS pixel of a phone drawing. A phone screen has 2–3 device pixels per CSS pixel: a
PNG of one pixel per CSS pixel was stretched and soft there. The phone drawing is the same inches drawn at
``DPI × PHONE_DENSITY`` (220 dpi): the same point sizes, twice the pixels each way; its pHYs records that
dpi, from which booktools.picture tells the page its CSS size (pixels ÷ density) and booktools.layout the
size of its text. The desk drawing stays at one pixel per CSS pixel, as Jupyter shows it."""
PHONE_PAD = 0.05
"""Inches of margin around a phone figure's drawn area (the inline backend's 0.1 is 22 px of a 358 px column)."""
PHONE_WIDTH = PHONE_PX / DPI - 2 * PHONE_PAD - 0.05
"""Inches: a phone figure this wide, cut to its drawn area plus :data:`PHONE_PAD`, fits :data:`PHONE_PX`."""
PHONE_METADATA = "batchlab/phone"
"""The key of a figure output's metadata that carries its phone PNG (Jupyter shows the desk PNG; nbval
does not compare metadata; booktools.picture writes it beside the desk PNG)."""

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

def check_layout(layout: str) -> str:
    """``layout`` if it is one of :data:`LAYOUTS`, else a ValueError that lists them."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout = {layout!r}：只能是 {' 或 '.join(LAYOUTS)}")
    return layout


def figure_width(layout: str = "desk", share: float = 1.0) -> float:
    """Inches of a figure drawn for ``layout``: ``share`` of the desk column's width, or the whole phone
    column (a phone figure is never narrower than the column it fills)."""
    return FIGURE_WIDTH * share if check_layout(layout) == "desk" else PHONE_WIDTH


def explorer_panels(figure: "Figure", layout: str, panels: int, desk_height: float, phone_height: float,
                    margins: dict, width_ratios: list[float] | None = None) -> bool:
    """Give an explorer's empty ``figure`` its size and axes, once (a figure that has axes is left alone):
    ``panels`` side by side with fixed ``margins`` on a desk (tight_layout would be recomputed per change),
    stacked and laid out by matplotlib on a phone, which is drawn once on a new figure. True on a phone."""
    phone = check_layout(layout) == "phone"
    if figure.axes:
        return phone
    figure.set_size_inches(figure_width(layout) if phone else FIGURE_WIDTH, phone_height if phone else desk_height)
    if panels == 1:
        figure.add_subplot()
    elif phone:
        figure.subplots(panels, 1)
    else:
        figure.subplots(1, panels, gridspec_kw={"width_ratios": width_ratios} if width_ratios else None)
    if phone:
        figure.set_layout_engine("constrained")
    else:
        figure.subplots_adjust(**margins)
    return phone


def figure_png(fig: "Figure", layout: str = "desk", density: int = 1) -> bytes:
    """``fig`` as the book shows it: PNG at ``density`` × its dpi (:data:`PHONE_DENSITY` for a phone's
    screen), cut to its drawn area as Jupyter's inline backend cuts it (0.1 inch of margin on a desk,
    :data:`PHONE_PAD` on a phone) and made compact by :func:`compact_png`; the pHYs chunk records the
    dpi drawn at, from which the page reads the CSS size and the text size."""
    import io

    if not isinstance(density, int) or density < 1:
        raise ValueError(f"像素密度应为正整数（每个 CSS 像素几个图像像素），收到 {density!r}")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi * density, bbox_inches="tight",
                pad_inches=0.1 if check_layout(layout) == "desk" else PHONE_PAD, facecolor="white")
    return compact_png(buffer.getvalue(), density)


PNG_COLOURS = 256
"""Colours of a figure's PNG palette. A chart draws a few dozen colours plus their anti-aliased edges
(300–2,000 in the book's figures); 256 chosen by coverage are within 5/255 of every pixel (not visible)
and the file is about a third of matplotlib's RGBA PNG."""


def compact_png(png: bytes, density: int = 1) -> bytes:
    """``png`` (a figure on an opaque ground) as a palette PNG of :data:`PNG_COLOURS` colours, zlib at
    its best, its pHYs kept; its width and height padded with white to a multiple of ``density``, so
    that its CSS size (pixels ÷ density) is a whole number and the page shows it unscaled."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        dpi = image.info.get("dpi")
        rgba = image.convert("RGBA")
    ground = Image.new("RGBA", (-(-rgba.width // density) * density, -(-rgba.height // density) * density),
                       "white")
    ground.alpha_composite(rgba)
    palette = ground.convert("RGB").quantize(PNG_COLOURS, method=Image.Quantize.MAXCOVERAGE,
                                             dither=Image.Dither.NONE)
    out = io.BytesIO()
    palette.save(out, format="png", optimize=True, **({"dpi": dpi} if dpi else {}))
    return out.getvalue()


def show_figure(draw: Callable[..., "Figure"], /, *args, **kwargs) -> None:
    """Show ``draw(*args, **kwargs)`` as ONE notebook output: the desk drawing (``layout="desk"``) as
    its image, the phone drawing (``layout="phone"``, at :data:`PHONE_DENSITY`) in the output's metadata
    under :data:`PHONE_METADATA`. Jupyter and the PDF show the desk figure; the web page serves the phone one
    to a narrow screen. Both figures are closed, so the inline backend does not show them again."""
    import matplotlib.pyplot as plt

    pngs, text = {}, ""
    for layout in LAYOUTS:
        fig = draw(*args, layout=layout, **kwargs)
        pngs[layout] = figure_png(fig, layout, PHONE_DENSITY if layout == "phone" else 1)
        text = text or repr(fig)
        plt.close(fig)
    display_drawings(pngs["desk"], pngs["phone"], text)


def display_drawings(desk: bytes, phone: bytes | None = None, text: str = "") -> None:
    """Display ONE output: the PNG ``desk`` as its image, the PNG ``phone`` (when given) in its metadata
    under :data:`PHONE_METADATA`, ``text`` as its plain text. The one shape of a figure with a phone
    drawing, for :func:`show_figure` and the explorers (:func:`show_png`); booktools.picture and
    booktools.frozen read it."""
    import base64

    from IPython.display import display

    data = {"image/png": base64.b64encode(desk).decode("ascii")}
    if text:
        data["text/plain"] = text
    metadata = {PHONE_METADATA: {"image/png": base64.b64encode(phone).decode("ascii")}} if phone else {}
    display(data, metadata=metadata, raw=True)


PHONE_TITLE_CHARS = 16
"""CJK characters a phone figure's title holds on one line (at 10.5 pt, 3.1 inches)."""


def phone_title(title: str, layout: str = "desk", most: int = PHONE_TITLE_CHARS) -> str:
    """``title`` as drawn for ``layout``: on a phone, a title longer than ``most`` CJK characters (a
    Latin character counts half) is broken after the punctuation mark (：，；) or before the bracket (（)
    nearest its middle; on a desk, unchanged."""
    if check_layout(layout) == "desk" or "\n" in title:
        return title
    widths = [1.0 if ord(ch) >= 0x2E80 else 0.55 for ch in title]
    if sum(widths) <= most:
        return title
    half, run, best = sum(widths) / 2, 0.0, None
    for i, (ch, w) in enumerate(zip(title, widths)):
        cut = i if ch == "（" else i + 1 if ch in "：，；" else None  # where the second line starts
        run += w
        if cut and cut < len(title) and (best is None or abs(run - half) < abs(best[1] - half)):
            best = (cut, run)
    if best is None:
        return title
    return title[:best[0]] + "\n" + title[best[0]:].lstrip()


def plain_log_ticks(axis, low: float, high: float, most: int = 5, base: int = 2) -> None:
    """Major ticks of a log ``axis`` (``ax.xaxis``) at powers of ``base`` between ``low`` and ``high``,
    every k-th so that at most ``most`` remain, labelled as plain numbers (128, 1,024, 0.25), no minor
    labels: a log axis over less than a decade otherwise shows one label (10³) or none."""
    import math

    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    from batchlab.page.numbers import count

    lo, hi = math.ceil(math.log(low, base) - 1e-9), math.floor(math.log(high, base) + 1e-9)
    exps = list(range(lo, hi + 1)) or [round(math.log(low, base))]
    step = max(1, math.ceil(len(exps) / most))
    ticks = [float(base) ** e for e in exps[::step]]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(lambda v, _pos: str(count(round(v))) if v >= 1 else f"{v:.3g}")
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


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


def show_png(output, png: bytes, phone: bytes | None = None) -> None:
    """Replace what an ``ipywidgets.Output`` shows with the image ``png`` (and, when given, its phone
    drawing ``phone``, carried as :func:`display_drawings` carries it)."""
    from IPython.display import clear_output

    with output:
        clear_output(wait=True)
        display_drawings(png, phone)
