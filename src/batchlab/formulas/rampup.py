"""Batch-size ramp-up as Megatron-LM reads ``--rampup-batch-size <start> <increment> <ramp-samples>``: the
global batch at consumed sample n, and what each ramp stage does to the pipeline of one
:class:`~batchlab.formulas.job.Job`.

Megatron-LM's ``RampupBatchsizeNumMicroBatchesCalculator`` (``megatron/core/num_microbatches_calculator.py`` at
commit ``0b9bc2088b6d6c858275d02638064cc7e0bf8b70``, the last one that has it: #4411 of 2026-04-21 replaced it with
the step schedule ``--step-batch-size-schedule`` and left ``--rampup-batch-size`` ignored): over
``k = (G − start) / increment`` increments, each lasting ``ramp_samples / k`` samples, the batch at consumed
sample n is ``start + int(n / (ramp_samples / k)) · increment``, and G once n > ramp_samples. The training
loop calls it before every step and then adds the step's batch to n. ``tests/test_rampup.py`` ports that
class and checks this module against it on random configurations.

Pure Python (no torch, no numpy), like every formula.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

from batchlab.formulas.batching import plan_batch
from batchlab.formulas.checks import at_most, divides, whole
from batchlab.formulas.job import LIMITS, Job
from batchlab.formulas.pipeline_schedules import bubble_fraction

__all__ = ["Rampup", "RampStage", "RAMP_SAMPLES_LIMIT", "RAMP_STAGES_LIMIT", "check_ramp_target", "ramp_stages",
           "noise_batch"]

RAMP_SAMPLES_LIMIT = 2**53
"""The most ramp samples a ramp may last: Megatron-LM divides the consumed samples by a float, and past 2⁵³ a
float no longer tells neighbouring sample counts apart (10¹⁵ sequences is far past any run)."""
RAMP_STAGES_LIMIT = 1024
"""The most ramp stages :func:`ramp_stages` lists, one validated job each (Megatron-LM's own examples ramp in
about a hundred: 16 → 1,536 in steps of 16 is 96)."""


@dataclass(frozen=True)
class Rampup:
    """A linear ramp of the global batch from ``start`` to ``global_batch`` in steps of ``increment`` over
    ``ramp_samples`` consumed samples (Megatron-LM's ``--rampup-batch-size``), validated when it is made.

    Megatron-LM's own checks, one Chinese line each: every count a whole number ≥ 1; start below the target
    (Megatron-LM asserts start ≤ G, and at start = G divides by zero: no increment to spread the samples
    over); G − start a multiple of the increment; ramp samples ≥ 1 (Megatron-LM allows 0 and then divides
    0 by 0.0 at the first sample)."""

    start: int
    increment: int
    ramp_samples: int
    global_batch: int

    def __post_init__(self) -> None:
        whole("rampup_start", self.start)
        whole("rampup_increment", self.increment)
        whole("rampup_samples", self.ramp_samples)
        at_most("rampup_samples", self.ramp_samples, RAMP_SAMPLES_LIMIT, "上限")
        whole("global_batch", self.global_batch)
        at_most("global_batch", self.global_batch, LIMITS["global_batch"][1], "上限")
        if self.start >= self.global_batch:
            raise ValueError(f"rampup_start = {self.start}：爬升的起始批次必须小于目标 global_batch = "
                             f"{self.global_batch}（相等时没有可爬升的增量，Megatron-LM 会除以零）")
        divides("global_batch − rampup_start", self.global_batch - self.start, "rampup_increment", self.increment)

    @property
    def num_increments(self) -> int:
        """k = (G − start) / increment: the ramp's steps (its stages are k + 1, the last one at G)."""
        return (self.global_batch - self.start) // self.increment

    @property
    def samples_per_increment(self) -> float:
        """ramp_samples / k, as Megatron-LM keeps it: a float (the batch changes where a multiple of it falls)."""
        return self.ramp_samples / self.num_increments

    def global_batch_at(self, consumed_samples: int) -> int:
        """The global batch of the step that starts after ``consumed_samples`` samples (Megatron-LM's
        ``update``): start + ⌊n / (ramp_samples / k)⌋ · increment while n ≤ ramp_samples, then G. The float
        division is Megatron-LM's, kept on purpose: at a boundary the batch is the one Megatron-LM runs."""
        n = whole("consumed_samples", consumed_samples, minimum=0)
        if n > self.ramp_samples:
            return self.global_batch
        return self.start + int(n / self.samples_per_increment) * self.increment

    def num_microbatches_at(self, consumed_samples: int, micro_batch_size: int, data_parallel: int = 1) -> int:
        """m = G_n / (b · d) for that step, refused in batching's own line when b · d does not divide G_n
        (Megatron-LM's consistency check, which every training step runs)."""
        return plan_batch(micro_batch_size, 1, data_parallel,
                          global_batch=self.global_batch_at(consumed_samples)).num_microbatches

    def stage_start(self, index: int) -> int:
        """The first consumed sample at which the batch is at least start + index · increment (index ≤ k)."""
        target = self.start + index * self.increment
        # ⌈index · ramp_samples / k⌉ exactly, then the float reading's neighbour: the batch only grows with n
        n = -(-index * self.ramp_samples // self.num_increments)
        while n > 0 and self.global_batch_at(n - 1) >= target:
            n -= 1
        while self.global_batch_at(n) < target:
            n += 1
        return n


@dataclass(frozen=True)
class RampStage:
    """One stage of a ramp under a job's pipeline: its batch, the consumed samples it covers, the steps the
    training loop runs at it, and m and the bubble — or the job's own refusal of that batch."""

    global_batch: int
    first_sample: int
    samples: int | None
    """Consumed samples from this stage's first to the next one's (None: the last stage lasts the rest)."""
    steps: int | None
    """Optimizer steps at this batch when each step adds its batch to the consumed samples, as the training
    loop does (0: the previous step already passed this stage; None for the last stage)."""
    num_microbatches: int | None
    """m = G_i / (b · d); None where b · d does not divide G_i."""
    bubble_fraction: float | None
    refusal: str | None
    """The job's own line refusing this batch (m < p, m not whole, …); None where the stage runs."""

    def to_dict(self) -> dict:
        """The stage as JSON-ready data (the CLI's ``--json``)."""
        return dataclasses.asdict(self)


def check_ramp_target(ramp: Rampup, job: Job) -> None:
    """A ramp grows the batch to ``job``'s global batch: another target is refused in one line."""
    if ramp.global_batch != job.global_batch:
        raise ValueError(f"rampup 的目标批次 {ramp.global_batch} 与 global_batch = {job.global_batch} 不同")


def ramp_stages(job: Job, ramp: Rampup) -> list[RampStage]:
    """Each stage of ``ramp`` (whose target is ``job``'s global batch) under ``job``'s pipeline: the stage's
    job is ``replace(job, global_batch=G_i)``, so a batch the job cannot run is refused in the job's own line.
    More than :data:`RAMP_STAGES_LIMIT` stages are refused."""
    check_ramp_target(ramp, job)
    at_most("爬升阶段数 (global_batch − rampup_start) / rampup_increment + 1", ramp.num_increments + 1,
            RAMP_STAGES_LIMIT, "上限")
    starts = [ramp.stage_start(i) for i in range(ramp.num_increments + 1)]
    stages, consumed = [], 0
    for i, first in enumerate(starts):
        batch = ramp.start + i * ramp.increment
        last = i == ramp.num_increments
        steps = None if last else max(0, -(-(starts[i + 1] - consumed) // batch))
        consumed += (steps or 0) * batch  # the training loop adds each step's batch to the consumed samples
        try:
            staged = dataclasses.replace(job, global_batch=batch)
            m, refusal = staged.num_microbatches, None
            bubble = bubble_fraction(staged.pipeline_stages, m, staged.schedule, staged.virtual_stages)
        except ValueError as err:
            refusal, bubble = str(err), None
            try:
                m = plan_batch(job.micro_batch_size, job.pipeline_stages, job.data_parallel,
                               global_batch=batch).num_microbatches
            except ValueError:
                m = None
        stages.append(RampStage(batch, first, None if last else starts[i + 1] - first, steps, m, bubble, refusal))
    return stages


def noise_batch(b_simple: float, allowed: Sequence[int], current: int | None = None) -> int:
    """The batch a noise-driven ramp takes once it has measured the simple noise scale B_simple: the largest of
    ``allowed`` that is at most B_simple (at least the smallest allowed), and never below ``current``.

    Why at most B_simple: below the noise scale a step's gradient is mostly noise, so a bigger batch buys
    almost proportionally fewer steps; above it extra samples are mostly wasted (McCandlish et al. 2018).
    Why never smaller: a ramp only grows, like Megatron-LM's. An estimate that is not a finite positive
    number (the two-batch estimate of ‖G‖² can come out ≤ 0 near a minimum) keeps ``current``.
    ``allowed``: the sizes the job can run (multiples of b · d with m ≥ p, say)."""
    sizes = sorted({whole("allowed", b) for b in allowed})
    if not sizes:
        raise ValueError("allowed 为空：至少给出一个可用的批大小")
    if current is not None:
        current = whole("current", current)
    if not (isinstance(b_simple, (int, float)) and math.isfinite(b_simple) and b_simple > 0):
        return current if current is not None else sizes[0]
    fitting = [b for b in sizes if b <= b_simple]
    chosen = fitting[-1] if fitting else sizes[0]
    return max(chosen, current) if current is not None else chosen
