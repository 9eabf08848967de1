// The code blocks (matched by the selector given) that are wider than their box: the start of each one's text.
sel => [...document.querySelectorAll(sel)].filter(p => p.offsetParent && p.scrollWidth > p.clientWidth + 1)
  .map(p => p.textContent.trim().slice(0, 60))
