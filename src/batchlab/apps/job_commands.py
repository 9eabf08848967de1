"""The calculator's ``plan`` and ``tune`` commands: one :class:`~batchlab.formulas.job.Job` from the flags,
one report (a JSON-able dict) and its text.

The flags of a job are declared once (:func:`job_arguments`, :data:`JOB_FLAGS`) and read once
(:func:`job_from_args`), for ``plan``, ``tune`` and ``pipeline`` alike; the job's own validation is the
commands' validation, so a bad value is refused with the same Chinese line that a notebook or a widget would
show.
"""
from __future__ import annotations

import argparse
from typing import Sequence

from batchlab.formulas.checks import at_most, positive
from batchlab.formulas.job import ATTENTION_KINDS, DEVICE_MEMORY_GIB, GIB, OPTIMIZER_STATES, RECOMPUTE_MODES, Job
from batchlab.formulas.memory import activation_basis, stage_memory
from batchlab.formulas.pipeline_schedules import SCHEDULES, bubble_fraction, schedule_label
from batchlab.formulas.precision import PRECISIONS
from batchlab.formulas.presets import PRESETS, count_params, get_config
from batchlab.formulas.rampup import RAMP_STAGES_LIMIT, Rampup, ramp_stages
from batchlab.formulas.roofline import DEVICE_PRESETS, roofline_curve
from batchlab.formulas.throughput import mfu, model_flops_per_token
from batchlab.formulas.tune import RESOLUTION, tune
from batchlab.lecture.case import CASE_STUDY
from batchlab.page.numbers import (Formatted, count, decimal, dropout, estimate, flops_rate, percent, scientific, series,
                                   size, throughput)
from batchlab.ui.tables import display_width, text_table

__all__ = ["DEFAULT_PEAK_FLOPS", "DEFAULT_BANDWIDTH", "JOB_FLAGS", "MODEL_OVERRIDES", "MODEL_LIMITS",
           "job_arguments", "job_from_args", "device_figures", "model_shape", "schedule_bubble", "schedule_name",
           "devices_text", "plan_arguments", "plan", "plan_report", "rampup_report", "plan_text", "report_lines",
           "tune_arguments", "tune_report", "tune_command", "tune_text"]

_NPU = DEVICE_PRESETS["ascend-910b"]
DEFAULT_PEAK_FLOPS = _NPU.peak_flops[0]
"""Per-device peak FLOP/s when none is given: the low end of the 910B preset."""
DEFAULT_BANDWIDTH = _NPU.memory_bandwidth[0]
"""Per-device memory bandwidth (bytes/s) when none is given: the low end of the 910B preset."""


JOB_FLAGS: dict[str, str] = {
    "model": "--model", "n_layer": "--n-layer", "d_model": "--d-model", "n_head": "--n-head", "seq_len": "--seq-len",
    "global_batch": "--global-batch", "micro_batch_size": "--micro-batch", "pipeline_stages": "--pipeline-stages",
    "data_parallel": "--data-parallel", "schedule": "--schedule", "virtual_stages": "--virtual-stages",
    "tensor_parallel": "--tensor-parallel", "sequence_parallel": "--sequence-parallel",
    "context_parallel": "--context-parallel", "recompute": "--recompute",
    "precision": "--precision", "optimizer": "--optimizer", "zero1": "--zero1", "fp32_grads": "--fp32-grads",
    "dropout": "--dropout", "attention": "--attention", "device_memory_gib": "--device-memory-gib",
}
"""The flag of each job field (and of the model shape's three overrides), on every command that takes a job."""
MODEL_OVERRIDES = ("n_layer", "d_model", "n_head")
"""The fields of the preset's shape that ``--n-layer``, ``--d-model`` and ``--n-head`` replace
(:class:`~batchlab.formulas.presets.GPTConfig` checks the shape they make: whole numbers, d_model divisible by
n_head)."""
MODEL_LIMITS: dict[str, int] = {"n_layer": 1024, "d_model": 2**16}
"""The most ``--n-layer`` and ``--d-model`` may say: past GPT-2 XL's 48 layers and width 1,600 by far, and small
enough that every formula over the layers answers at once. ``--n-head`` needs no bound of its own: it divides
d_model, so it is at most d_model."""


