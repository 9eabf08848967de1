"""The calculator's ``plan`` and ``tune`` commands: one :class:`~batchlab.formulas.job.Job` from the flags,
one report (a JSON-able dict) and its text.

The flags of a job are declared once (:func:`job_arguments`, :data:`JOB_FLAGS`) and read once
(:func:`job_from_args`), for ``plan``, ``tune`` and ``pipeline`` alike; the job's own validation is the
commands' validation, so a bad value is refused with the same Chinese line that a notebook or a widget would
show.
"""
from __future__ import annotations

import argparse

from batchlab.formulas.checks import at_most, positive
from batchlab.formulas.job import ATTENTION_KINDS, DEVICE_MEMORY_GIB, GIB, OPTIMIZER_STATES, RECOMPUTE_MODES, Job
from batchlab.formulas.memory import activation_basis, stage_memory
from batchlab.formulas.pipeline_schedules import SCHEDULES, bubble_fraction
from batchlab.formulas.precision import PRECISIONS
from batchlab.formulas.presets import PRESETS, count_params, get_config
from batchlab.formulas.rampup import RAMP_STAGES_LIMIT, Rampup, ramp_stages
from batchlab.formulas.roofline import DEVICE_PRESETS, roofline_curve
from batchlab.formulas.throughput import mfu, model_flops_per_token
from batchlab.formulas.tune import tune
from batchlab.lecture.case import CASE_STUDY
from batchlab.page.numbers import throughput

__all__ = ["DEFAULT_PEAK_FLOPS", "DEFAULT_BANDWIDTH", "JOB_FLAGS", "MODEL_OVERRIDES", "MODEL_LIMITS", "job_arguments",
           "job_from_args", "device_figures", "model_shape", "schedule_bubble", "schedule_name", "devices_text",
           "plan_arguments", "plan", "plan_report", "rampup_report", "plan_text", "tune_arguments", "tune_report", "tune_command",
           "tune_text"]

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
    parser.add_argument("--model", default=case.model.name, choices=list(PRESETS),
                        help=f"model preset (default {case.model.name})")
    parser.add_argument("--n-layer", type=int, default=None, help="override the preset's layer count")
    parser.add_argument("--d-model", type=int, default=None,
                        help="override the preset's width (a multiple of the heads)")
    parser.add_argument("--n-head", type=int, default=None,
                        help="override the preset's attention heads, a divisor of the width; --tensor-parallel "
                             "must divide them (gpt2-xl's 25 refuse t = 2; chapter 4.5 re-plans it with --n-head 32)")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="tokens per sequence (default: the model's context, 1024 for GPT-2)")
    parser.add_argument("--global-batch", type=int, required=True, help="sequences per optimizer step")
    parser.add_argument("--micro-batch", type=int, required=micro_batch_required, default=1,
                        help="sequences per micro-batch" + ("" if micro_batch_required else
                                                            " (default 1; tune lists every size anyway)"))
    parser.add_argument("--pipeline-stages", type=int, default=1, help="pipeline-parallel degree p (default 1)")
    parser.add_argument("--data-parallel", type=int, default=1, help="data-parallel degree (default 1)")
    parser.add_argument("--schedule", choices=list(SCHEDULES), default="1f1b",
                        help="pipeline schedule: its bubble, and how many micro-batches a stage holds (default 1f1b)")
    parser.add_argument("--virtual-stages", type=int, default=1,
                        help="model chunks per device v: >= 2 for interleaved-1f1b, 1 (ZB-H1) or 2 (ZB-V) for "
                             "zero-bubble, 1 otherwise; the layers cut into p x v chunks (default 1)")
    parser.add_argument("--tensor-parallel", type=int, default=1,
                        help="tensor-parallel degree t: splits each layer's heads and MLP (default 1)")
    parser.add_argument("--sequence-parallel", action="store_true",
                        help="sequence parallelism within the tensor-parallel group (needs --tensor-parallel > 1)")
    parser.add_argument("--context-parallel", type=int, default=1,
                        help="context-parallel degree cp: splits the sequence (default 1)")
    memory = parser.add_argument_group("memory per stage (chapter 4.3)")
    memory.add_argument("--recompute", choices=list(RECOMPUTE_MODES), default="none",
                        help="activation recomputation (default none)")
    memory.add_argument("--precision", choices=list(PRECISIONS), default=None,
                        help="default: bf16-mixed for GPT-2 sizes, fp32 for the small models")
    memory.add_argument("--optimizer", choices=list(OPTIMIZER_STATES), default="adam",
                        help="decides the optimizer-state bytes (default adam)")
    memory.add_argument("--zero1", action="store_true", help="shard optimizer states over data parallel (ZeRO-1)")
    memory.add_argument("--fp32-grads", action="store_true",
                        help="Megatron-LM's convention under bf16: fp32 main gradients, all-reduced in fp32 "
                             "(18 B/param with Adam); default ZeRO's 16-bit gradients (16 B/param)")
    memory.add_argument("--dropout", type=float, default=None,
                        help="dropout probability; > 0 keeps 1-byte masks per dropout (default: the model's, "
                             "0.1 for GPT-2 sizes as GPT-2 and Megatron-LM train, 0 for the small models)")
    memory.add_argument("--attention", choices=list(ATTENTION_KINDS), default="materialized",
                        help="materialized keeps the s×s scores (Korthikanti's 5as²b); fused (FlashAttention/SDPA) "
                             "does not (default materialized)")
    memory.add_argument("--device-memory-gib", type=float, default=DEVICE_MEMORY_GIB,
                        help=f"device memory in GiB (default {DEVICE_MEMORY_GIB:g}, an Ascend 910B)")


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
    """A report's model shape as the text reports write it: ``48 layers, width 1600, 32 heads`` (an override of
    ``--n-layer``, ``--d-model`` or ``--n-head`` keeps the preset's name, so the shape says which variant ran)."""
    return f"{report['n_layer']} layers, width {report['d_model']}, {report['n_head']} heads"


