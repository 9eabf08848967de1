/* True once live explorer number `i`'s chart is drawn for the colour scheme `scheme` (book/_js/live.js
 * marks its chart's box with data-scheme). */
([i, scheme]) => {
  const chart = document.querySelectorAll('.bl-live-chart')[i];
  return !!chart && chart.dataset.scheme === scheme;
}
