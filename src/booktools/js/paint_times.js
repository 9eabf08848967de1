/* When the loaded page first painted content and finished parsing (ms since navigation; NaN if it has
 * not painted): benchmarks/bench.py's phone measurements. */
() => ({
  first_paint: (performance.getEntriesByName('first-contentful-paint')[0] || {startTime: NaN}).startTime,
  dom_content_loaded: performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd,
})
