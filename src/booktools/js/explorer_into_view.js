/* Bring explorer number `i` into view a quarter screen below the top, with the page's own scrollIntoView
 * (it lays out the explorer's section first: a section not yet laid out has only an estimated height, so a
 * position measured earlier is wrong), and answer the page's clock (ms) at that moment
 * (benchmarks/bench.py: when a reader's scroll brought the explorer into view). */
i => {
  const frozen = document.querySelectorAll('.bl-frozen')[i];
  const shown = frozen && frozen.offsetParent !== null ? frozen : document.querySelectorAll('.bl-live')[i];
  shown.scrollIntoView({block: 'start'});
  scrollBy(0, -0.25 * innerHeight);
  return performance.now();
}
