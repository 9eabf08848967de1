/* Every control of one explorer box (live or frozen), as a finger meets it: its kind, its name, its box in
 * CSS pixels and, for a drop-down, the width its widest option's text needs beside the width it has (its
 * inner width less the arrow, 20 px in Chromium) (tests/test_explorer_labels.py). */
box => {
  const canvas = document.createElement('canvas').getContext('2d');
  return [...box.querySelectorAll('input, select, button')].map(e => {
    const r = e.getBoundingClientRect();
    const row = e.closest('[data-name], [data-kind]');
    const out = {tag: e.tagName.toLowerCase(), type: e.type || '', name: row ? (row.dataset.name || row.dataset.kind) : '',
                 text: (e.textContent || '').trim().slice(0, 20), width: r.width, height: r.height};
    if (e.tagName === 'SELECT') {
      const s = getComputedStyle(e);
      canvas.font = `${s.fontStyle} ${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
      out.needs = Math.max(...[...e.options].map(o => canvas.measureText(o.textContent).width));
      out.has = e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight) - 20;
    }
    return out;
  });
}
