/* Before printing (booktools/pdf.py `print_pages()`, with print media emulated at the printed column's
 * width): each block that the theme keeps whole on a page (tables, code, cell inputs and outputs,
 * admonitions, claim cards, figures) is marked `bl-print-whole` if it is at most `limitPx` tall, else
 * `bl-print-split`; book/_static/print.css keeps the first kind on one page and lets the second break
 * between lines, so a big block no longer leaves half a page empty before it, nor a small one an empty
 * frame at the foot of a page. Returns how many blocks may split. */
(limitPx) => {
  const blocks = document.querySelectorAll('article.bd-article :is(table, div.highlight, ' +
    'div.literal-block-wrapper, .cell_input, .cell_output, .output, .admonition, ' +
    '.pst-scrollable-table-container, .batchlab-claim, figure)');
  let split = 0;
  for (const el of blocks) {
    const tall = el.getBoundingClientRect().height > limitPx;
    el.classList.add(tall ? 'bl-print-split' : 'bl-print-whole');
    split += tall ? 1 : 0;
  }
  return split;
}
