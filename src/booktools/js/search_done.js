/* True once the book's search page (Sphinx's searchtools.js) has finished its query: its results
 * heading no longer says it is searching. booktools/browser.py `search_results()` waits for it. */
() => {
  const heading = document.querySelector('#search-results h2');
  return !heading || !/正在搜索|Searching/.test(heading.textContent);
}
