"""What a reader sees of a page's layout, measured in the browser: the page-level checks of
"the page a reader meets" (a desktop window and a phone).

`measure(tab)` runs in an already loaded Playwright page (after MathJax and widgets have rendered,
e.g. inside `booktools.render_check.check_page`) and returns a `LayoutReport`:

* **overflow**: elements of the main content (`article.bd-article`) that stick out of it, or make the
  whole page scroll sideways, and are not inside an element meant to scroll (computed `overflow-x`
  `auto` or `scroll`). Only the outermost offender of a subtree is listed. Content cut off by an
  `overflow-x: hidden/clip` box is listed too (`clipped`): the reader cannot reach it at all.
* **narrow_cells**: table cells with text narrower than 3 em of their own font size (a CJK term
  column squeezed to one character per line).
* **math_overflow**: displayed equations (MathJax `mjx-container[display]`) wider than the box they
  sit in and not inside a scroll box.
* **code_columns**: how many monospace characters fit on one line of the first code cell (the
  column's width for code: 88 is the line length the book's code is written to).
* **figures**: every image of the main content as the page shows it: its natural size in pixels,
  its pixels per inch (the PNG's pHYs chunk, read here from the file or the data URI) and the width
  it is displayed at, and whether it sits in a box meant to scroll. `figure_problems(font_pt)` turns
  that into the size of the figure's smallest text on the page: a text of `font_pt` points drawn at
  `dpi` is `font_pt * dpi / 96 * shown / natural` points at the displayed size (a CSS pixel is 1/96
  inch, a point 1/72 inch); below `MIN_TEXT_PT` it is reported.
* **cjk_spaces**: ASCII whitespace between two CJK characters (or CJK punctuation) in rendered
  prose: a Chinese line break in the Markdown that the HTML renders as a space ("。 本书"). Code,
  literals, math and MathJax output are not prose and are skipped; math stands for a non-CJK
  character, so "的 $x$ 值" (a space beside a formula) is fine.

`LayoutReport.problems()` lists every failure in Chinese, naming the element (a short CSS path and
its text), so a failing test says which page and element to fix.
"""
from __future__ import annotations

from dataclasses import dataclass, field

MIN_CELL_EM = 3.0
MIN_TEXT_PT = 8.0  # the smallest text a figure may show at its displayed size (issue 19)
CODE_COLUMNS = 88  # the book's code line length (at the desktop width)
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
VIEWPORTS = {"1280": DESKTOP, "390": PHONE}

# CJK ideographs (+ extension A, compatibility), CJK symbols and punctuation, fullwidth forms.
CJK_CLASS = r"\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"

