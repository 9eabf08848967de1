/* Where explorer number `i` of the page starts (its frozen view while shown, else its live box), in page
 * pixels, and the height of the screen: benchmarks/bench.py scrolls a reader down to it. */
i => {
  const frozen = document.querySelectorAll('.bl-frozen')[i];
  const shown = frozen && frozen.offsetParent !== null ? frozen : document.querySelectorAll('.bl-live')[i];
  return {top: shown.getBoundingClientRect().top + scrollY, screen: innerHeight};
}
