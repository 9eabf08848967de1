// Each comparison table that scrolls on a phone (table.bl-scroll, booktools.tables) and has something to
// scroll: the first column's cells that move when its box is scrolled to the far right
// (booktools.tables_check.fixed_first_columns; empty `moved` when the first column stays fixed).
() => [...document.querySelectorAll('article table.bl-scroll')].map(table => {
  let box = table.parentElement;
  while (box && getComputedStyle(box).overflowX === 'visible') box = box.parentElement;
  if (!box || box.scrollWidth <= box.clientWidth + 1) return null;
  const first = [...table.rows].map(r => r.cells[0]).filter(Boolean);
  box.scrollLeft = 0;
  const before = first.map(c => c.getBoundingClientRect().left);
  box.scrollLeft = box.scrollWidth;
  const moved = first.filter((c, i) => Math.abs(c.getBoundingClientRect().left - before[i]) > 1)
                     .map(c => c.textContent.trim().slice(0, 20));
  const scrolled = box.scrollLeft;
  box.scrollLeft = 0;
  return {table: (table.querySelector('thead') || table).textContent.replace(/\s+/g, ' ').trim().slice(0, 60),
          scrolled, moved};
}).filter(Boolean)
