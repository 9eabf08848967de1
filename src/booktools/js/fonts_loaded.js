/* Lay the page out (so that it asks for the fonts its text now needs, e.g. the @font-face rules just
 * added by booktools/pdf.py `use_truetype_web_fonts()`) and wait until every font it asked for is loaded. */
async () => {
  document.body.getBoundingClientRect();
  await document.fonts.ready;
  return document.fonts.status;
}