def job_arguments(parser: argparse.ArgumentParser, *, micro_batch_required: bool) -> None:
    """The flags of a job (:data:`JOB_FLAGS`), shared by plan, tune and pipeline."""
    case = CASE_STUDY.job
    parser.add_argument("--model", default=case.model.name, choices=list(PRESETS), help=f"模型预设（默认 {case.model.name}）")
    parser.add_argument("--n-layer", type=int, default=None, help="改用这个层数（覆盖预设）")
    parser.add_argument("--d-model", type=int, default=None, help="改用这个宽度（覆盖预设；须是注意力头数的倍数）")
    parser.add_argument("--n-head", type=int, default=None,
                        help="改用这个注意力头数（覆盖预设；须整除宽度，且能被 --tensor-parallel 整除："
                             "gpt2-xl 的 25 个头分不成 t = 2，第 4.5 节用 --n-head 32 重新规划）")
    parser.add_argument("--seq-len", type=int, default=None, help="每个序列的 token 数（默认：模型的上下文长度，GPT-2 为 1024）")
    parser.add_argument("--global-batch", type=int, required=True, help="每个优化器步的序列数（全局批大小）")
    parser.add_argument("--micro-batch", type=int, required=micro_batch_required, default=1,
                        help="每个微批次的序列数" + ("" if micro_batch_required else
                                                     "（默认 1；tune 反正会列出每一种大小）"))
    parser.add_argument("--pipeline-stages", type=int, default=1, help="流水线并行度 p（默认 1）")
    parser.add_argument("--data-parallel", type=int, default=1, help="数据并行度（默认 1）")
    parser.add_argument("--schedule", choices=list(SCHEDULES), default="1f1b",
                        help="流水线调度：决定气泡，以及每个阶段同时存着几个微批次（默认 1f1b）")
    parser.add_argument("--virtual-stages", type=int, default=1,
                        help="每张卡放的模型块数 v：interleaved-1f1b 要 ≥ 2，zero-bubble 取 1（ZB-H1）或 2（ZB-V），"
                             "其余调度取 1；各层切成 p × v 块（默认 1）")
    parser.add_argument("--tensor-parallel", type=int, default=1, help="张量并行度 t：切分每层的注意力头和 MLP（默认 1）")
    parser.add_argument("--sequence-parallel", action="store_true", help="在张量并行组内做序列并行（需要 --tensor-parallel > 1）")
    parser.add_argument("--context-parallel", type=int, default=1, help="上下文并行度 cp：切分序列（默认 1）")
    memory = parser.add_argument_group("每阶段显存（第 4.3 节）")
    memory.add_argument("--recompute", choices=list(RECOMPUTE_MODES), default="none", help="激活重计算（默认 none）")
    memory.add_argument("--precision", choices=list(PRECISIONS), default=None,
                        help="精度（默认：GPT-2 各尺寸用 bf16-mixed，小模型用 fp32）")
    memory.add_argument("--optimizer", choices=list(OPTIMIZER_STATES), default="adam", help="优化器，决定优化器状态的字节数（默认 adam）")
    memory.add_argument("--zero1", action="store_true", help="把优化器状态切分到数据并行的各卡上（ZeRO-1）")
    memory.add_argument("--fp32-grads", action="store_true",
                        help="Megatron-LM 在 bf16 下的做法：fp32 主梯度，以 fp32 做 all-reduce（Adam 下每参数 18 B）；"
                             "默认是 ZeRO 的 16 位梯度（每参数 16 B）")
    memory.add_argument("--dropout", type=float, default=None,
                        help="dropout 概率；> 0 时每个 dropout 存 1 字节的掩码（默认：模型自己的，GPT-2 各尺寸为 0.1，"
                             "与 GPT-2 和 Megatron-LM 训练时一样，小模型为 0）")
    memory.add_argument("--attention", choices=list(ATTENTION_KINDS), default="materialized",
                        help="materialized 保存 s×s 注意力分数（Korthikanti 的 5as²b）；fused（FlashAttention/SDPA）"
                             "不保存（默认 materialized）")
    memory.add_argument("--device-memory-gib", type=float, default=DEVICE_MEMORY_GIB,
                        help=f"每张卡的显存，单位 GiB（默认 {DEVICE_MEMORY_GIB:g}，即 Ascend 910B）")


