// The search page's results once each has its snippet (searchtools.js fetches every result page): null
// while one is missing, else [[link, snippet]] for the results with one (an API name has a description
// instead). tests/test_page_search.py waits for it with wait_for_function.
() => {
  const items = [...document.querySelectorAll('#search-results ul.search li')];
  if (!items.every(li => li.querySelector('p.context') || li.querySelector('span'))) return null;
  return items.filter(li => li.querySelector('p.context'))
              .map(li => [li.querySelector('a').getAttribute('href'), li.querySelector('p.context').textContent]);
}
