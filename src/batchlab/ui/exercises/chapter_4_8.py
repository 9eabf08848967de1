"""Exercises of chapter 4.8 (选读: the batch size during training); answers are computed by batchlab when checked."""
from __future__ import annotations

import math
from dataclasses import replace

from batchlab.formulas.rampup import Rampup, ramp_stages
from batchlab.formulas.scaling import steps_over_min
from batchlab.lecture.accumulation_precision import UNIT_ROUNDOFF
from batchlab.lecture.case import CASE_STUDY
from batchlab.lecture.scaling_literature import TABLE_CLAIMS, contradicted
from batchlab.page.symbols import tex
from batchlab.ui.exercises.base import Exercise

__all__ = ["EXERCISES"]

_LITERATURE_CHOICES = {"A": "small-early-fast", "B": "huge-optimizer", "C": "mid-use"}


def _contradicted_choice() -> str:
    """The one choice whose claim a cited finding reports the contrary of."""
    (letter,) = [letter for letter, claim in _LITERATURE_CHOICES.items() if contradicted(claim)]
    return letter


def _largest_absorbed(total: float, dtype: str = "bfloat16") -> float:
    """The largest x > 0 that a buffer of ``dtype`` holding ``total`` (> 0) rounds away: half the spacing of
    the dtype's numbers at ``total`` is u × 2^⌊log₂ total⌋, and a tie rounds to the even neighbour (a power
    of two's)."""
    return UNIT_ROUNDOFF[dtype] * 2.0 ** math.floor(math.log2(total))


def _smallest_ramp_start() -> int:
    """The smallest global batch the case's job runs (a multiple of b · d with m ≥ p): where a ramp can start."""
    job = CASE_STUDY.job
    for batch in range(1, job.global_batch + 1):
        try:
            replace(job, global_batch=batch)
        except ValueError:
            continue
        return batch
    raise AssertionError("the case's own batch runs")


def _ramp_steps(increment: int) -> list[int]:
    """The steps of each stage of the case's ramp from 16 to its global batch over 6000 samples (the last, at
    the target, runs on and is left out): ``--rampup-batch-size 16 <increment> 6000``."""
    job = CASE_STUDY.job
    return [s.steps for s in ramp_stages(job, Rampup(16, increment, 6000, job.global_batch)) if s.steps is not None]


EXERCISES: dict[str, Exercise] = {
    "4.8-1": Exercise(
        f"同一次训练中，初始化时测得 {tex('B_simple')} ≈ 20，训练一段时间后 ≈ 80。初始化时用 $B = 32$。"
        f"按 McCandlish et al. 2018 的模型（以 {tex('B_simple')} 代替 {tex('B_noise')}），后期批大小要增大到多少，"
        f"所需步数与最少步数 {tex('S_min')} 之比才与初始化时相同？",
        lambda: 80 / (steps_over_min(32, 20) - 1),
        "S/S_min 只取决于 B_noise/B：噪声尺度变为 4 倍，批大小也要变为 4 倍——这就是训练中逐步增大批大小的依据。",
    ),
    "4.8-2": Exercise(
        "按本章“延伸阅读”一节引用的四项结果（各在自己报告的设置内），原文表格的哪一条说法被报告了相反的结果？",
        _contradicted_choice,
        "对照那四项结果：DeepSeek LLM 67B 以批大小 4608、用普通的 AdamW 完成了预训练；“前期收敛快”与 Merrill et al. "
        "测到的初期临界批大小接近 0 同向；“常规 CV/NLP 用 128–256”没有一项引用的结果涉及。",
        choices={letter: TABLE_CLAIMS[claim].text for letter, claim in _LITERATURE_CHOICES.items()},
    ),
    "4.8-3": Exercise(
        "原文案例（4 级流水线、微批次大小 2、数据并行度 2、1F1B）按 Megatron-LM 旧的 `--rampup-batch-size` 规则从小批次爬升到 64。"
        "起始的全局批大小最小取多少，才不会被作业拒绝？",
        _smallest_ramp_start,
        "每个阶段的批大小须是 b × d = 4 的倍数；本书的 1F1B（与 torch 的 Schedule1F1B 一样）还要求 m = G/(b × d) ≥ p = 4：G ≥ 2 × 2 × 4 = 16。",
    ),
    "4.8-4": Exercise(
        "bfloat16 的有效数字是 8 位（含隐含的 1），单位舍入 u = 2⁻⁸。一个 bf16 梯度缓冲里已经累加到 2.0，"
        "再加上一个微批次的梯度分量 x（x > 0）。x 不超过多少时，缓冲的值一点也不变？（保留四位小数）",
        lambda: _largest_absorbed(2.0),
        "[2, 4) 里相邻两个 bf16 数相差 2 × 2⁻⁷；加上的量不超过这个间隔的一半（u × 2），就近舍入又回到 2.0"
        "（恰好一半时舍到尾数为偶的 2.0）。",
        decimals=4,
    ),
    "4.8-5": Exercise(
        "先预测，再运行。原文案例按 `--rampup-batch-size 16 16 6000` 爬升时，到第 6000 条样本为止各阶段共走 "
        f"{' + '.join(map(str, _ramp_steps(16)))} = {sum(_ramp_steps(16))} 步。把增量从 16 改成 8，"
        "到第 6000 条样本为止一共走多少步？先写下预测（比它多还是少），再运行 "
        f"`bl.ramp_stages(c, bl.Rampup(16, 8, 6000, {CASE_STUDY.job.global_batch}))`，"
        "把各阶段的步数（最后那个“其余”阶段除外）加起来。",
        lambda: sum(_ramp_steps(8)),
        "增量越小，批大小越早离开 16：阶段更多、每段更短，爬升途中的平均批大小更大，步数就更少"
        f"（{' + '.join(map(str, _ramp_steps(8)))}）。",
        predict=True,
    ),
}
