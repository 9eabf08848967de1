/* What one live explorer box shows (booktools/live_page.py `read()`): its summary text, its chart's
 * SVG, how many updates it ran and the last update's duration in ms. */
b => ({
  summary: b.querySelector('.bl-live-summary').textContent,
  chart: (b.querySelector('.bl-live-chart svg') || {outerHTML: ''}).outerHTML,
  updates: +(b.dataset.updates || 0),
  update_ms: +(b.dataset.updateMs || 0),
})
