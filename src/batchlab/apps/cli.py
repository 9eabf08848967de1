"""``python -m batchlab``: the book's numbers without a notebook.

    python -m batchlab plan --model gpt2-xl --seq-len 1024 --global-batch 64 \\
        --micro-batch 2 --pipeline-stages 4 --data-parallel 2 [--tokens-per-second 3200] --json
    python -m batchlab tune --model gpt2-xl --seq-len 1024 --global-batch 64 \\
        --pipeline-stages 4 --data-parallel 2 [--peak-tflops 256 --bandwidth-tbs 0.4] --json
    python -m batchlab device
    python -m batchlab bench-matmul --m 1 8 64 128 --dtype bfloat16
    python -m batchlab pipeline --schedule 1f1b --stages 4 --micro-batches 8 [--run local|distributed]
    python -m batchlab grade submissions/ [--csv grades.csv] [--timeout 600]

Each subcommand is one entry of :data:`COMMANDS`: a function that adds its arguments and a function
that runs it and returns what to print. Invalid input exits 2 with one line on stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from batchlab.formulas.batching import plan_batch
from batchlab.lecture.case import CASE_STUDY
from batchlab.formulas.checks import positive
from batchlab.apps.grade import DEFAULT_TIMEOUT_S, grade_class, grade_table, table_text, write_csv
from batchlab.formulas.memory import (DEVICE_MEMORY_GIB, GIB, OPTIMIZER_STATES, PRECISIONS, RECOMPUTE_MODES, MemorySettings,
                     default_precision, stage_memory)
from batchlab.formulas.partition import partition_layers
from batchlab.formulas.pipeline_schedules import SCHEDULES, bubble_fraction, check_runnable, in_flight_microbatches, pipeline_timeline
from batchlab.formulas.presets import PRESETS, count_params, get_config  # no torch: `plan` answers instantly
from batchlab.formulas.roofline import DEVICE_PRESETS, element_bytes
from batchlab.formulas.throughput import model_flops_per_token
from batchlab.formulas.tune import roofline_curve, tune

__all__ = ["main", "plan_report", "tune_report", "COMMANDS"]

_NPU = DEVICE_PRESETS["ascend-910b"]
DEFAULT_PEAK_FLOPS = _NPU.peak_flops[0]
"""Per-device peak FLOP/s when none is given: the low end of the 910B preset (256 TFLOPS)."""
DEFAULT_BANDWIDTH = _NPU.memory_bandwidth[0]
"""Per-device memory bandwidth (bytes/s) when none is given: the low end of the 910B preset (0.4 TB/s)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _seq_len(model: str, config, seq_len: int | None) -> int:
    """The sequence length a command uses: the model's context when not given, else checked against it."""
    seq_len = config.n_positions if seq_len is None else seq_len
    if seq_len < 1 or seq_len > config.n_positions:
        raise ValueError(f"seq_len = {seq_len}：必须在 1 到 {model} 的 n_positions = {config.n_positions} 之间")
    return seq_len


def _job_arguments(parser: argparse.ArgumentParser) -> None:
    """The model and batch arguments that plan and tune share."""
    parser.add_argument("--model", default=CASE_STUDY.model, choices=list(PRESETS),
                        help=f"model preset (default {CASE_STUDY.model})")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="tokens per sequence (default: the model's context, 1024 for GPT-2)")
    parser.add_argument("--global-batch", type=int, required=True, help="sequences per optimizer step")
    parser.add_argument("--pipeline-stages", type=int, default=1, help="pipeline-parallel degree p (default 1)")
    parser.add_argument("--data-parallel", type=int, default=1, help="data-parallel degree (default 1)")


def _memory_arguments(group) -> None:
    """The memory arguments that plan and tune share."""
    group.add_argument("--schedule", choices=list(SCHEDULES), default="1f1b",
                       help="pipeline schedule: decides how many micro-batches a stage holds (default 1f1b)")
    group.add_argument("--recompute", choices=list(RECOMPUTE_MODES), default="none",
                       help="activation recomputation (default none)")
    group.add_argument("--device-memory-gb", type=float, default=DEVICE_MEMORY_GIB,
                       help=f"device memory in GiB (default {DEVICE_MEMORY_GIB:g}, an Ascend 910B)")


