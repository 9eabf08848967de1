"""The audit of the lecture's case study (原文 4.5), claim by claim, as plain numbers (pure math, no torch).

Each function recomputes one kind of number the lecture reports, with the models of 4.1 (batch
arithmetic), 4.3 (memory) and 4.4 (FLOPs, roofline, bubble); :func:`audit_case` turns them into rows
whose verdict is decided by a stated criterion, so each can come out either way (the tests feed contrary
numbers). The lecture's figures come from :data:`batchlab.lecture.case.CASE_STUDY` ``.reported``; none of them is
an input to a model, only to a comparison.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product

from batchlab.formulas.batching import GRAD_ACCUM_READINGS
from batchlab.formulas.job import ATTENTION_KINDS, RECOMPUTE_MODES, Job
from batchlab.formulas.memory import stage_memory
from batchlab.formulas.precision import PRECISIONS
from batchlab.formulas.presets import PUBLISHED_PARAMS, count_params
from batchlab.formulas.roofline import RateCurve
from batchlab.formulas.throughput import mfu, model_step
from batchlab.lecture.case import CaseConfig

__all__ = ["MEMORY_AXES", "memory_grid", "matching_settings", "memory_can_drop", "modelled_speedup", "AuditRow", "audit_case"]

MemoryKey = tuple[str, str, str, bool, float, str]
"""(schedule, recompute, precision, zero1, dropout, attention)"""
MEMORY_AXES: dict[str, tuple] = {
    # The two schedules of one model chunk per device that the 原文's era ran (its case names no schedule);
    # interleaved and zero-bubble schedules are 4.5's re-plan, not a reading of what the 原文 measured.
    "schedule": ("gpipe", "1f1b"), "recompute": tuple(RECOMPUTE_MODES), "precision": tuple(PRECISIONS),
    "zero1": (False, True), "dropout": (0.0, 0.1), "attention": tuple(ATTENTION_KINDS),
}
"""What the lecture does not say about its case, each choice it could have made: the memory audit tries all."""


def memory_grid(job: Job) -> dict[MemoryKey, float]:
    """The worst stage's peak memory fraction of ``job`` under every combination of :data:`MEMORY_AXES`
    (its optimizer, Adam in the lecture's case, throughout)."""
    return {key: stage_memory(replace(job, **dict(zip(MEMORY_AXES, key)))).peak_memory_fraction
            for key in product(*MEMORY_AXES.values())}


def matching_settings(grid: dict[MemoryKey, float], reported: float, tolerance: float = 0.03) -> list[MemoryKey]:
    """The settings whose modelled fraction lies within ``tolerance`` (absolute) of ``reported``."""
    return [key for key, value in grid.items() if abs(value - reported) <= tolerance]


def memory_can_drop(before: dict[MemoryKey, float], after: dict[MemoryKey, float]) -> list[MemoryKey]:
    """The settings under which the second configuration needs less memory than the first."""
    return [key for key in before if after[key] < before[key]]


def modelled_speedup(before: Job, after: Job, curve: RateCurve) -> float:
    """Modelled tokens/s of ``after`` over ``before`` (4.4's step model: bubble + matmul rate at M = micro × seq)."""
    return model_step(after, curve).tokens_per_second / model_step(before, curve).tokens_per_second


@dataclass(frozen=True)
class AuditRow:
    """One claim of the lecture, what the book computes, and whether the criterion says it holds."""

    claim: str
    reported: str
    computed: str
    criterion: str
    reproduced: bool


def audit_case(before: CaseConfig, after: CaseConfig, curves: dict[str, RateCurve],
               peak_flops: tuple[float, float]) -> list[AuditRow]:
    """Every number of the case, recomputed; the verdict column is decided by each row's criterion."""
    rows = []
    params = count_params(before.job.model)
    released = PUBLISHED_PARAMS.get(before.job.model.name)
    same = "，与发布的检查点相同" if params == released else ""
    rows.append(AuditRow("模型参数量 1.5B", "1.5B", f"{params:,}{same}", "与 1.5×10⁹ 相差不超过 5%",
                         abs(params - 1.5e9) / 1.5e9 <= 0.05))
    for case, m_reported, bubble_reported in ((before, 16, 0.158), (after, 8, 0.273)):
        plan = case.plan()
        rows.append(AuditRow(f"{case.name}：微批次数与气泡", f"m = {m_reported}，{bubble_reported:.1%}",
                             f"m = {plan.num_microbatches}，{plan.bubble_fraction:.1%}（符合{GRAD_ACCUM_READINGS[plan.grad_accum_reading]}）",
                             "m 相同，气泡四舍五入到 0.1% 后相同",
                             plan.num_microbatches == m_reported and round(plan.bubble_fraction, 3) == bubble_reported))
    grid_before, grid_after = memory_grid(before.job), memory_grid(after.job)
    for case, grid in ((before, grid_before), (after, grid_after)):
        reported = case.reported["memory_fraction"]
        hits = matching_settings(grid, reported)
        rows.append(AuditRow(f"{case.name}：显存占用 {reported:.0%}", f"{reported:.0%}",
                             f"{len(hits)} 种设置在 ±3 个百分点内（模型范围 {min(grid.values()):.0%}–{max(grid.values()):.0%}）",
                             f"显存模型的 {len(grid)} 种设置（调度 × 重计算 × 精度 × ZeRO-1 × dropout × 注意力实现）"
                             "中至少一种在 ±3 个百分点内", bool(hits)))
    drops = memory_can_drop(grid_before, grid_after)
    rows.append(AuditRow("微批次 2 → 4 后显存下降", f"{before.reported['memory_fraction']:.0%} → {after.reported['memory_fraction']:.0%}",
                         f"{len(drops)} 种设置下下降", "同一设置下，调整后的峰值低于调整前（至少一种设置）", bool(drops)))
    for case in (before, after):
        reported, tokens = case.reported["npu_utilization"], case.reported["tokens_per_second"]
        # Two readings of the reported tokens/s: the whole cluster's (as the lecture's numbers suggest), or
        # one card's (then the cluster does devices × as much). The peak's range gives each a range.
        readings = {"整个集群": tokens, "每张卡": tokens * case.job.devices}
        ranges = {}
        for name, t in readings.items():
            try:
                ranges[name] = (mfu(t, case.job, peak_flops[1]), mfu(t, case.job, peak_flops[0]))
            except ValueError:  # over 100 % at the high peak: that reading is impossible, not a match
                continue
        rows.append(AuditRow(f"{case.name}：NPU 利用率 {reported:.0%} 是模型算力利用率（MFU）", f"{reported:.0%}",
                             "；".join(f"按{name}的 {tokens:,.0f} tokens/s：MFU {low:.1%}–{high:.1%}"
                                      for name, (low, high) in ranges.items()),
                             "报告值落在任一读法推出的 MFU 范围内（±50%）",
                             any(low / 1.5 <= reported <= high * 1.5 for low, high in ranges.values())))
    reported_speedup = after.reported["tokens_per_second"] / before.reported["tokens_per_second"]
    for name, curve in curves.items():
        speedup = modelled_speedup(before.job, after.job, curve)
        rows.append(AuditRow(f"吞吐提升 {reported_speedup - 1:.0%}（{name}）", f"{reported_speedup:.2f} 倍",
                             f"模型 {speedup:.2f} 倍", "模型的提升倍数在报告值的 ±15% 以内",
                             abs(speedup - reported_speedup) <= 0.15 * reported_speedup))
    util_ratio = after.reported["npu_utilization"] / before.reported["npu_utilization"]
    rows.append(AuditRow("利用率与吞吐的提升互相吻合", f"利用率 {util_ratio:.2f} 倍，吞吐 {reported_speedup:.2f} 倍",
                         f"相差 {abs(util_ratio / reported_speedup - 1):.1%}", "两个倍数相差不超过 5%",
                         abs(util_ratio / reported_speedup - 1) <= 0.05))
    return rows