def job_from_args(args: argparse.Namespace) -> Job:
    """The job the flags describe (ValueError naming the value and the rule when they describe none)."""
    overrides = {name: getattr(args, name) for name in MODEL_OVERRIDES if getattr(args, name) is not None}
    for name, limit in MODEL_LIMITS.items():
        if name in overrides:
            at_most(name, overrides[name], limit, "上限")
    model = get_config(args.model, **overrides)  # the shape's own rules (presets.GPTConfig), one line each
    return Job(model=model, seq_len=model.n_positions if args.seq_len is None else args.seq_len,
               global_batch=args.global_batch, micro_batch_size=args.micro_batch,
               pipeline_stages=args.pipeline_stages, data_parallel=args.data_parallel, schedule=args.schedule,
               virtual_stages=args.virtual_stages, tensor_parallel=args.tensor_parallel,
               sequence_parallel=args.sequence_parallel, context_parallel=args.context_parallel,
               recompute=args.recompute, precision=args.precision, optimizer=args.optimizer, zero1=args.zero1,
               fp32_grads=args.fp32_grads, dropout=args.dropout, attention=args.attention,
               device_memory_gib=args.device_memory_gib)


def device_figures(peak_flops: float, bandwidth: float | None, job: Job) -> dict:
    """The device figures an answer rests on, named after the preset end they come from (or 自定义)."""
    presets = (f"{p.name}（{end}）" for p in DEVICE_PRESETS.values() for i, end in enumerate(("低端", "高端"))
               if peak_flops == p.peak_flops[i] and bandwidth in (None, p.memory_bandwidth[i]))
    name = next(presets, "自定义")
    figures = {"name": name, "peak_flops": peak_flops, "memory_bytes": job.device_memory_bytes}
    return figures if bandwidth is None else {**figures, "memory_bandwidth": bandwidth}


def _job_summary(job: Job) -> dict:
    """The job's fields as the JSON reports name them."""
    return {"model": job.model.name, "n_layer": job.model.n_layer, "d_model": job.model.d_model,
            "n_head": job.model.n_head, "params": count_params(job.model), "seq_len": job.seq_len,
            "schedule": job.schedule, "virtual_stages": job.virtual_stages, "tensor_parallel": job.tensor_parallel,
            "sequence_parallel": job.sequence_parallel, "context_parallel": job.context_parallel,
            "recompute": job.recompute, "precision": job.precision,
            "optimizer": job.optimizer, "zero1": job.zero1, "fp32_grads": job.fp32_grads,
            "dropout": job.dropout, "attention": job.attention}


def model_shape(report: dict) -> str:
    """A report's model shape as the text reports write it, dimensions as the book writes them (h = 1600):
    ``48 层，宽度 1600，32 个注意力头`` (an override of ``--n-layer``, ``--d-model`` or ``--n-head`` keeps the preset's
    name, so the shape says which variant ran)."""
    return f"{report['n_layer']} 层，宽度 {report['d_model']}，{report['n_head']} 个注意力头"


def report_lines(rows: Sequence[tuple[str, str]]) -> list[str]:
    """A text report's labelled lines, each label padded to the widest (by display width: a Chinese character
    takes two columns), so the values start in one column."""
    width = max(display_width(label) for label, _ in rows) + 2
    return [label + " " * (width - display_width(label)) + value for label, value in rows]


def schedule_bubble(job: Job) -> float:
    """The bubble of ``job``'s own schedule (and virtual stages) at its p and m: the closed form of
    :func:`~batchlab.formulas.pipeline_schedules.bubble_fraction`, which the simulator agrees with."""
    return bubble_fraction(job.pipeline_stages, job.num_microbatches, job.schedule, job.virtual_stages)


def schedule_name(schedule: str, virtual_stages: int) -> str:
    """A schedule as the text reports write it, the name every figure and table gives it
    (:func:`~batchlab.formulas.pipeline_schedules.schedule_label`): ``1F1B``, ``交错式 1F1B（v = 2）``."""
    return schedule_label(schedule, virtual_stages)


