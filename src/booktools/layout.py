"""What a reader sees of a page's layout, measured in the browser: the page-level checks of
"the page a reader meets" (a desktop window and a phone).

`measure(tab)` runs js/measure_layout.js in an already loaded Playwright page (after MathJax and
widgets have rendered, e.g. inside `booktools.render_check.check_page`) and returns a `LayoutReport`:

* **overflow**: elements of the main content (`article.bd-article`) that stick out of it, or make the
  whole page scroll sideways, and are not inside an element meant to scroll (computed `overflow-x`
  `auto` or `scroll`). Only the outermost offender of a subtree is listed. Content cut off by an
  `overflow-x: hidden/clip` box is listed too (`clipped`): the reader cannot reach it at all.
* Tables are measured by `booktools.tables_check` (characters per rendered line: a cell's width,
  padding included, did not say whether "未/复/现" stacked one character per line).
* **math_overflow**: displayed equations (MathJax `mjx-container[display]`) wider than the box they
  sit in and not inside a scroll box.
* **code_columns**: how many monospace characters fit on one line of the first code cell (the
  column's width for code: 88 is the line length the book's code is written to).
* **figures**: every image of the main content as the page shows it: its natural size (CSS pixels:
  the browser divides a `2x` source's pixels by 2), its pixels and pixels per inch (the PNG's own
  width and pHYs chunk, read here from the file or the data URI) and the width it is displayed at,
  and whether it sits in a box meant to scroll. `figure_problems(font_pt)` turns that into the size of
  the figure's smallest text on the page: a text of `font_pt` points drawn at `dpi` into an image
  `pixels` wide is `font_pt * dpi / 96 * shown / pixels` points at the displayed size (a CSS pixel is
  1/96 inch, a point 1/72 inch): the CSS width it is shown at decides, not how many pixels it has (a
  phone figure drawn at 220 dpi, 2 pixels per CSS pixel, has the text size of one at 110 dpi); below
  `MIN_TEXT_PT` it is reported. `density_problems()`: an image served at another density than
  it was drawn at (its pixels ÷ the CSS pixels the browser gives it, against its dpi ÷ `style.DPI`): a
  1× PNG claimed `2x` is shown at half its size, a 2× PNG served as 1× twice as large. The image
  measured is the one the page chose (`currentSrc`: a phone's `<picture>` source at 390 px).
  `figure_fit_problems()`: an image wider than the column, sticking out of it, or in a box that
  scrolls sideways.
* **formulas**: every displayed equation's width against the room it has; `formula_fit_problems()`
  lists those a reader would have to scroll (its box may scroll, the reader should not have to).
* **cjk_spaces**: ASCII whitespace between two CJK characters (or CJK punctuation) in rendered
  prose: a Chinese line break in the Markdown that the HTML renders as a space ("。 本书"). Code,
  literals, math and MathJax output are not prose and are skipped; math stands for a non-CJK
  character, so "的 $x$ 值" (a space beside a formula) is fine.

`LayoutReport.problems()` lists every failure in Chinese, naming the element (a short CSS path and
its text), so a failing test says which page and element to fix.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from batchlab.ui.style import MIN_TEXT_PT  # one floor for the text a figure draws and the text a page shows (issue 19)
from booktools.browser import script
from booktools.picture import density_of

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
VIEWPORTS = {"1280": DESKTOP, "390": PHONE}

# CJK ideographs (+ extension A, compatibility), CJK symbols and punctuation, fullwidth forms.
CJK_CLASS = r"\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"


@dataclass
class LayoutReport:
    """One page at one viewport width (see the module docstring)."""
    width: int
    overflow: list[dict] = field(default_factory=list)
    clipped: list[dict] = field(default_factory=list)
    page_scroll: int = 0
    math_overflow: list[dict] = field(default_factory=list)
    display_math: int = 0
    code_columns: int | None = None
    cjk_spaces: list[dict] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list, repr=False)
    column: list[int] = field(default_factory=list)
    formulas: list[dict] = field(default_factory=list, repr=False)

    def layout_problems(self) -> list[str]:
        """Overflow and equations that neither fit nor scroll."""
        w = f"{self.width} px 宽"
        out = [f"{w}：整页可以横向滚动 {self.page_scroll} px"] if self.page_scroll > 1 else []
        out += [f"{w}：元素超出正文栏 {o['column']}（左 {o['left']}，右 {o['right']}）且不在滚动框内：{o['element']}"
                for o in self.overflow]
        out += [f"{w}：内容被裁掉（宽 {c['width']} px，内容 {c['content']} px，overflow 为 hidden）：{c['element']}"
                for c in self.clipped]
        out += [f"{w}：公式宽 {m['width']} px，可用 {m['available']} px，既放不下也不能滚动：{m['element']}"
                for m in self.math_overflow]
        return out

    def figure_points(self, font_pt: float, default_dpi: float | None = None) -> list[tuple[dict, float | None]]:
        """Each figure with the size, in points on the page, of a `font_pt` text drawn in it. An image
        that records no pixels per inch (an explorer's PNG from `style.canvas_png`) is taken to be
        drawn at `default_dpi`; without one its size is None."""
        out = []
        for f in self.figures:
            dpi = f.get("dpi") or default_dpi
            pixels = f.get("pixels") or f["natural"][0]  # the file's own width; the browser's when unread
            out.append((f, text_points(font_pt, dpi, pixels, f["shown"]) if dpi else None))
        return out

    def figure_problems(self, font_pt: float, min_pt: float = MIN_TEXT_PT,
                        default_dpi: float | None = None) -> list[str]:
        """Figures whose smallest text (`font_pt` points where drawn) is under `min_pt` points as shown."""
        w = f"{self.width} px 宽"
        out = []
        for f, pt in self.figure_points(font_pt, default_dpi):
            shown = f"原图 {f.get('pixels') or f['natural'][0]} 像素显示为 {f['shown']:.0f} px"
            if pt is None:
                out.append(f"{w}：图片没有记录每英寸像素数（PNG 的 pHYs），无法换算字号（{shown}）：{f['src']}")
            elif pt < min_pt - 1e-6:
                out.append(f"{w}：图中最小的字只有 {pt:.1f} pt（至少 {min_pt:g} pt；{shown}，{f['dpi'] or default_dpi:.0f} dpi，"
                           f"字号 {font_pt:g} pt）：{f['src']} {f['element']}")
        return out

    def density_problems(self, kinds: tuple[str, ...] = ("figure", "other", "widget")) -> list[str]:
        """Images of ``kinds`` that record their dpi and are served at another density than they were
        drawn at: the browser's CSS pixels for the image (``natural``) times the dpi's density
        (dpi ÷ ``style.DPI``) must be the file's pixels."""
        w = f"{self.width} px 宽"
        out = []
        for f in self.figures:
            if f.get("kind", "other") not in kinds or not f.get("dpi") or not f.get("pixels"):
                continue
            drawn = density_of(f["dpi"])
            served = f["pixels"] / f["natural"][0]
            if abs(served - drawn) > 0.02 * drawn:
                out.append(f"{w}：图按每 CSS 像素 {served:.2g} 个像素显示，画的是 {drawn} 个（{f['dpi']:.0f} dpi，"
                           f"{f['pixels']} 像素，浏览器当作 {f['natural'][0]} px）：{f['src']} {f['element']}")
        return out

    def figure_fit_problems(self, kinds: tuple[str, ...] = ("figure", "other")) -> list[str]:
        """Images of ``kinds`` (``figure``: a chapter's figure; ``widget``: an explorer's frozen image;
        ``other``) that are wider than the content column or stick out of it, or sit in a box that
        scrolls sideways: a reader must see the whole figure without scrolling inside it."""
        w = f"{self.width} px 宽"
        lo, hi = self.column or (0, self.width)
        out = []
        for f in self.figures:
            if f.get("kind", "other") not in kinds:
                continue
            where = f"{f['src']} {f['element']}"
            if f["shown"] > hi - lo + 1 or f.get("left", lo) < lo - 1 or f.get("right", hi) > hi + 1:
                out.append(f"{w}：图宽 {f['shown']:.0f} px（{f.get('left', 0):.0f}–{f.get('right', 0):.0f}），"
                           f"正文栏只有 {lo}–{hi}：{where}")
            if f.get("box_scrolls"):
                out.append(f"{w}：图在可横向滚动的框里（框宽 {f['scroll_box']} px，图宽 {f['shown']:.0f} px），"
                           f"读者要左右滑动才能看全：{where}")
        return out

    def formula_fit_problems(self) -> list[str]:
        """Displayed formulas wider than the room they have, even inside a box that scrolls: a formula
        a reader must scroll sideways is broken into lines instead."""
        return [f"{self.width} px 宽：公式宽 {m['width']} px，可用 {m['available']} px（要横向滚动才能读完）："
                f"{m['element']}" for m in self.formulas if m["width"] > m["available"] + 1]

    def cjk_space_problems(self) -> list[str]:
        return [f"{self.width} px 宽：中文之间有空格「{s['context']}」：{s['element']}" for s in self.cjk_spaces]

    def problems(self) -> list[str]:
        return self.layout_problems() + self.cjk_space_problems()


def text_points(font_pt: float, dpi: float, natural_px: float, shown_px: float) -> float:
    """Points on the page of a `font_pt` text drawn at `dpi` into an image `natural_px` pixels wide
    and displayed `shown_px` CSS pixels wide: `font_pt * dpi / 72` image pixels tall, times
    `shown_px / natural_px` CSS pixels each, at 72/96 of a point per CSS pixel."""
    return font_pt * dpi / 96 * shown_px / natural_px


def image_facts(src: str) -> tuple[float | None, int | None]:
    """Pixels per inch an image file (a `file:` URL) or a `data:` URL records (the PNG's pHYs chunk,
    as matplotlib writes it) and its width in pixels; None for what cannot be read."""
    import base64
    import io
    from urllib.parse import unquote, urlsplit

    from PIL import Image

    if src.startswith("data:"):
        head, _, body = src.partition(",")
        raw = base64.b64decode(body) if head.endswith(";base64") else unquote(body).encode("latin-1")
        stream = io.BytesIO(raw)
    elif src.startswith("file:"):
        stream = unquote(urlsplit(src).path)
    else:
        return None, None
    try:
        with Image.open(stream) as im:
            dpi, width = im.info.get("dpi"), im.width
    except (OSError, ValueError):
        return None, None
    return (float(dpi[0]) if dpi and dpi[0] else None), width


def _short_src(src: str) -> str:
    if src.startswith("data:"):
        return f"{src.partition(',')[0]}（{len(src)} 个字符）"
    return src.rsplit("/", 1)[-1]


def measure(tab, width: int | None = None) -> LayoutReport:
    """Measure the page loaded in the Playwright page `tab` (see the module docstring)."""
    m = tab.evaluate(script("measure_layout"), [CJK_CLASS])
    for f in m["figures"]:
        f["dpi"], f["pixels"] = image_facts(f["src"])
        f["src"] = _short_src(f["src"])
    return LayoutReport(width=width or tab.viewport_size["width"], **m)
