"""``python -m batchlab``: the book's numbers without a notebook::

    python -m batchlab plan --global-batch 64 --micro-batch 2 --pipeline-stages 4 --data-parallel 2 [--json]
    python -m batchlab tune --global-batch 64 --pipeline-stages 4 --data-parallel 2 [--peak-tflops 256]
    python -m batchlab pipeline --global-batch 64 --micro-batch 2 --pipeline-stages 4 [--run local|distributed]
    python -m batchlab device | bench-matmul --m 1024 2048 --k 1600 --n 6400 | grade submissions/

Each subcommand is one entry of :data:`COMMANDS`: a function that adds its arguments, one that runs it and
returns the report (``--json`` prints it) and one that writes it for a reader, in Chinese (``plan`` and ``tune``
live in :mod:`batchlab.apps.job_commands`). Every value is checked before torch loads; invalid input exits 2 with
one Chinese line on stderr. ``plan``, ``tune`` and ``pipeline`` take one job, with the same flags
(:func:`~batchlab.apps.job_commands.job_arguments`), built once (:func:`~batchlab.apps.job_commands.job_from_args`).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from batchlab.apps import job_commands
from batchlab.apps.grade import (DEFAULT_NOTEBOOK_S, DEFAULT_TIMEOUT_S, MAX_JOBS, GradingInterrupted,
                                 assignment_exercises, check_grade_dependencies, grade_class, grade_table)
from batchlab.apps.grade_report import check_csv_target, table_text, write_csv
from batchlab.formulas.budget import BENCH_BUDGET, RUN_BUDGET, bench_cost, check_budget, run_cost
from batchlab.formulas.checks import at_most, between, whole
from batchlab.formulas.job import Job
from batchlab.formulas.pipeline_schedules import BACKWARD_PER_FORWARD, SCHEDULES, pipeline_timeline, simulable
from batchlab.formulas.precision import element_bytes
from batchlab.formulas.roofline import matmul_flops
from batchlab.page.numbers import Formatted, count, estimate, percent, ratio, seconds, series, size
from batchlab.ui.tables import text_table

__all__ = ["main", "build_parser", "COMMANDS", "CLI_BENCH_SECONDS", "LOCAL_SCHEDULES", "MODELLED", "run_refusal"]


# argparse's own usage errors, in the book's language (the patterns are argparse's messages).
_ARGPARSE_ZH: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"argument (?P<a>\S+): invalid int value: (?P<v>.+)"), "{a} 的值 {v} 不是整数"),
    (re.compile(r"argument (?P<a>\S+): invalid float value: (?P<v>.+)"), "{a} 的值 {v} 不是数"),
    (re.compile(r"argument (?P<a>\S+): invalid choice: (?P<v>\S+) \(choose from (?P<c>.+)\)"),
     "{a} = {v}：只能取 {c} 之一"),
    (re.compile(r"argument (?P<a>\S+): expected one argument"), "{a} 需要一个值"),
    (re.compile(r"argument (?P<a>\S+): expected at least one argument"), "{a} 至少需要一个值"),
    (re.compile(r"argument (?P<a>\S+): expected (?P<n>\d+) arguments"), "{a} 需要 {n} 个值"),
    (re.compile(r"the following arguments are required: (?P<a>.+)"), "缺少参数 {a}"),
    (re.compile(r"unrecognized arguments: (?P<a>.+)"), "不认识的参数 {a}"),
    (re.compile(r"argument (?P<a>\S+): (?P<m>.+)"), "{a}：{m}"),
)


def _in_chinese(message: str) -> str:
    return next((template.format(**match.groupdict()) for pattern, template in _ARGPARSE_ZH
                 if (match := pattern.fullmatch(message))), message)


class _Formatter(argparse.HelpFormatter):
    """argparse's help, with its own words in Chinese: 用法 for usage, a full-width colon after each heading."""

    def format_help(self) -> str:
        return re.sub(r"^usage: |^(\S.*):$", lambda m: m[1] + "：" if m[1] else "用法：", super().format_help(), flags=re.M)


