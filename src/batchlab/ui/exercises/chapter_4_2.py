"""Exercises of chapter 4.2; answers are computed by batchlab when checked, never typed in."""
from __future__ import annotations

from ...case import CASE_STUDY
from ...scaling import samples_over_min, scale_lr, steps_over_min
from .base import Exercise

__all__ = ["EXERCISES"]

EXERCISES: dict[str, Exercise] = {
    "4.2-1": Exercise(
        "Adam 在 B = 32 时学习率 3e-3 效果好。按线性缩放法则，B = 256 时学习率应设为多少？",
        lambda: scale_lr(3e-3, 32, 256, "linear"),
        "线性缩放：学习率乘以 B_new / B_old。",
    ),
    "4.2-2": Exercise(
        "同上，改用平方根缩放（sqrt scaling），B = 512 时学习率是多少？",
        lambda: scale_lr(3e-3, 32, 512, "sqrt"),
        "平方根缩放：学习率乘以 √(B_new / B_old)。",
    ),
    "4.2-3": Exercise(
        "梯度噪声尺度 B_noise = 64。用 B = 16 训练，达到同一损失所需的步数是最少步数 S_min 的几倍？",
        lambda: steps_over_min(16, 64),
        "McCandlish et al. 2018：S / S_min = 1 + B_noise / B。",
    ),
    "4.2-4": Exercise(
        "同上（B_noise = 64），改用 B = 512，所需样本数是最少样本数 E_min 的几倍？",
        lambda: samples_over_min(512, 64),
        "McCandlish et al. 2018：E / E_min = 1 + B / B_noise。",
    ),
    "4.2-5": Exercise(
        "数据集有 1,048,576 条序列。单卡 Batch = 2 时每个 epoch 更新多少次？换成 4.5 节案例的流水线配置"
        "（Global 64，Micro 2，PP 4，DP 2）后每个 epoch 更新多少次？填后者。",
        lambda: CASE_STUDY.plan().updates_per_epoch(1_048_576),
        "每次参数更新消耗一个 Global Batch；微批次切分不改变更新次数。",
    ),
}
