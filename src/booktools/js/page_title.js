/* The page's title as its first heading shows it (without the headerlink mark), else the document's
 * title: the PDF bookmark of the page (booktools/pdf.py `print_pages()`). */
() => {
  const h = document.querySelector('article h1');
  return (h ? h.innerText : document.title).replace(/[#¶]\s*$/, '').trim();
}
