// Give the named table headers the wrap and minimum width booktools.tables gave them before issue 42 (a
// check's contrary case: tests/test_page_tables.py).
names => {
  for (const th of document.querySelectorAll('article th')) {
    if (names.includes(th.textContent.trim())) { th.className = 'bl-wrap'; th.style.minWidth = '4em'; }
  }
}
