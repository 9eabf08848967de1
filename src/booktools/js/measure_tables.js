/* What a reader sees of the tables of a page (booktools/tables_check.py, `measure()`): every table cell's
 * text as rendered lines (each character's box from a Range, grouped by line), and every table's columns
 * against the part of the screen the reader can see without scrolling sideways.
 * Called by Playwright with [cjkClass]; returns {cells, tables}:
 *  cells:  [{element, table, row, column, label, head, blocks: [[{text, chars, brokenBefore}], ...]}]
 *          one entry per visible cell with text (`head`: in the header row; `label`: its column's
 *          header); a block is one paragraph (or list item) of the cell, its lines in reading order;
 *          `chars` counts non-space characters (a formula counts its characters); `brokenBefore` says
 *          how the line began: "space" (the break fell on a space), "cjk" (beside a Chinese character),
 *          "inside" (inside a run of Latin letters, digits and signs: a word, a number or a code name
 *          cut in two), "forced" (after a <br>).
 *  tables: [{element, columns, offscreen: [column index, ...], visible: [left, right]}]. */
([cjkClass]) => {
  const root = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const isCjk = new RegExp(`[${cjkClass}]`);
  const space = /\s/;
  const desc = el => {
    let s = el.tagName.toLowerCase();
    if (el.id) s += '#' + el.id;
    const cls = [...el.classList].slice(0, 3);
    if (cls.length) s += '.' + cls.join('.');
    const path = [];
    for (let p = el.parentElement; p && p !== root && path.length < 3; p = p.parentElement) {
      path.unshift(p.tagName.toLowerCase() + (p.id ? '#' + p.id : '') +
                   (p.classList.length ? '.' + [...p.classList].slice(0, 2).join('.') : ''));
    }
    const text = (el.innerText || el.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 50);
    return (path.length ? path.join(' > ') + ' > ' : '') + s + (text ? ` «${text}»` : '');
  };
  const hidden = el => {
    const cs = getComputedStyle(el);
    return cs.display === 'none' || cs.visibility === 'hidden';
  };
  const SKIP = 'script, style, template, mjx-assistive-mml, .visually-hidden, .sr-only';
  const BLOCK = /^(block|list-item|table-cell|flex|grid|table)$/;

  // The units of a cell, in reading order: a character of a text node (its box from a one-character
  // Range) or a whole formula (MathJax draws its glyphs with CSS, so its box stands for its text).
  const units = cell => {
    const out = [];
    const blockOf = node => {
      for (let p = node.parentElement; p && p !== cell; p = p.parentElement) {
        if (BLOCK.test(getComputedStyle(p).display)) return p;
      }
      return cell;
    };
    const walk = el => {
      for (const n of el.childNodes) {
        if (n.nodeType === 3) {
          const text = n.textContent, block = blockOf(n);
          for (let i = 0; i < text.length; i++) {
            const ch = text[i];
            if (space.test(ch)) { out.push({ch: ' ', block}); continue; }
            const range = document.createRange();
            range.setStart(n, i);
            range.setEnd(n, i + 1);
            const r = [...range.getClientRects()].find(b => b.width > 0 || b.height > 0);
            if (r) out.push({ch, block, top: r.top, bottom: r.bottom, left: r.left, right: r.right});
          }
        } else if (n.nodeType === 1) {
          if (n.matches(SKIP) || hidden(n)) continue;
          if (n.matches('mjx-container')) {
            const r = n.getBoundingClientRect();
            const tex = (n.querySelector('mjx-assistive-mml') || n).textContent.replace(/\s+/g, '');
            if (r.width > 0) out.push({ch: tex || '□', block: blockOf(n), top: r.top, bottom: r.bottom,
                                       left: r.left, right: r.right, math: true});
            continue;
          }
          if (n.tagName === 'BR') { out.push({ch: '\n', block: blockOf(n)}); continue; }
          walk(n);
        }
      }
    };
    walk(cell);
    return out;
  };

  // Group a block's units into lines: a unit starts a new line when it sits wholly below the line so far
  // (its vertical middle under the line's bottom), or after a forced break.
  const lines = list => {
    const out = [];
    let line = null, gap = '', forced = false;
    const word = ch => !isCjk.test(ch) && !space.test(ch);
    for (const u of list) {
      if (u.ch === ' ' || u.ch === '\n') {
        gap += u.ch;
        forced = forced || u.ch === '\n';
        continue;
      }
      const mid = (u.top + u.bottom) / 2;
      if (!line || forced || mid > line.bottom) {
        let kind = null;
        if (line) {
          kind = forced ? 'forced' : gap ? 'space'
               : (word(line.last) && word(u.ch[0]) && !line.lastMath && !u.math) ? 'inside' : 'cjk';
        }
        line = {text: '', chars: 0, top: u.top, bottom: u.bottom, brokenBefore: kind, last: '', lastMath: false};
        out.push(line);
      } else if (gap) {
        line.text += ' ';
      }
      line.text += u.ch;
      line.chars += [...u.ch].length;
      line.bottom = Math.max(line.bottom, u.bottom);
      line.last = u.ch[u.ch.length - 1];
      line.lastMath = !!u.math;
      gap = '';
      forced = false;
    }
    return out.map(({text, chars, brokenBefore}) => ({text, chars, brokenBefore}));
  };

  const cells = [], tables = [];
  const vw = document.documentElement.clientWidth;
  [...root.querySelectorAll('table')].forEach((table, t) => {
    if (table.closest(SKIP) || hidden(table)) return;
    const tr = table.getBoundingClientRect();
    if (tr.width === 0 && tr.height === 0) return;
    // what the reader sees without scrolling sideways: the window, cut by every box the table scrolls in
    let left = 0, right = vw;
    for (let p = table.parentElement; p; p = p.parentElement) {
      const cs = getComputedStyle(p);
      if (cs.overflowX !== 'visible') {
        const r = p.getBoundingClientRect();
        left = Math.max(left, r.left + p.clientLeft);
        right = Math.min(right, r.left + p.clientLeft + p.clientWidth);
      }
    }
    const headers = [...table.querySelectorAll('thead th, thead td')].map(h => h.textContent.replace(/\s+/g, ' ').trim());
    const offscreen = new Set();
    let columns = 0;
    [...table.rows].forEach((row, i) => {
      let col = 0;
      for (const cell of row.cells) {
        const c = col;
        col += cell.colSpan || 1;
        if (hidden(cell)) continue;
        const r = cell.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;
        if (r.right > right + 1 || r.left < left - 1) offscreen.add(c);
        const list = units(cell);
        if (!list.some(u => u.ch !== ' ' && u.ch !== '\n')) continue;
        const byBlock = new Map();
        for (const u of list) {
          if (!byBlock.has(u.block)) byBlock.set(u.block, []);
          byBlock.get(u.block).push(u);
        }
        cells.push({element: desc(cell), table: t, row: i, column: c, label: headers[c] || '',
                    head: !!cell.closest('thead'),
                    blocks: [...byBlock.values()].map(lines).filter(b => b.length)});
      }
      columns = Math.max(columns, col);
    });
    tables.push({element: desc(table).replace(/ «.*$/, '') + ` «${headers.join(' | ').slice(0, 60)}»`,
                 columns, offscreen: [...offscreen].sort((a, b) => a - b),
                 visible: [Math.round(left), Math.round(right)]});
  });
  return {cells, tables};
}
