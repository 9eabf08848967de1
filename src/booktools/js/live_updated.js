/* True once explorer number `i` has run more than `n` updates (booktools/live_page.py `set_control()`
 * waits for the recomputation a control's move starts). */
([i, n]) => +(document.querySelectorAll('.bl-live')[i].dataset.updates || 0) > n
