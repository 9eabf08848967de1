"""Exercises of chapter 4.1; answers are computed by batchlab when checked, never typed in."""
from __future__ import annotations

import math

from batchlab.formulas.batching import plan_batch
from batchlab.formulas.noise import expected_sq_error
from batchlab.formulas.pipeline_schedules import bubble_fraction
from batchlab.formulas.scaling import scale_lr
from batchlab.lecture.case import CASE_STUDY
from batchlab.ui.exercises.base import Exercise, nearest_choice

__all__ = ["EXERCISES"]

EXERCISES: dict[str, Exercise] = {
    "4.1-1": Exercise(
        "全局批大小 128，微批次大小 4，数据并行度 4，流水线 4 级：每个数据并行副本每步要跑几个微批次？",
        lambda: plan_batch(4, 4, 4, global_batch=128).num_microbatches,
        "每个微批次都要穿过全部流水线阶段，阶段数不会“乘出”样本：m = Global / (Micro × DP)。",
    ),
    "4.1-2": Exercise(
        "上题配置下，原文公式中的“梯度累积步数”是多少？",
        lambda: plan_batch(4, 4, 4, global_batch=128).pipeline_fills,
        "原文公式 Global = Micro × PP × DP × 累积步数，解出累积步数 = m / PP。",
    ),
    "4.1-3": Exercise(
        "8 级流水线、8 个微批次时，气泡占比 $(p-1)/(m+p-1)$ 是多少？（填小数，保留两位，或直接写成分数）",
        lambda: bubble_fraction(8, 8),
        "p = 8，m = 8：分子 p-1，分母 m+p-1。",
        decimals=2,
    ),
    "4.1-4": Exercise(
        "全局批大小 192，微批次大小 2，流水线 4 级，数据并行度 8：写进 DeepSpeed 配置时，"
        "gradient_accumulation_steps 应填多少？",
        lambda: plan_batch(2, 4, 8, global_batch=192).num_microbatches,
        "DeepSpeed 的 train_batch_size = micro × gradient_accumulation_steps × DP，流水线阶段数不在其中。",
    ),
    "4.1-5": Exercise(
        "B 远小于样本总数 N 时，批大小从 16 增大到 64，梯度估计误差的标准差变为原来的多少倍？"
        "（填小数，保留两位，或写成分数）",
        # B ≪ N: i.i.d. draws, no finite-population factor.
        lambda: math.sqrt(expected_sq_error(1.0, 64) / expected_sq_error(1.0, 16)),
        "误差的方差约为 tr(Σ)/B，标准差按 1/√B 变化。",
        decimals=2,
    ),
    "4.1-6": Exercise(
        f"案例的全局批大小 {CASE_STUDY.job.global_batch} 保持不变，把微批次大小从 {CASE_STUDY.job.micro_batch_size} "
        "增大到 4（微批次数随之减半）。按线性缩放法则，学习率应该怎样变？",
        # the learning rate follows the global batch, which does not move
        lambda: nearest_choice(scale_lr(1.0, CASE_STUDY.job.global_batch, CASE_STUDY.job.global_batch), {"A": 2.0, "B": 2**0.5, "C": 1.0}),
        "学习率跟随的是每次参数更新所用的样本数，也就是全局批大小；微批次只是把它分几趟送进流水线。",
        choices={"A": "增大到 2 倍（微批次大小增大到 2 倍）", "B": "乘以 √2", "C": "不变"},
    ),
}
