"""batchlab: the shared code of the book 《Batch Size 核心概念》.

Three layers, one direction: presentation (``plotting``, ``widgets``, ``exercises``, ``cli``) calls
measurement (``device``, ``model``, ``data``, ``noise``), which calls pure math (``batching``,
``schedules``). Import the submodule you need: ``from batchlab.batching import plan_batch``.
"""
__version__ = "0.1.0"
