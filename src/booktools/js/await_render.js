/* Wait until a loaded page has rendered (MathJax typeset, every ipywidgets view drawn by the HTML
 * manager, images decoded, fonts loaded; at most timeoutMs), then report what it shows: each widget
 * view's area, the embedded widget state, images, math and Font Awesome 5 glyphs.
 * booktools/render_check.py (`check_page()`) and booktools/pdf.py (before printing) call it with
 * [viewType, stateType, timeoutMs]: the MIME types of the widget view and state scripts. */
async ([viewType, stateType, timeoutMs]) => {
  const deadline = performance.now() + timeoutMs;
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await Promise.race([MathJax.startup.promise, sleep(timeoutMs)]);
  }
  const views = [...document.querySelectorAll(`script[type="${viewType}"]`)];
  const area = s => s.previousElementSibling && s.previousElementSibling.classList.contains('widget-subarea')
                    ? s.previousElementSibling : null;
  // the HTML manager inserts a .widget-subarea before each view script and renders into it
  while (performance.now() < deadline &&
         views.some(s => !area(s) || !area(s).querySelector('.lm-Widget'))) {
    await sleep(50);
  }
  // a lazy image below the first screen loads only when scrolled to: the checks and the PDF want them all
  for (const img of document.querySelectorAll('img[loading="lazy"]')) img.loading = 'eager';
  await Promise.all([...document.images].map(img => img.complete ? null :
      new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r); })));
  await document.fonts.ready;
  const isFa5 = el => [null, '::before', '::after'].some(p => {
    const cs = getComputedStyle(el, p);
    return /Font Awesome 5/.test(cs.fontFamily) &&
           (p === null ? el.textContent.trim() !== '' : !['none', 'normal'].includes(cs.content));
  });
  const state = document.querySelector(`script[type="${stateType}"]`);
  return {
    views: views.map(s => {
      const a = area(s);
      return {
        model_id: JSON.parse(s.textContent).model_id,
        // every widget view is a Lumino widget; an Output widget's own output area is one too
        views: a ? [...a.querySelectorAll('.lm-Widget')].filter(e => !e.parentElement.closest('.widget-output')).length : 0,
        errors: a ? (a.textContent.match(/Error displaying widget/g) || []).length : 0,
        images: a ? [...a.querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0).length : 0,
        text: a ? [...a.querySelectorAll('.widget-output, .widget-html, .widget-label, .widget-htmlmath')]
                   .some(e => e.innerText.trim() !== '') : false,
        // LaTeX left as source in labels, HTML and buttons
        raw_latex: a ? [...a.querySelectorAll('.widget-label, .widget-html, .widget-htmlmath, button')]
                   .map(e => e.innerText).filter(t => /\$[^$\n]+\$|\\\(|\\\[/.test(t)) : [],
      };
    }),
    state: state ? JSON.parse(state.textContent).state : {},
    images: [...document.images].map(i => [i.currentSrc || i.src, i.complete && i.naturalWidth > 0]),
    math: document.querySelectorAll('.math').length,
    math_unrendered: [...document.querySelectorAll('.math')].filter(m => !m.querySelector('mjx-container')).length,
    mathjax: document.querySelectorAll('mjx-container').length,
    mathjax_errors: document.querySelectorAll('mjx-merror').length,
    fa5: [...document.querySelectorAll('body *')].filter(isFa5).length,
  };
}
