"""Choosing the micro-batch size (sections 4.3–4.4) as plain numbers: every candidate, its bubble, its
memory and its modelled speed, and the best one that fits (pure math, no torch).

At a fixed global batch, data-parallel degree and pipeline depth, the only free choice is the
micro-batch size b: a divisor of global_batch / data_parallel, giving m = global_batch / (b · dp)
micro-batches (1F1B needs m ≥ p, :func:`batchlab.formulas.pipeline_schedules.check_runnable`). For each, this
module puts side by side what the book computes in separate chapters:

* the bubble (p − 1)/(m + p − 1) and the modelled tokens/s (:func:`batchlab.formulas.throughput.model_step`,
  with a rate curve: measured, or a device preset's roofline, :meth:`batchlab.formulas.roofline.DevicePeak.curve`);
* the worst stage's peak memory against the device (:func:`batchlab.formulas.memory.stage_memory`), under
  the job's own attention kind (``Job.attention``; the lecture's case keeps the s×s scores, and whoever
  prints the answer names it with :func:`batchlab.formulas.memory.activation_basis`).

:func:`tune` recommends the fitting candidate with the highest modelled tokens/s. When nothing fits it
tries the usual remedies one at a time — recomputation (selective, then full), then more pipeline
stages — and says which one would make some micro-batch fit.
"""
from __future__ import annotations

from dataclasses import replace

from batchlab.formulas.job import LIMITS, Job
from batchlab.formulas.memory import stage_memory
from batchlab.formulas.pipeline_schedules import runnable
from batchlab.formulas.roofline import RateCurve
from batchlab.formulas.throughput import model_step

__all__ = ["tune", "runnable_micro_batch_sizes"]

_RECOMPUTE_ORDER = ("none", "selective", "full")


def runnable_micro_batch_sizes(job: Job, pipeline_stages: int | None = None) -> list[int]:
    """Every micro-batch size b ``job``'s batch arithmetic allows at its global batch and data-parallel
    degree (with ``pipeline_stages`` stages, default the job's): b divides global_batch / data_parallel (a
    whole m), b is within the job's limit, and the schedule can run those m micro-batches (1F1B: m ≥ p,
    :func:`batchlab.formulas.pipeline_schedules.runnable`). Memory is not asked."""
    p = job.pipeline_stages if pipeline_stages is None else pipeline_stages
    per_replica = job.global_batch // job.data_parallel
    return [b for b in range(1, min(per_replica, LIMITS["micro_batch_size"][1]) + 1)
            if per_replica % b == 0 and runnable(job.schedule, p, per_replica // b)]


def _candidates(job: Job, curve: RateCurve, **changes: object) -> list[dict]:
    """One row per runnable micro-batch size of ``job`` with ``changes`` applied (each its own job)."""
    rows = []
    for b in runnable_micro_batch_sizes(job, changes.get("pipeline_stages")):
        candidate = replace(job, micro_batch_size=b, **changes)
        step, memory = model_step(candidate, curve), stage_memory(candidate)
        rows.append({
            "micro_batch_size": b,
            "num_microbatches": candidate.num_microbatches,
            "bubble_fraction": step.bubble_fraction,
            "peak_memory_fraction": memory.peak_memory_fraction,
            "fits": memory.fits,
            "tokens_per_second": step.tokens_per_second,
            "matmul_efficiency": step.matmul_efficiency,
            "step_seconds": step.step_seconds,
        })
    return rows


def _largest_fit(rows: list[dict]) -> int | None:
    """The largest fitting micro-batch size (memory grows with b, so the largest says most)."""
    fitting = [r["micro_batch_size"] for r in rows if r["fits"]]
    return max(fitting) if fitting else None


def _suggest(job: Job, curve: RateCurve) -> tuple[str, dict | None]:
    """When nothing fits: the first single change (recompute, then more stages) that makes some
    micro-batch fit, as a sentence and as the changed fields; then the two together."""
    stronger = _RECOMPUTE_ORDER[_RECOMPUTE_ORDER.index(job.recompute) + 1:]
    n_layer, p0, dp = job.model.n_layer, job.pipeline_stages, job.data_parallel
    deeper = [p for p in range(p0 + 1, n_layer + 1) if n_layer % p == 0]

    def fits_with(**changes: object) -> int | None:
        return _largest_fit(_candidates(job, curve, **changes))

    def devices(p: int, b: int) -> int:
        return replace(job, pipeline_stages=p, micro_batch_size=b).devices

    for mode in stronger:
        if (b := fits_with(recompute=mode)) is not None:
            return f"用 {mode} 重计算后微批次大小 {b} 放得下", {"recompute": mode}
    for p in deeper:
        if (b := fits_with(pipeline_stages=p)) is not None:
            return (f"把流水线阶段数从 {p0} 增大到 {p}（设备数 {p} × {dp} = {devices(p, b)}）后微批次大小 {b} 放得下",
                    {"pipeline_stages": p})
    for mode in stronger:
        for p in deeper:
            if (b := fits_with(recompute=mode, pipeline_stages=p)) is not None:
                return (f"用 {mode} 重计算并把流水线阶段数从 {p0} 增大到 {p}（设备数 {devices(p, b)}）后微批次大小 {b} "
                        "放得下", {"recompute": mode, "pipeline_stages": p})
    return ("重计算和更多流水线阶段（到 n_layer = "
            f"{n_layer}）都不够：需要更大的显存、ZeRO-1、更低的精度或更短的序列"), None


def tune(job: Job, curve: RateCurve) -> dict:
    """Every runnable micro-batch size of ``job`` (its own micro-batch size is one choice among them), and
    the recommended one.

    Candidates: each divisor b of global_batch / data_parallel, except (1F1B) those with fewer
    micro-batches than stages, each as ``dataclasses.replace(job, micro_batch_size=b)``. Each row is a
    dict with ``micro_batch_size``, ``num_microbatches``, ``bubble_fraction``, ``peak_memory_fraction``
    (worst stage / device), ``fits``, ``tokens_per_second`` (whole job,
    :func:`batchlab.formulas.throughput.model_step` on ``curve``), ``matmul_efficiency`` and ``step_seconds``.

    Returns ``candidates``, ``recommended`` (the fitting candidate with the highest modelled tokens/s, or
    None), ``suggestion`` (None when something fits; else a Chinese sentence naming the first change
    that makes some micro-batch fit) and ``suggested_change`` (that change as job fields to replace, e.g.
    ``{"recompute": "selective"}``; None if none helps or nothing needed).
    """
    if not isinstance(job, Job):
        raise ValueError(f"job = {job!r}：必须是 Job（batchlab.formulas.job.Job）")
    if not isinstance(curve, RateCurve):
        raise ValueError(f"curve = {curve!r}：必须是 RateCurve（实测点，或 DevicePeak.curve 的屋顶线）")
    rows = _candidates(job, curve)
    fitting = [r for r in rows if r["fits"]]
    recommended = max(fitting, key=lambda r: r["tokens_per_second"]) if fitting else None
    suggestion = change = None
    if recommended is None:
        suggestion, change = _suggest(job, curve)
    return {"candidates": rows, "recommended": recommended, "suggestion": suggestion, "suggested_change": change}
