"""The bubble-versus-matmul trade-off of section 4.4 as plain numbers (pure math, no torch).

A pipeline step runs each micro-batch forward and backward through every stage. With uniform stage
costs it lasts (m + p − 1) time slots of one micro-batch's forward + backward on one stage, of which
each stage is busy m: the bubble (p − 1)/(m + p − 1). At a fixed global batch, a larger micro-batch
means fewer micro-batches (a bigger bubble) but larger matrix multiplications (M = micro-batch ×
sequence length rows), which a device runs at a higher fraction of its peak. This module puts both
into one modelled step time, so the trade-off can be computed instead of argued.

**FLOPs** (Narayanan et al. 2021, §5.1): a transformer layer's forward pass costs
24·b·s·h²·(1 + s/(6h)) FLOPs (its matmuls), the output head 2·b·s·h·V; the backward pass twice the
forward; full recomputation adds one more forward of the layers. Per token of a training step this is
the paper's 72·l·h²·(1 + s/(6h) + V/(12·l·h)) without recomputation and 96·l·h²·(1 + s/(6h) +
V/(16·l·h)) with it.

**Achieved FLOP/s** at M rows comes from a *rate curve*: measured points (M, FLOP/s) from
:mod:`batchlab.measure.matmul` on the reader's device, interpolated on log–log axes and held flat outside
the measured range, or a device preset's roofline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from batchlab.formulas.checks import one_of, positive, whole
from batchlab.formulas.partition import partition_layers
from batchlab.formulas.pipeline_schedules import SCHEDULES, bubble_fraction
from batchlab.formulas.presets import GPTConfig

__all__ = ["layer_forward_flops", "head_forward_flops", "model_flops_per_token", "RateCurve",
           "StepModel", "model_step"]


def layer_forward_flops(config: GPTConfig, micro_batch_size: int, seq_len: int) -> float:
    """One transformer layer's forward matmul FLOPs for one micro-batch: 24·b·s·h²·(1 + s/(6h))."""
    b, s, h = whole("micro_batch_size", micro_batch_size), whole("seq_len", seq_len), config.d_model
    return 24 * b * s * h * h * (1 + s / (6 * h))


def head_forward_flops(config: GPTConfig, micro_batch_size: int, seq_len: int) -> float:
    """The output head's forward FLOPs (logits): 2·b·s·h·V."""
    return 2 * whole("micro_batch_size", micro_batch_size) * whole("seq_len", seq_len) * config.d_model * config.vocab_size


def model_flops_per_token(config: GPTConfig, seq_len: int, recompute: bool = False) -> float:
    """Training FLOPs per token (forward + backward, + one more forward of the layers with full
    recomputation): Narayanan et al. 2021's 72 (or 96)·l·h²·(1 + s/(6h) + V/(12 (or 16)·l·h))."""
    layers = config.n_layer * layer_forward_flops(config, 1, seq_len) / seq_len
    head = head_forward_flops(config, 1, seq_len) / seq_len
    return (4 if recompute else 3) * layers + 3 * head


@dataclass(frozen=True)
class RateCurve:
    """Achieved FLOP/s as a function of M (rows of the matmul), from measured points."""

    rows: tuple[int, ...]
    flops_per_second: tuple[float, ...]
    name: str = "measured"

    def __post_init__(self) -> None:
        if len(self.rows) != len(self.flops_per_second) or not self.rows:
            raise ValueError("rows 与 flops_per_second 必须一一对应且非空")
        for m, f in zip(self.rows, self.flops_per_second):
            whole("rows", m)
            positive("flops_per_second", f)
        if list(self.rows) != sorted(set(self.rows)):
            raise ValueError(f"rows = {self.rows}：必须严格递增")

    @classmethod
    def from_results(cls, results: Sequence[dict], name: str = "measured") -> "RateCurve":
        """From ``bench_matmul``'s ``results`` rows (keys ``m`` and ``tflops``)."""
        pairs = sorted((int(r["m"]), float(r["tflops"]) * 1e12) for r in results)
        return cls(tuple(m for m, _ in pairs), tuple(f for _, f in pairs), name)

    def rate(self, rows: float) -> float:
        """FLOP/s at ``rows``: log–log interpolation, held flat beyond the measured ends."""
        positive("rows", rows)
        ms, fs = self.rows, self.flops_per_second
        if rows <= ms[0]:
            return fs[0]
        if rows >= ms[-1]:
            return fs[-1]
        for (m0, f0), (m1, f1) in zip(zip(ms, fs), zip(ms[1:], fs[1:])):
            if m0 <= rows <= m1:
                t = (math.log(rows) - math.log(m0)) / (math.log(m1) - math.log(m0))
                return math.exp(math.log(f0) + t * (math.log(f1) - math.log(f0)))
        raise AssertionError("unreachable: rows lies inside the measured range")

    @property
    def best(self) -> float:
        return max(self.flops_per_second)

    def efficiency(self, rows: float) -> float:
        """The rate at ``rows`` as a fraction of the best measured rate."""
        return self.rate(rows) / self.best


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


def model_step(config: GPTConfig, seq_len: int, global_batch: int, micro_batch_size: int,
               pipeline_stages: int, data_parallel: int, curve: RateCurve, schedule: str = "1f1b",
               recompute: bool = False) -> StepModel:
    """Modelled step: (m + p − 1) slots of the busiest stage's forward + backward, each matmul at the
    curve's rate for M = micro × seq rows. GPipe and 1F1B take the same time (they differ in memory).
    ``recompute`` (full recomputation) adds one more forward of the layers to each slot."""
    one_of("schedule", schedule, SCHEDULES)
    b, p, dp = whole("micro_batch_size", micro_batch_size), whole("pipeline_stages", pipeline_stages), whole("data_parallel", data_parallel)
    g = whole("global_batch", global_batch)
    if g % (b * dp):
        raise ValueError(f"global_batch = {g} 不能被 micro_batch_size × data_parallel = {b} × {dp} = {b * dp} 整除")
    m = g // (b * dp)
    rows = b * whole("seq_len", seq_len)
    rate = curve.rate(rows)
    stage_flops = []
    for stage in partition_layers(config, p):
        layers = stage.num_layers * layer_forward_flops(config, b, seq_len)
        head = head_forward_flops(config, b, seq_len) if stage.has_head else 0.0
        # forward + backward (twice the forward); full recomputation runs the layers' forward again
        stage_flops.append(3 * (layers + head) + (layers if recompute else 0.0))
    slot = max(stage_flops) / rate
    step = (m + p - 1) * slot
    return StepModel(b, m, p, rows, curve.efficiency(rows), slot, bubble_fraction(p, m), step, g * seq_len / step)
