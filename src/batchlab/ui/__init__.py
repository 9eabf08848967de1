"""The presentation layer: what readers see. One module per topic, each holding that topic's figures
and widgets; they call measurement and math, and hold no formula of their own.

* ``style`` — the figure style, the Chinese font, the error message every widget shows.
* ``batch`` — batch arithmetic (4.1): the global-batch calculator.
* ``pipeline`` — pipeline schedules (4.1, 4.4): timeline charts.
* ``noise`` — gradient noise (4.1, 4.2): error curves, the gradient cloud, the noise explorer.
* ``convergence`` — training curves (4.2).
* ``tables`` — plain-text tables that align Chinese and Latin text.
* ``exercises`` — self-checks; each chapter's questions in ``exercises/chapter_<n>.py``.

Memory (4.3), the efficiency trade-off (4.4) and the tuner (4.5) get a module here each.
"""
