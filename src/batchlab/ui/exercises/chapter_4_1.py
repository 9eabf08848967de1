"""Exercises of chapter 4.1; answers are computed by batchlab when checked, never typed in."""
from __future__ import annotations

import math

from batchlab.formulas.batching import plan_batch, token_weights
from batchlab.formulas.noise import expected_sq_error
from batchlab.formulas.pipeline_schedules import bubble_fraction
from batchlab.formulas.scaling import scale_lr
from batchlab.lecture.case import CASE_STUDY
from batchlab.ui.exercises.base import Exercise, nearest_choice

__all__ = ["EXERCISES"]

# 4.1's accumulation cell: a batch of 32 sequences of 32 tokens, accumulated over MICROBATCHES micro-batches
MICROBATCHES = 4
TOKENS = 32 * 32 // MICROBATCHES  # real tokens per micro-batch (no padding)

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
        "8 级流水线、8 个微批次时，气泡占比是多少？先用 $(p-1)/(m+p-1)$ 写下预测，再把流水线模拟单元格里的 "
        "`p, m = 4, 8` 改成 `8, 8`，运行它和下一格，填模拟出的气泡占比（保留两位小数，或直接写成分数）。",
        lambda: bubble_fraction(8, 8),
        "p = 8，m = 8：分子 p-1，分母 m+p-1；模拟的空闲占比与公式相同。",
        decimals=2,
        predict=True,
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
    "4.1-7": Exercise(
        f"案例的全局批大小 {CASE_STUDY.job.global_batch}、微批次大小 {CASE_STUDY.job.micro_batch_size}、"
        f"流水线 {CASE_STUDY.job.pipeline_stages} 级保持不变，把数据并行度从 {CASE_STUDY.job.data_parallel} 改成 "
        f"{2 * CASE_STUDY.job.data_parallel}（卡数翻倍）。先预测气泡占比会变大、变小还是不变，再在交互计算器里改数据并行度，"
        "填它算出的气泡占比（保留两位小数，或直接写成分数）。",
        lambda: plan_batch(CASE_STUDY.job.micro_batch_size, CASE_STUDY.job.pipeline_stages,
                           2 * CASE_STUDY.job.data_parallel, global_batch=CASE_STUDY.job.global_batch).bubble_fraction,
        "全局批大小不变时，副本多了，每个副本分到的微批次数 m = Global / (Micro × DP) 就少了，气泡 (p-1)/(m+p-1) 变大。",
        decimals=2,
        predict=True,
    ),
    "4.1-8": Exercise(
        f"如果忘了给每个微批次的损失乘份额，{MICROBATCHES} 个微批次累积出的梯度是整批梯度的几倍？先写下预测，"
        f"再运行 `accumulated_grad(probe, x, y, {MICROBATCHES}, scale=False).norm() / whole.norm()`，填你看到的倍数。",
        # a micro-batch's mean loss weighs each of its n tokens 1/n; the batch's loss weighs them 1/(m·n)
        lambda: (1 / TOKENS) / token_weights([TOKENS] * MICROBATCHES)[0],
        "每个微批次的损失是它自己的平均；不乘份额就把 m 个平均直接相加，而整批的平均是它们的平均。",
        predict=True,
    ),
}
