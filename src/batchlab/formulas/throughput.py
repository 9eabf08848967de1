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

**Tensor and context parallelism.** Each of a stage's t · cp devices does 1/(t · cp) of its FLOPs, on
matmuls of M = b·s/cp rows against [h, 4h/t] (:mod:`batchlab.formulas.roofline`), and each layer adds its
tensor-parallel collectives (:func:`batchlab.formulas.comm.tensor_parallel_bytes_per_layer`) at the device's
link bandwidth, not overlapped with the compute. The bubble is the schedule's
(:func:`batchlab.formulas.pipeline_schedules.bubble_fraction`): the step lasts m slots / (1 − bubble).

**Achieved FLOP/s** at M rows comes from a *rate curve*: measured points (M, FLOP/s) from
:mod:`batchlab.measure.matmul` on the reader's device, interpolated on log–log axes and held flat outside
the measured range, or a device preset's roofline.
"""
from __future__ import annotations

from dataclasses import dataclass

from batchlab.formulas.checks import positive
from batchlab.formulas.comm import tensor_parallel_bytes_per_layer
from batchlab.formulas.job import Job
from batchlab.formulas.pipeline_schedules import BACKWARD_PER_FORWARD, bubble_fraction
from batchlab.formulas.presets import head_forward_flops, layer_forward_flops
from batchlab.formulas.roofline import RateCurve, matmul_rows

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
    """M = micro_batch_size × seq_len / cp: the rows of every matmul in a layer."""
    matmul_efficiency: float
    slot_seconds: float
    """Forward + backward of one micro-batch on the busiest stage, its tensor-parallel collectives included."""
    bubble_fraction: float
    step_seconds: float
    tokens_per_second: float
    """Of the whole job (all data-parallel replicas); of the communication only the tensor-parallel part counts."""
    tensor_parallel_seconds: float = 0.0
    """The tensor-parallel collectives' share of :attr:`slot_seconds` (0 at t = 1)."""


def model_step(job: Job, curve: RateCurve, link_bandwidth: float | None = None) -> StepModel:
    """Modelled step of ``job``: m slots / (1 − the schedule's bubble) — (m + p − 1) slots under GPipe and
    1F1B, which differ in memory only — each slot the busiest stage's forward + backward on one of its
    t · cp devices, each matmul at ``curve``'s rate for M = micro × seq / cp rows, plus its tensor-parallel
    collectives at ``link_bandwidth`` bytes/s (default: the curve's, from its device preset). Full
    recomputation adds one more forward of the layers to each slot.

    ``curve`` must be for the job's t (:func:`~batchlab.formulas.roofline.roofline_curve`): a curve measured
    or built for [M, h] × [h, 4h] says nothing about [M, h] × [h, 4h/t]."""
    t = job.tensor_parallel
    if curve.tensor_parallel != t:
        raise ValueError(f"速率曲线按 tensor_parallel = {curve.tensor_parallel} 的矩阵乘 [M, h] × [h, 4h/t] 给出，"
                         f"作业却是 tensor_parallel = {t}：请用同一个 t 的曲线（roofline_curve / DevicePeak.curve）")
    link = curve.link_bandwidth if link_bandwidth is None else positive("link_bandwidth", link_bandwidth)
    if t > 1 and link is None:
        raise ValueError(f"tensor_parallel = {t}：张量并行每层都要做集合通信，需要卡间带宽 link_bandwidth"
                         "（字节/秒）；这张卡的预设没有查到出处的数字，请自己给出")
    b, s, p, m = job.micro_batch_size, job.seq_len, job.pipeline_stages, job.num_microbatches
    rows = matmul_rows(b, s, job.context_parallel)
    layer, head = layer_forward_flops(job.model, b, s), head_forward_flops(job.model, b, s)
    per_layer_seconds = tensor_parallel_bytes_per_layer(job) / link if t > 1 else 0.0
    share = t * job.context_parallel  # the devices of one stage that split each micro-batch's work
    slots = [(_training_flops(stage.num_layers * layer, head if stage.has_head else 0.0, job.recompute)
              / share / curve.rate(rows), stage.num_layers * per_layer_seconds) for stage in job.stages]
    compute, communication = max(slots, key=sum)
    slot = compute + communication
    bubble = bubble_fraction(p, m, job.schedule, job.virtual_stages)
    step = m * slot / (1 - bubble)
    return StepModel(b, m, p, rows, curve.efficiency(rows), slot, bubble, step,
                     job.global_batch * s / step, communication)
