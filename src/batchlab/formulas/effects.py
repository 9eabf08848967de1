"""Everything one batch configuration sets, side by side (4.6, 误区一: "batch size only affects memory").

:func:`batch_effects` gathers, for one training job, the quantities the book's chapters model one at a
time: the busiest stage's peak memory (4.3), the matmul efficiency at M = micro-batch × sequence rows
(4.4), the pipeline bubble (4.4) and the communication of one step (:mod:`batchlab.formulas.comm`). Steps to a
target loss cannot be computed from shapes; the chapter measures them on a small model and adds them
under the key ``"steps_to_target"``. :func:`effect_ratios` divides two such dicts, which is what
:func:`batchlab.lecture.verdicts.only_memory_moves` judges.
"""
from __future__ import annotations

from typing import Mapping

from batchlab.formulas.comm import step_communication
from batchlab.formulas.job import GIB, Job
from batchlab.formulas.memory import stage_memory
from batchlab.formulas.roofline import RateCurve
from batchlab.formulas.throughput import model_step

__all__ = ["EFFECTS", "MEMORY_EFFECT", "batch_effects", "effect_ratios"]

# What a batch configuration moves, in code (keys) and as readers see them (values).
EFFECTS: dict[str, str] = {
    "steps_to_target": "达到目标损失的步数",
    "peak_memory_gib": "最满阶段的显存（GiB）",
    "matmul_efficiency": "矩阵乘法效率",
    "bubble_fraction": "气泡占比",
    "p2p_messages": "每步点对点消息数",
    "allreduce_mib_per_sample": "每个样本分摊的 All-Reduce（MiB）",
}
MEMORY_EFFECT = "peak_memory_gib"


def batch_effects(job: Job, curve: RateCurve) -> dict[str, float]:
    """The shape-determined entries of :data:`EFFECTS` for ``job`` (all but ``"steps_to_target"``): its
    memory, step and communication, all of the one job."""
    step, memory, comm = model_step(job, curve), stage_memory(job), step_communication(job)
    return {
        "peak_memory_gib": max(memory.peak_bytes_per_stage) / GIB,
        "matmul_efficiency": step.matmul_efficiency,
        "bubble_fraction": step.bubble_fraction,
        "p2p_messages": comm.p2p_messages,
        "allreduce_mib_per_sample": comm.allreduce_bytes_per_sample / 2**20,
    }


def effect_ratios(new: Mapping[str, float], old: Mapping[str, float]) -> dict[str, float]:
    """new / old for every key of :data:`EFFECTS` present in both (in :data:`EFFECTS` order)."""
    shared = [k for k in EFFECTS if k in new and k in old]
    if not shared:
        raise ValueError(f"两组结果没有共同的量：{sorted(new)} 与 {sorted(old)}")
    for k in shared:
        if not old[k] > 0:
            raise ValueError(f"{k} = {old[k]!r}：作分母的原值必须为正")
    return {k: new[k] / old[k] for k in shared}
