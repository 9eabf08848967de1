/* Move a range input to `v` and tell the page, as a reader's drag does when it ends
 * (booktools/live_page.py `set_control()`). */
(el, v) => {
  el.value = v;
  el.dispatchEvent(new Event('change'));
}