def devices_text(report: dict) -> str:
    """``8 = 4 个流水线阶段 × 2 路数据并行``, with the tensor and context degrees when they are not 1."""
    parts = [f"{count(report['tensor_parallel'])} 路张量并行"] if report["tensor_parallel"] > 1 else []
    parts += [f"{count(report['pipeline_stages'])} 个流水线阶段", f"{count(report['data_parallel'])} 路数据并行"]
    parts += [f"{count(report['context_parallel'])} 路上下文并行"] if report["context_parallel"] > 1 else []
    sp = "（序列并行）" if report["sequence_parallel"] else ""
    return f"{count(report['devices'])} = {' × '.join(parts)}{sp}"


def _memory_settings(report: dict) -> str:
    """The settings the memory answer rests on, in one line of the text reports (the attention kind in the
    reader's words too: the stored s×s scores are most of a GPT-2 layer's activation bytes)."""
    return (f"{schedule_name(report['schedule'], report['virtual_stages'])}，重计算 {report['recompute']}，"
            f"{report['precision']}，{report['optimizer']}{' + ZeRO-1' if report['zero1'] else ''}"
            f"{'，fp32 梯度' if report['fp32_grads'] else ''}，dropout {dropout(report['dropout'])}，"
            f"{activation_basis(report['attention'])}")


def _gib(values: Sequence[float]) -> str:
    """Bytes per stage in GiB to one decimal, as one row (a thousand stages stay one short line)."""
    return f"{series([decimal(v / GIB, 1) for v in values])} GiB"


# ── plan ─────────────────────────────────────────────────────────────────────────────────────────

def plan_report(job: Job, stated_grad_accum: int | None = None, tokens_per_second: float | None = None,
                peak_flops: float = DEFAULT_PEAK_FLOPS) -> dict:
    """Everything ``plan`` prints about ``job``, as a JSON-able dict. ``stated_grad_accum`` is checked
    against both readings of 梯度累积步数; ``tokens_per_second`` (the whole job's measured throughput)
    gives the MFU on ``peak_flops`` (per device); None without it. Raises ValueError on invalid input."""
    plan = job.plan if stated_grad_accum is None else job.read_grad_accum(stated_grad_accum)
    peak_flops = positive("peak_flops", peak_flops)
    return {
        **_job_summary(job),
        "tokens_per_step": plan.tokens_per_step(job.seq_len),
        "layers_per_stage": [stage.num_layers for stage in job.stages],
        **plan.to_dict(),
        "devices": job.devices,  # t · p · d · cp (the plan's own counts only p · d)
        "bubble_fraction": schedule_bubble(job),
        **stage_memory(job).to_dict(),
        "model_flops_per_token": model_flops_per_token(job),
        "tokens_per_second": tokens_per_second,
        "peak_flops": peak_flops,
        "device": device_figures(peak_flops, None, job),
        "mfu": None if tokens_per_second is None else mfu(tokens_per_second, job, peak_flops),
    }


def plan_arguments(parser: argparse.ArgumentParser) -> None:
    job_arguments(parser, micro_batch_required=True)
    parser.add_argument("--grad-accum", type=int, default=None,
                        help="一个给定的梯度累积步数，按两种读法核对：流水线填充数 m/p（原文）或微批次数 m（DeepSpeed）")
    utilization = parser.add_argument_group("模型 FLOPs 利用率 MFU（第 4.4 节）")
    utilization.add_argument("--tokens-per-second", type=float, default=None, help="整个作业（所有卡）实测的吞吐，单位 tokens/s；给出 MFU")
    utilization.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_FLOPS / 1e12,
                             help=f"每张卡的峰值 TFLOP/s（默认 {DEFAULT_PEAK_FLOPS / 1e12:g}，Ascend 910B 预设的低端）")
    parser.add_argument("--rampup-batch-size", type=int, nargs=3, default=None,
                        metavar=("START", "INCREMENT", "SAMPLES"),
                        help="Megatron-LM 批大小爬升计算器在 PR #4411 之前的算法（如今的 Megatron-LM 忽略这个参数，"
                             "改用 --step-batch-size-schedule）：全局批大小从 START 起，每消耗 SAMPLES 个样本中的一段"
                             "增加 INCREMENT，直到 --global-batch；按这个作业列出每个阶段的批大小、微批次数和气泡"
                             f"（至多 {RAMP_STAGES_LIMIT} 个阶段）")


