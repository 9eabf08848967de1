"""The bubble-versus-matmul trade-off of section 4.4 as plain numbers (pure math, no torch).

A pipeline step runs each micro-batch forward and backward through every stage. With uniform stage
costs it lasts (m + p − 1) time slots of one micro-batch's forward + backward on one stage, of which
each stage is busy m: the bubble (p − 1)/(m + p − 1). At a fixed global batch, a larger micro-batch
means fewer micro-batches (a bigger bubble) but larger matrix multiplications (M = micro-batch ×
sequence length rows), which a device runs at a higher fraction of its peak. This module puts both
into one modelled step time, so the trade-off can be computed instead of argued.

**FLOPs** (Narayanan et al. 2021, appendix "Floating-point operations"; the counts live beside the parameter
counts in :mod:`batchlab.formulas.presets`): a transformer layer's forward pass costs 24·b·s·h²·(1 + s/(6h))
FLOPs (its matmuls), the output head 2·b·s·h·V; the backward pass twice the forward. The paper's Eq. 3
(§5.1), F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) per iteration, *assumes full activation recomputation*:
the layers run four forward-equivalents (forward, the recomputed forward, backward = 2), 4 × 24 = 96, while
the head is not recomputed (forward + backward = 6·B·s·h·V = 96·B·s·l·h² · V/(16·l·h)). Without
recomputation — this module's default — the layers run three (72 = 96 × 3/4) and the same 6·B·s·h·V is
72·B·s·l·h² · V/(12·l·h): per token 72·l·h²·(1 + s/(6h) + V/(12·l·h)). That form is derived here from the
paper's counts, not printed in it; Megatron-LM's own throughput log (``num_floating_point_operations`` in
megatron/training/training.py) also counts three passes. With ``recompute="full"`` this module gives Eq. 3
per token, 96·l·h²·(1 + s/(6h) + V/(16·l·h)).

**Achieved FLOP/s** at M rows comes from a *rate curve*: measured points (M, FLOP/s) from
:mod:`batchlab.measure.matmul` on the reader's device, interpolated on log–log axes and held flat outside
the measured range, or a device preset's roofline.
"""
from __future__ import annotations

from dataclasses import dataclass

from batchlab.formulas.checks import positive
from batchlab.formulas.job import Job
from batchlab.formulas.pipeline_schedules import BACKWARD_PER_FORWARD, bubble_fraction
from batchlab.formulas.presets import head_forward_flops, layer_forward_flops
from batchlab.formulas.roofline import RateCurve

__all__ = ["model_flops_per_token",
           "mfu", "StepModel", "model_step"]

def _training_flops(layers: float, head: float, recompute: str) -> float:
    """Forward + backward of ``layers`` and ``head`` forward FLOPs; full recomputation runs the layers'
    forward once more (selective recomputation's extra attention work is small and not counted)."""
    return (1 + BACKWARD_PER_FORWARD) * (layers + head) + (layers if recompute == "full" else 0.0)


def model_flops_per_token(job: Job) -> float:
    """Training FLOPs per token of ``job``'s model and sequence length (module docstring): without
    recomputation 72·l·h²·(1 + s/(6h) + V/(12·l·h)), derived from Narayanan et al. 2021's counts with three
    passes; with full recomputation their Eq. 3 per token, 96·l·h²·(1 + s/(6h) + V/(16·l·h))."""
    config, s = job.model, job.seq_len
    layers = config.n_layer * layer_forward_flops(config, 1, s) / s
    return _training_flops(layers, head_forward_flops(config, 1, s) / s, job.recompute)


def mfu(tokens_per_second: float, job: Job, peak_flops: float) -> float:
    """Model FLOPs utilisation of ``job`` at a measured throughput (tokens/s of the whole job):
    tokens/s × :func:`model_flops_per_token` / (devices × ``peak_flops``, one device's FLOP/s). Above 100 %
    is impossible, so it is refused: the throughput, the device count or the peak is wrong."""
    value = (positive("tokens_per_second", tokens_per_second) * model_flops_per_token(job)
             / (job.devices * positive("peak_flops", peak_flops)))
    if value > 1:
        raise ValueError(f"MFU = {value:.0%}：超过 100% 不可能——tokens_per_second = {tokens_per_second:g} 对 "
                         f"{job.devices} 张峰值 {peak_flops / 1e12:g} TFLOP/s 的卡太大，吞吐、卡数或峰值有误")
    return value


@dataclass(frozen=True)
class StepModel:
    """One modelled training step of one pipeline replica."""

    micro_batch_size: int
    num_microbatches: int
    pipeline_stages: int
    rows: int
    """M = micro_batch_size × seq_len: the rows of every matmul in a layer."""
    matmul_efficiency: float
    slot_seconds: float
    """Forward + backward of one micro-batch on the busiest stage."""
    bubble_fraction: float
    step_seconds: float
    tokens_per_second: float
    """Of the whole job (all data-parallel replicas), communication not counted."""


def model_step(job: Job, curve: RateCurve) -> StepModel:
    """Modelled step of ``job``: (m + p − 1) slots of the busiest stage's forward + backward, each matmul
    at ``curve``'s rate for M = micro × seq rows. GPipe and 1F1B take the same time (they differ in
    memory); full recomputation adds one more forward of the layers to each slot."""
    b, s, p, m = job.micro_batch_size, job.seq_len, job.pipeline_stages, job.num_microbatches
    rows = job.tokens_per_microbatch
    layer, head = layer_forward_flops(job.model, b, s), head_forward_flops(job.model, b, s)
    busiest = max(_training_flops(stage.num_layers * layer, head if stage.has_head else 0.0, job.recompute)
                  for stage in job.stages)
    slot = busiest / curve.rate(rows)
    step = (m + p - 1) * slot
    return StepModel(b, m, p, rows, curve.efficiency(rows), slot, bubble_fraction(p, m), step,
                     job.global_batch * s / step)