class _Parser(argparse.ArgumentParser):
    """argparse in the book's language: a usage error is one line on stderr, in Chinese, with exit status 2;
    the help says 用法, 选项 and 位置参数, and -h says what it does in Chinese."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        kwargs["add_help"] = False
        super().__init__(*args, **kwargs)
        self._positionals.title, self._optionals.title = "位置参数", "选项"
        self.add_argument("-h", "--help", action="help", help="显示这段帮助并退出")

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {_in_chinese(message)}\n")


# ── device ───────────────────────────────────────────────────────────────────────────────────────

def _device_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default=None, help="计算设备：auto（默认）、cpu、cuda、npu、npu:1 ……")


def _device(args: argparse.Namespace) -> dict:
    from batchlab.measure.device import select_device  # torch only for the commands that need it
    from batchlab.measure.device_memory import describe

    return describe(select_device(args.device)).as_record()


_DEVICE_LABELS = {"device": "设备", "kind": "类型", "name": "名称", "torch": "torch 版本", "torch_npu": "torch_npu 版本",
                  "memory": "显存（内存）", "process_rss": "整个进程的常驻内存", "allocator": "分配器占用"}


def _format_memory(memory: dict) -> str:
    """The memory line of ``device``: what ``allocated`` counts (on the CPU the whole process's RSS, not allocator
    bytes), its peak and what is free (where the figures come from, a tool's own words, is the JSON's ``source``)."""
    return (f"已占用 {size(memory['allocated'], 2)}（{_DEVICE_LABELS.get(memory['measures'], '')}，measures = "
            f"{memory['measures']}），峰值 {size(memory['peak'], 2)}，可用 {size(memory['free'])} / 共 {size(memory['total'])}")


def _device_text(info: dict) -> str:
    shown = {key: _format_memory(value) if key == "memory" else "无" if value is None else str(value) for key, value in info.items()}
    return "\n".join(job_commands.report_lines([(_DEVICE_LABELS.get(key, key), value) for key, value in shown.items()]))


# ── bench-matmul ─────────────────────────────────────────────────────────────────────────────────

CLI_BENCH_SECONDS = 10.0
"""The longest benchmark the CLI starts (estimated before the samples; the default takes 1–3 s here, the
case's shapes in 4.6's cheat sheet 2–3 s on an idle 2-core CPU and twice that on a busy one)."""
_BENCH_MS = (1, 2, 4, 8, 16, 32, 64, 128)  # = measure.matmul.DEFAULT_MS, repeated so --help needs no torch
BENCH_LIMITS = {"MAX_DIM": 65_536, "MAX_REPEATS": 100, "MIN_SECONDS_RANGE": (1e-6, 1.0), "MAX_CALL_FLOPS": 10**11}
""":mod:`batchlab.measure.matmul`'s limits of the same names, repeated so that every flag is checked before torch
loads (seconds on a laptop); tests/test_cli.py holds the two equal."""
_BENCH_FLAGS = {"ms": "--m 的个数", "m": "--m", "k": "--k", "n": "--n"}
"""The flags that set each input of :func:`~batchlab.formulas.budget.bench_cost`, for its refusal line."""


def _bench_matmul_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--m", type=int, nargs="+", default=list(_BENCH_MS),
                        help="[M, K] × [K, N] 的行数 M，可给多个（默认 1 2 4 … 128）")
    parser.add_argument("--k", type=int, default=4096, help="内维 K（默认 4096）")
    parser.add_argument("--n", type=int, default=8192, help="列数 N（默认 8192）")
    # No argparse choices: the package's one_of check answers in the book's wording.
    parser.add_argument("--dtype", default="auto",
                        help="数据类型：auto（默认：NPU/GPU 上 bfloat16，CPU 上 float32）、float32、bfloat16 或 float16")
    parser.add_argument("--device", default=None, help="计算设备：auto（默认）、cpu、cuda、npu、npu:1 ……")
    parser.add_argument("--repeats", type=int, default=5, help="每个 M 的采样次数，取最快的一次（默认 5）")
    parser.add_argument("--min-seconds", type=float, default=0.01, help="每次采样重复矩阵乘法，直到至少持续这么多秒（默认 0.01）")


def _check_bench_flags(args: argparse.Namespace) -> None:
    """Every bench-matmul flag against :func:`~batchlab.measure.matmul.bench_matmul`'s rules, in its wording, before
    torch loads; what only the device can say (its memory, its dtypes, how long a call takes) is left to it."""
    if args.dtype != "auto":
        element_bytes(args.dtype)
    dims = [at_most(name, whole(name, value), BENCH_LIMITS["MAX_DIM"], "上限")
            for name, value in [*(("m", m) for m in args.m), ("k", args.k), ("n", args.n)]]
    at_most("repeats", whole("repeats", args.repeats), BENCH_LIMITS["MAX_REPEATS"], "上限")
    between("min_seconds", args.min_seconds, *BENCH_LIMITS["MIN_SECONDS_RANGE"])
    at_most("2·m·k·n（最大的 m）", matmul_flops(max(dims[:-2]), args.k, args.n), BENCH_LIMITS["MAX_CALL_FLOPS"],
            "一次计时调用的上限")


def _bench_matmul(args: argparse.Namespace) -> dict:
    _check_bench_flags(args)  # a typo answers before torch loads (seconds on a laptop)
    # what the shapes hold and draw, before torch loads: "auto" is fp32 on a CPU, bf16 (drawn in fp32) elsewhere
    for dtype in ("float32", "bfloat16") if args.dtype == "auto" else (args.dtype,):
        check_budget(bench_cost(args.m, args.k, args.n, dtype), BENCH_BUDGET, _BENCH_FLAGS)
    from batchlab.measure.matmul import bench_matmul, efficiency, training_dtype  # torch only when needed

    dtype = training_dtype(args.device) if args.dtype == "auto" else args.dtype
    bench = bench_matmul(args.m, args.k, args.n, dtype, args.device, args.repeats, args.min_seconds,
                         max_seconds=CLI_BENCH_SECONDS)
    return {**bench.as_record(), "fraction_of_best": efficiency(bench.results),
            "estimated_cost": asdict(bench_cost(args.m, args.k, args.n, dtype))}


def _bench_matmul_text(report: dict) -> str:
    # The first line's "device" and the header's "of best" are what tests/test_matmul_bench.py reads.
    table = text_table(["m", "k", "n", "每次耗时", "TFLOP/s", "波动（最慢/最快）", "of best（占最快）"],
                       [[Formatted(str(row["m"])), Formatted(str(row["k"])), Formatted(str(row["n"])), seconds(row["seconds"]),
                         estimate(row["tflops"]), ratio(spread), percent(fraction)]
                        for row, spread, fraction in zip(report["results"], report["spread"], report["fraction_of_best"])])
    return "\n".join([f"device  {report['device']}（{report['device_name']}），{report['dtype']}，每个 m 采样 "
                      f"{count(report['repeats'])} 次、取最快的一次，每次采样至少 {seconds(report['min_seconds'])}",
                      table.text])


# ── pipeline ─────────────────────────────────────────────────────────────────────────────────────

def _pipeline_arguments(parser: argparse.ArgumentParser) -> None:
    job_commands.job_arguments(parser, micro_batch_required=True)  # the job: plan's flags
    parser.add_argument("--run", choices=["local", "distributed"], default=None,
                        help="实测而不是模拟：单进程（local）或每个阶段一个进程（distributed，"
                             "torch.distributed.pipelining），以 fp32、不带 dropout 运行作业的 GPT"
                             "（例如 --model tiny --n-layer 4 --d-model 128 --seq-len 64）")
    parser.add_argument("--timeout", type=float, default=120.0, help="多进程实测最多可用的秒数，含启动（默认 120）")


MAX_RUN_STAGES = 16
LOCAL_WARMUP, LOCAL_TIMED, DISTRIBUTED_TIMED = 1, 2, 2
RUN_STEPS = {"local": LOCAL_WARMUP + LOCAL_TIMED, "distributed": 1 + DISTRIBUTED_TIMED}
"""Steps a measured run takes, each kind one discarded warm-up (a cold first backward must not set the bubble)
and two timed, within :data:`~batchlab.formulas.budget.RUN_BUDGET` for the README's example."""
_RUN_FLAGS = {"num_microbatches": "--global-batch", "pipeline_stages": "--pipeline-stages",
              "micro_batch_size": "--micro-batch", "seq_len": "--seq-len", "d_model": "--d-model"}
