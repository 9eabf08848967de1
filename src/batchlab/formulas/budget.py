"""What a measured run will cost, estimated from its shape before it starts, and what it may cost
(pure math, no torch).

Each flag of the calculator has its own bound, but what a run costs is their product: 2²⁰ micro-batches of
one token pass a FLOP cap and still issue two million Python-level forward and backward ops; a sequence of
10,000 tokens at width 4 costs few FLOPs but keeps a·s²·b attention scores per layer (the memory model of
4.3), gigabytes. So a run is estimated by what it spends — ops, FLOPs, bytes held at once, activation bytes
written — and each quantity has one rule: its budget. :func:`check_budget` refuses the first quantity over
its budget with one line that names it and what reduces it.

* :func:`run_cost` — one pipeline step of a :class:`~batchlab.formulas.job.Job` run with torch
  (``python -m batchlab pipeline --run local|distributed``), against :data:`RUN_BUDGET`;
* :func:`bench_cost` — a matmul benchmark (``python -m batchlab bench-matmul``), against
  :data:`BENCH_BUDGET` (its duration is estimated on the device, from a probe call, by the benchmark itself).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Mapping, Sequence

from batchlab.formulas.checks import whole
from batchlab.formulas.job import GIB, Job
from batchlab.formulas.memory import TOKEN_ID_BYTES, layer_activation_bytes, stage_activation_bytes, stage_memory
from batchlab.formulas.precision import ELEMENT_BYTES
from batchlab.formulas.presets import count_params
from batchlab.formulas.throughput import model_flops_per_token

__all__ = ["RunCost", "RUN_BUDGET", "TRANSIENT_LAYERS", "run_cost", "BenchCost", "BENCH_BUDGET", "MAX_BENCH_BYTES",
           "bench_cost", "over_budget", "check_budget"]


def _rule(label: str, unit: str, reduce: tuple[str, ...]) -> dict:
    """A quantity's rule: what readers call it, its unit ("B" is shown in MiB/GiB) and the inputs that shrink it."""
    return {"label": label, "unit": unit, "reduce": reduce}


@dataclass(frozen=True)
class RunCost:
    """What one measured pipeline run spends, all its steps and processes together."""

    ops: int = field(metadata=_rule("前向和反向操作数（2 × 阶段数 × 微批次数 × 步数）", "",
                                    ("num_microbatches", "pipeline_stages")))
    """Stage forwards and backwards, each dozens of Python-level torch calls (milliseconds here at any width)."""
    flops: float = field(metadata=_rule("估计训练 FLOPs", "FLOP", ("num_microbatches", "micro_batch_size", "seq_len",
                                                                "d_model")))
    peak_bytes: int = field(metadata=_rule("估计同时占用的内存", "B", ("seq_len", "micro_batch_size", "d_model",
                                                                 "num_microbatches")))
    """Weights and gradients, the in-flight activations of every stage, the layer being run, the batch."""
    activation_bytes: int = field(metadata=_rule("估计写出的激活（含注意力分数 a·s²·b）", "B",
                                                 ("seq_len", "micro_batch_size", "num_microbatches")))
    """Every activation every micro-batch writes on every stage: the elementwise work FLOPs leave out."""


