"""``python -m batchlab``: the book's numbers without a notebook.

    python -m batchlab plan --model gpt2-xl --seq-len 1024 --global-batch 64 \\
        --micro-batch 2 --pipeline-stages 4 --data-parallel 2 --json
    python -m batchlab device
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from .batching import plan_batch
from .presets import PRESETS, count_params, get_config  # no torch: `plan` answers instantly

__all__ = ["main", "plan_report"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def plan_report(model: str, seq_len: int | None, global_batch: int, micro_batch_size: int,
                pipeline_stages: int = 1, data_parallel: int = 1,
                grad_accum_steps: int | None = None) -> dict:
    """Everything ``plan`` prints, as a JSON-able dict. Raises ValueError on invalid input."""
    config = get_config(model)
    seq_len = config.n_positions if seq_len is None else seq_len
    if seq_len < 1 or seq_len > config.n_positions:
        raise ValueError(f"seq_len {seq_len} must lie between 1 and {model}'s n_positions = {config.n_positions}")
    if pipeline_stages > config.n_layer:
        raise ValueError(
            f"pipeline_stages {pipeline_stages} exceeds {model}'s {config.n_layer} layers: every stage needs a layer"
        )
    plan = plan_batch(micro_batch_size, pipeline_stages, data_parallel,
                      global_batch=global_batch, grad_accum_steps=grad_accum_steps)
    return {
        "model": model,
        "params": count_params(config),
        "seq_len": seq_len,
        "tokens_per_step": plan.tokens_per_step(seq_len),
        **plan.to_dict(),
    }


def _print_plan(report: dict) -> None:
    print(f"model            {report['model']}  ({report['params']:,} parameters)")
    print(f"global batch     {report['global_batch']} sequences = {report['tokens_per_step']:,} tokens per step")
    print(f"devices          {report['devices']} = {report['pipeline_stages']} pipeline stages × "
          f"{report['data_parallel']} data parallel")
    print(f"num_microbatches {report['num_microbatches']} per replica per step "
          f"(micro-batch {report['micro_batch_size']})")
    ga = report["grad_accum_steps"]
    print(f"grad_accum_steps {ga if ga is not None else 'n/a'} in the seed's convention "
          f"(= num_microbatches / pipeline_stages); DeepSpeed's gradient_accumulation_steps = "
          f"{report['num_microbatches']}")
    print(f"bubble_fraction  {report['bubble_fraction']:.3f}  = (p-1)/(m+p-1)")
    if not report["fills_pipeline"]:
        print("warning          fewer micro-batches than stages: 1F1B cannot run, the pipeline never fills")


def _format_memory(memory: dict) -> str:
    gib = {k: memory[k] / 2**30 for k in ("allocated", "peak", "free", "total")}
    return (f"allocated {gib['allocated']:.2f} GiB, peak {gib['peak']:.2f} GiB, "
            f"free {gib['free']:.1f} of {gib['total']:.1f} GiB  [{memory['source']}]")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="python -m batchlab", description="Batch-size calculator of 《Batch Size 核心概念》.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    plan = sub.add_parser("plan", help="validate a batch configuration and derive micro-batches and bubble")
    plan.add_argument("--model", default="gpt2-xl", choices=list(PRESETS), help="model preset (default gpt2-xl)")
    plan.add_argument("--seq-len", type=int, default=None,
                      help="tokens per sequence (default: the model's context, 1024 for GPT-2)")
    plan.add_argument("--global-batch", type=int, required=True, help="sequences per optimizer step")
    plan.add_argument("--micro-batch", type=int, required=True, help="sequences per micro-batch")
    plan.add_argument("--pipeline-stages", type=int, default=1, help="pipeline-parallel degree p (default 1)")
    plan.add_argument("--data-parallel", type=int, default=1, help="data-parallel degree (default 1)")
    plan.add_argument("--grad-accum", type=int, default=None,
                      help="gradient-accumulation steps, checked against the global batch (seed or DeepSpeed convention)")
    plan.add_argument("--json", action="store_true", help="print JSON instead of text")

    dev = sub.add_parser("device", help="report the compute path (NPU, CUDA or CPU) and its memory")
    dev.add_argument("--device", default=None, help="auto (default), cpu, cuda, npu, npu:1, …")
    dev.add_argument("--json", action="store_true", help="print JSON instead of text")

    args = parser.parse_args(argv)
    try:
        if args.command == "plan":
            report = plan_report(args.model, args.seq_len, args.global_batch, args.micro_batch,
                                 args.pipeline_stages, args.data_parallel, args.grad_accum)
            print(json.dumps(report, indent=2, ensure_ascii=False)) if args.json else _print_plan(report)
        else:
            from .device import describe, select_device

            info = describe(select_device(args.device))
            if args.json:
                print(json.dumps(info, indent=2, ensure_ascii=False))
            else:
                for key, value in info.items():
                    print(f"{key:<10} {_format_memory(value) if key == 'memory' else value}")
    except (ValueError, RuntimeError) as err:
        print(f"{parser.prog} {args.command}: error: {err}", file=sys.stderr)
        return 2
    return 0
