/* The page's sections as the book's PDF lists them (booktools/pdf.py `print_pages()`): each second-level
 * heading of the article, its text without the headerlink mark, and an id on the heading itself (its
 * own, else `bl-print-<section id>`). Chromium writes a named destination only for an id that some
 * link points at, and places a section's at an unreliable height when the section spans pages, so
 * each heading gets a hidden link to it. Headings outside an id'd section are left out. */
() => [...document.querySelectorAll('article.bd-article section[id] > h2')].map(h => {
  if (!h.id) h.id = `bl-print-${h.parentElement.id}`;
  const link = document.createElement('a');
  link.href = `#${h.id}`;
  link.style.display = 'none';
  document.body.appendChild(link);
  return {id: h.id, title: h.innerText.replace(/[#¶]\s*$/, '').replace(/\s+/g, ' ').trim()};
}).filter(s => s.title)
