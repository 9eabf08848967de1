/* What one explorer's chart draws, for the dark-mode and label checks (tests/test_page_dark.py,
 * tests/test_explorer_labels.py): every visible SVG text (its words, box, fill and opacity), every stroked
 * line (its stroke, opacity, width and whether it is dashed) and the colour of the page behind the chart
 * (the first ancestor with an opaque background). `box`: the chart's element (.bl-live-chart). */
box => {
  const svg = box.querySelector('svg');
  if (!svg) return null;
  const frame = svg.getBoundingClientRect();
  const seen = el => {
    let alpha = 1;
    for (let e = el; e && e !== svg.parentElement; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility === 'hidden') return 0;
      alpha *= parseFloat(s.opacity || '1');
    }
    return alpha;
  };
  let background = 'rgba(0, 0, 0, 0)';
  for (let e = box; e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor;
    if (c && !/rgba\(.*,\s*0\)$/.test(c) && c !== 'transparent') { background = c; break; }
  }
  const texts = [];
  svg.querySelectorAll('text').forEach(t => {
    const alpha = seen(t) * parseFloat(getComputedStyle(t).fillOpacity || '1');
    const words = (t.textContent || '').trim();
    if (!words || alpha === 0) return;
    const r = t.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) return;
    texts.push({text: words, fill: getComputedStyle(t).fill, alpha: alpha,
                x: r.left - frame.left, y: r.top - frame.top, width: r.width, height: r.height});
  });
  const lines = [];
  svg.querySelectorAll('path, line, polyline').forEach(p => {
    const s = getComputedStyle(p);
    if (!s.stroke || s.stroke === 'none' || parseFloat(s.strokeWidth || '0') === 0) return;
    const alpha = seen(p) * parseFloat(s.strokeOpacity || '1');
    if (alpha === 0) return;
    const r = p.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) return;
    lines.push({stroke: s.stroke, alpha: alpha, width: parseFloat(s.strokeWidth),
                dashed: !!s.strokeDasharray && s.strokeDasharray !== 'none',
                x: r.left - frame.left, y: r.top - frame.top, w: r.width, h: r.height});
  });
  return {background: background, width: frame.width, height: frame.height, texts: texts, lines: lines};
}