# ── plan ─────────────────────────────────────────────────────────────────────────────────────────

def plan_report(model: str, seq_len: int | None, global_batch: int, micro_batch_size: int,
                pipeline_stages: int = 1, data_parallel: int = 1,
                stated_grad_accum: int | None = None, *, schedule: str = "1f1b", recompute: str = "none",
                precision: str | None = None, optimizer: str = "adam", zero1: bool = False,
                device_memory_gib: float = DEVICE_MEMORY_GIB, tokens_per_second: float | None = None,
                peak_flops: float = DEFAULT_PEAK_FLOPS) -> dict:
    """Everything ``plan`` prints, as a JSON-able dict. Raises ValueError on invalid input.
    ``precision`` None takes the model's default (16-bit mixed for GPT-2, fp32 for the small models).
    ``tokens_per_second`` (the whole job's measured throughput) gives the MFU: tokens/s × model FLOPs per
    token / (devices × ``peak_flops``, per-device FLOP/s); None without it."""
    config = get_config(model)
    seq_len = _seq_len(model, config, seq_len)
    stages = partition_layers(config, pipeline_stages)  # every stage needs a layer
    plan = plan_batch(micro_batch_size, pipeline_stages, data_parallel,
                      global_batch=global_batch, stated_grad_accum=stated_grad_accum)
    settings = MemorySettings(precision=precision or default_precision(config), optimizer=optimizer, zero1=zero1,
                              data_parallel=data_parallel, recompute=recompute)
    memory = stage_memory(config, pipeline_stages, micro_batch_size, seq_len, plan.num_microbatches, schedule,
                          settings, device_memory_gib)
    peak_flops = positive("peak_flops", peak_flops)
    flops_per_token = model_flops_per_token(config, seq_len, recompute=(recompute == "full"))
    mfu = None
    if tokens_per_second is not None:
        mfu = positive("tokens_per_second", tokens_per_second) * flops_per_token / (plan.devices * peak_flops)
    return {
        "model": model,
        "params": count_params(config),
        "seq_len": seq_len,
        "tokens_per_step": plan.tokens_per_step(seq_len),
        "layers_per_stage": [stage.num_layers for stage in stages],
        **plan.to_dict(),
        "schedule": schedule,
        "recompute": recompute,
        "precision": settings.precision,
        "optimizer": optimizer,
        "zero1": zero1,
        **memory.to_dict(),
        "model_flops_per_token": flops_per_token,
        "tokens_per_second": tokens_per_second,
        "peak_flops": peak_flops,
        "mfu": mfu,
    }


def _plan_arguments(parser: argparse.ArgumentParser) -> None:
    _job_arguments(parser)
    parser.add_argument("--micro-batch", type=int, required=True, help="sequences per micro-batch")
    parser.add_argument("--grad-accum", type=int, default=None,
                        help="a stated gradient-accumulation count, checked against both readings: "
                             "pipeline fills m/p (the lecture) or micro-batches m (DeepSpeed)")
    memory = parser.add_argument_group("memory per stage (chapter 4.3)")
    _memory_arguments(memory)
    memory.add_argument("--precision", choices=list(PRECISIONS), default=None,
                        help="default: bf16-mixed for GPT-2 sizes, fp32 for the small models")
    memory.add_argument("--optimizer", choices=list(OPTIMIZER_STATES), default="adam",
                        help="decides the optimizer-state bytes (default adam)")
    memory.add_argument("--zero1", action="store_true", help="shard optimizer states over data parallel (ZeRO-1)")
    utilization = parser.add_argument_group("model FLOPs utilization (chapter 4.4)")
    utilization.add_argument("--tokens-per-second", type=float, default=None,
                             help="measured throughput of the whole job (all devices); gives the MFU")
    utilization.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_FLOPS / 1e12,
                             help=f"per-device peak TFLOPS (default {DEFAULT_PEAK_FLOPS / 1e12:g}, the low end "
                                  "of the Ascend 910B preset)")


