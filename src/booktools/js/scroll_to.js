/* Scroll the page to `y` (page pixels) and answer the page's clock (ms) at that moment: when a reader's
 * scroll brought something into view (benchmarks/bench.py, tests/test_live_explorers.py). */
y => { scrollTo(0, y); return performance.now(); }