"""The flags that set each input of :func:`~batchlab.formulas.budget.run_cost`, for its refusal line."""

LOCAL_SCHEDULES = ("gpipe", "1f1b")
"""The schedules the one-process run replays (one stage module per stage, the backward whole); the
multi-process run (:func:`~batchlab.measure.pipeline_distributed.run_pipeline_distributed`) runs them all."""
MODELLED = "模型推算"
"""How the pipeline command marks the simulator's answer given in place of a run that cannot be made."""


def run_refusal(job: Job, kind: str) -> str | None:
    """Why a measured run of ``kind`` (``local`` or ``distributed``) cannot run ``job``, in one Chinese clause;
    None when it can. The runs cut the model into pipeline stages only: no tensor, sequence or context
    parallelism."""
    split = [f"{name} = {value}" for name, value in (("tensor_parallel", job.tensor_parallel),
                                                      ("context_parallel", job.context_parallel)) if value > 1]
    computed = [f"{name} = {value!r}" for name, value, runs in (
        ("precision", job.precision, "fp32"), ("attention", job.attention, "materialized"), ("dropout", job.dropout, 0))
        if value != runs]
    if computed:  # checked here, before torch loads: the runs' own checks would say it seconds later
        return (f"{'、'.join(computed)}：实测运行用 fp32、显式注意力、不带 dropout 计算（--precision fp32 "
                "--attention materialized --dropout 0），下面是模拟器的答案")
    if split or job.sequence_parallel:
        return (f"{'、'.join(split) or 'sequence_parallel = True'}：实测运行只切流水线阶段，不做张量、序列或上下文并行，"
                "下面是模拟器的答案")
    if kind == "local" and job.schedule not in LOCAL_SCHEDULES:
        return (f"schedule = {job.schedule!r}：单进程实测（--run local）只重放 GPipe 和 1F1B，"
                f"{SCHEDULES[job.schedule]} 请用 --run distributed；下面是模拟器的答案")
    return None


