"""The page layer: what the published page runs in the reader's browser (Pyodide unpacks this folder whole),
in pure Python — the standard library, ``batchlab.formulas``, ``batchlab.lecture`` and this folder only (no
numpy, matplotlib or ipywidgets; tests/test_layers.py holds it to that).

Each explorer is declared once here, in a module of its own named by the explorer (its ``name``): its
controls, its summary, its browser chart, how a notebook lays out its controls and which drawing function
of ``batchlab.ui`` draws its figure. The notebook's widget (:class:`batchlab.ui.explorer_widget.ExplorerWidget`)
and the page's live explorer (``web`` is its entry) are both made from that declaration; ``web`` finds the
declarations in this folder by themselves, so adding an explorer is one module here and one drawing function.

* ``spec`` — what a control, a panel, a notebook layout and an explorer are.
* ``web`` — JSON in, JSON out, for the page.
* ``colours`` — the book's colours, shared by the matplotlib figures and the browser charts.
* ``numbers`` — numbers for people: sizes, percentages, rates, estimates, m×10ⁿ.
* ``valid`` — which values of a job's counts make a valid job (the memory and trade-off explorers' sliders).
"""