_MEASURE_JS = r"""
([minCellEm, cjkClass]) => {
  const root = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const rootBox = root.getBoundingClientRect();
  const vw = document.documentElement.clientWidth;
  const right = Math.min(rootBox.right, vw), left = Math.max(rootBox.left, 0);
  const tol = 1;
  const desc = el => {
    let s = el.tagName.toLowerCase();
    if (el.id) s += '#' + el.id;
    const cls = [...el.classList].slice(0, 3);
    if (cls.length) s += '.' + cls.join('.');
    const path = [];
    for (let p = el.parentElement; p && p !== root && path.length < 3; p = p.parentElement) {
      path.unshift(p.tagName.toLowerCase() + (p.classList.length ? '.' + [...p.classList].slice(0, 2).join('.') : ''));
    }
    const text = (el.innerText || el.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 60);
    return (path.length ? path.join(' > ') + ' > ' : '') + s + (text ? ` «${text}»` : '');
  };
  const scrolls = cs => cs.overflowX === 'auto' || cs.overflowX === 'scroll';
  // inside an element meant to scroll sideways (below the article root)?
  const inScrollBox = el => {
    for (let p = el.parentElement; p && p !== root.parentElement; p = p.parentElement) {
      if (scrolls(getComputedStyle(p))) return true;
    }
    return false;
  };
  const skip = el => el.closest('mjx-assistive-mml, script, style, template, .visually-hidden, .sr-only');
  const visible = (el, r) => {
    if (r.width === 0 && r.height === 0) return false;
    const cs = getComputedStyle(el);
    return cs.display !== 'none' && cs.visibility !== 'hidden' && cs.position !== 'fixed';
  };

  const offenders = new Set();
  const overflow = [], clipped = [];
  for (const el of root.querySelectorAll('*')) {
    if (skip(el)) continue;
    const r = el.getBoundingClientRect();
    if (!visible(el, r)) continue;
    const cs = getComputedStyle(el);
    if ((cs.overflowX === 'hidden' || cs.overflowX === 'clip') && el.scrollWidth > el.clientWidth + tol
        && el.clientWidth > 0 && !inScrollBox(el)) {
      // scrollWidth also counts invisible boxes (MathJax's assistive MathML): compare what is drawn
      let lo = r.left, hi = r.right;
      for (const d of el.querySelectorAll('*')) {
        if (skip(d)) continue;
        const dr = d.getBoundingClientRect();
        if (!visible(d, dr)) continue;
        lo = Math.min(lo, dr.left); hi = Math.max(hi, dr.right);
      }
      if (hi > r.right + tol || lo < r.left - tol) {
        clipped.push({element: desc(el), width: Math.round(r.width), content: Math.round(hi - lo)});
      }
    }
    if (r.right <= right + tol && r.left >= left - tol) continue;
    if (inScrollBox(el)) continue;
    // report the outermost offender only
    let parentOffends = false;
    for (let p = el.parentElement; p && p !== root; p = p.parentElement) {
      if (offenders.has(p)) { parentOffends = true; break; }
    }
    offenders.add(el);
    if (parentOffends) continue;
    overflow.push({element: desc(el), left: Math.round(r.left), right: Math.round(r.right),
                   column: [Math.round(left), Math.round(right)]});
  }
  // every image: natural size, displayed width, and the box it scrolls in (if any)
  const figures = [];
  for (const img of root.querySelectorAll('img')) {
    if (skip(img)) continue;
    const r = img.getBoundingClientRect();
    if (!visible(img, r) || !img.naturalWidth) continue;
    let box = null;
    for (let p = img.parentElement; p && p !== root.parentElement; p = p.parentElement) {
      if (scrolls(getComputedStyle(p))) { box = p; break; }
    }
    figures.push({element: desc(img).replace(/ «.*$/, ''), src: img.currentSrc || img.src,
                  natural: [img.naturalWidth, img.naturalHeight], shown: Math.round(r.width * 100) / 100,
                  scroll_box: box ? Math.round(box.clientWidth) : null});
  }
  const doc = document.documentElement;
  const pageScroll = Math.max(doc.scrollWidth, document.body.scrollWidth) - vw;

  const narrow = [];
  for (const cell of root.querySelectorAll('td, th')) {
    if (skip(cell) || !cell.textContent.trim()) continue;
    const r = cell.getBoundingClientRect();
    if (!visible(cell, r)) continue;
    const em = parseFloat(getComputedStyle(cell).fontSize);
    if (r.width < minCellEm * em - 0.5) {
      narrow.push({element: desc(cell), width: Math.round(r.width * 10) / 10, em: Math.round(r.width / em * 100) / 100});
    }
  }
  const cellEms = [...root.querySelectorAll('td, th')]
      .filter(c => c.textContent.trim() && !skip(c))
      .map(c => c.getBoundingClientRect().width / parseFloat(getComputedStyle(c).fontSize))
      .filter(w => w > 0);

  const math = [];
  const displays = [...root.querySelectorAll('mjx-container[display="true"], mjx-container[display]')];
  for (const m of displays) {
    const r = m.getBoundingClientRect();
    if (!visible(m, r)) continue;
    // the typeset formula's own width (the container is a block as wide as its parent)
    const inner = m.firstElementChild ? m.firstElementChild.getBoundingClientRect() : r;
    const box = m.parentElement.getBoundingClientRect();
    const fits = inner.width <= Math.min(box.width, right - left) + tol
                 && inner.right <= right + tol && inner.left >= left - tol;
    if (!fits && !scrolls(getComputedStyle(m)) && !inScrollBox(m)) {
      math.push({element: desc(m.closest('.math') || m), width: Math.round(inner.width),
                 available: Math.round(Math.min(box.width, right - left))});
    }
  }

  // monospace characters per line in the first code cell (or any <pre>)
  let codeColumns = null;
  const pre = root.querySelector('div.cell_input pre, div.highlight pre, pre');
  if (pre) {
    const probe = document.createElement('span');
    probe.textContent = 'x'.repeat(100);
    probe.style.cssText = 'position:absolute;visibility:hidden;white-space:pre';
    pre.appendChild(probe);
    const ch = probe.getBoundingClientRect().width / 100;
    probe.remove();
    const cs = getComputedStyle(pre);
    const inner = pre.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    codeColumns = Math.floor(inner / ch + 1e-6);
  }

  // ASCII whitespace between CJK characters in prose: text per block element, with code, literals
  // and math replaced by a non-CJK placeholder
  const EXCLUDE = 'pre, code, kbd, samp, script, style, .math, mjx-container, .MathJax, .highlight, ' +
                  'tt, .literal, .cell_input, .jp-RenderedText, .output.text_plain, .widget-subarea';
  const BLOCK = /^(block|list-item|table-cell|table-caption|flex|grid|table|table-row)$/;
  const cjkGap = new RegExp(`([${cjkClass}])[ \\t\\n\\r]+([${cjkClass}])`, 'g');
  const blocks = new Map();
  const blockOf = node => {
    for (let p = node.parentElement; p; p = p.parentElement) {
      if (p === root || BLOCK.test(getComputedStyle(p).display)) return p;
    }
    return root;
  };
  // excluded subtrees become a placeholder in their block's text
  const order = [];
  (function walk(el) {
    for (const n of el.childNodes) {
      if (n.nodeType === 3) order.push([blockOf(n), n.textContent]);
      else if (n.nodeType === 1) {
        if (n.matches(EXCLUDE)) { order.push([blockOf(n), '\u25a1']); continue; }
        const cs = getComputedStyle(n);
        if (cs.display === 'none') continue;
        walk(n);
      }
    }
  })(root);
  for (const [b, t] of order) blocks.set(b, (blocks.get(b) || '') + t);
  const spaces = [];
  for (const [b, text] of blocks) {
    for (const m of text.matchAll(cjkGap)) {
      const at = m.index;
      spaces.push({element: desc(b).replace(/ «.*$/, ''),
                   context: text.slice(Math.max(0, at - 8), at + m[0].length + 8).replace(/\n/g, '⏎')});
    }
  }
  return {overflow, clipped, page_scroll: Math.max(0, Math.round(pageScroll)), narrow_cells: narrow,
          narrowest_cell_em: cellEms.length ? Math.round(Math.min(...cellEms) * 100) / 100 : null,
          math_overflow: math, display_math: displays.length, code_columns: codeColumns,
          cjk_spaces: spaces, figures, column: [Math.round(left), Math.round(right)]};
}
"""