def schedule_bubble(job: Job) -> float:
    """The bubble of ``job``'s own schedule (and virtual stages) at its p and m: the closed form of
    :func:`~batchlab.formulas.pipeline_schedules.bubble_fraction`, which the simulator agrees with."""
    return bubble_fraction(job.pipeline_stages, job.num_microbatches, job.schedule, job.virtual_stages)


def schedule_name(schedule: str, virtual_stages: int) -> str:
    """A schedule as the text reports write it: ``1f1b``, ``interleaved-1f1b (v = 2)``."""
    return schedule if virtual_stages == 1 else f"{schedule} (v = {virtual_stages})"


def devices_text(report: dict) -> str:
    """``8 = 4 pipeline stages × 2 data parallel``, with the tensor and context degrees when they are not 1."""
    parts = [f"{report['tensor_parallel']} tensor parallel"] if report["tensor_parallel"] > 1 else []
    parts += [f"{report['pipeline_stages']} pipeline stages", f"{report['data_parallel']} data parallel"]
    parts += [f"{report['context_parallel']} context parallel"] if report["context_parallel"] > 1 else []
    sp = " (sequence parallel)" if report["sequence_parallel"] else ""
    return f"{report['devices']} = {' × '.join(parts)}{sp}"


def _memory_settings(report: dict) -> str:
    """The settings the memory answer rests on, in one line of the text reports (the attention kind in the
    reader's words too: the stored s×s scores are most of a GPT-2 layer's activation bytes)."""
    return (f"{schedule_name(report['schedule'], report['virtual_stages'])}, recompute {report['recompute']}, {report['precision']}, {report['optimizer']}"
            f"{' + ZeRO-1' if report['zero1'] else ''}{', fp32 grads' if report['fp32_grads'] else ''}, "
            f"dropout {report['dropout']:g}, {activation_basis(report['attention'])}")


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
                        help="a stated gradient-accumulation count, checked against both readings: "
                             "pipeline fills m/p (the lecture) or micro-batches m (DeepSpeed)")
    utilization = parser.add_argument_group("model FLOPs utilization (chapter 4.4)")
    utilization.add_argument("--tokens-per-second", type=float, default=None,
                             help="measured throughput of the whole job (all devices); gives the MFU")
    utilization.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_FLOPS / 1e12,
                             help=f"per-device peak TFLOPS (default {DEFAULT_PEAK_FLOPS / 1e12:g}, the low end "
                                  "of the Ascend 910B preset)")
    parser.add_argument("--rampup-batch-size", type=int, nargs=3, default=None,
                        metavar=("START", "INCREMENT", "SAMPLES"),
                        help="the arithmetic of Megatron-LM's batch ramp-up calculator as it ran before PR #4411 "
                             "(today's Megatron-LM ignores this flag and uses --step-batch-size-schedule): grow the "
                             "global batch from START by INCREMENT over SAMPLES consumed samples up to --global-batch; "
                             "lists each stage's batch, micro-batches and bubble under this job "
                             f"(at most {RAMP_STAGES_LIMIT} stages)")


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
    last = ramp["stages"][-1]
    lines = ["", f"ramp-up          --rampup-batch-size {ramp['start']} {ramp['increment']} {ramp['ramp_samples']}: "
             f"{len(ramp['stages'])} stages, {ramp['samples_per_increment']:,.6g} samples per increment, "
             f"global batch {last['global_batch']} from sample {last['first_sample']:,} (Megatron-LM's reading)",
             f"{'batch':>7} {'from sample':>13} {'samples':>13} {'steps':>10} {'m':>7} {'bubble':>7}"]
    for stage in ramp["stages"]:
        m = "-" if stage["num_microbatches"] is None else f"{stage['num_microbatches']:,}"
        row = (f"{stage['global_batch']:>7,} {stage['first_sample']:>13,} "
               + (f"{'(the rest)':>13} {'':>10}" if stage["samples"] is None else
                  f"{stage['samples']:>13,} {stage['steps']:>10,}") + f" {m:>7}")
        lines.append(row + (f" {stage['bubble_fraction']:>7.1%}" if stage["refusal"] is None else
                            f"  refused: {stage['refusal']}"))
    return lines


