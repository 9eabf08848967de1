"""Exercises of chapter 4.5 (a lab: tune another case); answers are computed by batchlab when checked."""
from __future__ import annotations

import math
from dataclasses import replace

from batchlab.formulas.job import Job
from batchlab.formulas.memory import stage_memory
from batchlab.formulas.pipeline_schedules import bubble_fraction
from batchlab.formulas.presets import get_config
from batchlab.formulas.roofline import DEVICE_PRESETS
from batchlab.formulas.throughput import mfu, model_flops_per_token
from batchlab.formulas.tune import tune
from batchlab.lecture.audit import modelled_speedup
from batchlab.lecture.case import CASE_STUDY, CaseConfig
from batchlab.page.numbers import flops_rate, throughput
from batchlab.ui.exercises.base import Exercise, nearest_choice

__all__ = ["EXERCISES", "LAB_CASE"]

# The lab's case: GPT-2 large on 16 NPUs (4 stages × 4 data-parallel replicas).
LAB_CASE = CaseConfig(name="练习案例", job=Job(get_config("gpt2-large"), seq_len=1024, global_batch=128,
                                                micro_batch_size=2, pipeline_stages=4, data_parallel=4),
                      stated_grad_accum=4, devices="16 × Ascend 910B")


# The per-card peak 4.5-3 and 4.5-5 use: the 910B preset's low end, named in the question from the preset itself.
_PEAK = DEVICE_PRESETS["ascend-910b"].peak_flops[0]


def _case_mfu(per_card: bool) -> float:
    """The MFU of the lecture's reported tokens/s at ``_PEAK``, read as the whole cluster's or as each card's."""
    tokens = CASE_STUDY.reported["tokens_per_second"] * (CASE_STUDY.job.devices if per_card else 1)
    return mfu(tokens, CASE_STUDY.job, _PEAK)


# The choices of 4.5-5: the reported figure, the per-card reading (the wrong reading for this question) and
# the cluster-wide reading it asks for.
_CASE_CHOICES = {"A": CASE_STUDY.reported["npu_utilization"], "B": _case_mfu(per_card=True),
                 "C": _case_mfu(per_card=False)}


def _lab_recommendation() -> int:
    result = tune(LAB_CASE.job, DEVICE_PRESETS["ascend-910b"].curve(LAB_CASE.job.model, "low"))
    return result["recommended"]["micro_batch_size"]


def _lab_mfu_percent() -> float:
    return 100 * mfu(20_000, LAB_CASE.job, _PEAK)


# 4.5-7 and 4.5-8 double the lab case's micro-batch at the same global batch (1F1B, no recomputation).
_LAB_DOUBLED = replace(LAB_CASE.job, micro_batch_size=2 * LAB_CASE.job.micro_batch_size)
# 4.5-7's choices: the modelled speed-up's direction, with a ±5 % band called "about the same".
_SPEED_BAND = 0.05


def _lab_speedup() -> float:
    """Modelled tokens/s of the doubled micro-batch over the lab case's, on the 910B roofline's low end."""
    return modelled_speedup(LAB_CASE.job, _LAB_DOUBLED, DEVICE_PRESETS["ascend-910b"].curve(LAB_CASE.job.model, "low"))


def _speed_direction() -> str:
    speedup = _lab_speedup()
    return "A" if speedup > 1 + _SPEED_BAND else "C" if speedup < 1 - _SPEED_BAND else "B"


def _lab_memory_ratio() -> float:
    """The fullest stage's peak memory with the doubled micro-batch over the lab case's."""
    return stage_memory(_LAB_DOUBLED).peak_memory_fraction / stage_memory(LAB_CASE.job).peak_memory_fraction


def _lab_bubbles() -> str:
    jobs = (LAB_CASE.job, _LAB_DOUBLED)
    return " → ".join(f"{bubble_fraction(j.pipeline_stages, j.num_microbatches, j.schedule):.1%}" for j in jobs)


