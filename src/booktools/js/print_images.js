/* The page's pictures as the printed PDF draws them (booktools/pdf.py `_print_page()`): every visible
 * <img> at least `minPx` tall, in document order, the same order the PDF's large images come in.
 * `shrink` maps an index of that list to a new maximum height in CSS pixels: a picture that would
 * otherwise move to the next page and leave most of this one empty is drawn smaller so it fits.
 * Returns the heights after shrinking. */
([minPx, shrink]) => {
  const imgs = [...document.querySelectorAll('article.bd-article img')]
    .filter(img => img.getBoundingClientRect().height >= minPx);
  for (const [i, px] of Object.entries(shrink)) {
    const img = imgs[Number(i)];
    if (img) {
      img.style.maxHeight = `${px}px`;
      img.style.width = 'auto';
    }
  }
  return imgs.map(img => img.getBoundingClientRect().height);
}