def plan_text(report: dict) -> str:
    fills = report["pipeline_fills"]
    lines = [
        f"model            {report['model']}  ({model_shape(report)}; {report['params']:,} parameters)",
        f"global batch     {report['global_batch']} sequences = {report['tokens_per_step']:,} tokens per step",
        f"devices          {devices_text(report)}",
        f"layers/stage     {report['layers_per_stage']}",
        f"num_microbatches {report['num_microbatches']} per replica per step "
        f"(micro-batch {report['micro_batch_size']}; DeepSpeed's gradient_accumulation_steps)",
        f"pipeline_fills   {fills if fills is not None else 'n/a'} "
        "(= num_microbatches / pipeline_stages, the lecture's gradient-accumulation count)",
        f"bubble_fraction  {report['bubble_fraction']:.3f}  "
        + ("= (p-1)/(m+p-1)" if report["schedule"] in ("gpipe", "1f1b") else
           f"({SCHEDULES[report['schedule']]}, v = {report['virtual_stages']}: the closed form the simulator agrees with)"),
    ]
    gib = lambda values: "[" + ", ".join(f"{v / GIB:.1f}" for v in values) + "] GiB"  # noqa: E731
    lines += [
        f"memory           {_memory_settings(report)}; in flight {report['in_flight_microbatches']}"
        + ("" if report["virtual_stages"] == 1 else
           f" chunks of {report['n_layer'] // (report['pipeline_stages'] * report['virtual_stages'])} layers"),
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
    lines.append(f"model FLOPs      {report['model_flops_per_token']:.4g} per token ("
                 + ("Narayanan et al. 2021, Eq. 3: full recompute" if report["recompute"] == "full" else
                    "from Narayanan et al. 2021's counts without recomputation: 3 passes, not Eq. 3's 4") + ")")
    if report["mfu"] is not None:
        lines.append(f"mfu              {report['mfu']:.1%}  = {throughput(report['tokens_per_second'])} × FLOPs/token "
                     f"/ ({report['devices']} × {report['peak_flops'] / 1e12:g} TFLOPS)")
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
        "rate curve: the roofline of the MLP matmul [M, h] × [h, 4h] in bf16 (default: the LOW end of the "
        f"Ascend 910B preset, {DEFAULT_PEAK_FLOPS / 1e12:g} TFLOPS and {DEFAULT_BANDWIDTH / 1e12:g} TB/s)")
    curve.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_FLOPS / 1e12,
                       help=f"per-device peak TFLOPS (default {DEFAULT_PEAK_FLOPS / 1e12:g})")
    curve.add_argument("--bandwidth-tbs", type=float, default=DEFAULT_BANDWIDTH / 1e12,
                       help=f"per-device memory bandwidth in TB/s (default {DEFAULT_BANDWIDTH / 1e12:g})")
    curve.add_argument("--link-gbs", type=float, default=None,
                       help="device-to-device bandwidth in GB/s per direction, for the tensor-parallel collectives "
                            "(needed with --tensor-parallel > 1: the 910B preset has no sourced figure)")


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


