"""The book's colours, shared by the matplotlib figures and the charts of the live explorers (a pure
module: the reader's browser imports it too), and their counterparts in the page's dark mode.

The figures and the charts are declared in the light scheme. A page in dark mode (the theme follows the
phone's setting, or the reader's choice) draws the same chart with :func:`in_scheme`: every colour the
book uses swapped for its dark counterpart (:data:`DARK`) and the chart's own ink (titles, axes, legend,
grid) set for the dark background (:data:`DARK_INK`). The coloured words of a summary are written with
:func:`css_ink`, so the page's style sheet (book/_static/live.css, the same colours, checked by
tests/test_page_dark.py) gives them their dark colour too.
"""
from __future__ import annotations

import copy

__all__ = ["PALETTE", "OVERFLOW_COLOUR", "MEASURED_COLOUR", "ERROR_COLOUR", "WARNING_COLOUR", "FIT_COLOUR",
           "MUTED_COLOUR", "SCHEMES", "BACKGROUNDS", "DARK", "DARK_INK", "TEXT_ROLES", "css_ink", "in_scheme",
           "contrast", "luminance", "rgb"]

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
OVERFLOW_COLOUR = PALETTE[3]
"""Red: what does not fit (a stage above the device's memory, a micro-batch size that does not fit)."""
MEASURED_COLOUR = "black"
ERROR_COLOUR = "#b00020"
WARNING_COLOUR = "#b06000"
FIT_COLOUR = "#2a7d2a"
MUTED_COLOUR = "#555555"
"""Grey words beside the summary (the note that names what else a moved control changed)."""

SCHEMES = ("light", "dark")
BACKGROUNDS = {"light": "#ffffff", "dark": "#14181e"}
"""The page's background in each scheme (pydata-sphinx-theme's ``--pst-color-background``): what a chart's
text and lines must stand out against."""

DARK = {
    PALETTE[0]: "#5aa9e6",        # blue: the data, the measured points
    PALETTE[3]: "#ff6b6b",        # red: what does not fit (also a bar's red share label: text)
    PALETTE[4]: "#b08fd8",        # purple: activations
    PALETTE[5]: "#c08d80",        # brown
    "#000000": "#eef2f5",         # black: the theory line, the measured peaks
    "black": "#eef2f5",
    "#333": "#ced6dd",            # the bars' share labels
    "#333333": "#ced6dd",
    "#404040": "#c8d0d8",         # the device's capacity line
    "#4d4d4d": "#c3cbd3",         # the trade-off's bubble labels
    "#888888": "#8f99a5",         # the trade-off's grey line
    MUTED_COLOUR: "#9ca4af",
    ERROR_COLOUR: "#ff7a8a",
    WARNING_COLOUR: "#f0a040",
    FIT_COLOUR: "#6fcf6f",
}
"""Each colour the book draws or writes with (lower case) → the colour it takes on the dark page: lighter,
so that text keeps 4.5:1 and lines 3:1 against :data:`BACKGROUNDS`\\ ``["dark"]``."""

DARK_INK = {"text": "#ced6dd", "axis": "#9ca4af", "grid": "#2c343f", "inactive": "#5a6472",
            "tooltip": "#1f252d", "border": "#48566b"}
"""A chart's own ink on the dark page: its titles and legend (``text``, the theme's body text), axis lines,
ticks and names (``axis``, the theme's muted text), the grid (faint: it must not glare), a legend entry
switched off, the tooltip's box and border."""

TEXT_ROLES = {"fit": FIT_COLOUR, "overflow": OVERFLOW_COLOUR, "warning": WARNING_COLOUR, "error": ERROR_COLOUR,
              "muted": MUTED_COLOUR}
"""The coloured words of the explorers' summaries, by role (:func:`css_ink`)."""


def css_ink(role: str) -> str:
    """The CSS colour of a summary's words of ``role`` (:data:`TEXT_ROLES`): the page's variable
    ``--bl-<role>``, which book/_static/live.css sets in dark mode, else the light colour (a notebook)."""
    return f"var(--bl-{role}, {TEXT_ROLES[role]})"