EXERCISES: dict[str, Exercise] = {
    "4.5-1": Exercise(
        "练习案例（GPT-2 large，序列 1024，全局批大小 128，4 级流水线，4 路数据并行）用微批次大小 2 时，"
        "每个数据并行副本每步有几个微批次？",
        lambda: LAB_CASE.plan().num_microbatches,
        "m = 全局批大小 / (微批次大小 × 数据并行度)；流水线阶段数不在其中。",
    ),
    "4.5-2": Exercise(
        "GPT-2 large（36 层，h = 1280，词表 50257）在序列长度 1024、不重计算时，按正文的公式，每个 token 的训练 FLOPs "
        "是多少 GFLOP？（保留一位小数）",
        lambda: model_flops_per_token(LAB_CASE.job) / 1e9,
        "不重计算时每 token 72·l·h²·(1 + s/(6h) + V/(12·l·h))：由 Narayanan et al. 2021 的逐项计数推出"
        "（前向 1 遍 + 反向 2 遍）。论文的式 3，96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))，假设完全重计算，"
        "各层多一遍前向（4 遍，72 = 96 × 3/4），输出层不重算，所以词表项是 V/(16lh) 而不是 V/(12lh)。",
        decimals=1,
    ),
    "4.5-3": Exercise(
        f"这个作业在 16 张卡上跑出 {throughput(20_000)}。若每张卡峰值 {flops_rate(_PEAK)}，模型算力利用率（MFU）是百分之几？"
        "（填百分数的数值，保留一位小数）",
        _lab_mfu_percent,
        "MFU = tokens/s × 每 token FLOPs / (卡数 × 每卡峰值)。",
        decimals=1,
    ),
    "4.5-4": Exercise(
        "先预测：用调参器给练习案例调参（910B 屋顶线低端作为速率曲线，默认 1F1B、不重计算、64 GiB），"
        "它推荐的微批次大小是多少？写下预测，再运行 `bl.tune(lab, lab_curve)`，填它推荐（`recommended`）的微批次大小。",
        _lab_recommendation,
        "python -m batchlab tune --model gpt2-large --seq-len 1024 --global-batch 128 "
        "--pipeline-stages 4 --data-parallel 4",
        predict=True,
    ),
    "4.5-5": Exercise(
        f"先预测：原文案例报告 {throughput(CASE_STUDY.reported['tokens_per_second'])} 时“NPU 利用率 "
        f"{CASE_STUDY.reported['npu_utilization']:.0%}”。把 {throughput(CASE_STUDY.reported['tokens_per_second'])} "
        f"读作整个 {CASE_STUDY.job.devices} 卡集群的吞吐，由吞吐推出的模型算力利用率"
        f"（每张卡峰值取 {flops_rate(_PEAK)}）大约是多少？写下预测的选项，再用本章的 `model_flops_utilisation` 算出来。",
        lambda: nearest_choice(_case_mfu(per_card=False), _CASE_CHOICES),
        f"每 token 约 10¹⁰ 次浮点运算；乘以整个集群的 tokens/s，再除以 {CASE_STUDY.job.devices} 张卡的峰值之和。"
        f"若你把 {throughput(CASE_STUDY.reported['tokens_per_second'])} 当成每张卡的吞吐，会得到约 "
        f"{_case_mfu(per_card=True):.0%}（选项 B）：那是另一种读法，正文的对照表也算了它，但这道题问的是整个集群的读法。",
        choices={"A": "约 42%，与报告一致", "B": f"约 {_case_mfu(per_card=True):.0%}",
                 "C": f"不到 {math.ceil(100 * _case_mfu(per_card=False)):.0f}%"},
        predict=True,
    ),
    "4.5-7": Exercise(
        f"先预测：练习案例把微批次大小从 {LAB_CASE.job.micro_batch_size} 增大到 {_LAB_DOUBLED.micro_batch_size}"
        "（全局批大小不变，1F1B），按 4.4 节的步时间模型（910B 屋顶线低端），吞吐会怎样变？写下预测的选项，"
        f"再运行 `bl.modelled_speedup(lab, replace(lab, micro_batch_size={_LAB_DOUBLED.micro_batch_size}), lab_curve)`"
        "（调整后的吞吐是调整前的几倍）对照。",
        _speed_direction,
        f"M = 微批次大小 × 序列长度，从 {LAB_CASE.job.micro_batch_size * LAB_CASE.job.seq_len} 变成 "
        f"{_LAB_DOUBLED.micro_batch_size * LAB_CASE.job.seq_len}，都已越过 910B 屋顶线的拐点，矩阵乘法几乎不再变快；"
        f"微批次数减半，气泡 {_lab_bubbles()}。",
        choices={"A": f"变快 {_SPEED_BAND:.0%} 以上", "B": f"相差不到 {_SPEED_BAND:.0%}",
                 "C": f"变慢 {_SPEED_BAND:.0%} 以上"},
        predict=True,
    ),
    "4.5-8": Exercise(
        f"先预测：练习案例把微批次大小从 {LAB_CASE.job.micro_batch_size} 增大到 {_LAB_DOUBLED.micro_batch_size}"
        "（全局批大小不变，1F1B，不重计算），最满阶段的峰值显存是原来的几倍？写下预测，"
        "再用 `bl.stage_memory(job).peak_memory_fraction` 算两种微批次下的峰值显存占比并相除（保留两位小数）。",
        _lab_memory_ratio,
        f"1F1B 下第一个阶段在途的微批次数 min(p, m) = {LAB_CASE.job.pipeline_stages} 不变，每个微批次的激活值加倍；"
        "参数、梯度和优化器状态与微批次大小无关，所以峰值不到原来的 2 倍。",
        decimals=2,
        predict=True,
    ),
}
