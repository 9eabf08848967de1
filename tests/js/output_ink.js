/* Each text cell of the book's own outputs on the page (result tables, verdict cards in a code cell's
 * output): its text, its computed colour and the colour it sits on (the first ancestor, itself included,
 * with an opaque background), for tests/test_page_dark.py. */
() => {
  const under = e => {
    for (let n = e; n; n = n.parentElement) {
      const bg = getComputedStyle(n).backgroundColor;
      if (bg && !bg.startsWith('rgba(0, 0, 0, 0)') && bg !== 'transparent') return bg;
    }
    return getComputedStyle(document.body).backgroundColor;
  };
  const cells = [...document.querySelectorAll(
    '.cell_output .batchlab-table th, .cell_output .batchlab-table td, .cell_output .batchlab-claim dt, ' +
    '.cell_output .batchlab-claim dd, .cell_output .batchlab-claim__head')];
  return cells.filter(e => (e.textContent || '').trim()).slice(0, 400).map(e => {
    e.scrollIntoView({block: 'center'});  // a section off screen is not laid out (content-visibility)
    return {text: e.textContent.trim().slice(0, 20), color: getComputedStyle(e).color, background: under(e)};
  });
}
