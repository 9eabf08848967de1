"""Exercises of chapter 4.7 (选读: more schedules and parallelism); answers are computed by batchlab when checked."""
from __future__ import annotations

from dataclasses import replace

from batchlab.formulas.job import Job
from batchlab.formulas.memory import layer_activation_bytes
from batchlab.formulas.pipeline_schedules import bubble_fraction, pipeline_timeline
from batchlab.lecture.case import CASE_STUDY
from batchlab.lecture.replan import REPLAN_MODEL, replanned
from batchlab.ui.exercises.base import Exercise

__all__ = ["EXERCISES"]


def _idle_time_ratio(schedule: str, virtual_stages: int, p: int = 4, m: int = 8) -> float:
    """Idle time per device of one simulated step under ``schedule`` over 1F1B's, the same work (a chunk costs 1/v
    of a stage)."""
    v = virtual_stages
    idle = [t.makespan * t.idle_fraction for t in (pipeline_timeline(schedule, p, m, 1 / v, 2 / v, virtual_stages=v),
                                                   pipeline_timeline("1f1b", p, m))]
    return idle[0] / idle[1]


def _replanned_bubble() -> float:
    """The bubble of the case on the same 8 cards as t·p·d = 2·4·1 (the 32-head variant)."""
    job = replanned(replace(CASE_STUDY.job, model=REPLAN_MODEL))
    return bubble_fraction(job.pipeline_stages, job.num_microbatches, job.schedule, job.virtual_stages)


EXERCISES: dict[str, Exercise] = {
    "4.7-1": Exercise(
        "交错式 1F1B：$p = 4$ 个阶段、$m = 8$ 个微批次、每个设备 $v = 2$ 个虚拟阶段，气泡占比是多少？"
        "（用百分数，保留一位小数，如 27.3）",
        lambda: 100 * bubble_fraction(4, 8, "interleaved-1f1b", 2),
        "每个设备空等的时间缩短为 1F1B 的 1/v：(p − 1)/(v·m + p − 1)。",
        decimals=1,
    ),
    "4.7-2": Exercise(
        "同样 $p = 4$、$m = 8$，F、B、W 一样长。零气泡 ZB-H1 每个设备的空闲时间是 1F1B 的几倍？（保留两位小数）",
        lambda: _idle_time_ratio("zero-bubble", 1),
        "1F1B 空等 p − 1 个“前向 + 反向”；ZB-H1 把 W 推迟去填空，只剩 p − 1 个单独的操作，每个是它的三分之一。",
        decimals=2,
    ),
    "4.7-3": Exercise(
        "GPT-2 1.5B 的 32 头变体（$h = 1600$，$a = 32$），$s = 1024$，微批次大小 2，16 位、有 dropout、不重计算、"
        "显式注意力，张量并行 $t = 4$ 并开序列并行。按 Korthikanti et al. 2022 的表 2，一层在每张卡上保存多少 MiB "
        "激活值？（保留一位小数）",
        lambda: layer_activation_bytes(Job(REPLAN_MODEL, seq_len=1024, global_batch=2, micro_batch_size=2,
                                           precision="bf16-mixed", dropout=0.1, tensor_parallel=4,
                                           sequence_parallel=True)) / 2**20,
        "开序列并行时每层 s·b·h·(34 + 5·a·s/h)/t 字节，除以 2²⁰。",
        decimals=1,
    ),
    "4.7-4": Exercise(
        "在同样 8 张卡上把原文案例改为 t·p·d = 2·4·1（GPT-2 1.5B 的 32 头同规模变体，全局批大小 64，微批次大小 2，"
        "1F1B），每步的气泡占比是百分之几？（填百分数的数值，保留一位小数）",
        lambda: 100 * _replanned_bubble(),
        "数据并行度从 2 变成 1，每个副本的微批次数 m = 64 / (2 × 1) 翻倍；气泡 (p − 1)/(m + p − 1)。",
        decimals=1,
    ),
    "4.7-5": Exercise(
        "先预测，再运行：$p = 4$、$m = 8$ 时，把交错式 1F1B 的虚拟阶段从 $v = 2$（练习 4.7-1）加到 $v = 4$，"
        "气泡占比是多少？先写下预测（是 $v = 2$ 时的一半、多于一半，还是少于一半？），再运行 "
        "`bl.bubble_fraction(4, 8, \"interleaved-1f1b\", 4)`，或画 "
        "`bl.show_figure(bl.plot_schedule_comparison, 4, 8, [(\"interleaved-1f1b\", 4)])` 看时间线。"
        "（用百分数，保留一位小数）",
        lambda: 100 * bubble_fraction(4, 8, "interleaved-1f1b", 4),
        "(p − 1)/(v·m + p − 1)：v 翻倍只让分母里的 v·m 翻倍，分子 p − 1 和分母里的 p − 1 不变，所以气泡比一半略多。",
        decimals=1,
        predict=True,
    ),
}
