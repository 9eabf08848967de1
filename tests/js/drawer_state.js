/* The navigation drawers as a reader finds them: for "primary" (the book's contents) and "secondary" (this
 * page's contents), whether the toggle is on screen, its labels and aria-expanded, whether the contents'
 * links are on screen and on top (not under the page or off its edge), whether a drawer <dialog> is open,
 * and where the focus is. tests/test_page_nav.py reads it after each tap, click and key. */
() => {
  const vw = window.innerWidth, vh = window.innerHeight;
  const onScreen = (el) => {
    if (!el) return false;
    const r = el.getBoundingClientRect(), cs = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && cs.visibility !== 'hidden' && cs.display !== 'none'
      && r.left >= -1 && r.right <= vw + 1 && r.bottom > 0 && r.top < vh;
  };
  const onTop = (a) => {
    const r = a.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + Math.min(8, r.width / 2), r.top + r.height / 2);
    return !!hit && (hit === a || a.contains(hit));
  };
  const side = (name, links) => {
    const toggle = document.querySelector('.bd-header-article .' + name + '-toggle');
    const dialog = document.getElementById('pst-' + name + '-sidebar-modal');
    const active = document.activeElement;
    return {
      toggle: onScreen(toggle),
      label: toggle ? toggle.getAttribute('aria-label') : null,
      title: toggle ? toggle.getAttribute('title') : null,
      expanded: toggle ? toggle.getAttribute('aria-expanded') : null,
      links: [...document.querySelectorAll(links)].filter((a) => onScreen(a) && onTop(a)).length,
      dialog: !!(dialog && dialog.open),
      focusInside: !!(dialog && dialog.open && dialog.contains(active) && active !== dialog),
      focusOnToggle: !!toggle && active === toggle,
    };
  };
  return {
    primary: side('primary', 'nav.bd-docs-nav a'),
    secondary: side('secondary', '#pst-page-toc-nav a'),
    searchBoxes: [...document.querySelectorAll('.search-button-field, .search-button')]
      .filter(onScreen).length,
  };
}
