"""The explorers declared once, in pure Python (no numpy, matplotlib or ipywidgets): each one's controls,
its summary and its browser chart. The notebook's ipywidgets explorers (``batchlab.ui.batch``,
``memory``, ``pipeline``, ``noise``) and the published page's live explorers (Pyodide runs this folder in the
reader's browser; ``web`` is its entry) are both built from them.

* ``spec`` — what a control, a panel and an explorer are.
* ``batch`` — the global-batch calculator (4.1).
* ``memory`` — the memory explorer (4.3).
* ``tradeoff`` — the bubble-versus-matmul explorer (4.4, 4.5).
* ``noise`` — the gradient-noise explorer (4.2), from the chapter's measured data.
* ``web`` — JSON in, JSON out, for the page.
"""
