"""What readers see: one module per topic, each holding that topic's figures and widgets. They call
the formulas and the lecture — never ``measure`` (explorers stay torch-free and fast; measured numbers
arrive as arguments) — and hold no formula of their own.

* ``style`` — the figure style, the Chinese font, the error message every widget shows.
* ``batch`` — batch arithmetic (4.1): the global-batch calculator.
* ``pipeline`` — pipeline schedules (4.1, 4.4): timeline charts; the bubble-versus-matmul explorer (4.4, 4.5).
* ``noise`` — gradient noise (4.1, 4.2): error curves, the gradient cloud, the noise explorer.
* ``convergence`` — training curves (4.2).
* ``memory`` — per-stage memory bars and the memory explorer (4.3).
* ``efficiency`` — matmul rates and the roofline (4.4).
* ``misconceptions`` — the figures of 4.6.
* ``diagrams`` — the picture of a batch (4.1): global batch → replicas → micro-batches → stages.
* ``numbers`` — numbers for people: sizes, percentages, rates, estimates, m×10ⁿ.
* ``tables`` — result tables (HTML in the book, aligned text elsewhere).
* ``exercises`` — self-checks; each chapter's questions in ``exercises/chapter_<n>.py``.
"""
