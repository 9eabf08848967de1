"""``python -m batchlab.measure.pipeline_torchrun``: the distributed pipeline of 4.4 on real servers, one
process per card, started by ``torchrun`` (rank functions of :mod:`batchlab.measure.pipeline_distributed`).

On an NPU server (8 cards, one process per card, hccl)::

    torchrun --nproc-per-node 4 -m batchlab.measure.pipeline_torchrun --device npu --model gpt2 \\
        --pipeline-stages 4 --global-batch 64 --micro-batch 8 --seq-len 256 --precision fp32 --dropout 0

``--schedule`` is any of the calculator's (gpipe, 1f1b, interleaved-1f1b, zero-bubble) and ``--virtual-stages``
the model chunks per card (≥ 2 for interleaved-1f1b; 1 = ZB-H1 or 2 = ZB-V for zero-bubble), the layers cut
into pipeline-stages × virtual-stages chunks; e.g. ``--schedule interleaved-1f1b --virtual-stages 3`` with
``--model gpt2`` (12 layers) on 4 cards.

On several NPU servers, one ``torchrun`` per server, the same command on each but ``--node-rank``
(0 on the server whose address is ``--master-addr``, then 1, 2, ...); ``--pipeline-stages`` is the total number
of processes, ``--nnodes`` × ``--nproc-per-node``::

    # on server 0 (address 10.0.0.1); on server 1 the same with --node-rank 1
    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 8 \\
      --master-addr 10.0.0.1 --master-port 29500 \\
      -m batchlab.measure.pipeline_torchrun --device npu \\
      --pipeline-stages 16 --global-batch 128 --micro-batch 4 --n-layer 48

Without ``torchrun`` (no ``RANK`` in the environment), ``python -m batchlab.measure.pipeline_torchrun ...``
starts the processes itself through :func:`~batchlab.measure.pipeline_distributed.run_pipeline_distributed`.
Across servers, each machine's clock is its own, so the timeline is aligned on a barrier at the start of
each step (good to a message's latency).

The flags that describe the job are the calculator's (``python -m batchlab plan`` and ``pipeline``): one
:class:`~batchlab.formulas.job.Job` is built from them, validated once, and run; a run computes in fp32
without dropout (:func:`~batchlab.measure.pipeline_local.check_pipeline_job`), so the GPT-2 presets need
``--precision fp32 --dropout 0``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace

import torch
import torch.distributed as dist

from batchlab.formulas.checks import whole
from batchlab.formulas.job import Job
from batchlab.formulas.pipeline_schedules import SCHEDULES, bubble_fraction
from batchlab.formulas.precision import PRECISIONS
from batchlab.formulas.presets import PRESETS, get_config
from batchlab.measure.device import select_device
from batchlab.measure.pipeline_distributed import (BACKENDS, DistributedPipelineRun, check_torch_schedule, merge_ranks,
                                                   one_thread, rank_device, require_pipelining,
                                                   run_pipeline_distributed, run_rank, torch_schedule)
from batchlab.measure.pipeline_local import check_pipeline_job

__all__ = ["main"]


def _summary(run: DistributedPipelineRun) -> dict:
    job, timeline = run.job, run.timeline
    p = timeline.pipeline_stages
    busy = [sum(op.end - op.start for op in timeline.ops if op.stage == s) for s in range(p)]
    return {
        "schedule": job.schedule, "virtual_stages": job.virtual_stages, "torch_schedule": torch_schedule(job),
        "pipeline_stages": p, "num_microbatches": timeline.num_microbatches,
        "micro_batch_size": job.micro_batch_size, "global_batch": job.global_batch, "seq_len": job.seq_len,
        "loss": run.loss, "idle_fraction": timeline.idle_fraction,
        "bubble_formula": bubble_fraction(p, timeline.num_microbatches, job.schedule, job.virtual_stages),
        "makespan_seconds": timeline.makespan, "busy_seconds_per_stage": busy,
        "step_seconds": list(run.step_seconds), "warmup_seconds": run.warmup_seconds,
        "start_seconds": run.start_seconds,
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m batchlab.measure.pipeline_torchrun",
        description="流水线并行实测：每个进程一段（torch.distributed.pipelining）。"
                    "由 torchrun 启动时每卡一个进程，否则自行启动 --pipeline-stages 个进程。")
    # The job's flags, spelled as the calculator's (python -m batchlab plan / pipeline)
    parser.add_argument("--model", default="tiny", choices=list(PRESETS), help="预设模型名（默认 tiny）")
    parser.add_argument("--n-layer", type=int, default=None, help="覆盖预设的层数（须 ≥ 段数）")
    parser.add_argument("--d-model", type=int, default=None, help="覆盖预设的宽度")
    parser.add_argument("--seq-len", type=int, default=32, help="每条序列的 token 数（默认 32）")
    parser.add_argument("--global-batch", type=int, default=32, help="每步的序列数（默认 32）")
    parser.add_argument("--micro-batch", type=int, default=4, help="每个微批的序列数 b（默认 4）")
    parser.add_argument("--pipeline-stages", type=int, default=None,
                        help="流水线阶段数 p（torchrun 下默认为进程总数，否则 2）")
    parser.add_argument("--schedule", choices=list(SCHEDULES), default="1f1b", help="流水线调度（默认 1f1b）")
    parser.add_argument("--virtual-stages", type=int, default=1,
                        help="每张卡的模型段数 v：interleaved-1f1b 要 ≥ 2，zero-bubble 为 1（ZB-H1）或 2（ZB-V），"
                             "其余为 1；层数须能切成 p × v 段（默认 1）")
    parser.add_argument("--precision", choices=list(PRECISIONS), default=None, help="实测只支持 fp32")
    parser.add_argument("--dropout", type=float, default=None, help="流水线实测要求 0（默认：模型的）")
    # What only a measurement has
    parser.add_argument("--steps", type=int, default=2, help="预热一步之后计时的步数")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="cpu, cuda, npu（默认自动选择）")
    parser.add_argument("--backend", default=None, help="默认：gloo（cpu）、nccl（cuda）、hccl（npu）")
    parser.add_argument("--start-method", default="fork", help="不用 torchrun 时启动子进程的方式")
    parser.add_argument("--grads", default=None, metavar="FILE",
                        help="torchrun 下把最后一步的梯度汇总到 0 号进程并存成 FILE（torch.save；只适合小模型；"
                             "每台机器都要给）")
    return parser


def job_from_args(args: argparse.Namespace, pipeline_stages: int) -> Job:
    """The job the flags describe, run on ``pipeline_stages`` processes (ValueError when they describe none)."""
    overrides = {key: value for key, value in (("n_layer", args.n_layer), ("d_model", args.d_model))
                 if value is not None}
    return check_torch_schedule(check_pipeline_job(Job(
        model=get_config(args.model, **overrides), seq_len=args.seq_len, global_batch=args.global_batch,
        micro_batch_size=args.micro_batch, pipeline_stages=pipeline_stages, schedule=args.schedule,
        virtual_stages=args.virtual_stages, precision=args.precision, dropout=args.dropout)))


def _refuse(parser: argparse.ArgumentParser, error: ValueError) -> int:
    """A job refused, in one line on stderr, as the calculator's commands do; exit code 2."""
    print(f"{parser.prog}: error: {str(error).strip().splitlines()[0]}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """``python -m batchlab.measure.pipeline_torchrun``: under ``torchrun`` (``RANK`` set) this process is one
    rank, ``--virtual-stages`` chunks; otherwise it starts the ranks itself. Rank 0 (or the launcher) prints a
    JSON summary: idle share of the median timed step against the schedule's closed form
    (:func:`~batchlab.formulas.pipeline_schedules.bubble_fraction`), step and start-up seconds. A job the flags
    cannot describe, or that torch cannot run, is refused in one line before any work (exit code 2)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if "RANK" not in os.environ:  # not under torchrun: start the ranks here
        device = args.device or "cpu"
        try:
            job = job_from_args(args, args.pipeline_stages or 2)
        except ValueError as error:
            return _refuse(parser, error)
        result = run_pipeline_distributed(job, steps=args.steps, seed=args.seed, device=device, backend=args.backend,
                                          start_method=args.start_method if device == "cpu" else "spawn")
        print(json.dumps(_summary(result), ensure_ascii=False, indent=1))
        return 0

    require_pipelining()
    one_thread()
    launched = time.perf_counter()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if args.pipeline_stages is not None and args.pipeline_stages != world:
        raise SystemExit(f"--pipeline-stages = {args.pipeline_stages}：必须等于进程总数 WORLD_SIZE = {world}（每个进程一段）")
    try:
        job = job_from_args(args, world)
    except ValueError as error:
        return _refuse(parser, error)
    kind = select_device(args.device).type
    device = rank_device(kind, local_rank)
    backend = args.backend or BACKENDS[kind]
    dist.init_process_group(backend)
    try:
        result = run_rank(rank, job, whole("steps", args.steps), args.seed, device)
        # seconds since this process started its work; the gradients are too large to gather in general
        result = replace(result, ready=result.ready - launched, grads=result.grads if args.grads is not None else {})
        gathered = [None] * world if rank == 0 else None
        dist.gather_object(result, gathered, dst=0)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        one_host = int(os.environ.get("LOCAL_WORLD_SIZE", world)) == world
        merged = merge_ranks(gathered, job, align="clock" if one_host else "barrier")
        if args.grads is not None:  # the tied wte.weight: both hosts' parts summed, as one process would have it
            torch.save(merged.grads, args.grads)
        merged = replace(merged, start_seconds=max(r.ready for r in gathered))
        print(json.dumps(_summary(merged), ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
