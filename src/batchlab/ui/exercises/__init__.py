"""Self-checks for the chapters' exercises.

Expected answers are computed by batchlab's own functions at check time, never typed in, so an
exercise and the book's prose cannot drift apart. ``check`` prints a verdict and returns a bool;
a wrong or malformed answer gets a hint, never a traceback.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from .batching import plan_batch
from .scaling import expected_sq_error, samples_over_min, scale_lr, steps_over_min
from .schedules import bubble_fraction

__all__ = ["Exercise", "EXERCISES", "check", "is_correct", "expected"]


@dataclass(frozen=True)
class Exercise:
    question: str
    answer: Callable[[], Any]
    hint: str
    rel_tol: float = 1e-3


def _num_mb_deepspeed() -> int:
    return plan_batch(2, 4, 2, global_batch=64).num_microbatches


EXERCISES: dict[str, Exercise] = {
    "4.1-1": Exercise(
        "Global Batch = 128，Micro-Batch = 4，数据并行度 = 4，流水线 4 级：每个副本每步要跑几个微批次？",
        lambda: plan_batch(4, 4, 4, global_batch=128).num_microbatches,
        "每个微批次都要穿过全部流水线阶段，阶段数不会“乘出”样本：m = Global / (Micro × DP)。",
    ),
    "4.1-2": Exercise(
        "上题配置下，种子文本公式中的“梯度累积步数”是多少？",
        lambda: plan_batch(4, 4, 4, global_batch=128).grad_accum_steps,
        "种子公式 Global = Micro × PP × DP × 累积步数，解出累积步数 = m / PP。",
    ),
    "4.1-3": Exercise(
        "8 级流水线、8 个微批次时，气泡占比 (p-1)/(m+p-1) 是多少？（填小数）",
        lambda: bubble_fraction(8, 8),
        "p = 8，m = 8：分子 p-1，分母 m+p-1。",
    ),
    "4.1-4": Exercise(
        "案例的初始配置（Global 64，Micro 2，PP 4，DP 2）写进 DeepSpeed 配置时，"
        "gradient_accumulation_steps 应填多少？",
        _num_mb_deepspeed,
        "DeepSpeed 的 train_batch_size = micro × gradient_accumulation_steps × DP，流水线阶段数不在其中。",
    ),
    "4.1-5": Exercise(
        "从总体中无放回抽样、且 B 远小于 N 时，批大小从 16 增加到 64，梯度估计误差的标准差缩小为原来的几分之一？"
        "（填小数，如 0.5）",
        # B ≪ N: a population of 10¹² samples makes the finite-population factor vanish.
        lambda: math.sqrt(expected_sq_error(1.0, 64, 10**12) / expected_sq_error(1.0, 16, 10**12)),
        "误差的方差约为 tr(Σ)/B，标准差按 1/√B 变化。",
    ),
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
        lambda: plan_batch(2, 4, 2, global_batch=64).updates_per_epoch(1_048_576),
        "每次参数更新消耗一个 Global Batch；微批次切分不改变更新次数。",
    ),
}


def expected(exercise_id: str) -> Any:
    """The answer to ``exercise_id``, computed now by batchlab (for instructors and tests)."""
    return _get(exercise_id).answer()


def _get(exercise_id: str) -> Exercise:
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise ValueError(f"unknown exercise {exercise_id!r}; known: {', '.join(EXERCISES)}") from None


def check(exercise_id: str, answer: Any) -> None:
    """Print ✅ or ❌ with a hint for ``answer`` (returns nothing, so a notebook cell shows only the verdict)."""
    is_correct(exercise_id, answer, quiet=False)


def is_correct(exercise_id: str, answer: Any, quiet: bool = True) -> bool:
    """Whether ``answer`` matches the answer batchlab computes now; prints the verdict unless ``quiet``."""
    exercise = _get(exercise_id)
    say = (lambda msg: None) if quiet else print
    if answer is None or answer is ...:
        say(f"练习 {exercise_id}：还没有作答。把 None 换成你的答案后重新运行本单元。")
        return False
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        say(f"练习 {exercise_id}：请填一个数字，收到的是 {answer!r}（{type(answer).__name__}）。")
        return False
    truth = exercise.answer()
    # Counts (micro-batches, updates) must be exact; rates and fractions get a small tolerance.
    exact = isinstance(truth, int)
    if (answer == truth) if exact else math.isclose(float(answer), float(truth), rel_tol=exercise.rel_tol, abs_tol=1e-9):
        say(f"练习 {exercise_id}：✅ 正确（{truth:g}）。")
        return True
    say(f"练习 {exercise_id}：❌ {answer!r} 不对。提示：{exercise.hint}")
    return False
