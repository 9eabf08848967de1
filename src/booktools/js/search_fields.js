// Every visible search field (form.bd-search: the search page's, the pop-up's) of the page: where its
// magnifier ends and where its query's text starts (tests/test_page_search.py).
() => [...document.querySelectorAll('form.bd-search')].filter(f => f.offsetParent).map(f => {
  const icon = f.querySelector('i').getBoundingClientRect(), input = f.querySelector('input');
  const cs = getComputedStyle(input), box = input.getBoundingClientRect();
  return {where: f.parentElement.id || f.parentElement.className, icon: [icon.left, icon.right],
          text: box.left + parseFloat(cs.borderLeftWidth) + parseFloat(cs.paddingLeft)};
})
