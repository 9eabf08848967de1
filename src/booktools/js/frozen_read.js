/* What each frozen explorer of a loaded page shows (src/booktools/frozen.py writes them at build time):
 * its controls, its figures (decoded), whether it
 * shows text, and LaTeX left as source in its labels and text. booktools/render_check.py calls it. */
async () => {
  const views = [...document.querySelectorAll('.bl-frozen')];
  const figures = views.flatMap(v => [...v.querySelectorAll('img')]);
  await Promise.all(figures.map(img => img.decode().catch(() => null)));
  return views.map(v => ({
    controls: v.querySelectorAll('.bl-frozen-control').length,
    inert: [...v.querySelectorAll('.bl-frozen-control input, .bl-frozen-control select, .bl-frozen-control button')]
      .every(e => e.disabled),
    images: v.querySelectorAll('img').length,
    images_shown: [...v.querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0).length,
    text: [...v.querySelectorAll('.bl-frozen-html')].some(e => e.textContent.trim() !== ''),
    raw_latex: [...v.querySelectorAll('.bl-frozen-label, .bl-frozen-html, button, option')]
      .map(e => e.textContent).filter(t => /\$[^$\n]+\$|\\\(|\\\[/.test(t)),
  }));
}
