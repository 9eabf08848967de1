/* The words of an explorer's summary that carry a colour of their own (an element with a style attribute
 * that names one): their text and computed colour (tests/test_page_dark.py). */
summary => [...summary.querySelectorAll('[style*="color"]')]
  .filter(e => (e.textContent || '').trim())
  .map(e => ({text: e.textContent.trim().slice(0, 30), color: getComputedStyle(e).color}))