def _plan(args: argparse.Namespace) -> dict:
    return plan_report(args.model, args.seq_len, args.global_batch, args.micro_batch,
                       args.pipeline_stages, args.data_parallel, args.grad_accum, schedule=args.schedule,
                       recompute=args.recompute, precision=args.precision, optimizer=args.optimizer,
                       zero1=args.zero1, device_memory_gib=args.device_memory_gb,
                       tokens_per_second=args.tokens_per_second,
                       peak_flops=positive("peak_tflops", args.peak_tflops) * 1e12)


def _plan_text(report: dict) -> str:
    fills = report["pipeline_fills"]
    lines = [
        f"model            {report['model']}  ({report['params']:,} parameters)",
        f"global batch     {report['global_batch']} sequences = {report['tokens_per_step']:,} tokens per step",
        f"devices          {report['devices']} = {report['pipeline_stages']} pipeline stages × "
        f"{report['data_parallel']} data parallel",
        f"layers/stage     {report['layers_per_stage']}",
        f"num_microbatches {report['num_microbatches']} per replica per step "
        f"(micro-batch {report['micro_batch_size']}; DeepSpeed's gradient_accumulation_steps)",
        f"pipeline_fills   {fills if fills is not None else 'n/a'} "
        "(= num_microbatches / pipeline_stages, the lecture's gradient-accumulation count)",
        f"bubble_fraction  {report['bubble_fraction']:.3f}  = (p-1)/(m+p-1)",
    ]
    gib = lambda values: "[" + ", ".join(f"{v / GIB:.1f}" for v in values) + "] GiB"  # noqa: E731
    lines += [
        f"memory           {report['schedule']}, recompute {report['recompute']}, {report['precision']}, "
        f"{report['optimizer']}{' + ZeRO-1' if report['zero1'] else ''}; in flight {report['in_flight_microbatches']}",
        f"  model states   {gib(report['model_state_bytes_per_stage'])}",
        f"  activations    {gib(report['activation_bytes_per_stage'])}",
        f"  peak           {gib(report['peak_bytes_per_stage'])}  = {report['peak_memory_fraction']:.1%} of "
        f"{report['device_memory_bytes'] / GIB:g} GiB (worst stage)",
    ]
    if report["peak_memory_fraction"] > 1:
        lines.append("warning          the worst stage does not fit: try --recompute, more stages or a smaller micro-batch")
    if report["grad_accum_reading"] is not None:
        lines.append(f"--grad-accum     matches the reading '{report['grad_accum_reading']}'")
    if not report["enough_microbatches"]:
        lines.append("warning          fewer micro-batches than stages: 1F1B cannot run, the pipeline never fills")
    lines.append(f"model FLOPs      {report['model_flops_per_token']:.4g} per token (Narayanan et al. 2021"
                 f"{', full recompute' if report['recompute'] == 'full' else ''})")
    if report["mfu"] is not None:
        lines.append(f"mfu              {report['mfu']:.1%}  = {report['tokens_per_second']:g} tokens/s × FLOPs/token "
                     f"/ ({report['devices']} × {report['peak_flops'] / 1e12:g} TFLOPS)")
    return "\n".join(lines)


# ── tune ─────────────────────────────────────────────────────────────────────────────────────────

