"""Exercises of chapter 4.2; answers are computed by batchlab when checked, never typed in."""
from __future__ import annotations

import math
from dataclasses import replace

from batchlab.formulas.batching import plan_batch
from batchlab.formulas.noise import finite_population_factor
from batchlab.formulas.scaling import samples_over_min, scale_lr, steps_over_min
from batchlab.lecture.case import CASE_STUDY
from batchlab.page.numbers import learning_rate
from batchlab.page.symbols import tex
from batchlab.ui.exercises.base import Exercise, nearest_choice

__all__ = ["EXERCISES"]


def _noise_ratio(small: int = 4, large: int = 32, population: int = 256) -> float:
    """The explorer's theoretical relative error ‖G_B − G‖/‖G‖ at ``large`` over that at ``small``: the square root
    of the ratio of their finite-population factors (tr Σ and ‖G‖ cancel)."""
    return math.sqrt(finite_population_factor(large, population) / finite_population_factor(small, population))


def _updates_after_tuning() -> float:
    """Updates per epoch after the case's tuning (micro-batch 2 → 4, global batch unchanged) over before."""
    before = CASE_STUDY.job
    after = replace(before, micro_batch_size=4)
    return after.plan.updates_per_epoch(1_048_576) / before.plan.updates_per_epoch(1_048_576)

EXERCISES: dict[str, Exercise] = {
    "4.2-1": Exercise(
        f"某个作业在 $B = 32$ 时学习率 {learning_rate(3e-3)} 效果好。按线性缩放法则（Goyal et al. 为 SGD 提出），"
        "$B = 256$ 时学习率应设为多少？",
        lambda: scale_lr(3e-3, 32, 256, "linear"),
        "线性缩放：学习率乘以新旧批大小之比。",
    ),
    "4.2-2": Exercise(
        "同上，改用平方根缩放（sqrt scaling，Adam 扫描学习率的起点），$B = 512$ 时学习率是多少？",
        lambda: scale_lr(3e-3, 32, 512, "sqrt"),
        "平方根缩放：学习率乘以新旧批大小之比的平方根。",
    ),
    "4.2-3": Exercise(
        f"梯度噪声尺度 {tex('B_noise')} = 64。用 $B = 16$ 训练，达到同一损失所需的步数是最少步数 {tex('S_min')} 的几倍？",
        lambda: steps_over_min(16, 64),
        "McCandlish et al. 2018：所需步数 / 最少步数 = 1 + 梯度噪声尺度 / B。",
    ),
    "4.2-4": Exercise(
        f"同上（{tex('B_noise')} = 64），改用 $B = 512$，所需样本数是最少样本数 {tex('E_min')} 的几倍？",
        lambda: samples_over_min(512, 64),
        "McCandlish et al. 2018：所需样本数 / 最少样本数 = 1 + B / 梯度噪声尺度。",
    ),
    "4.2-5": Exercise(
        "数据集有 1,048,576 条序列。流水线配置为全局批大小 128、微批次大小 4、流水线 4 级、数据并行度 4，"
        "每个 epoch 更新多少次参数？",
        lambda: plan_batch(4, 4, 4, global_batch=128).updates_per_epoch(1_048_576),
        "每次参数更新消耗一个 Global Batch；微批次切分不改变更新次数。",
    ),
    "4.2-6": Exercise(
        f"某任务的梯度噪声尺度 {tex('B_noise')} ≈ 40。把批大小从 32 增大到 512（增大到 16 倍），"
        "按 McCandlish et al. 2018 的模型，达到同一损失所需的步数大约变为原来的：",
        lambda: nearest_choice(steps_over_min(512, 40) / steps_over_min(32, 40), {"A": 1 / 16, "B": 1 / 2, "C": 1.0}),
        "所需步数 / 最少步数 = 1 + 梯度噪声尺度 / B：B 远大于梯度噪声尺度之后，步数接近下限，不再随 B 成比例减少。",
        choices={"A": "1/16（与批大小成反比）", "B": "约 1/2", "C": "几乎不变"},
    ),
    "4.2-9": Exercise(
        "先预测：“梯度噪声探索器”一节的探索器里，批次从 $N = 256$ 条序列中无放回抽取。把批大小从 $B = 4$ 拖到 $B = 32$（8 倍），"
        f"摘要里“理论”的相对误差 ‖{tex('G_B')} − $G$‖/‖$G$‖ 会变为原来的几分之几？"
        "先在 `prediction` 里写下你的预测（一个小数，例如 1/8 写 0.125），再拖动滑块，"
        "用摘要里 $B = 32$ 与 $B = 4$ 两个理论值之比作答（保留两位小数）。",
        _noise_ratio,
        "误差的平方按 tr(Σ)/B · (N − B)/(N − 1) 下降，相对误差是它的平方根：独立同分布时是 1/√8 ≈ 0.35；"
        "无放回抽样的修正让 B = 32 的误差再小一些。",
        decimals=2,
        predict=True,
    ),
    "4.2-10": Exercise(
        "先预测：原文的案例把微批次大小从 2 调到 4，全局批大小 64 不变（微批次数从 16 变为 8）。每个 epoch 的参数更新次数会怎样变？"
        "先在 `prediction` 里写下你预测的选项，再运行“流水线并行中的更新频率”一节的第一个代码单元，对照表格作答：",
        lambda: nearest_choice(_updates_after_tuning(), {"A": 0.5, "B": 1.0, "C": 2.0}),
        "一次参数更新消耗一个全局批大小的样本；微批次只是把这个批次分几趟送进流水线。",
        choices={"A": "减半（微批次数减半）", "B": "不变", "C": "加倍（每个微批次大了一倍）"},
        predict=True,
    ),
}