def _pipeline(args: argparse.Namespace) -> dict:
    job = job_commands.job_from_args(args)  # the schedule's rules (m vs p, v vs the layers): the job says so
    p, m, v = job.pipeline_stages, job.num_microbatches, job.virtual_stages
    layers = job.model.n_layer // (p * v)  # of one chunk (the job checked that p · v divides them)
    refusal = None if args.run is None else run_refusal(job, args.run)
    run = None if refusal else args.run
    cost = None
    if run is not None:  # what the run will spend, against the budget, before anything runs or torch loads
        at_most("pipeline_stages", p, MAX_RUN_STAGES, "实测运行的上限")
        timeout = between("timeout", args.timeout, 1, 3600)
        cost = check_budget(run_cost(job, RUN_STEPS[run], p if run == "distributed" else 1), RUN_BUDGET,
                            _RUN_FLAGS)
    report = {"schedule": job.schedule, "virtual_stages": v, "pipeline_stages": p, "num_microbatches": m,
              "model": job.model.name, "n_layer": job.model.n_layer, "d_model": job.model.d_model,
              "n_head": job.model.n_head, "seq_len": job.seq_len, "global_batch": job.global_batch,
              "micro_batch_size": job.micro_batch_size, "data_parallel": job.data_parallel,
              "tensor_parallel": job.tensor_parallel, "sequence_parallel": job.sequence_parallel,
              "context_parallel": job.context_parallel,
              "bubble_fraction_formula": job_commands.schedule_bubble(job),
              "peak_in_flight": list(job.in_flight_chunks),
              "peak_in_flight_unit": "micro-batches" if v == 1 else f"chunks of {layers} layer{'s' * (layers > 1)}",
              "modelled": None if refusal is None else f"{MODELLED}：{refusal}"}
    unit = f"one forward pass of a stage (backward = {BACKWARD_PER_FORWARD})"
    if run is None and not simulable(p, m, job.schedule, v):  # the closed forms, which the simulator agrees with
        busy = m * (1 + BACKWARD_PER_FORWARD)  # every stage's own work; the bubble is the idle rest of the step
        return {**report, "run": "formula", "bubble_fraction": report["bubble_fraction_formula"],
                "step_time": busy / (1 - report["bubble_fraction_formula"]), "step_time_unit": unit,
                "estimated_cost": None}
    if run is None:  # a chunk is 1/v of a stage: its forward and backward take 1/v of the stage's
        timeline = pipeline_timeline(job.schedule, p, m, 1 / v, BACKWARD_PER_FORWARD / v, virtual_stages=v)
        return {**report, "run": "simulated", "bubble_fraction": timeline.idle_fraction,
                "step_time": timeline.makespan, "step_time_unit": unit, "estimated_cost": None,
                "peak_in_flight": timeline.peak_in_flight()}
    from batchlab.measure.pipeline_distributed import run_pipeline_distributed  # torch only for the runs
    from batchlab.measure.pipeline_local import run_pipeline_local

    if run == "local":
        timeline = run_pipeline_local(job, steps=LOCAL_TIMED, warmup=LOCAL_WARMUP).replayed
        seconds = timeline.makespan
    else:
        measured = run_pipeline_distributed(job, steps=DISTRIBUTED_TIMED, timeout=timeout)
        timeline, seconds = measured.timeline, min(measured.step_seconds)
    cores = os.cpu_count() or 1
    shared = (f"{p} 个进程共用 {cores} 个 CPU 核：每个进程分不到一个核，测到的气泡比公式大得多"
              if run == "distributed" and p > cores else None)
    return {**report, "run": run, "bubble_fraction": timeline.idle_fraction, "step_time": seconds,
            "step_time_unit": "seconds", "peak_in_flight": timeline.peak_in_flight(),
            "estimated_cost": asdict(cost), "warning": shared}


