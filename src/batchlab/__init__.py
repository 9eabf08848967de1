"""batchlab: the shared code of the book 《Batch Size 核心概念》.

Three layers, one direction: presentation calls measurement, which calls pure math — never the other
way. :data:`LAYERS` lists every module by layer; ``tests/test_layers.py`` reads each module's imports
(with ``ast``, nothing executed) and enforces the direction, and that math never imports torch.

* **math** — plain numbers in, numbers out; no torch, instant, property-tested.
  ``checks`` (argument rules), ``presets`` (GPT-2 shapes, parameter counts), ``case`` (the lecture's
  case study as data), ``batching`` (the batch arithmetic of 4.1), ``partition`` (layers per pipeline
  stage), ``pipeline_schedules`` (GPipe/1F1B orders, in-flight micro-batches, simulator),
  ``sampling`` (E‖G_B − G‖², the two-batch estimator), ``memory`` (bytes per pipeline stage, the
  lecture's micro-batch growth procedure), ``scaling`` (learning-rate rules, McCandlish et al.'s
  trade-off), ``npu_smi`` (parses ``npu-smi info``), ``verdicts`` (the criteria that decide whether a
  claim of the lecture holds), ``throughput`` (FLOPs, a measured rate curve, the modelled step time),
  ``fit`` (the least-squares line both a criterion and a fit use).
  ``roofline`` (a matmul's FLOPs, bytes and intensity, ridge point, device peaks as sourced ranges).
  ``tune`` (every runnable micro-batch size with its bubble, memory and modelled tokens/s; the
  recommendation, or the change that makes one fit; a roofline rate curve). ``comm`` (point-to-point
  messages and ring all-reduce bytes of one step), ``effects`` (everything one batch configuration sets,
  side by side, for 4.6).
* **measurement** — torch on the reader's NPU, GPU or CPU. ``device`` (choosing and timing a device),
  ``device_memory`` (reading its memory), ``memory_meter`` (saved activations, step peaks, the growth
  procedure on a device), ``model`` (the GPT), ``data`` (a seeded Markov corpus),
  ``noise`` (per-sample gradients, noise scale), ``optim`` (LAMB), ``train`` (the training loop),
  ``pipeline_run`` (the GPT cut into stages, run as a pipeline in one process or one process per stage),
  ``matmul_bench`` (matmul seconds and TFLOP/s per M, the device's measured roofs), ``accumulation``
  (when k micro-batches give one batch's gradient, and the three things that break it).
* **presentation** — ``ui`` (figures, widgets, exercises and tables, one module per topic) and ``cli``
  (``python -m batchlab``).

Import the submodule you need: ``from batchlab.batching import plan_batch``.
"""
__version__ = "0.1.0"

LAYERS: dict[str, tuple[str, ...]] = {
    "math": ("checks", "presets", "case", "batching", "partition", "pipeline_schedules", "sampling", "memory",
             "scaling", "npu_smi", "verdicts", "throughput", "roofline", "fit", "audit",
             "tune", "comm", "effects"),
    "measurement": ("device", "device_memory", "memory_meter", "model", "data", "noise", "optim", "train",
                    "pipeline_run", "matmul_bench", "accumulation"),
    "presentation": ("ui", "ui.style", "ui.tables", "ui.batch", "ui.pipeline", "ui.efficiency", "ui.noise", "ui.memory",
                     "ui.convergence", "ui.misconceptions",
                     "ui.exercises", "ui.exercises.base", "ui.exercises.chapter_4_1",
                     "ui.exercises.chapter_4_2", "ui.exercises.chapter_4_3", "ui.exercises.chapter_4_4",
                     "ui.exercises.chapter_4_5", "ui.exercises.chapter_4_6", "grade", "cli", "__main__"),
}