def rgb(colour: str) -> tuple[float, float, float]:
    """``#rgb``, ``#rrggbb`` or ``black`` as red, green and blue in 0–1."""
    text = {"black": "#000000", "white": "#ffffff"}.get(colour.strip().lower(), colour.strip().lower())
    if not text.startswith("#") or len(text) not in (4, 7):
        raise ValueError(f"colour = {colour!r}：须是 #rgb 或 #rrggbb")
    digits = text[1:] if len(text) == 7 else "".join(c * 2 for c in text[1:])
    return tuple(int(digits[i:i + 2], 16) / 255 for i in (0, 2, 4))


def luminance(colour: str | tuple[float, float, float]) -> float:
    """The relative luminance of ``colour`` (WCAG 2)."""
    channels = rgb(colour) if isinstance(colour, str) else colour
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str | tuple[float, float, float], b: str | tuple[float, float, float]) -> float:
    """The WCAG contrast ratio of two colours (1 to 21)."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _swap(value: object) -> object:
    """``value`` with every colour of :data:`DARK` in it replaced (dicts and lists walked)."""
    if isinstance(value, dict):
        return {k: _swap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v) for v in value]
    if isinstance(value, str):
        return DARK.get(value.lower(), value)
    return value


def _each(part: object) -> list[dict]:
    """An option's component (one dict or a list of them) as a list."""
    return [p for p in (part if isinstance(part, list) else [part]) if isinstance(p, dict)]


def _ink(option: dict) -> None:
    """Give one (base or media) option the dark page's ink where it names a component."""
    text, axis, grid = DARK_INK["text"], DARK_INK["axis"], DARK_INK["grid"]
    if "textStyle" in option:
        option["textStyle"] = {**option["textStyle"], "color": text}
    for title in _each(option.get("title")):
        title["textStyle"] = {**title.get("textStyle", {}), "color": text}
    for legend in _each(option.get("legend")):
        legend["textStyle"] = {**legend.get("textStyle", {}), "color": text}
        legend["inactiveColor"] = DARK_INK["inactive"]
    for key in ("xAxis", "yAxis"):
        for ax in _each(option.get(key)):
            ax["nameTextStyle"] = {**ax.get("nameTextStyle", {}), "color": axis}
            ax["axisLine"] = {**ax.get("axisLine", {}), "lineStyle": {"color": axis}}
            ax["axisTick"] = {**ax.get("axisTick", {}), "lineStyle": {"color": axis}}
            ax["axisLabel"] = {**ax.get("axisLabel", {}), "color": axis}
            ax["splitLine"] = {**ax.get("splitLine", {}), "lineStyle": {"color": grid}}
    for series in _each(option.get("series")):  # labels ECharts would write in its light default ink
        if isinstance(series.get("label"), dict):
            series["label"].setdefault("color", text)
        mark = series.get("markLine")
        if isinstance(mark, dict) and isinstance(mark.get("label"), dict):
            mark["label"].setdefault("color", text)
    for tooltip in _each(option.get("tooltip")):
        tooltip.update({"backgroundColor": DARK_INK["tooltip"], "borderColor": DARK_INK["border"],
                        "textStyle": {**tooltip.get("textStyle", {}), "color": text}})


def in_scheme(option: dict | None, scheme: str) -> dict | None:
    """The ECharts ``option`` (as the explorers declare it, for the light page) drawn for ``scheme``: the
    light one unchanged; the dark one with :data:`DARK`'s colours and :data:`DARK_INK`, its background
    transparent (the page's own shows through). Media queries (:func:`batchlab.page.spec.responsive`) are
    recoloured too. None (a refused value draws no chart) stays None."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme = {scheme!r}：只能是 {' 或 '.join(SCHEMES)}")
    if option is None or scheme == "light":
        return option
    dark = _swap(copy.deepcopy(option))
    base = dark.get("baseOption", dark)
    _ink(base)
    base["backgroundColor"] = "transparent"
    for media in dark.get("media", []):
        _ink(media.get("option", {}))
    return dark