def tune_report(model: str, seq_len: int | None, global_batch: int, pipeline_stages: int = 1,
                data_parallel: int = 1, *, schedule: str = "1f1b", recompute: str = "none",
                device_memory_gib: float = DEVICE_MEMORY_GIB, peak_flops: float = DEFAULT_PEAK_FLOPS,
                bandwidth: float = DEFAULT_BANDWIDTH) -> dict:
    """Everything ``tune`` prints: the inputs, the roofline rate curve used (per-device ``peak_flops`` in
    FLOP/s, ``bandwidth`` in bytes/s) and :func:`batchlab.formulas.tune.tune`'s answer. Raises ValueError."""
    config = get_config(model)
    seq_len = _seq_len(model, config, seq_len)
    curve = roofline_curve(config, peak_flops, bandwidth)
    result = tune(config, seq_len, global_batch, pipeline_stages, data_parallel, curve, schedule=schedule,
                  recompute=recompute, device_memory_gib=device_memory_gib)
    return {
        "model": model,
        "seq_len": seq_len,
        "global_batch": global_batch,
        "pipeline_stages": pipeline_stages,
        "data_parallel": data_parallel,
        "devices": pipeline_stages * data_parallel,
        "schedule": schedule,
        "recompute": recompute,
        "precision": default_precision(config),
        "device_memory_bytes": int(device_memory_gib * GIB),
        "curve": {"name": curve.name, "peak_flops": peak_flops, "bandwidth": bandwidth,
                  "rows": list(curve.rows), "flops_per_second": list(curve.flops_per_second)},
        **result,
    }


def _tune_arguments(parser: argparse.ArgumentParser) -> None:
    _job_arguments(parser)
    _memory_arguments(parser)
    curve = parser.add_argument_group(
        "rate curve: the roofline of the MLP matmul [M, h] × [h, 4h] in bf16 (default: the LOW end of the "
        f"Ascend 910B preset, {DEFAULT_PEAK_FLOPS / 1e12:g} TFLOPS and {DEFAULT_BANDWIDTH / 1e12:g} TB/s)")
    curve.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_FLOPS / 1e12,
                       help=f"per-device peak TFLOPS (default {DEFAULT_PEAK_FLOPS / 1e12:g})")
    curve.add_argument("--bandwidth-tbs", type=float, default=DEFAULT_BANDWIDTH / 1e12,
                       help=f"per-device memory bandwidth in TB/s (default {DEFAULT_BANDWIDTH / 1e12:g})")


def _tune(args: argparse.Namespace) -> dict:
    return tune_report(args.model, args.seq_len, args.global_batch, args.pipeline_stages, args.data_parallel,
                       schedule=args.schedule, recompute=args.recompute, device_memory_gib=args.device_memory_gb,
                       peak_flops=positive("peak_tflops", args.peak_tflops) * 1e12,
                       bandwidth=positive("bandwidth_tbs", args.bandwidth_tbs) * 1e12)


def _tune_text(report: dict) -> str:
    lines = [
        f"model            {report['model']}, seq_len {report['seq_len']}, global batch {report['global_batch']}, "
        f"{report['pipeline_stages']} stages × {report['data_parallel']} data parallel = {report['devices']} devices",
        f"memory           {report['schedule']}, recompute {report['recompute']}, {report['precision']}, adam, "
        f"{report['device_memory_bytes'] / GIB:g} GiB per device",
        f"rate curve       {report['curve']['name']}",
        "",
        f"{'micro':>6} {'m':>4} {'bubble':>7} {'memory':>7} {'fits':>5} {'matmul eff':>10} {'tokens/s':>12}",
    ]
    best = report["recommended"]
    for row in report["candidates"]:
        mark = "  ← recommended" if best is not None and row["micro_batch_size"] == best["micro_batch_size"] else ""
        lines.append(f"{row['micro_batch_size']:>6} {row['num_microbatches']:>4} {row['bubble_fraction']:>7.1%} "
                     f"{row['peak_memory_fraction']:>7.1%} {'yes' if row['fits'] else 'no':>5} "
                     f"{row['matmul_efficiency']:>10.1%} {row['tokens_per_second']:>12,.0f}{mark}")
    lines.append("")
    if best is not None:
        lines.append(f"recommended      micro-batch {best['micro_batch_size']} ({best['num_microbatches']} micro-batches): "
                     "the fitting one with the highest modelled tokens/s (an upper bound: roofline, no communication)")
    else:
        lines.append(f"nothing fits     {report['suggestion']}")
    return "\n".join(lines)


# ── device ───────────────────────────────────────────────────────────────────────────────────────

def _device_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default=None, help="auto (default), cpu, cuda, npu, npu:1, …")


def _device(args: argparse.Namespace) -> dict:
    from batchlab.measure.device import select_device  # torch only for the commands that need it
    from batchlab.measure.device_memory import describe

    return describe(select_device(args.device))


