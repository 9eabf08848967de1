"""``python -m batchlab``: the book's numbers without a notebook::

    python -m batchlab plan --model gpt2-xl --seq-len 1024 --global-batch 64 \\
        --micro-batch 2 --pipeline-stages 4 --data-parallel 2 [--tokens-per-second 3200] --json
    python -m batchlab tune --model gpt2-xl --seq-len 1024 --global-batch 64 \\
        --pipeline-stages 4 --data-parallel 2 [--peak-tflops 256 --bandwidth-tbs 0.4] --json
    python -m batchlab device
    python -m batchlab bench-matmul --m 1024 2048 4096 --k 1600 --n 6400
    python -m batchlab pipeline --global-batch 64 --micro-batch 2 --pipeline-stages 4 --data-parallel 2
    python -m batchlab pipeline --model tiny --n-layer 4 --d-model 128 --seq-len 64 --global-batch 32 \\
        --micro-batch 4 --pipeline-stages 4 --run local|distributed
    python -m batchlab grade submissions/ [--csv grades.csv] [--timeout 600]

Each subcommand is one entry of :data:`COMMANDS`: a function that adds its arguments and a function
that runs it and returns what to print (``plan`` and ``tune`` live in :mod:`batchlab.apps.job_commands`). Invalid input exits 2 with one line on stderr.
``plan``, ``tune`` and ``pipeline`` take one job, with the same flags (:func:`~batchlab.apps.job_commands.job_arguments`),
built once (:func:`~batchlab.apps.job_commands.job_from_args`).
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
from batchlab.apps.grade import (DEFAULT_NOTEBOOK_S, DEFAULT_TIMEOUT_S, GradingInterrupted, assignment_exercises,
                                 check_grade_dependencies, grade_class, grade_table)
from batchlab.apps.grade_report import check_csv_target, table_text, write_csv
from batchlab.formulas.budget import BENCH_BUDGET, RUN_BUDGET, bench_cost, check_budget, run_cost
from batchlab.formulas.checks import at_most, between, whole
from batchlab.formulas.job import Job
from batchlab.formulas.pipeline_schedules import BACKWARD_PER_FORWARD, SCHEDULES, pipeline_timeline, simulable
from batchlab.formulas.precision import element_bytes
from batchlab.formulas.roofline import matmul_flops

__all__ = ["main", "build_parser", "COMMANDS", "CLI_BENCH_SECONDS", "LOCAL_SCHEDULES", "MODELLED", "run_refusal"]


# argparse's own usage errors, in the book's language (the patterns are argparse's messages).
_ARGPARSE_ZH: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"argument (?P<a>\S+): invalid (?P<t>int|float) value: (?P<v>.+)"), "{a} 的值 {v} 不是{t}"),
    (re.compile(r"argument (?P<a>\S+): invalid choice: (?P<v>\S+) \(choose from (?P<c>.+)\)"),
     "{a} = {v}：只能取 {c} 之一"),
    (re.compile(r"argument (?P<a>\S+): expected one argument"), "{a} 需要一个值"),
    (re.compile(r"argument (?P<a>\S+): expected at least one argument"), "{a} 至少需要一个值"),
    (re.compile(r"argument (?P<a>\S+): expected (?P<n>\d+) arguments"), "{a} 需要 {n} 个值"),
    (re.compile(r"the following arguments are required: (?P<a>.+)"), "缺少参数 {a}"),
    (re.compile(r"unrecognized arguments: (?P<a>.+)"), "不认识的参数 {a}"),
    (re.compile(r"argument (?P<a>\S+): (?P<m>.+)"), "{a}：{m}"),
)
_TYPE_ZH = {"int": "整数", "float": "数"}


def _in_chinese(message: str) -> str:
    for pattern, template in _ARGPARSE_ZH:
        if match := pattern.fullmatch(message):
            fields = match.groupdict()
            if "t" in fields:
                fields["t"] = _TYPE_ZH[fields["t"]]
            return template.format(**fields)
    return message


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr, in Chinese, with exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {_in_chinese(message)}\n")


# ── device ───────────────────────────────────────────────────────────────────────────────────────

def _device_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default=None, help="auto (default), cpu, cuda, npu, npu:1, …")


def _device(args: argparse.Namespace) -> dict:
    from batchlab.measure.device import select_device  # torch only for the commands that need it
    from batchlab.measure.device_memory import describe

    return describe(select_device(args.device)).as_record()


def _format_memory(memory: dict) -> str:
    gib = {k: memory[k] / 2**30 for k in ("allocated", "peak", "free", "total")}
    # On the CPU "allocated" is the whole process's RSS, not allocator bytes: say which.
    return (f"allocated ({memory['measures']}) {gib['allocated']:.2f} GiB, peak {gib['peak']:.2f} GiB, "
            f"free {gib['free']:.1f} of {gib['total']:.1f} GiB  [{memory['source']}]")


def _device_text(info: dict) -> str:
    return "\n".join(f"{key:<10} {_format_memory(value) if key == 'memory' else value}"
                     for key, value in info.items())


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
                        help="rows M of [M, K] × [K, N] (default: 1 2 4 … 128)")
    parser.add_argument("--k", type=int, default=4096, help="inner dimension K (default 4096)")
    parser.add_argument("--n", type=int, default=8192, help="columns N (default 8192)")
    # No argparse choices: the package's one_of check answers in the book's wording.
    parser.add_argument("--dtype", default="auto",
                        help="auto (default: bfloat16 on an NPU/GPU, float32 on a CPU), float32, bfloat16 or float16")
    parser.add_argument("--device", default=None, help="auto (default), cpu, cuda, npu, npu:1, …")
    parser.add_argument("--repeats", type=int, default=5, help="samples per M; the best counts (default 5)")
    parser.add_argument("--min-seconds", type=float, default=0.01,
                        help="each sample repeats the matmul until it lasts this long (default 0.01)")


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
    lines = [f"device  {report['device']} ({report['device_name']}), {report['dtype']}, "
             f"best of {report['repeats']} samples ≥ {report['min_seconds']:g} s",
             f"{'m':>6} {'k':>6} {'n':>6} {'seconds':>11} {'TFLOP/s':>9} {'of best':>8}"]
    for row, fraction in zip(report["results"], report["fraction_of_best"]):
        lines.append(f"{row['m']:>6} {row['k']:>6} {row['n']:>6} {row['seconds']:>11.4e} "
                     f"{row['tflops']:>9.4f} {fraction:>8.1%}")
    return "\n".join(lines)


# ── pipeline ─────────────────────────────────────────────────────────────────────────────────────

def _pipeline_arguments(parser: argparse.ArgumentParser) -> None:
    job_commands.job_arguments(parser, micro_batch_required=True)  # the job: plan's flags
    parser.add_argument("--run", choices=["local", "distributed"], default=None,
                        help="measure instead of simulate: one process (local) or one process per stage "
                             "(distributed, torch.distributed.pipelining) running the job's GPT in fp32 without "
                             "dropout (e.g. --model tiny --n-layer 4 --d-model 128 --seq-len 64)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds a distributed run may take, start-up included (default 120)")


MAX_RUN_STAGES = 16
LOCAL_WARMUP, LOCAL_TIMED = 1, 2
DISTRIBUTED_TIMED = 2
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
        cost = check_budget(run_cost(job, RUN_STEPS[run], p if run == "distributed" else 1), RUN_BUDGET,
                            _RUN_FLAGS)
    report = {"schedule": job.schedule, "virtual_stages": v, "pipeline_stages": p, "num_microbatches": m,
              "model": job.model.name, "n_layer": job.model.n_layer, "d_model": job.model.d_model,
              "n_head": job.model.n_head, "seq_len": job.seq_len, "global_batch": job.global_batch,
              "micro_batch_size": job.micro_batch_size,
              "data_parallel": job.data_parallel, "tensor_parallel": job.tensor_parallel,
              "sequence_parallel": job.sequence_parallel, "context_parallel": job.context_parallel,
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
        measured = run_pipeline_distributed(job, steps=DISTRIBUTED_TIMED,
                                            timeout=between("timeout", args.timeout, 1, 3600))
        timeline, seconds = measured.timeline, min(measured.step_seconds)
    cores = os.cpu_count() or 1
    shared = (f"{p} 个进程共用 {cores} 个 CPU 核：每个进程分不到一个核，测到的气泡比公式大得多"
              if run == "distributed" and p > cores else None)
    return {**report, "run": run, "bubble_fraction": timeline.idle_fraction, "step_time": seconds,
            "step_time_unit": "seconds", "peak_in_flight": timeline.peak_in_flight(),
            "estimated_cost": asdict(cost), "warning": shared}


def _pipeline_text(report: dict) -> str:
    unit = "s" if report["step_time_unit"] == "seconds" else "× a stage's forward"
    run = report["run"] if report["modelled"] is None else f"{report['run']}, {MODELLED}"
    closed = ("formula (p-1)/(m+p-1)" if report["schedule"] in ("gpipe", "1f1b") else
              f"closed form of {SCHEDULES[report['schedule']]}")
    parallel = [f"{report[k]} {name}" for k, name in (("tensor_parallel", "tensor parallel"),
                                                      ("context_parallel", "context parallel")) if report[k] > 1]
    return "\n".join([
        *([f"note             {report['modelled']}"] if report["modelled"] else []),
        f"schedule         {job_commands.schedule_name(report['schedule'], report['virtual_stages'])} ({run}), "
        f"{report['pipeline_stages']} stages, {report['num_microbatches']} micro-batches",
        f"job              {report['model']} ({job_commands.model_shape(report)}), seq_len "
        f"{report['seq_len']}, global batch {report['global_batch']} = {report['data_parallel']} × "
        f"{report['num_microbatches']} micro-batches of {report['micro_batch_size']}"
        + "".join(f", {text}" for text in parallel) + (", sequence parallel" if report["sequence_parallel"] else ""),
        f"bubble_fraction  {report['bubble_fraction']:.3f}  ({closed} = {report['bubble_fraction_formula']:.3f})",
        f"step time        {report['step_time']:.4g} {unit}",
        f"peak in flight   {report['peak_in_flight']} {report['peak_in_flight_unit']} per stage",
        *([f"warning          {report['warning']}"] if report.get("warning") else []),
    ])


# ── grade ────────────────────────────────────────────────────────────────────────────────────────

def _grade_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="folder of submitted notebooks, one file per student")
    parser.add_argument("--csv", default=None, metavar="FILE",
                        help="also write the table to FILE (UTF-8 CSV; never inside DIR)")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds a cell may run before it is interrupted (default {DEFAULT_TIMEOUT_S})")
    parser.add_argument("--notebook-timeout", type=int, default=DEFAULT_NOTEBOOK_S,
                        help=f"seconds one notebook may run in all, kernel start included (default {DEFAULT_NOTEBOOK_S})")
    parser.add_argument("--chapter", nargs="+", default=None, metavar="N",
                        help="the assignment's chapters, e.g. 4.1 (default: every chapter that at least half "
                             "the notebooks ask)")


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
    grades = grade_class(directory, timeout, notebook_timeout=notebook_timeout)
    if not grades:
        raise ValueError(f"DIR = {args.directory!r}：文件夹里没有要批改的文件")
    headers, rows = grade_table(grades, args.chapter)
    if csv_path is not None:
        write_csv(csv_path, headers, rows)
    return {"directory": str(directory), "timeout": timeout, "csv": args.csv,
            "headers": headers, "rows": rows}


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
    "plan": Command("validate a batch configuration and derive micro-batches and bubble",
                    job_commands.plan_arguments, job_commands.plan, job_commands.plan_text),
    "device": Command("report the compute path (NPU, CUDA or CPU) and its memory",
                      _device_arguments, _device, _device_text),
    "pipeline": Command("simulate (or run) one pipeline step: bubble, step time, in-flight micro-batches per stage",
                        _pipeline_arguments, _pipeline, _pipeline_text),
    "tune": Command("list every micro-batch size: bubble, memory per stage, modelled tokens/s; recommend one",
                    job_commands.tune_arguments, job_commands.tune_command, job_commands.tune_text),
    "bench-matmul": Command("time [M, K] × [K, N] matmuls per M: seconds, TFLOP/s, fraction of the best",
                            _bench_matmul_arguments, _bench_matmul, _bench_matmul_text),
    "grade": Command("run each submitted notebook in a fresh kernel and score its exercises, one row per student",
                     _grade_arguments, _grade, _grade_text),
}


def build_parser() -> argparse.ArgumentParser:
    """The calculator's parser: one subcommand per entry of :data:`COMMANDS`, each with ``--json``."""
    parser = _Parser(prog="python -m batchlab", description="Batch-size calculator of 《Batch Size 核心概念》.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, command in COMMANDS.items():
        command_parser = sub.add_parser(name, help=command.help)
        command.add_arguments(command_parser)
        command_parser.add_argument("--json", action="store_true", help="print JSON instead of text")
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
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `| head` closed the pipe: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
    return 0
