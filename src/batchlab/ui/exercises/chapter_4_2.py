"""Exercises of chapter 4.2; answers are computed by batchlab when checked, never typed in."""
from __future__ import annotations

from batchlab.formulas.batching import plan_batch
from batchlab.formulas.scaling import samples_over_min, scale_lr, steps_over_min
from batchlab.page.numbers import learning_rate
from batchlab.page.symbols import tex
from batchlab.ui.exercises.base import Exercise, nearest_choice

__all__ = ["EXERCISES"]

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
}
