"""batchlab: the shared code of the book 《Batch Size 核心概念》.

One sub-package per layer; the folder says the layer, the file name the topic. Calls go one way —
``apps`` and the notebooks join ``ui`` and ``measure``, which both call ``lecture`` and ``formulas`` —
and ``tests/test_layers.py`` states that as rules on these paths.

* ``formulas`` — plain numbers in, numbers out (no torch, no numpy): the training job record
  (``job``), batch arithmetic, memory, pipeline schedules and their simulator, roofline, throughput,
  the tuner, communication, gradient-noise and learning-rate formulas, argument checks.
* ``lecture`` — the 原文's case study as data (``case``), its audit (``audit``) and the criteria that
  decide whether a claim holds (``verdicts``).
* ``measure`` — the same quantities measured with torch on the reader's NPU, GPU or CPU: the device
  layer, the GPT, data, training, gradient noise, memory, matmul rates, pipeline runs.
* ``page`` — what the published page runs in the reader's browser too (standard library, ``formulas`` and
  ``lecture`` only): each explorer's declaration, the colours, numbers for people.
* ``ui`` — figures, the explorers' widgets, exercises and tables (no formula of its own, no torch).
* ``apps`` — ``python -m batchlab`` (``cli``) and grading a class's notebooks (``grade``).

Import the module you need: ``from batchlab.formulas.batching import plan_batch``.
"""
__version__ = "0.1.0"
