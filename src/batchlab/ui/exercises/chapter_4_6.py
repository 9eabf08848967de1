"""Exercises of chapter 4.6 (the four misconceptions); answers are computed by batchlab when checked."""
from __future__ import annotations

from dataclasses import replace

from batchlab.formulas.batching import token_weights
from batchlab.formulas.comm import allreduce_bytes, step_communication
from batchlab.formulas.effects import EFFECTS, MEMORY_EFFECT, batch_effects, effect_ratios
from batchlab.formulas.job import Job
from batchlab.formulas.roofline import DEVICE_PRESETS
from batchlab.lecture.case import CASE_STUDY, CASE_STUDY_TUNED
from batchlab.lecture.verdicts import unchanged
from batchlab.ui.exercises.base import Exercise

__all__ = ["EXERCISES", "UNCHANGED_CHOICES"]

# Choice letters of 4.6-3 → the quantity of batchlab.formulas.effects.EFFECTS each names.
UNCHANGED_CHOICES: dict[str, str] = {"A": "p2p_messages", "B": "bubble_fraction", "C": "allreduce_mib_per_sample",
                                     "D": MEMORY_EFFECT}


def _tuned_messages() -> int:
    return step_communication(CASE_STUDY_TUNED.job).p2p_messages


def _memory_ratio(job: Job) -> float:
    """The busiest stage's memory of ``job`` over the case's (4.6, 误区一's table), on the 910B roofline."""
    curve = DEVICE_PRESETS["ascend-910b"].curve(CASE_STUDY.job.model, "low")
    return effect_ratios(batch_effects(job, curve), batch_effects(CASE_STUDY.job, curve))[MEMORY_EFFECT]


def _unchanged_by_micro_batch() -> str:
    curve = DEVICE_PRESETS["ascend-910b"].curve(CASE_STUDY.job.model, "low")
    effects = [batch_effects(c.job, curve) for c in (CASE_STUDY, CASE_STUDY_TUNED)]
    ratios = effect_ratios(effects[1], effects[0])
    same = [letter for letter, key in UNCHANGED_CHOICES.items() if unchanged(ratios[key], tolerance=1e-9)]
    if len(same) != 1:
        raise AssertionError(f"练习 4.6-3 的选项应恰有一个不变，实际不变的是 {same}")
    return same[0]


EXERCISES: dict[str, Exercise] = {
    "4.6-1": Exercise(
        "原文案例调整后（4 级流水线，微批次大小 4，每个副本 8 个微批次），一个数据并行副本每步在相邻阶段之间一共收发"
        "多少条点对点消息（前向的激活与反向的梯度都算）？",
        _tuned_messages,
        "每个微批次在 p − 1 个阶段边界上各走一次前向、一次反向：2(p − 1)m。",
    ),
    "4.6-2": Exercise(
        "一个流水线阶段持有 4 亿个参数，梯度以 bf16（2 字节）做环形 All-Reduce，数据并行度 8。每张卡每步发送多少 GB"
        "（10⁹ 字节）？（保留两位小数）",
        lambda: allreduce_bytes(400_000_000 * 2, 8) / 1e9,
        "环形 All-Reduce 每张卡发送 2(d − 1)/d × 梯度字节数。",
        decimals=2,
    ),
    "4.6-3": Exercise(
        "全局批大小不变，把原文案例的微批次大小从 2 增大到 4。下面哪一项不变？",
        _unchanged_by_micro_batch,
        "全局批次不变，每步的样本数就不变；All-Reduce 每步一次，与怎样切分无关。",
        choices={letter: EFFECTS[key] for letter, key in UNCHANGED_CHOICES.items()},
    ),
    "4.6-4": Exercise(
        "梯度累积的两个微批次分别有 100 和 300 个有效 token。若每个微批次先求平均损失、再除以微批次数，"
        "第一个微批次里一个 token 的权重是按全局 token 数归一化时的几倍？",
        lambda: token_weights([100, 300], "per_microbatch")[0] / token_weights([100, 300], "global_tokens")[0],
        "按微批次平均：1/(2 × 100)；按全局 token：1/400。",
    ),
    "4.6-8": Exercise(
        "全局批大小不变，把原文案例的微批次大小从 2 增大到 4：最满阶段的显存变为原来的几倍？先把你的预测写进 `prediction`"
        "（每个微批次的激活翻倍，显存也翻倍吗？），再运行误区一里算 `effects` 的那一格，"
        "用 `effects[\"微批次 ×2\"][\"peak_memory_gib\"] / effects[\"基线\"][\"peak_memory_gib\"]` 算出比值填进 `answer`。"
        "（保留两位小数）",
        lambda: _memory_ratio(CASE_STUDY_TUNED.job),
        "参数、梯度和优化器状态不随微批次变，翻倍的只有激活：比值在 1 与 2 之间，取决于激活占这个阶段显存的份额。",
        decimals=2,
        predict=True,
    ),
    "4.6-9": Exercise(
        "微批次大小保持 2，把原文案例的全局批大小从 64 增大到 128（1F1B）：最满阶段的显存变为原来的几倍？"
        "先把你的预测写进 `prediction`（每步的样本翻倍了），再运行误区一里算 `effects` 的那一格，"
        "用 `effects[\"全局批次 ×2\"][\"peak_memory_gib\"] / effects[\"基线\"][\"peak_memory_gib\"]` 算出比值填进 `answer`。"
        "（保留两位小数）",
        lambda: _memory_ratio(replace(CASE_STUDY.job, global_batch=2 * CASE_STUDY.job.global_batch)),
        "1F1B 下第 i 个阶段同时在途的微批次最多 min(p − i, m) 个：m 从 16 增大到 32，p = 4 不变，"
        "在途的激活也就不变；多出来的微批次只是排在后面。",
        decimals=2,
        predict=True,
    ),
}
