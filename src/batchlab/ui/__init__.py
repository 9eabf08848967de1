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
* ``tables`` — plain-text tables that align Chinese and Latin text.
* ``exercises`` — self-checks; each chapter's questions in ``exercises/chapter_<n>.py``.
"""