@dataclass
class LayoutReport:
    """One page at one viewport width (see the module docstring)."""
    width: int
    overflow: list[dict] = field(default_factory=list)
    clipped: list[dict] = field(default_factory=list)
    page_scroll: int = 0
    narrow_cells: list[dict] = field(default_factory=list)
    narrowest_cell_em: float | None = None
    math_overflow: list[dict] = field(default_factory=list)
    display_math: int = 0
    code_columns: int | None = None
    cjk_spaces: list[dict] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list, repr=False)
    column: list[int] = field(default_factory=list)

    def layout_problems(self) -> list[str]:
        """Overflow, narrow table cells and equations that neither fit nor scroll."""
        w = f"{self.width} px 宽"
        out = [f"{w}：整页可以横向滚动 {self.page_scroll} px"] if self.page_scroll > 1 else []
        out += [f"{w}：元素超出正文栏 {o['column']}（左 {o['left']}，右 {o['right']}）且不在滚动框内：{o['element']}"
                for o in self.overflow]
        out += [f"{w}：内容被裁掉（宽 {c['width']} px，内容 {c['content']} px，overflow 为 hidden）：{c['element']}"
                for c in self.clipped]
        out += [f"{w}：表格单元格只有 {c['em']} em 宽（至少 {MIN_CELL_EM:g} em）：{c['element']}"
                for c in self.narrow_cells]
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
            out.append((f, text_points(font_pt, dpi, f["natural"][0], f["shown"]) if dpi else None))
        return out

    def figure_problems(self, font_pt: float, min_pt: float = MIN_TEXT_PT,
                        default_dpi: float | None = None) -> list[str]:
        """Figures whose smallest text (`font_pt` points where drawn) is under `min_pt` points as shown."""
        w = f"{self.width} px 宽"
        out = []
        for f, pt in self.figure_points(font_pt, default_dpi):
            shown = f"原图 {f['natural'][0]} px 显示为 {f['shown']:.0f} px"
            if pt is None:
                out.append(f"{w}：图片没有记录每英寸像素数（PNG 的 pHYs），无法换算字号（{shown}）：{f['src']}")
            elif pt < min_pt - 1e-6:
                out.append(f"{w}：图中最小的字只有 {pt:.1f} pt（至少 {min_pt:g} pt；{shown}，{f['dpi'] or default_dpi:.0f} dpi，"
                           f"字号 {font_pt:g} pt）：{f['src']} {f['element']}")
        return out

    def cjk_space_problems(self) -> list[str]:
        return [f"{self.width} px 宽：中文之间有空格「{s['context']}」：{s['element']}" for s in self.cjk_spaces]

    def problems(self) -> list[str]:
        return self.layout_problems() + self.cjk_space_problems()


def text_points(font_pt: float, dpi: float, natural_px: float, shown_px: float) -> float:
    """Points on the page of a `font_pt` text drawn at `dpi` into an image `natural_px` pixels wide
    and displayed `shown_px` CSS pixels wide: `font_pt * dpi / 72` image pixels tall, times
    `shown_px / natural_px` CSS pixels each, at 72/96 of a point per CSS pixel."""
    return font_pt * dpi / 96 * shown_px / natural_px


def image_dpi(src: str) -> float | None:
    """Pixels per inch an image file (a `file:` URL) or a `data:` URL records (the PNG's pHYs chunk,
    as matplotlib writes it), or None."""
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
        return None
    try:
        with Image.open(stream) as im:
            dpi = im.info.get("dpi")
    except (OSError, ValueError):
        return None
    return float(dpi[0]) if dpi and dpi[0] else None


def _short_src(src: str) -> str:
    if src.startswith("data:"):
        return f"{src.partition(',')[0]}（{len(src)} 个字符）"
    return src.rsplit("/", 1)[-1]


def measure(tab, width: int | None = None) -> LayoutReport:
    """Measure the page loaded in the Playwright page `tab` (see the module docstring)."""
    m = tab.evaluate(_MEASURE_JS, [MIN_CELL_EM, CJK_CLASS])
    for f in m["figures"]:
        f["dpi"] = image_dpi(f["src"])
        f["src"] = _short_src(f["src"])
    return LayoutReport(width=width or tab.viewport_size["width"], **m)