_RUN_NAMES = {"simulated": "模拟器", "formula": "闭式解", "local": "单进程实测", "distributed": "多进程实测"}  # each "run"
_PARALLEL = {"tensor_parallel": "张量并行", "context_parallel": "上下文并行"}


def _pipeline_text(report: dict) -> str:
    measured = report["step_time_unit"] == "seconds"
    run = _RUN_NAMES[report["run"]] + ("" if report["modelled"] is None else f"，{MODELLED}")
    closed = ("公式 (p-1)/(m+p-1)" if report["schedule"] in ("gpipe", "1f1b") else
              f"闭式解（{SCHEDULES[report['schedule']]}）")
    parallel = [f"{count(report[k])} 路{name}" for k, name in _PARALLEL.items() if report[k] > 1]
    v, p = report["virtual_stages"], report["pipeline_stages"]
    unit = ("个微批次" if v == 1 else f"个模型块（每块 {count(report['n_layer'] // (p * v))} 层）")
    rows = [
        *([("说明", report["modelled"])] if report["modelled"] else []),
        ("调度", f"{job_commands.schedule_name(report['schedule'], v)}（{run}），{count(p)} 个流水线阶段，"
               f"{count(report['num_microbatches'])} 个微批次"),
        ("作业", f"{report['model']}（{job_commands.model_shape(report)}），序列长度 {report['seq_len']}，"
               f"全局批大小 {count(report['global_batch'])} = {count(report['data_parallel'])} 路数据并行 × "
               f"{count(report['num_microbatches'])} 个微批次 × 每个 {count(report['micro_batch_size'])} 个序列"
               + "".join(f"，{text}" for text in parallel) + ("，序列并行" if report["sequence_parallel"] else "")),
        ("气泡占比", f"{report['bubble_fraction']:.3f}（{closed} = {report['bubble_fraction_formula']:.3f}）"),
        ("一步时间", seconds(report["step_time"]) if measured else
         f"{estimate(report['step_time'])} 个“一个阶段的前向”（反向 = {BACKWARD_PER_FORWARD} 个前向）"),
        ("同时在途峰值", f"每个阶段 {series(map(count, report['peak_in_flight']))} {unit}"),
        *([("警告", report["warning"])] if report.get("warning") else []),
    ]
    return "\n".join(job_commands.report_lines(rows))


# ── grade ────────────────────────────────────────────────────────────────────────────────────────

def _grade_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="学生提交的笔记本所在的文件夹，每个学生一个文件")
    parser.add_argument("--csv", default=None, metavar="FILE", help="同时把成绩表写入 FILE（UTF-8 CSV；不能在 DIR 里面）")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S,
                        help=f"一个单元格最多运行的秒数，超时即中断（默认 {DEFAULT_TIMEOUT_S}）")
    parser.add_argument("--notebook-timeout", type=int, default=DEFAULT_NOTEBOOK_S,
                        help=f"一份笔记本总共最多运行的秒数，含内核启动（默认 {DEFAULT_NOTEBOOK_S}）")
    parser.add_argument("--chapter", nargs="+", default=None, metavar="N", help="作业包含的章节，例如 4.1（默认：至少一半笔记本作答了的每一章）")
    parser.add_argument("--jobs", type=int, default=None, metavar="N", help="同时批改的笔记本数，每份一个沙箱（默认：核数与内存容得下的份数）")