def _format_memory(memory: dict) -> str:
    gib = {k: memory[k] / 2**30 for k in ("allocated", "peak", "free", "total")}
    # On the CPU "allocated" is the whole process's RSS, not allocator bytes: say which.
    return (f"allocated ({memory['measures']}) {gib['allocated']:.2f} GiB, peak {gib['peak']:.2f} GiB, "
            f"free {gib['free']:.1f} of {gib['total']:.1f} GiB  [{memory['source']}]")


def _device_text(info: dict) -> str:
    return "\n".join(f"{key:<10} {_format_memory(value) if key == 'memory' else value}"
                     for key, value in info.items())


# ── bench-matmul ─────────────────────────────────────────────────────────────────────────────────

_BENCH_MS = (1, 2, 4, 8, 16, 32, 64, 128)  # = matmul_bench.DEFAULT_MS, repeated so --help needs no torch


def _bench_matmul_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--m", type=int, nargs="+", default=list(_BENCH_MS),
                        help="rows M of [M, K] × [K, N] (default: 1 2 4 … 128)")
    parser.add_argument("--k", type=int, default=4096, help="inner dimension K (default 4096)")
    parser.add_argument("--n", type=int, default=8192, help="columns N (default 8192)")
    # No argparse choices: the package's one_of check answers in the book's wording.
    parser.add_argument("--dtype", default="float32", help="float32 (default), bfloat16 or float16")
    parser.add_argument("--device", default=None, help="auto (default), cpu, cuda, npu, npu:1, …")
    parser.add_argument("--repeats", type=int, default=5, help="samples per M; the best counts (default 5)")
    parser.add_argument("--min-seconds", type=float, default=0.01,
                        help="each sample repeats the matmul until it lasts this long (default 0.01)")


def _bench_matmul(args: argparse.Namespace) -> dict:
    element_bytes(args.dtype)  # a dtype typo answers before torch loads (seconds on a laptop)
    from batchlab.measure.matmul import bench_matmul, efficiency  # torch only for the commands that need it

    report = bench_matmul(args.m, args.k, args.n, args.dtype, args.device, args.repeats, args.min_seconds)
    report["fraction_of_best"] = efficiency(report["results"])
    return report


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
    parser.add_argument("--schedule", choices=list(SCHEDULES), default="1f1b", help="pipeline schedule (default 1f1b)")
    parser.add_argument("--stages", type=int, required=True, help="pipeline stages p")
    parser.add_argument("--micro-batches", type=int, required=True, help="micro-batches per step m")
    parser.add_argument("--run", choices=["local", "distributed"], default=None,
                        help="measure instead of simulate: one process (local) or one process per stage "
                             "(distributed, torch.distributed.pipelining) running a small GPT")
    parser.add_argument("--micro-batch-size", type=int, default=4, help="sequences per micro-batch when run (default 4)")
    parser.add_argument("--seq-len", type=int, default=64, help="tokens per sequence when run (default 64)")
    parser.add_argument("--d-model", type=int, default=128, help="width of the GPT that is run (default 128)")


def _pipeline(args: argparse.Namespace) -> dict:
    check_runnable(args.schedule, args.stages, args.micro_batches)  # 1F1B needs m ≥ p, as the runtimes do
    p, m = args.stages, args.micro_batches
    report = {"schedule": args.schedule, "pipeline_stages": p, "num_microbatches": m,
              "bubble_fraction_formula": bubble_fraction(p, m),
              "peak_in_flight": in_flight_microbatches(args.schedule, p, m)}
    if args.run is None:
        timeline = pipeline_timeline(args.schedule, p, m)
        return {**report, "run": "simulated", "bubble_fraction": timeline.idle_fraction,
                "step_time": timeline.makespan, "step_time_unit": "one forward pass (backward = 2)"}
    from batchlab.measure.model import GPT  # torch only for the runs
    from batchlab.measure.pipeline_local import pipeline_batch, run_pipeline_local
    from batchlab.measure.pipeline_distributed import run_pipeline_distributed

    config = get_config("tiny", n_layer=max(p, 2), d_model=args.d_model, n_head=4, n_positions=max(64, args.seq_len))
    if args.run == "local":
        inputs, targets = pipeline_batch(config, m, args.micro_batch_size, args.seq_len, seed=0)
        result = run_pipeline_local(GPT(config), inputs, targets, p, m, args.schedule)
        timeline, seconds = result["replayed"], result["replayed"].makespan
    else:
        result = run_pipeline_distributed(config, p, m, args.micro_batch_size, args.seq_len, args.schedule)
        timeline, seconds = result["timeline"], min(result["step_seconds"])
    return {**report, "run": args.run, "bubble_fraction": timeline.idle_fraction, "step_time": seconds,
            "step_time_unit": "seconds", "peak_in_flight": timeline.peak_in_flight(),
            "model": {"n_layer": config.n_layer, "d_model": config.d_model,
                      "micro_batch_size": args.micro_batch_size, "seq_len": args.seq_len}}


