"""Exercises of chapter 4.1; answers are computed by batchlab when checked, never typed in."""
from __future__ import annotations

import math

from ...batching import plan_batch
from ...case import CASE_STUDY
from ...pipeline_schedules import bubble_fraction
from ...sampling import expected_sq_error
from .base import Exercise

__all__ = ["EXERCISES"]

EXERCISES: dict[str, Exercise] = {
    "4.1-1": Exercise(
        "Global Batch = 128，Micro-Batch = 4，数据并行度 = 4，流水线 4 级：每个副本每步要跑几个微批次？",
        lambda: plan_batch(4, 4, 4, global_batch=128).num_microbatches,
        "每个微批次都要穿过全部流水线阶段，阶段数不会“乘出”样本：m = Global / (Micro × DP)。",
    ),
    "4.1-2": Exercise(
        "上题配置下，原文公式中的“梯度累积步数”是多少？",
        lambda: plan_batch(4, 4, 4, global_batch=128).pipeline_fills,
        "原文公式 Global = Micro × PP × DP × 累积步数，解出累积步数 = m / PP。",
    ),
    "4.1-3": Exercise(
        "8 级流水线、8 个微批次时，气泡占比 (p-1)/(m+p-1) 是多少？（填小数）",
        lambda: bubble_fraction(8, 8),
        "p = 8，m = 8：分子 p-1，分母 m+p-1。",
    ),
    "4.1-4": Exercise(
        "案例的初始配置（Global 64，Micro 2，PP 4，DP 2）写进 DeepSpeed 配置时，"
        "gradient_accumulation_steps 应填多少？",
        lambda: CASE_STUDY.plan().num_microbatches,
        "DeepSpeed 的 train_batch_size = micro × gradient_accumulation_steps × DP，流水线阶段数不在其中。",
    ),
    "4.1-5": Exercise(
        "从总体中无放回抽样、且 B 远小于 N 时，批大小从 16 增加到 64，梯度估计误差的标准差缩小为原来的几分之一？"
        "（填小数，如 0.5）",
        # B ≪ N: i.i.d. draws, no finite-population factor.
        lambda: math.sqrt(expected_sq_error(1.0, 64) / expected_sq_error(1.0, 16)),
        "误差的方差约为 tr(Σ)/B，标准差按 1/√B 变化。",
    ),
}