def rampup_report(job: Job, start: int, increment: int, ramp_samples: int) -> dict:
    """The ramp ``--rampup-batch-size start increment ramp_samples`` up to ``job``'s global batch, stage by stage
    under its pipeline (:func:`~batchlab.formulas.rampup.ramp_stages`). Raises ValueError on an invalid ramp."""
    ramp = Rampup(start, increment, ramp_samples, job.global_batch)
    return {"start": ramp.start, "increment": ramp.increment, "ramp_samples": ramp.ramp_samples,
            "samples_per_increment": ramp.samples_per_increment,
            "stages": [stage.to_dict() for stage in ramp_stages(job, ramp)]}


def plan(args: argparse.Namespace) -> dict:
    job = job_from_args(args)
    report = plan_report(job, args.grad_accum, args.tokens_per_second, positive("peak_tflops", args.peak_tflops) * 1e12)
    if args.rampup_batch_size is not None:
        report["rampup"] = rampup_report(job, *args.rampup_batch_size)
    return report


def _rampup_text(ramp: dict) -> list[str]:
    """The ramp's stages as a table: batch, the consumed samples it covers, the steps run at it, m and the
    bubble, or the job's line refusing that batch."""
    last, each = ramp["stages"][-1], ramp["samples_per_increment"]  # Megatron-LM divides evenly: may be fractional
    rows = [[count(stage["global_batch"]), count(stage["first_sample"]),
             *([Formatted("（其余）"), Formatted("")] if stage["samples"] is None else
               [count(stage["samples"]), count(stage["steps"])]),
             Formatted("—") if stage["num_microbatches"] is None else count(stage["num_microbatches"]),
             percent(stage["bubble_fraction"]) if stage["refusal"] is None else f"不能运行：{stage['refusal']}"]
            for stage in ramp["stages"]]
    return ["", *report_lines([("批大小爬升", f"--rampup-batch-size {ramp['start']} {ramp['increment']} "
                                             f"{ramp['ramp_samples']}：{count(len(ramp['stages']))} 个阶段，每次增加间隔 "
                                             f"{count(each) if float(each).is_integer() else decimal(each, 2)} 个样本，从第 "
                                             f"{count(last['first_sample'])} 个样本起全局批大小为 {count(last['global_batch'])}"
                                             "（Megatron-LM 的读法）")]),
            text_table(["批大小", "起始样本", "样本数", "步数", "m", "气泡"], rows).text]


