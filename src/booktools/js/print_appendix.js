/* Before the book's PDF prints a page (booktools/pdf.py `_print_page()`): a page of API reference
 * (a section that is, or directly holds, autodoc's `#module-…` anchor) becomes a short appendix. Each module keeps its heading and the first
 * paragraph of its docstring (what it is for); the rest of the docstring and every function, class and
 * constant entry is left out of the print, and `note` (which says where the full reference is) goes
 * under the page's title. The web page keeps everything. Returns how many modules were shortened. */
(note) => {
  const isModule = el => el.id.startsWith('module-');
  const modules = [...document.querySelectorAll('article.bd-article section')]
    .filter(s => isModule(s) || [...s.children].some(c => c.tagName !== 'SECTION' && isModule(c)));
  for (const section of modules) {
    let purpose = false;
    for (const child of section.children) {
      if (/^H[1-6]$/.test(child.tagName) || child.tagName === 'SECTION') continue;
      if (child.tagName === 'SPAN' && !child.textContent.trim()) continue;   // an anchor
      if (!purpose && child.tagName === 'P' && !isModule(child)) {
        purpose = true;
        continue;
      }
      child.style.display = 'none';
    }
  }
  const title = document.querySelector('article.bd-article h1');
  if (modules.length && title) {
    const p = document.createElement('p');
    p.className = 'bl-print-appendix-note';
    p.textContent = note;
    title.after(p);
  }
  return modules.length;
}