def _pipeline_text(report: dict) -> str:
    unit = "s" if report["step_time_unit"] == "seconds" else "× forward"
    return "\n".join([
        f"schedule         {report['schedule']} ({report['run']}), {report['pipeline_stages']} stages, "
        f"{report['num_microbatches']} micro-batches",
        f"bubble_fraction  {report['bubble_fraction']:.3f}  (formula (p-1)/(m+p-1) = {report['bubble_fraction_formula']:.3f})",
        f"step time        {report['step_time']:.4g} {unit}",
        f"peak in flight   {report['peak_in_flight']} micro-batches per stage",
    ])


# ── grade ────────────────────────────────────────────────────────────────────────────────────────

def _grade_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="folder of submitted notebooks, one file per student")
    parser.add_argument("--csv", default=None, metavar="FILE", help="also write the table to FILE (UTF-8 CSV)")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds a cell may run before it is interrupted (default {DEFAULT_TIMEOUT_S})")


def _grade(args: argparse.Namespace) -> dict:
    directory = Path(args.directory)
    if not directory.is_dir():
        raise ValueError(f"DIR = {args.directory!r}：不是一个存在的文件夹")
    timeout = int(positive("timeout", args.timeout))  # whole seconds: nbclient's limit is an integer
    csv_path = None if args.csv is None else Path(args.csv)
    if csv_path is not None and not csv_path.parent.is_dir():  # say so before minutes of grading
        raise ValueError(f"--csv {args.csv!r}：文件夹 {str(csv_path.parent)!r} 不存在")
    grades = grade_class(directory, timeout, exclude=[csv_path] if csv_path else ())
    if not grades:
        raise ValueError(f"DIR = {args.directory!r}：文件夹里没有要批改的文件")
    headers, rows = grade_table(grades)
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
                    _plan_arguments, _plan, _plan_text),
    "device": Command("report the compute path (NPU, CUDA or CPU) and its memory",
                      _device_arguments, _device, _device_text),
    "pipeline": Command("simulate (or run) one pipeline step: bubble, step time, in-flight micro-batches per stage",
                        _pipeline_arguments, _pipeline, _pipeline_text),
    "tune": Command("list every micro-batch size: bubble, memory per stage, modelled tokens/s; recommend one",
                    _tune_arguments, _tune, _tune_text),
    "bench-matmul": Command("time [M, K] × [K, N] matmuls per M: seconds, TFLOP/s, fraction of the best",
                            _bench_matmul_arguments, _bench_matmul, _bench_matmul_text),
    "grade": Command("run each submitted notebook in a fresh kernel and score its exercises, one row per student",
                     _grade_arguments, _grade, _grade_text),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="python -m batchlab", description="Batch-size calculator of 《Batch Size 核心概念》.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, command in COMMANDS.items():
        command_parser = sub.add_parser(name, help=command.help)
        command.add_arguments(command_parser)
        command_parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    command = COMMANDS[args.command]
    try:
        report: Any = command.run(args)
    except (ValueError, RuntimeError) as err:
        print(f"{parser.prog} {args.command}: error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else command.text(report))
    return 0
