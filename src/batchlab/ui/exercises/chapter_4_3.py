"""Exercises of chapter 4.3; answers are computed by batchlab when checked, never typed in."""
from __future__ import annotations

from dataclasses import replace

from batchlab.formulas.job import GIB, Job
from batchlab.formulas.memory import bytes_per_param, layer_activation_bytes, stage_memory
from batchlab.formulas.tune import runnable_micro_batch_sizes
from batchlab.formulas.pipeline_schedules import in_flight_microbatches
from batchlab.formulas.presets import get_config
from batchlab.lecture.case import CASE_STUDY
from batchlab.ui.exercises.base import Exercise

__all__ = ["EXERCISES"]


def _case_stage_states_gib(stage: int) -> float:
    return stage_memory(CASE_STUDY.job).stages[stage].states.total / GIB


def _peak_growth_when_micro_doubles() -> float:
    """The fullest stage's peak at twice the case's micro-batch over the case's own (1F1B, memory model)."""
    job = CASE_STUDY.job
    before, after = (max(stage_memory(replace(job, micro_batch_size=b)).peak_bytes_per_stage)
                     for b in (job.micro_batch_size, 2 * job.micro_batch_size))
    return after / before


def _stage0_growth_when_global_doubles() -> float:
    job = CASE_STUDY.job
    before, after = (stage_memory(replace(job, global_batch=g)).stages[0].activation_bytes
                     for g in (job.global_batch, 2 * job.global_batch))
    return after / before


EXERCISES: dict[str, Exercise] = {
    "4.3-1": Exercise(
        "本章在 CPU 上训练的 `tiny` 模型用 fp32 全精度 + Adam。先预测：它每个参数的模型状态（参数、梯度、优化器状态）"
        "一共占多少字节，比 16 位混合精度 + Adam 的 16 字节多还是少？然后运行“在小模型上测量”的单元，"
        "用表中三列之和除以参数个数（参数字节 ÷ 4）核对，填整数。",
        lambda: sum(bytes_per_param("fp32", "adam").values()),
        "fp32 训练的权重本身就是 fp32，不需要另存一份主权重：参数 4 + 梯度 4 + Adam 两个动量各 4"
        "（表中多出的几十字节是 torch 为每个参数张量保存的步数计数器）。",
        predict=True,
    ),
    "4.3-2": Exercise(
        "案例初始配置（GPT-2 1.5B，4 级流水线，16 位混合精度 Adam，16 位梯度，无 ZeRO）中，中间阶段（阶段 1，12 层）"
        "的模型状态占多少 GiB？（保留两位小数）",
        lambda: _case_stage_states_gib(1),
        "一层参数 12·d² + 13·d，d = 1600；乘以 12 层，再乘以每参数 16 字节，除以 2³⁰。",
        decimals=2,
    ),
    "4.3-3": Exercise(
        "8 级流水线、32 个微批次，1F1B 调度下阶段 0 最多同时保存几个微批次的激活值？",
        lambda: in_flight_microbatches("1f1b", 8, 32)[0],
        "1F1B 的阶段 i（从 0 数起）最多持有 min(p − i, m) 个微批次。",
    ),
    "4.3-4": Exercise(
        "GPT-2 1.5B 的一层（$h = 1600$，$a = 25$），$s = 1024$，微批次大小 2，16 位、有 dropout、不重计算、"
        "显式注意力（保存 $s\\times s$ 分数），按 Korthikanti et al. 2022 需要保存多少 GiB 激活值？（保留两位小数）",
        lambda: layer_activation_bytes(Job(get_config("gpt2-xl"), seq_len=1024, global_batch=2, micro_batch_size=2,
                                           precision="bf16-mixed", dropout=0.1)) / GIB,
        "s·b·h·(34 + 5·a·s/h) 字节。",
        decimals=2,
    ),
    "4.3-5": Exercise(
        "案例初始配置用 1F1B，微批次大小不变，把全局批大小从 64 增大到 128（m 从 16 变为 32）。"
        "阶段 0 的激活显存变为原来的几倍？",
        _stage0_growth_when_global_doubles,
        "1F1B 的阶段 0 最多持有 min(p, m) 个微批次；m 已经不小于 p 时，再增大 m 不增加在途微批次。",
    ),
    "4.3-6": Exercise(
        "案例初始配置（全局批大小 64，数据并行度 2，4 级流水线，1F1B）不改全局批大小和数据并行度，"
        "不看显存，批次算术允许的最大微批次大小是多少？",
        lambda: max(runnable_micro_batch_sizes(CASE_STUDY.job)),
        "微批次大小要整除每个副本的序列数 64 / 2，且微批次数 m = 32 / b ≥ p（本书与 torch 的 1F1B 的规则）。",
    ),
    "4.3-8": Exercise(
        "先预测：案例初始配置（1F1B，不重计算）把微批次大小从 2 加倍到 4（全局批大小不变），最满阶段的显存峰值"
        "变为原来的几倍？然后在显存探索器里把微批次大小从 2 调到 4，用摘要里前后两个峰值算出倍数（保留两位小数）。",
        _peak_growth_when_micro_doubles,
        "激活值随微批次大小加倍，模型状态不变：峰值的倍数在 1 和 2 之间，模型状态占得越多越接近 1。",
        decimals=2,
        predict=True,
    ),
    "4.3-9": Exercise(
        "案例初始配置把微批次大小加到 8 时，不重计算放不下。先预测：同样 b = 8 换成选择性重计算，最满阶段的峰值"
        "占设备显存的百分之几？然后在显存探索器里把微批次大小调到 8、重计算选“选择性重计算”，读摘要"
        "（填百分数的数值，保留一位小数）。",
        lambda: 100 * stage_memory(replace(CASE_STUDY.job, micro_batch_size=8,
                                           recompute="selective")).peak_memory_fraction,
        "选择性重计算只去掉每层的 s×s 注意力分数（5·a·s²·b 字节），而案例中这一项占每层激活的大半。",
        decimals=1,
        predict=True,
    ),
}
