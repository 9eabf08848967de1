"""``python -m batchlab.measure.pipeline_torchrun``: the distributed pipeline of 4.4 on real servers, one
process per card, started by ``torchrun`` (rank functions of :mod:`batchlab.measure.pipeline_distributed`).

On an NPU server (8 cards, one process per card, hccl)::

    torchrun --nproc-per-node 4 -m batchlab.measure.pipeline_torchrun --device npu \\
        --stages 4 --micro-batches 8 --micro-batch-size 8 --seq-len 256 --model gpt2 --n-layer 12

On several NPU servers, one ``torchrun`` per server, the same command on each but ``--node-rank``
(0 on the server whose address is ``--master-addr``, then 1, 2, ...); ``--stages`` is the total number of
processes, ``--nnodes`` × ``--nproc-per-node``::

    # on server 0 (address 10.0.0.1); on server 1 the same with --node-rank 1
    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 8 \\
      --master-addr 10.0.0.1 --master-port 29500 \\
      -m batchlab.measure.pipeline_torchrun --device npu \\
      --stages 16 --micro-batches 32 --n-layer 48

Without ``torchrun`` (no ``RANK`` in the environment), ``python -m batchlab.measure.pipeline_torchrun ...``
starts the processes itself through :func:`~batchlab.measure.pipeline_distributed.run_pipeline_distributed`.
Across servers, each machine's clock is its own, so the timeline is aligned on a barrier at the start of
each step (good to a message's latency).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import torch
import torch.distributed as dist

from batchlab.formulas.checks import whole
from batchlab.formulas.pipeline_schedules import bubble_fraction, check_runnable
from batchlab.formulas.presets import get_config
from batchlab.measure.device import select_device
from batchlab.measure.pipeline_distributed import (BACKENDS, merge_ranks, one_thread, rank_device, require_pipelining,
                                                   run_pipeline_distributed, run_rank)

__all__ = ["main"]


def _summary(result: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    timeline = result["timeline"]
    p = timeline.pipeline_stages
    busy = [sum(op.end - op.start for op in timeline.ops if op.stage == s) for s in range(p)]
    return {
        "schedule": args.schedule, "stages": p, "micro_batches": timeline.num_microbatches,
        "micro_batch_size": args.micro_batch_size, "seq_len": args.seq_len,
        "loss": result.get("loss"), "idle_fraction": timeline.idle_fraction,
        "bubble_formula": bubble_fraction(p, timeline.num_microbatches),
        "makespan_seconds": timeline.makespan, "busy_seconds_per_stage": busy,
        "step_seconds": result["step_seconds"], "warmup_seconds": result.get("warmup_seconds"),
        "start_seconds": result.get("start_seconds"),
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m batchlab.measure.pipeline_torchrun",
        description="流水线并行实测：每个进程一段（torch.distributed.pipelining）。"
                    "由 torchrun 启动时每卡一个进程，否则自行启动 --stages 个进程。")
    parser.add_argument("--stages", type=int, default=None, help="流水线阶段数 p（torchrun 下默认为进程总数）")
    parser.add_argument("--micro-batches", type=int, default=8, help="微批次数 m")
    parser.add_argument("--micro-batch-size", type=int, default=4, help="每个微批的序列数 b")
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--schedule", choices=["gpipe", "1f1b"], default="1f1b")
    parser.add_argument("--steps", type=int, default=2, help="预热一步之后计时的步数")
    parser.add_argument("--model", default="tiny", help="预设模型名：tiny, pico, gpt2, ...")
    parser.add_argument("--n-layer", type=int, default=None, help="覆盖预设的层数（须 ≥ 段数）")
    parser.add_argument("--d-model", type=int, default=None, help="覆盖预设的宽度")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="cpu, cuda, npu（默认自动选择）")
    parser.add_argument("--backend", default=None, help="默认：gloo（cpu）、nccl（cuda）、hccl（npu）")
    parser.add_argument("--start-method", default="fork", help="不用 torchrun 时启动子进程的方式")
    parser.add_argument("--grads", default=None, metavar="FILE",
                        help="torchrun 下把最后一步的梯度汇总到 0 号进程并存成 FILE（torch.save；只适合小模型；"
                             "每台机器都要给）")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m batchlab.measure.pipeline_torchrun``: under ``torchrun`` (``RANK`` set) this process is one
    rank, one stage; otherwise it starts the ranks itself. Rank 0 (or the launcher) prints a JSON
    summary: idle share of the last step against (p − 1)/(m + p − 1), step and start-up seconds."""
    args = _parser().parse_args(argv)
    overrides = {key: value for key, value in (("n_layer", args.n_layer), ("d_model", args.d_model))
                 if value is not None}
    config = get_config(args.model, **overrides)
    if "RANK" not in os.environ:  # not under torchrun: start the ranks here
        device = args.device or "cpu"
        result = run_pipeline_distributed(config, args.stages or 2, args.micro_batches, args.micro_batch_size,
                                          args.seq_len, args.schedule, args.steps, args.seed, args.backend,
                                          args.start_method if device == "cpu" else "spawn", device=device)
        print(json.dumps(_summary(result, args), ensure_ascii=False, indent=1))
        return 0

    require_pipelining()
    one_thread()
    launched = time.perf_counter()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if args.stages is not None and args.stages != world:
        raise SystemExit(f"--stages = {args.stages}：必须等于进程总数 WORLD_SIZE = {world}（每个进程一段）")
    check_runnable(args.schedule, world, args.micro_batches)
    kind = select_device(args.device).type
    device = rank_device(kind, local_rank)
    backend = args.backend or BACKENDS[kind]
    dist.init_process_group(backend)
    try:
        result = run_rank(rank, world, config, args.micro_batches, args.micro_batch_size, args.seq_len,
                           args.schedule, whole("steps", args.steps), args.seed, device)
        result["ready"] -= launched  # seconds since this process started its work
        if args.grads is None:
            result.pop("grads")  # too large to gather in general; the summary does not need them
        gathered = [None] * world if rank == 0 else None
        dist.gather_object(result, gathered, dst=0)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        one_host = int(os.environ.get("LOCAL_WORLD_SIZE", world)) == world
        for r in gathered:
            r.setdefault("grads", {})
        merged = merge_ranks(gathered, args.schedule, args.micro_batches, align="clock" if one_host else "barrier")
        if args.grads is not None:  # the tied wte.weight: both hosts' parts summed, as one process would have it
            torch.save(merged["grads"], args.grads)
        merged["start_seconds"] = max(r["ready"] for r in gathered)
        print(json.dumps(_summary(merged, args), ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