def plan_text(report: dict) -> str:
    fills = report["pipeline_fills"]
    v = report["virtual_stages"]
    closed = (" = (p-1)/(m+p-1)" if report["schedule"] in ("gpipe", "1f1b") else
              f"（{schedule_name(report['schedule'], v)}：模拟器验证过的闭式解）")
    if v == 1:
        in_flight = f"{series(map(count, report['in_flight_microbatches']))} 个微批次"
    else:  # chunks of n_layer / (p · v) layers each, as the pipeline command and the JSON count them
        layers = report["n_layer"] // (report["pipeline_stages"] * v)
        in_flight = f"{series(map(count, report['in_flight_chunks']))} 个模型块（每块 {count(layers)} 层）"
    rows = [
        ("模型", f"{report['model']}（{model_shape(report)}；{count(report['params'])} 个参数）"),
        ("全局批大小", f"{count(report['global_batch'])} 个序列 = 每步 {count(report['tokens_per_step'])} 个 token"),
        ("设备数", devices_text(report)),
        ("每阶段层数", series(map(count, report["layers_per_stage"]))),
        ("微批次数", f"{count(report['num_microbatches'])}，每个副本每步（微批次大小 {count(report['micro_batch_size'])}；"
                  "即 DeepSpeed 的 gradient_accumulation_steps）"),
        ("流水线填充数", ("不适用" if fills is None else count(fills))
         + "（= 微批次数 / 流水线阶段数，原文所说的梯度累积步数）"),
        ("气泡占比", f"{report['bubble_fraction']:.3f}{closed}"),
        ("显存", f"{_memory_settings(report)}；同时在途 {in_flight}"),
        ("  模型状态", _gib(report["model_state_bytes_per_stage"])),
        ("  激活值", _gib(report["activation_bytes_per_stage"])),
        ("  峰值", f"{_gib(report['peak_bytes_per_stage'])} = 每张卡 {size(report['device_memory_bytes'])} 的 "
                 f"{percent(report['peak_memory_fraction'])}（最满的阶段）"),
    ]
    if report["peak_memory_fraction"] > 1:
        rows.append(("警告", "最满的阶段放不下：试试 --recompute、更多流水线阶段或更小的微批次"))
    if report["grad_accum_reading"] is not None:
        rows.append(("--grad-accum", f"与读法 '{report['grad_accum_reading']}' 相符"))
    if not report["enough_microbatches"]:
        rows.append(("警告", "微批次数少于流水线阶段数：1F1B 跑不起来，流水线始终填不满"))
    rows.append(("模型 FLOPs", f"每个 token {scientific(report['model_flops_per_token'], 3)}（"
                 + ("Narayanan 等 2021 的式 3：完全重计算" if report["recompute"] == "full" else
                    "由 Narayanan 等 2021 的计数推得，不重计算：前向反向共 3 遍，不是式 3 的 4 遍") + "）"))
    if report["mfu"] is not None:
        rows.append(("MFU", f"{percent(report['mfu'])} = {throughput(report['tokens_per_second'])} × 每 token 的 FLOPs "
                            f"/（{count(report['devices'])} × {flops_rate(report['peak_flops'])}）"))
    lines = report_lines(rows)
    if "rampup" in report:
        lines += _rampup_text(report["rampup"])
    return "\n".join(lines)


# ── tune ─────────────────────────────────────────────────────────────────────────────────────────

def tune_report(job: Job, peak_flops: float = DEFAULT_PEAK_FLOPS, bandwidth: float = DEFAULT_BANDWIDTH,
                link_bandwidth: float | None = None) -> dict:
    """Everything ``tune`` prints: the job, the device figures it assumes (per-device ``peak_flops`` in
    FLOP/s, ``bandwidth`` in bytes/s, as the roofline rate curve of the job's tensor-parallel share of the
    matmul; ``link_bandwidth`` in bytes/s for its tensor-parallel collectives) and
    :func:`batchlab.formulas.tune.tune`'s answer. Raises ValueError."""
    curve = roofline_curve(job.model, peak_flops, bandwidth, tensor_parallel=job.tensor_parallel,
                           link_bandwidth=link_bandwidth)
    return {
        **_job_summary(job),
        "global_batch": job.global_batch,
        "pipeline_stages": job.pipeline_stages,
        "data_parallel": job.data_parallel,
        "devices": job.devices,
        "device_memory_bytes": job.device_memory_bytes,
        "device": device_figures(peak_flops, bandwidth, job),
        "curve": {"name": curve.name, "peak_flops": peak_flops, "bandwidth": bandwidth,
                  "tensor_parallel": curve.tensor_parallel, "link_bandwidth": curve.link_bandwidth,
                  "rows": list(curve.rows), "flops_per_second": list(curve.flops_per_second)},
        **tune(job, curve),
    }


def tune_arguments(parser: argparse.ArgumentParser) -> None:
    job_arguments(parser, micro_batch_required=False)
    curve = parser.add_argument_group(
        "速率曲线：bf16 下 MLP 矩阵乘法 [M, h] × [h, 4h] 的屋顶线（默认取 Ascend 910B 预设的低端："
        f"{DEFAULT_PEAK_FLOPS / 1e12:g} TFLOP/s 和 {DEFAULT_BANDWIDTH / 1e12:g} TB/s）")
    curve.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_FLOPS / 1e12,
                       help=f"每张卡的峰值 TFLOP/s（默认 {DEFAULT_PEAK_FLOPS / 1e12:g}）")
    curve.add_argument("--bandwidth-tbs", type=float, default=DEFAULT_BANDWIDTH / 1e12,
                       help=f"每张卡的显存带宽，单位 TB/s（默认 {DEFAULT_BANDWIDTH / 1e12:g}）")
    curve.add_argument("--link-gbs", type=float, default=None,
                       help="卡间单向带宽，单位 GB/s，用于张量并行的集合通信（--tensor-parallel > 1 时必须给："
                            "910B 预设里没有有出处的数字）")


