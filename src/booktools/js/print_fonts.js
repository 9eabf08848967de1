/* The page's @font-face rules, from every stylesheet it can read: [{family, weight, style, urls}], each
 * url made absolute against its stylesheet (booktools/print_fonts.py replaces the CFF ones for print). */
() => {
  const faces = [];
  for (const sheet of document.styleSheets) {
    let rules;
    try { rules = sheet.cssRules; } catch (e) { continue; }   // a sheet from elsewhere: not readable
    const base = sheet.href || document.baseURI;
    for (const rule of rules) {
      if (!(rule instanceof CSSFontFaceRule)) continue;
      const s = rule.style;
      const urls = [...s.getPropertyValue('src').matchAll(/url\(\s*["']?([^"')]+)["']?\s*\)/g)]
        .map(m => new URL(m[1], base).href);
      faces.push({
        family: s.getPropertyValue('font-family').replace(/^["']|["']$/g, ''),
        weight: s.getPropertyValue('font-weight') || 'normal',
        style: s.getPropertyValue('font-style') || 'normal',
        urls,
      });
    }
  }
  return faces;
}
