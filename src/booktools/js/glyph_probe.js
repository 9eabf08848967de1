/* Draw each of `chars` in its own 64 px cell of a box pinned to the page's top left (#cjk-glyph-probe),
 * in `family` or the body's font, for booktools/browser.py's `cjk_glyphs()` to screenshot cell by
 * cell. Called with [chars, family]; returns the font family the box uses. */
([chars, family]) => {
  const box = document.createElement('div');
  box.id = 'cjk-glyph-probe';
  box.style.cssText = 'position:fixed;left:0;top:0;z-index:2147483647;background:#fff;color:#000;' +
                      'padding:8px;display:flex;gap:8px;font-size:48px;line-height:1';
  box.style.fontFamily = family || getComputedStyle(document.body).fontFamily;
  for (const ch of chars) {
    const cell = document.createElement('span');
    cell.textContent = ch;
    cell.style.cssText = 'display:inline-block;width:64px;height:64px;text-align:center';
    box.appendChild(cell);
  }
  document.body.appendChild(box);
  return box.style.fontFamily;
}
