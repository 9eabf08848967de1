/* What a reader sees of a page's layout (booktools/layout.py, `measure()`): overflow out of the main
 * column, clipped content, equations that neither fit nor scroll, the code column's
 * width in characters, ASCII spaces between Chinese characters, every figure as shown (and whether
 * its box scrolls sideways) and every displayed formula's width against the room it has.
 * Called by Playwright with [cjkClass]; returns the fields of `LayoutReport`. */
([cjkClass]) => {
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
    // kind: a chapter's figure (<figure>), an explorer's frozen image (widget output) or another image
    const kind = img.closest('figure') ? 'figure'
               : img.closest('.jupyter-widgets, .widget-subarea, .jp-RenderedImage, .widget-output') ? 'widget' : 'other';
    figures.push({element: desc(img).replace(/ «.*$/, ''), src: img.currentSrc || img.src,
                  natural: [img.naturalWidth, img.naturalHeight], shown: Math.round(r.width * 100) / 100,
                  left: Math.round(r.left * 10) / 10, right: Math.round(r.right * 10) / 10, kind,
                  scroll_box: box ? Math.round(box.clientWidth) : null,
                  // the box really scrolls sideways: what it holds is wider than what it shows
                  box_scrolls: box ? box.scrollWidth > box.clientWidth + tol : false});
  }
  const doc = document.documentElement;
  const pageScroll = Math.max(doc.scrollWidth, document.body.scrollWidth) - vw;

  const math = [], formulas = [];
  const displays = [...root.querySelectorAll('mjx-container[display="true"], mjx-container[display]')];
  for (const m of displays) {
    const r = m.getBoundingClientRect();
    if (!visible(m, r)) continue;
    // the typeset formula's own width (the container is a block as wide as its parent)
    const inner = m.firstElementChild ? m.firstElementChild.getBoundingClientRect() : r;
    const box = m.parentElement.getBoundingClientRect();
    const fits = inner.width <= Math.min(box.width, right - left) + tol
                 && inner.right <= right + tol && inner.left >= left - tol;
    // every displayed formula, scroll box or not: a reader should not have to scroll one
    formulas.push({element: desc(m.closest('.math') || m), width: Math.round(inner.width),
                   available: Math.round(Math.min(box.width, right - left)), fits});
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
  return {overflow, clipped, page_scroll: Math.max(0, Math.round(pageScroll)),
          math_overflow: math, display_math: displays.length, formulas, code_columns: codeColumns,
          cjk_spaces: spaces, figures, column: [Math.round(left), Math.round(right)]};
}
