"""Exercises of chapter 4.4; answers are computed by batchlab when checked, never typed in."""
from __future__ import annotations

from dataclasses import replace

from batchlab.formulas.precision import element_bytes
from batchlab.formulas.roofline import RateCurve, arithmetic_intensity, matmul_flops, tokens_per_matmul
from batchlab.formulas.throughput import model_step
from batchlab.lecture.case import CASE_STUDY
from batchlab.ui.exercises.base import Exercise

__all__ = ["EXERCISES"]


def _step_ratio(speed_up: float) -> float:
    """Step time after doubling the case's micro-batch (2 → 4) over before, when the matmuls of the
    bigger micro-batch run ``speed_up`` times faster per FLOP."""
    job = CASE_STUDY.job
    rows = job.tokens_per_microbatch
    curve = RateCurve((rows, 2 * rows), (1e12, speed_up * 1e12))
    before, after = (model_step(j, curve) for j in (job, replace(job, micro_batch_size=2 * job.micro_batch_size)))
    return after.step_seconds / before.step_seconds


def _slower_option() -> str:
    options = {"A": 1.0, "B": 1.5, "C": 2.0}
    slower = [letter for letter, speed_up in options.items() if _step_ratio(speed_up) > 1]
    return slower[0] if len(slower) == 1 else "?"


EXERCISES: dict[str, Exercise] = {
    "4.4-1": Exercise(
        "序列长度 1024、微批次大小 2 时，Transformer 层里每个矩阵乘法的 M（行数）是多少？",
        lambda: tokens_per_matmul(2, 1024),
        "一个微批次的每个 token 都是矩阵乘法的一行：M = 微批次大小 × 序列长度。",
    ),
    "4.4-2": Exercise(
        "[128, 4096] × [4096, 8192] 的矩阵乘法有多少 GFLOP？（保留一位小数）",
        lambda: matmul_flops(128, 4096, 8192) / 1e9,
        "每个输出元素做 K 次乘法和 K 次加法：2·M·K·N。",
        decimals=1,
    ),
    "4.4-3": Exercise(
        "同一个乘法用 bf16（每个元素 2 字节）时的算术强度是多少 FLOP/字节？（取整数）",
        lambda: arithmetic_intensity(128, 4096, 8192, element_bytes("bfloat16")),
        "FLOP 除以读写的字节数：2·M·K·N / (2·(M·K + K·N + M·N))。",
        decimals=0,
    ),
    "4.4-4": Exercise(
        "案例初始配置（全局批大小 64，微批次大小 2，流水线 4 级，数据并行 2）把微批次大小增大到 4。"
        "若矩阵乘法效率不变（每个微批次的计算时间恰好加倍），每步时间变为原来的几倍？（保留两位小数）",
        lambda: _step_ratio(1.0),
        "每步 (m + p − 1) 个时间片：之前 m = 16、时间片 t；之后 m = 8、时间片 2t。",
        decimals=2,
    ),
    "4.4-5": Exercise(
        "同上，把微批次大小从 2 增大到 4。下面哪种情况下每步时间一定变长？",
        _slower_option,
        "把每种情况的时间片代入 (m + p − 1) × 时间片比较：效率不变时，只剩下更大的气泡。",
        choices={"A": "矩阵乘法效率不变", "B": "矩阵乘法效率提高到 1.5 倍", "C": "矩阵乘法效率提高到 2 倍"},
    ),
}
