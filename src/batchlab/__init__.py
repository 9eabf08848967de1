"""batchlab: the shared code of the book 《Batch Size 核心概念》.

**In a notebook**, one import reaches everything the chapters use (the habit of d2l's
``from d2l import torch as d2l``)::

    import batchlab as bl
    job = bl.CASE_STUDY.job      # the 原文's case
    bl.stage_memory(job).peak_memory_fraction

Each name is defined in one module of one layer (the table :data:`SURFACE`; the API reference lists
them under their modules) and loaded on first use, so ``bl.stage_memory`` does not import torch and the
browser, which runs ``formulas`` and ``page``, never does. Inside the package every module imports a
name from the module that defines it, never from here.

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
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

SURFACE: dict[str, tuple[str, ...]] = {
    # 公式：数字进、数字出（不需要 torch）
    "formulas.batching": ("GRAD_ACCUM_READINGS", "plan_batch"),
    "formulas.effects": ("batch_effects", "EFFECTS", "MEMORY_EFFECT"),
    "formulas.job": ("Job",),
    "formulas.memory": ("activation_basis", "bytes_per_param", "grow_micro_batch", "layer_activation_bytes",
                        "logit_bytes", "stage_memory"),
    "formulas.partition": ("stage_forward_flops",),
    "formulas.measured_timeline": ("OUTLIER_FACTOR", "outlier_ops", "sibling_ratios"),
    "formulas.pipeline_schedules": ("bubble_fraction", "pipeline_timeline", "schedule_label", "SCHEDULES"),
    "formulas.presets": ("count_params", "get_config"),
    "formulas.rampup": ("ramp_stages", "Rampup"),
    "formulas.roofline": ("arithmetic_intensity", "DEVICE_PRESETS"),
    "formulas.scaling": ("fit_steps_samples", "LR_RULES", "samples_over_min", "scale_lr", "steps_over_min"),
    "formulas.throughput": ("mfu", "model_flops_per_token", "model_step"),
    "formulas.tune": ("runnable_micro_batch_sizes", "tune"),
    # 原文：案例数据与判定标准
    "lecture.audit": ("audit_case", "matching_settings", "memory_grid", "modelled_speedup"),
    "lecture.case": ("CASE_STUDY", "CASE_STUDY_TUNED"),
    "lecture.claims": ("CLAIMS",),
    "lecture.noise_growth": ("levels_off", "rises"),
    "lecture.replan": ("ASSUMED_LINK_BANDWIDTHS", "HYPOTHETICAL_CURVE", "recommendation_moves", "REPLAN_MODEL"),
    "lecture.verdicts": ("beats", "best_rate_grows", "fluctuation_ratio", "holds_in_every_seed", "in_band",
                         "late_oscillation", "loss_after", "lowest_at_budgets", "moved_besides", "only_memory_moves",
                         "samples_to_target", "straight_line_residual", "UNTESTABLE", "update_verdict",
                         "verdict_over_seeds",
                         "wins_as_prescribed", "wins_per_seed"),
    # 测量：在读者的设备上用 torch 实测
    "measure.accumulation": ("accumulation_error", "accumulation_training", "allreduce_error", "batch_gradients",
                             "BatchNormLM", "relative_gap"),
    "measure.data": ("make_corpus",),
    "measure.device": ("select_device",),
    "measure.device_memory": ("describe", "memory_info"),
    "measure.matmul": ("bench_matmul", "measure_ceilings"),
    "measure.memory": ("find_micro_batch", "model_state_bytes", "saved_activation_bytes", "timed_step"),
    "measure.model": ("BigramLM", "build_model", "GPT"),
    "measure.noise": ("gradient_cloud", "gradient_trace_cov", "minibatch_error", "noise_over_training",
                      "noise_scale_from_batches", "noise_scale_simple", "per_sample_grads"),
    "measure.npu_smi": ("parse_npu_smi", "read_npu_smi", "sample_text"),
    "measure.pipeline_distributed": ("run_pipeline_distributed",),
    "measure.pipeline_local": ("pipeline_batch", "run_pipeline_local"),
    "measure.ramp": ("NoiseRule", "ramp_runs"),
    "measure.train": ("steps_to_target", "sweep", "train"),
    # 网页也运行的部分：探索器的声明、给人读的数字
    "page.batch": ("BatchExplorer",),
    "page.memory": ("MemoryExplorer",),
    "page.noise": ("NoiseExplorer",),
    "page.numbers": ("count", "decimal", "dropout", "estimate", "float_gap", "labelled", "learning_rate", "listed",
                     "percent", "size", "span", "throughput"),
    "page.tradeoff": ("TradeoffExplorer",),
    # 图、控件、表格与练习
    "ui.claims": ("claim_card",),
    "ui.convergence": ("plot_loss_curve", "plot_steps_samples", "plot_training_curves"),
    "ui.diagrams": ("draw_batch_anatomy",),
    "ui.efficiency": ("plot_matmul_rates", "plot_roofline"),
    "ui.exercises": ("check",),
    "ui.explorer_widget": ("ExplorerWidget",),
    "ui.memory": ("plot_memory_audit", "plot_memory_by_batch", "plot_schedule_memory"),
    "ui.misconceptions": ("plot_early_late", "plot_lr_sweep", "plot_ramp", "plot_what_moves", "ramp_table"),
    "ui.names": ("name",),
    "ui.noise": ("plot_estimate_error", "plot_noise_growth", "plot_variance_curve"),
    "ui.pipeline": ("plot_pipeline_timelines", "plot_schedule_comparison"),
    "ui.precision": ("accumulation_table", "plot_accumulation_error", "training_table"),
    "ui.schedules": ("best_moves", "plot_schedule_runs", "schedule_bubble_table", "schedule_speed_table",
                     "tensor_parallel_speeds", "tensor_parallel_table", "tokens_by_schedule"),
    "ui.style": ("show_figure",),
    "ui": ("style",),
    "ui.tables": ("text_table",),
}
"""The notebooks' public names, by the module (under ``batchlab.``) that defines each one. A name that
is a module (``style``) is that module."""

_HOME = {name: module for module, names in SURFACE.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """``bl.<name>``: the name from its defining module, imported on first use."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'batchlab' has no attribute {name!r}")
    home = importlib.import_module(f"batchlab.{module}")
    value = getattr(home, name) if hasattr(home, name) else importlib.import_module(f"batchlab.{module}.{name}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
