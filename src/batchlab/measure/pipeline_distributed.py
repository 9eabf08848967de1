"""One process per pipeline stage: ``torch.distributed.pipelining`` on the GPT (4.4).

* :func:`run_pipeline_distributed` starts p processes that talk through ``torch.distributed``
  (gloo on CPU, nccl on CUDA, hccl on Ascend NPU) and run ``torch.distributed.pipelining``'s
  ``ScheduleGPipe`` or ``Schedule1F1B``; it returns the measured timeline (communication and all),
  the gradients and the start-up and step times;
* :mod:`batchlab.measure.pipeline_torchrun`: the same on servers, one process per card, started by
  ``torchrun``, built from this module's rank functions.

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

import multiprocessing
import multiprocessing.connection
import os
import socket
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
from batchlab.formulas.pipeline_schedules import Op, Timeline, check_runnable
from batchlab.formulas.presets import GPTConfig, get_config
from batchlab.measure.device import accelerator_module, select_device, synchronize
from batchlab.measure.model import GPT, next_token_loss
from batchlab.measure.pipeline_local import check_no_dropout, check_stage_batch, pipeline_batch, split_model

try:  # torch ≥ 2.4; imported here so that forked ranks start without importing it again
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
except ImportError:  # pragma: no cover - old torch, or a build without torch.distributed
    dist = None
    PipelineStage = Schedule1F1B = ScheduleGPipe = None

__all__ = ["BACKENDS", "require_pipelining", "one_thread", "rank_device", "run_rank", "merge_ranks", "free_port",
           "run_pipeline_distributed"]

# The collective library of each device type; ``backend=`` overrides it.
BACKENDS: dict[str, str] = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}

# ---------------------------------------------------------------------------
# One process per stage: torch.distributed.pipelining
# ---------------------------------------------------------------------------


def require_pipelining() -> None:
    if PipelineStage is None or dist is None or not dist.is_available():
        raise RuntimeError(f"torch {torch.__version__} 没有 torch.distributed.pipelining（需要 torch ≥ 2.4，"
                           "且带 torch.distributed 编译）")


def one_thread() -> None:
    """First thing in every rank: one intra-op thread (several ranks share the cores; and a forked
    child whose parent already ran OpenMP work can hang with more than one)."""
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    torch.set_num_threads(1)


def rank_device(kind: str, local_rank: int) -> torch.device:
    if kind == "cpu":
        return torch.device("cpu")
    device = select_device(f"{kind}:{local_rank}")  # imports torch_npu for npu, checks the card exists
    accelerator_module(device).set_device(device.index)
    return device


def run_rank(rank: int, world: int, config: GPTConfig, num_microbatches: int, micro_batch_size: int,
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
    one_thread()
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        device = rank_device(kind, rank)
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(seconds=timeout))
        try:
            result = run_rank(rank, world, config, num_microbatches, micro_batch_size, seq_len, schedule,
                               steps, seed, device, method)
        finally:
            dist.destroy_process_group()
        torch.save(result, Path(out_dir, f"rank{rank}.tmp"))
        os.replace(Path(out_dir, f"rank{rank}.tmp"), Path(out_dir, f"rank{rank}.pt"))
    except BaseException:
        Path(out_dir, f"rank{rank}.err").write_text(traceback.format_exc(), encoding="utf-8")
        raise


def free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it; concurrent callers get different ones)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def _child_environment() -> Iterator[None]:
    """Thread settings that a spawned child must find in its environment (a forked one also sets them
    itself, in :func:`one_thread`); the parent's environment is restored afterwards."""
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


def merge_ranks(results: list[dict[str, Any]], schedule: str, num_microbatches: int,
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
    require_pipelining()
    config = _resolve_config(config)
    check_runnable(schedule, pipeline_stages, num_microbatches)
    p, m = pipeline_stages, num_microbatches
    partition_layers(config, p, method)  # checks p ≤ n_layer here, not in p processes
    check_no_dropout(config)
    whole("steps", steps)
    whole("seed", seed, minimum=0)
    check_stage_batch(config, m, micro_batch_size, seq_len)
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
    merged = merge_ranks(results, schedule, m)
    merged["start_seconds"] = max(r["ready"] for r in results) - launched
    return merged