def tune_text(report: dict) -> str:
    lines = [
        f"model            {report['model']} ({model_shape(report)}), seq_len {report['seq_len']}, "
        f"global batch {report['global_batch']}, "
        f"devices {devices_text(report)}",
        f"memory           {_memory_settings(report)}, {report['device_memory_bytes'] / GIB:g} GiB per device",
        f"device           {report['device']['name']}: {report['device']['peak_flops'] / 1e12:g} TFLOP/s, "
        f"{report['device']['memory_bandwidth'] / 1e12:g} TB/s",
        f"rate curve       {report['curve']['name']}",
        "",
        f"{'micro':>6} {'m':>4} {'bubble':>7} {'memory':>7} {'fits':>5} {'matmul eff':>10} {'tokens/s':>12}",
    ]
    best = report["recommended"]
    for row in report["candidates"]:
        mark = "  ← recommended" if best is not None and row["micro_batch_size"] == best["micro_batch_size"] else ""
        lines.append(f"{row['micro_batch_size']:>6} {row['num_microbatches']:>4} {row['bubble_fraction']:>7.1%} "
                     f"{row['peak_memory_fraction']:>7.1%} {'yes' if row['fits'] else 'no':>5} "
                     f"{row['matmul_efficiency']:>10.1%} {throughput(row['tokens_per_second'], False):>12}{mark}")
    lines.append("")
    if best is not None:
        lines.append(f"recommended      micro-batch {best['micro_batch_size']} ({best['num_microbatches']} micro-batches): "
                     "the fitting one with the highest modelled tokens/s (modelled, not measured: the roofline is an upper "
                     "bound with no per-micro-batch overhead, point-to-point latency or kernel launch, so it never "
                     "rewards a larger micro-batch once the matmul is compute-bound; measure before choosing)")
    else:
        lines.append(f"nothing fits     {report['suggestion']}")
    lines += ["", "schedules        the same job under each schedule (and v): its fastest micro-batch that fits, "
              "else its fastest (modelled)",
              f"{'schedule':<26} {'micro':>5} {'m':>4} {'bubble':>7} {'memory':>7} {'fits':>5} {'tokens/s':>12}"]
    won = report["best_schedule"]
    for entry in report["schedules"]:
        row = entry["recommended"] or entry["fastest"]
        mark = ("  ← fastest" if won is not None and (entry["schedule"], entry["virtual_stages"]) ==
                (won["schedule"], won["virtual_stages"]) else "")
        lines.append(f"{schedule_name(entry['schedule'], entry['virtual_stages']):<26} {row['micro_batch_size']:>5} "
                     f"{row['num_microbatches']:>4} {row['bubble_fraction']:>7.1%} {row['peak_memory_fraction']:>7.1%} "
                     f"{'yes' if row['fits'] else 'no':>5} {throughput(row['tokens_per_second'], False):>12}{mark}")
    if won is not None:
        lines.append(f"best schedule    {schedule_name(won['schedule'], won['virtual_stages'])}, micro-batch "
                     f"{won['micro_batch_size']}: {report['schedule_reason']}")
    else:
        lines.append("best schedule    none: nothing fits under any schedule searched")
    if report["schedules_not_searched"]:
        lines.append(f"not searched     {', '.join(report['schedules_not_searched'])}: reading their memory off the "
                     "schedule's order would take too long at this many stages and micro-batch sizes")
    return "\n".join(lines)
