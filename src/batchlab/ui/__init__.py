"""What readers see: one module per topic, each holding that topic's figures and widgets. They call
the formulas and the lecture — never ``measure`` (explorers stay torch-free and fast; measured numbers
arrive as arguments) — and hold no formula of their own. What the published page runs too (the explorers'
declarations, the colours, numbers for people) lives in :mod:`batchlab.page`, which ``ui`` may import.

* ``style`` — the figure style, the Chinese font, the error message every widget shows.
* ``explorer_widget`` — the one widget class that makes any explorer of :mod:`batchlab.page` a notebook
  widget (``controls`` makes each control's widget).
* ``pipeline`` — pipeline schedules (4.1, 4.4): timeline charts; the bubble-versus-matmul explorer's figure (4.4, 4.5).
* ``noise`` — gradient noise (4.1, 4.2): error curves, the gradient cloud, the noise explorer's figure.
* ``convergence`` — training curves (4.2).
* ``memory`` — per-stage memory bars and the memory explorer's figure (4.3).
* ``efficiency`` — matmul rates and the roofline (4.4).
* ``misconceptions`` — the figures of 4.6.
* ``diagrams`` — the picture of a batch (4.1): global batch → replicas → micro-batches → stages.
* ``tables`` — result tables (HTML in the book, aligned text elsewhere).
* ``exercises`` — self-checks; each chapter's questions in ``exercises/chapter_<n>.py``.
"""