def _grade(args: argparse.Namespace) -> dict:
    check_grade_dependencies()  # the extra batchlab[grade]: refused in one line, not an ImportError's traceback
    directory = Path(args.directory)
    if not directory.is_dir():
        raise ValueError(f"DIR = {args.directory!r}：不是一个存在的文件夹")
    # whole seconds (nbclient's limit is an integer), at most a day: a cell is a student's exercise
    timeout = int(between("timeout", args.timeout, 1, 24 * 3600))
    notebook_timeout = int(between("notebook-timeout", args.notebook_timeout, 1, 7 * 24 * 3600))
    # say so before minutes of grading; then write where the check looked (links resolved once)
    csv_path = None if args.csv is None else check_csv_target(Path(args.csv), directory)
    if args.chapter is not None:
        assignment_exercises([], args.chapter)  # an unknown chapter is refused before grading too
    jobs = None if args.jobs is None else int(between("jobs", args.jobs, 1, MAX_JOBS))
    grades = grade_class(directory, timeout, notebook_timeout=notebook_timeout, jobs=jobs)
    headers, rows = grade_table(grades, args.chapter)
    if csv_path is not None:
        write_csv(csv_path, headers, rows)
    return {"directory": str(directory), "timeout": timeout, "csv": args.csv, "headers": headers, "rows": rows}


def _grade_text(report: dict) -> str:
    text = table_text(report["headers"], report["rows"])
    return text if report["csv"] is None else f"{text}\n已写入 {report['csv']}"


# ── the table ────────────────────────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class Command:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], dict]
    """Returns the JSON-able report; raises ValueError/RuntimeError on invalid input."""
    text: Callable[[dict], str]
    """The report as a reader-friendly text (``--json`` prints the report itself)."""


COMMANDS: dict[str, Command] = {
    "plan": Command("核对一个批次配置，推出微批次数、气泡和每阶段显存",
                    job_commands.plan_arguments, job_commands.plan, job_commands.plan_text),
    "device": Command("报告计算设备（NPU、CUDA 或 CPU）及其显存（内存）", _device_arguments, _device, _device_text),
    "pipeline": Command("模拟（或实测）一步流水线：气泡、一步时间、每阶段同时在途的微批次", _pipeline_arguments, _pipeline,
                        _pipeline_text),
    "tune": Command("列出每种微批次大小的气泡、每阶段显存和模型推算的吞吐，并推荐一个",
                    job_commands.tune_arguments, job_commands.tune_command, job_commands.tune_text),
    "bench-matmul": Command("逐个 M 计时 [M, K] × [K, N] 矩阵乘法：耗时、TFLOP/s、占最快的比例",
                            _bench_matmul_arguments, _bench_matmul, _bench_matmul_text),
    "grade": Command("在全新的内核里逐份运行学生提交的笔记本，给练习打分，每个学生一行", _grade_arguments, _grade, _grade_text),
}


def build_parser() -> argparse.ArgumentParser:
    """The calculator's parser: one subcommand per entry of :data:`COMMANDS`, each with ``--json``."""
    parser = _Parser(prog="python -m batchlab", description="《Batch Size 核心概念》的批大小计算器。")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, title="命令", metavar="命令")
    for name, command in COMMANDS.items():
        command_parser = sub.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(command_parser)
        command_parser.add_argument("--json", action="store_true", help="输出 JSON 而不是文字报告")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = COMMANDS[args.command]
    try:
        report: Any = command.run(args)
        # allow_nan=False: "Infinity" and "NaN" are not JSON; a report holding one is a bug to refuse
        text = json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) if args.json else command.text(report)
    except GradingInterrupted as stop:  # Ctrl-C: the sandbox is gone, nothing written
        print(f"{parser.prog} {args.command}: 已中断：{stop.total} 份中批改完 {stop.done} 份，没有写出任何结果",
              file=sys.stderr)
        return 130
    except (ValueError, RuntimeError, OverflowError, TimeoutError) as err:
        # one line: a rank's RuntimeError carries its whole traceback after the first line
        print(f"{parser.prog} {args.command}: error: {str(err).strip().splitlines()[0]}", file=sys.stderr)
        return 2
    if not args.json and isinstance(report, dict) and report.get("busy"):  # the JSON carries it as "busy"
        print(f"{parser.prog} {args.command}: 注意：{report['busy']}", file=sys.stderr)
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `| head` closed the pipe: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
    return 0
