"""One process per pipeline stage: ``torch.distributed.pipelining`` on the GPT (4.4).

* :func:`run_pipeline_distributed` starts p processes that talk through ``torch.distributed``
  (gloo on CPU, nccl on CUDA, hccl on Ascend NPU) and run ``torch.distributed.pipelining``'s
  ``ScheduleGPipe`` or ``Schedule1F1B``; it returns the measured timeline (communication and all),
  the gradients and the start-up and step times;
* :func:`main`: the same on a server, one process per card, started by ``torchrun``.

On an NPU server (8 cards, one process per card, hccl)::

    torchrun --nproc-per-node 4 -m batchlab.measure.pipeline_distributed --device npu \\
        --stages 4 --micro-batches 8 --micro-batch-size 8 --seq-len 256 --model gpt2 --n-layer 12

On several NPU servers, one ``torchrun`` per server, the same command on each but ``--node-rank``
(0 on the server whose address is ``--master-addr``, then 1, 2, ...); ``--stages`` is the total number of
processes, ``--nnodes`` × ``--nproc-per-node``::

    # on server 0 (address 10.0.0.1); on server 1 the same with --node-rank 1
    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 8 \\
      --master-addr 10.0.0.1 --master-port 29500 \\
      -m batchlab.measure.pipeline_distributed --device npu \\
      --stages 16 --micro-batches 32 --n-layer 48

Without ``torchrun`` (no ``RANK`` in the environment), ``python -m batchlab.measure.pipeline_distributed ...`` starts
the processes itself through :func:`run_pipeline_distributed`. Across servers, each machine's clock is
its own, so the timeline is aligned on a barrier at the start of each step (good to a message's latency).

Notes from measuring on a laptop CPU: use dropout 0 (each stage's random numbers would differ from
single-process accumulation); give each rank one thread (``torch.set_num_threads(1)``,
``OMP_NUM_THREADS=1``; with ``fork`` after OpenMP work in the parent, more threads can hang);
``OMP_WAIT_POLICY=PASSIVE`` stops idle ranks from spinning on shared cores; the first step exchanges
tensor shapes between stages and is slow, so one warm-up step precedes the timed ones. With ops of a
few milliseconds on a few shared cores, fixed per-message costs make the measured bubble much larger
than (p − 1)/(m + p − 1); with wider layers it approaches the formula.

The stages are :func:`batchlab.measure.pipeline_local.split_model`'s; its one-process replay is the
measurement without communication.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import multiprocessing.connection
import os
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from batchlab.formulas.checks import one_of, positive, whole
from batchlab.formulas.partition import partition_layers
from batchlab.formulas.pipeline_schedules import Op, Timeline, bubble_fraction, check_runnable
from batchlab.formulas.presets import GPTConfig, get_config
from batchlab.measure.device import accelerator_module, select_device, synchronize
from batchlab.measure.model import next_token_loss
from batchlab.measure.pipeline_local import pipeline_batch, split_model

try:  # torch ≥ 2.4; imported here so that forked ranks start without importing it again
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
except ImportError:  # pragma: no cover - old torch, or a build without torch.distributed
    dist = None
    PipelineStage = Schedule1F1B = ScheduleGPipe = None

__all__ = ["BACKENDS", "free_port", "run_pipeline_distributed", "main"]

# The collective library of each device type; ``backend=`` overrides it.
BACKENDS: dict[str, str] = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}

# ---------------------------------------------------------------------------
# One process per stage: torch.distributed.pipelining
# ---------------------------------------------------------------------------


def _require_pipelining() -> None:
    if PipelineStage is None or dist is None or not dist.is_available():
        raise RuntimeError(f"torch {torch.__version__} 没有 torch.distributed.pipelining（需要 torch ≥ 2.4，"
                           "且带 torch.distributed 编译）")


def _one_thread() -> None:
    """First thing in every rank: one intra-op thread (several ranks share the cores; and a forked
    child whose parent already ran OpenMP work can hang with more than one)."""
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    torch.set_num_threads(1)


def _rank_device(kind: str, local_rank: int) -> torch.device:
    if kind == "cpu":
        return torch.device("cpu")
    device = select_device(f"{kind}:{local_rank}")  # imports torch_npu for npu, checks the card exists
    accelerator_module(device).set_device(device.index)
    return device


def _run_rank(rank: int, world: int, config: GPTConfig, num_microbatches: int, micro_batch_size: int,
              seq_len: int, schedule: str, steps: int, seed: int, device: torch.device,
              method: str = "uniform") -> dict[str, Any]:
    """The work of one rank, once its process group is up: build the seeded GPT, keep stage ``rank``,
    run one warm-up step and ``steps`` timed ones; return the timed steps' ops, the last step's
    gradients (GPT names) and its loss (last rank)."""
    m = num_microbatches
    stage_module = split_model(GPT(config, seed=seed), world, method)[rank].to(device)
    stage = PipelineStage(stage_module, rank, world, device)
    ops: list[list] = []  # [kind, microbatch, start, end], perf_counter seconds

    def timed(kind: str, method_):
        def run(chunk_id, *args, **kwargs):
            start = time.perf_counter()
            out = method_(chunk_id, *args, **kwargs)
            synchronize(device)
            ops.append([kind, chunk_id, start, time.perf_counter()])
            return out
        return run

    for name in ("forward_one_chunk", "backward_one_chunk"):
        if not callable(getattr(stage, name, None)):
            raise RuntimeError(f"torch {torch.__version__} 的 PipelineStage 没有 {name}，无法逐个操作计时")
    stage.forward_one_chunk = timed("F", stage.forward_one_chunk)
    stage.backward_one_chunk = timed("B", stage.backward_one_chunk)

    def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = next_token_loss(logits, target)
        synchronize(device)
        if ops and ops[-1][0] == "F":  # not during the warm-up's shape inference, which calls it too
            ops[-1][3] = time.perf_counter()  # the loss belongs to the last stage's forward, as locally
        return loss

    kinds = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
    pipe = kinds[schedule](stage, m, loss_fn=loss_fn)  # scale_grads: gradients of the mean loss
    inputs, targets = pipeline_batch(config, m, micro_batch_size, seq_len, seed)
    args = (inputs.to(device),) if rank == 0 else ()
    target = targets.to(device) if rank == world - 1 else None
    ready = time.perf_counter()
    steps_out, losses = [], []
    for step in range(steps + 1):  # step 0 is the warm-up: stages exchange shapes
        stage_module.zero_grad(set_to_none=True)
        ops.clear()
        dist.barrier()
        begin = time.perf_counter()
        pipe.step(*args, target=target, losses=losses if target is not None else None)
        synchronize(device)
        steps_out.append({"begin": begin, "end": time.perf_counter(), "ops": [list(op) for op in ops]})
    grads = {name: param.grad.detach().cpu().clone() for name, param in stage_module.named_parameters()
             if param.grad is not None}
    return {"rank": rank, "ready": ready, "steps": steps_out, "grads": grads,
            "loss": sum(loss.item() for loss in losses) / m if losses else None}


def _worker(rank: int, world: int, port: int, kind: str, backend: str, config: GPTConfig,
            num_microbatches: int, micro_batch_size: int, seq_len: int, schedule: str, steps: int,
            seed: int, method: str, timeout: float, out_dir: str) -> None:
    """One rank started by :func:`run_pipeline_distributed`: results to ``out_dir/rank{rank}.pt``, a
    traceback to ``out_dir/rank{rank}.err`` on failure (and a non-zero exit code)."""
    _one_thread()
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        device = _rank_device(kind, rank)
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(seconds=timeout))
        try:
            result = _run_rank(rank, world, config, num_microbatches, micro_batch_size, seq_len, schedule,
                               steps, seed, device, method)
        finally:
            dist.destroy_process_group()
        torch.save(result, Path(out_dir, f"rank{rank}.tmp"))
        os.replace(Path(out_dir, f"rank{rank}.tmp"), Path(out_dir, f"rank{rank}.pt"))
    except BaseException:
        Path(out_dir, f"rank{rank}.err").write_text(traceback.format_exc(), encoding="utf-8")
        raise


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def _child_environment() -> Iterator[None]:
    """Thread settings that a spawned child must find in its environment (a forked one also sets them
    itself, in :func:`_one_thread`); the parent's environment is restored afterwards."""
    wanted = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    saved = {key: os.environ.get(key) for key in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _merge(results: list[dict[str, Any]], schedule: str, num_microbatches: int,
           align: str = "clock") -> dict[str, Any]:
    """The ranks' results as one: the last timed step's timeline (seconds after its earliest op), the
    gradients summed over ranks where a name appears twice (the tied ``wte.weight``), step times.

    ``align="clock"``: the ranks share one clock (one machine; ``perf_counter`` is system-wide).
    ``"barrier"``: each rank's times count from its own exit from the barrier before each step
    (several machines, whose clocks are unrelated)."""
    world = len(results)
    steps = len(results[0]["steps"])

    def origin(result: dict[str, Any], step: int) -> float:
        return result["steps"][step]["begin"] if align == "barrier" else 0.0

    step_seconds = [max(r["steps"][k]["end"] - origin(r, k) for r in results)
                    - min(r["steps"][k]["begin"] - origin(r, k) for r in results) for k in range(1, steps)]
    last = steps - 1
    raw = [(r["rank"], kind, mb, start - origin(r, last), end - origin(r, last))
           for r in results for kind, mb, start, end in r["steps"][last]["ops"]]
    first = min(op[3] for op in raw)
    ops = tuple(Op(stage=rank, microbatch=mb, kind=kind, start=start - first, end=end - first)
                for rank, kind, mb, start, end in sorted(raw, key=lambda op: op[3]))
    grads: dict[str, torch.Tensor] = {}
    for r in results:
        for name, grad in r["grads"].items():
            grads[name] = grads[name] + grad if name in grads else grad
    warmup = (max(r["steps"][0]["end"] - origin(r, 0) for r in results)
              - min(r["steps"][0]["begin"] - origin(r, 0) for r in results))
    return {"timeline": Timeline(schedule, world, num_microbatches, ops), "grads": grads,
            "loss": results[-1]["loss"], "step_seconds": step_seconds, "warmup_seconds": warmup}


def _resolve_config(config: str | GPTConfig) -> GPTConfig:
    return config if isinstance(config, GPTConfig) else get_config(config)


def run_pipeline_distributed(
    config: str | GPTConfig,
    pipeline_stages: int,
    num_microbatches: int,
    micro_batch_size: int,
    seq_len: int,
    schedule: str = "1f1b",
    steps: int = 2,
    seed: int = 0,
    backend: str | None = None,
    start_method: str = "fork",
    *,
    device: str | None = "cpu",
    method: str = "uniform",
    timeout: float = 300.0,
) -> dict[str, Any]:
    """Train ``steps`` timed steps (after one warm-up) of a pipeline of ``pipeline_stages`` processes,
    one stage each, on ``torch.distributed.pipelining`` (``ScheduleGPipe`` or ``Schedule1F1B``).

    ``config``: a preset name (``"tiny"``) or a :class:`~batchlab.measure.model.GPTConfig`; every rank builds
    ``GPT(config, seed=seed)`` and keeps its stage (:func:`split_model`). The data is
    :func:`pipeline_batch` (m × b sequences). No optimizer steps: every step sees the same weights,
    so the returned gradients are comparable with :func:`run_pipeline_distributed`'s.

    ``device``: ``"cpu"`` (default), ``"cuda"`` or ``"npu"`` (rank r on card r), or ``None``/``"auto"``
    for :func:`~batchlab.measure.device.select_device`'s choice; ``backend`` defaults to :data:`BACKENDS`'s
    (gloo, nccl, hccl). ``start_method``: ``"fork"`` starts in a fraction of a second (CPU only: an
    accelerator cannot be used in a forked child), ``"spawn"`` in seconds and from any script guarded
    by ``if __name__ == "__main__":``. ``timeout`` (s) bounds the whole run. The rendezvous is over
    TCP on 127.0.0.1, on a free port.

    Returns a dict: ``"timeline"`` (the last timed step, seconds after its earliest op, measured with
    ``time.perf_counter``, the loss included in the last stage's forward), ``"grads"`` (the last step's,
    merged over ranks: the tied ``wte.weight`` is the sum of the first and last stage's, see
    :func:`split_model`), ``"loss"`` (mean over micro-batches), ``"step_seconds"`` (one per timed step,
    first begin to last end over ranks), ``"warmup_seconds"`` and ``"start_seconds"`` (from starting
    the processes until every rank has its process group and stage).

    Every process is joined, or terminated, before this returns or raises; a rank's exception is raised
    here as a RuntimeError carrying its traceback.
    """
    _require_pipelining()
    config = _resolve_config(config)
    check_runnable(schedule, pipeline_stages, num_microbatches)
    p, m = pipeline_stages, num_microbatches
    partition_layers(config, p, method)  # checks p ≤ n_layer here, not in p processes
    _check_dropout(config)
    whole("steps", steps)
    whole("seed", seed, minimum=0)
    _check_batch(config, m, micro_batch_size, seq_len)
    timeout = positive("timeout", timeout)
    one_of("start_method", start_method, multiprocessing.get_all_start_methods())
    kind = select_device(device).type
    if kind not in BACKENDS:
        raise ValueError(f"device = {device!r}：只支持 {', '.join(BACKENDS)}")
    if kind != "cpu" and start_method == "fork":
        raise ValueError(f"start_method = 'fork'：{kind} 不能在 fork 出的子进程里初始化，"
                         "请用 start_method='spawn'，或在服务器上用 torchrun（见本模块说明）")
    backend = BACKENDS[kind] if backend is None else backend
    if kind == "cpu" and backend != "gloo":
        raise ValueError(f"backend = {backend!r}：CPU 上只能用 'gloo'")

    ctx = multiprocessing.get_context(start_method)
    procs = []
    with tempfile.TemporaryDirectory(prefix="batchlab-pipeline-") as out_dir:
        try:
            launched = time.perf_counter()
            port = free_port()
            with _child_environment():
                for rank in range(p):
                    proc = ctx.Process(target=_worker, name=f"batchlab-pipeline-rank{rank}", daemon=True,
                                       args=(rank, p, port, kind, backend, config, m, micro_batch_size,
                                             seq_len, schedule, steps, seed, method, timeout, out_dir))
                    proc.start()
                    procs.append(proc)
            deadline = launched + timeout
            # Until all have exited, or one has failed (the others would wait for it forever).
            while any(proc.exitcode is None for proc in procs):
                if any(proc.exitcode not in (None, 0) for proc in procs):
                    break
                if time.perf_counter() > deadline:
                    raise TimeoutError(f"流水线运行超过 timeout = {timeout} 秒仍未结束（已终止各进程）")
                multiprocessing.connection.wait([proc.sentinel for proc in procs if proc.exitcode is None], 0.05)
            errors = []
            for rank, proc in enumerate(procs):
                err = Path(out_dir, f"rank{rank}.err")
                if err.exists():
                    errors.append(f"rank {rank}:\n{err.read_text(encoding='utf-8')}")
                elif proc.exitcode not in (None, 0):
                    errors.append(f"rank {rank}: 进程以退出码 {proc.exitcode} 结束")
            if errors:
                raise RuntimeError("流水线的子进程出错：\n" + "\n".join(errors))
            results = [torch.load(Path(out_dir, f"rank{rank}.pt"), weights_only=False) for rank in range(p)]
        finally:
            for proc in procs:
                if proc.exitcode is None:
                    proc.terminate()
            for proc in procs:
                proc.join(5)
                if proc.exitcode is None:
                    proc.kill()
                    proc.join()
                proc.close()
    merged = _merge(results, schedule, m)
    merged["start_seconds"] = max(r["ready"] for r in results) - launched
    return merged


# ---------------------------------------------------------------------------
# Command line (torchrun or not)
# ---------------------------------------------------------------------------


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
        prog="python -m batchlab.measure.pipeline_distributed",
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
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m batchlab.measure.pipeline_distributed``: under ``torchrun`` (``RANK`` set) this process is one
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

    _require_pipelining()
    _one_thread()
    launched = time.perf_counter()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if args.stages is not None and args.stages != world:
        raise SystemExit(f"--stages = {args.stages}：必须等于进程总数 WORLD_SIZE = {world}（每个进程一段）")
    check_runnable(args.schedule, world, args.micro_batches)
    kind = select_device(args.device).type
    device = _rank_device(kind, local_rank)
    backend = args.backend or BACKENDS[kind]
    dist.init_process_group(backend)
    try:
        result = _run_rank(rank, world, config, args.micro_batches, args.micro_batch_size, args.seq_len,
                           args.schedule, whole("steps", args.steps), args.seed, device)
        result["ready"] -= launched  # seconds since this process started its work
        result.pop("grads")  # too large to gather in general; the summary does not need them
        gathered = [None] * world if rank == 0 else None
        dist.gather_object(result, gathered, dst=0)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        one_host = int(os.environ.get("LOCAL_WORLD_SIZE", world)) == world
        for r in gathered:
            r["grads"] = {}
        merged = _merge(gathered, args.schedule, args.micro_batches, align="clock" if one_host else "barrier")
        merged["start_seconds"] = max(r["ready"] for r in gathered)
        print(json.dumps(_summary(merged, args), ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
