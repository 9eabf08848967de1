"""Exercises of chapter 4.4; answers are computed by batchlab when checked, never typed in."""
from __future__ import annotations

from dataclasses import replace

from batchlab.formulas.pipeline_schedules import bubble_fraction
from batchlab.formulas.precision import element_bytes
from batchlab.formulas.roofline import DEVICE_PRESETS, RateCurve, arithmetic_intensity, matmul_flops, tokens_per_matmul
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


def _modelled_change(**change) -> str:
    """Whether the modelled tokens/s of the case under the 910B roofline's low end (the trade-off explorer's default
    curve) goes up (A), down (B) or stays within 0.1 % (C) when the job changes as ``change`` says."""
    job = CASE_STUDY.job
    curve = DEVICE_PRESETS["ascend-910b"].curve(job.model, "low")
    before, after = (model_step(j, curve).tokens_per_second for j in (job, replace(job, **change)))
    return "C" if abs(after / before - 1) < 1e-3 else "A" if after > before else "B"


_FASTER_SLOWER = {"A": "更高", "B": "更低", "C": "不变（相差不到 0.1%）"}


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
    "4.4-8": Exercise(
        "先预测：案例的初始配置（全局批大小 64，微批次大小 2，流水线 4 级，数据并行 2）把微批次大小增大到 4，"
        "按 910B 屋顶线低端的步时模型，tokens/s 会怎样？把选项字母写进 `prediction`；再在权衡探索器里把"
        "微批次大小从 2 拨到 4，比较两次的 tokens/s，把你看到的（选项字母）填进 `answer`。",
        lambda: _modelled_change(micro_batch_size=2 * CASE_STUDY.job.micro_batch_size),
        "微批次 2 时 M = 2048，已在 910B 拐点之上，效率没有可涨的；m 从 16 减到 8，气泡从 (p−1)/(m+p−1) 变大。",
        choices=_FASTER_SLOWER,
        predict=True,
    ),
    "4.4-9": Exercise(
        "原文说 4 个阶段至少要 4 个微批次才能填满流水线。先预测：$p = 8$ 个阶段、$m = 8$ 个微批次时，"
        "气泡占一步的百分之几？写进 `prediction`；再运行 `bl.bubble_fraction(8, 8)`，把结果（百分数，保留一位小数，"
        "如 27.3）填进 `answer`。",
        lambda: 100 * bubble_fraction(8, 8),
        "m = p 时每个阶段都轮到了工作，但开头和结尾各有 p − 1 个时间片的空等：(p − 1)/(m + p − 1) = 7/15。",
        decimals=1,
        predict=True,
    ),
    "4.4-10": Exercise(
        "先预测：在权衡探索器的默认状态（案例初始配置，1F1B）下把流水线调度换成 GPipe，模型估计的 tokens/s 会怎样？"
        "把选项字母写进 `prediction`；再点 GPipe，把你看到的（选项字母）填进 `answer`，并看显存那一栏变成了什么。",
        lambda: _modelled_change(schedule="gpipe"),
        "两种调度的一步都是 (m + p − 1) 个时间片，气泡相同；差别在显存：GPipe 要同时存全部 m 个微批次的激活值，"
        "1F1B 的第 i 段最多存 min(p − i, m) 个。",
        choices=_FASTER_SLOWER,
        predict=True,
    ),
}
