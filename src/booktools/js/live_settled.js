/* True once explorer number `i` of the page (its .bl-live box) is live or has given up (data-state
 * "ready" or "failed"): booktools/live_page.py `make_live()` waits for it. */
i => {
  const box = document.querySelectorAll('.bl-live')[i];
  return !!box && (box.dataset.state === 'ready' || box.dataset.state === 'failed');
}