def tune_command(args: argparse.Namespace) -> dict:
    link = None if args.link_gbs is None else positive("link_gbs", args.link_gbs) * 1e9
    job = job_from_args(args)
    try:
        return tune_report(job, positive("peak_tflops", args.peak_tflops) * 1e12,
                           positive("bandwidth_tbs", args.bandwidth_tbs) * 1e12, link)
    except ValueError as err:  # the model's line names the figure; the reader types the flag
        if link is None and "link_bandwidth" in str(err):
            raise ValueError(f"{err}（命令行：--link-gbs）") from None
        raise


_COLUMNS = ["微批次大小", "m", "气泡", "显存", "放得下"]


def _cells(row: dict) -> list:
    """A candidate's first cells in tune's two tables (:data:`_COLUMNS`)."""
    return [count(row["micro_batch_size"]), count(row["num_microbatches"]), percent(row["bubble_fraction"]),
            percent(row["peak_memory_fraction"]), row["fits"]]


def tune_text(report: dict) -> str:
    device, best, won = report["device"], report["recommended"], report["best_schedule"]
    candidates = text_table([*_COLUMNS, "矩阵乘法效率", "tokens/s", ""], [
        [*_cells(row), percent(row["matmul_efficiency"]), throughput(row["tokens_per_second"], False),
         "← 推荐" if best is not None and row["micro_batch_size"] == best["micro_batch_size"] else ""]
        for row in report["candidates"]])
    schedules = text_table(["调度", *_COLUMNS, "tokens/s", ""], [
        [schedule_name(e["schedule"], e["virtual_stages"]), *_cells(row), throughput(row["tokens_per_second"], False),
         "← 最佳" if won and (e["schedule"], e["virtual_stages"]) == (won["schedule"], won["virtual_stages"]) else ""]
        for e in report["schedules"] for row in [e["recommended"] or e["fastest"]]])
    verdict = (("推荐", f"微批次大小 {count(best['micro_batch_size'])}（{count(best['num_microbatches'])} 个微批次）："
                      f"放得下的候选里模型吞吐最高的（相差不到 {percent(RESOLUTION)} 算一样快，一样快时取显存少的）。"
                      "这是模型推算，不是实测：屋顶线是上限，不计每个微批次的开销、点对点延迟和内核启动，"
                      "矩阵乘法一旦算力受限就不再奖励更大的微批次；选定之前请实测") if best else
               ("都放不下", report["suggestion"]))
    tail = [("调度搜索", "同一个作业换成每种调度（及 v）：各取放得下的最快微批次，都放不下时取最快的（模型推算）"),
            ("最佳调度", f"{schedule_name(won['schedule'], won['virtual_stages'])}，微批次大小 "
                      f"{count(won['micro_batch_size'])}：{report['schedule_reason']}" if won else "无：搜索过的调度下都放不下")]
    if report["schedules_not_searched"]:
        tail.append(("未搜索", f"{'、'.join(report['schedules_not_searched'])}：这么多流水线阶段和微批次大小下，"
                             "从调度顺序读出它们的显存太费时"))
    return "\n".join([*report_lines([
        ("模型", f"{report['model']}（{model_shape(report)}），序列长度 {report['seq_len']}，"
               f"全局批大小 {count(report['global_batch'])}，设备数 {devices_text(report)}"),
        ("显存", f"{_memory_settings(report)}，每张卡 {size(report['device_memory_bytes'])}"),
        ("设备", f"{device['name']}：{flops_rate(device['peak_flops'])}，{estimate(device['memory_bandwidth'] / 1e12)} TB/s"),
        ("速率曲线", report["curve"]["name"])]), "", candidates.text, "", *report_lines([verdict]), "",
        *report_lines(tail[:1]), schedules.text, *report_lines(tail[1:])])