RUN_BUDGET = RunCost(ops=512, flops=4e10, peak_bytes=GIB, activation_bytes=GIB // 4)
"""What a measured run may spend: each about a second of work on an idle 2-core CPU and a few on a busy one
(measured here: 1.3–4 ms an op, ~40 GFLOP/s at width 128–256, ~200 MB/s of activations at width 4), beside
the 2–5 s it takes to start torch, so a run answers within seconds on a laptop.
The README's ``pipeline --model tiny --n-layer 4 --d-model 128 --run local`` (4 stages × 8 micro-batches of
4 × 64 tokens) spends 64 ops, 1.1e10 FLOPs, 34 MiB held and 75 MiB written; ``--run distributed`` three steps of it."""

TRANSIENT_LAYERS = 2
"""The layer being run, counted twice over what the memory model keeps: its forward's temporaries (the scores
before masking and softmax) and, in its backward, the gradient of each kept tensor."""


def run_cost(job: Job, steps: int = 1, processes: int = 1) -> RunCost:
    """What ``steps`` steps of ``job`` cost when run with torch by ``processes`` processes (one per stage
    when distributed, each building the whole model before keeping its stage).

    ops = steps · 2·p·m; FLOPs = steps · tokens · :func:`~batchlab.formulas.throughput.model_flops_per_token`;
    bytes held = every stage's peak of :func:`~batchlab.formulas.memory.stage_memory` (states and in-flight
    activations, all stages on one machine) + the other processes' copies of the weights
    + :data:`TRANSIENT_LAYERS` × one layer's activations + the batch's token ids and targets (int64);
    activation bytes written = steps · m · Σ :func:`~batchlab.formulas.memory.stage_activation_bytes`.
    """
    steps, processes = whole("steps", steps), whole("processes", processes)
    if not isinstance(job, Job):
        raise ValueError(f"job = {job!r}：必须是 Job（batchlab.formulas.job.Job）")
    m, p = job.num_microbatches, job.pipeline_stages
    tokens = job.global_batch * job.seq_len
    weights = count_params(job.model) * job.element_bytes
    held = sum(stage.peak_bytes for stage in stage_memory(job).stages)
    peak = (held + (processes - 1) * weights + TRANSIENT_LAYERS * layer_activation_bytes(job, recompute="none")
            + 2 * TOKEN_ID_BYTES * tokens)
    written = m * sum(stage_activation_bytes(job, stage) for stage in job.stages)
    return RunCost(ops=steps * 2 * p * m, flops=model_flops_per_token(job) * tokens * steps, peak_bytes=peak,
                   activation_bytes=steps * written)


@dataclass(frozen=True)
class BenchCost:
    """What a matmul benchmark ``[m, k] × [k, n]`` for every m spends before its samples are timed."""

    shapes: int = field(metadata=_rule("要测的 m 的个数", "", ("ms",)))
    """One calibration and its samples each, and one row of the answer."""
    peak_bytes: int = field(metadata=_rule("矩阵占用的内存", "B", ("k", "n", "m")))
    """The weight, the largest input and output; a 16-bit weight is drawn in fp32 first."""
    drawn: int = field(metadata=_rule("随机生成的矩阵元素数", "", ("k", "n", "m")))
    """The weight once, each input twice (once to time one call, once to sample): seconds on a CPU per 10⁸."""


MAX_BENCH_BYTES = GIB
"""The most bytes of matrices a benchmark started by the CLI holds: a laptop's spare memory, and under a second
to draw at random; the lecture's MLP at micro-batch 4 (``--m 4096 --k 1600 --n 6400``) needs 164 MiB."""
BENCH_BUDGET = BenchCost(shapes=64, peak_bytes=MAX_BENCH_BYTES, drawn=2**28)
"""What a benchmark may spend before timing: 64 shapes (the default sweep has 8), 1 GiB, 2²⁸ random elements."""


def bench_cost(ms: Sequence[int], k: int, n: int, dtype: str = "float32") -> BenchCost:
    """What benchmarking ``[m, k] × [k, n]`` for every m of ``ms`` in ``dtype`` costs (counts as given: the
    benchmark checks each size itself)."""
    e = ELEMENT_BYTES[dtype]
    largest = max(ms, default=0)
    weight = k * n
    peak = e * (weight + largest * (k + n)) + (ELEMENT_BYTES["float32"] * weight if e != 4 else 0)
    return BenchCost(shapes=len(ms), peak_bytes=peak, drawn=weight + 2 * k * sum(ms))


def over_budget(cost: RunCost | BenchCost, budget: RunCost | BenchCost) -> list[str]:
    """The names of ``cost``'s quantities over ``budget`` (the same dataclass), in declaration order."""
    return [f.name for f in fields(cost) if getattr(cost, f.name) > getattr(budget, f.name)]


def _amount(value: float, unit: str) -> str:
    """A count as itself (``=``), an estimate to a few digits (``≈``): 1,025 MiB against 1,024, not 1 GiB against 1."""
    if unit == "B":
        return f"≈ {value / GIB:.3g} GiB" if value >= 10 * GIB else f"≈ {math.ceil(value / 2**20):,} MiB"
    if unit:
        return f"≈ {value:.3g} {unit}"
    return f"= {int(value):,}" if value < 1e15 else f"= {value:.3g}"


def check_budget(cost: RunCost | BenchCost, budget: RunCost | BenchCost,
                 names: Mapping[str, str] | None = None) -> RunCost | BenchCost:
    """``cost`` if every quantity is within ``budget``; else ValueError, one line: the first quantity over, its
    estimate and budget, and what reduces it (``names`` maps the inputs to what the reader typed, e.g. flags)."""
    for name in over_budget(cost, budget):
        rule = next(f.metadata for f in fields(cost) if f.name == name)
        shown = [(names or {}).get(r, r) for r in rule["reduce"]]
        reduce = shown[0] if len(shown) == 1 else f"{'、'.join(shown[:-1])} 或 {shown[-1]}"
        value, limit = getattr(cost, name), getattr(budget, name)
        raise ValueError(f"{rule['label']} {_amount(value, rule['unit'])}，超过了上限 "
                         f"{_amount(limit, rule['unit'])[2:]}：请减小 {reduce}")
    return cost

