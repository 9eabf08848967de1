"""One process per pipeline stage: ``torch.distributed.pipelining`` on the GPT (4.4).

* :func:`run_pipeline_distributed` starts p processes that talk through ``torch.distributed``
  (gloo on CPU, nccl on CUDA, hccl on Ascend NPU) and run ``torch.distributed.pipelining``'s
  ``ScheduleGPipe`` or ``Schedule1F1B``; it returns the measured timeline (communication and all),
  the gradients and the start-up and step times;
* :mod:`batchlab.measure.pipeline_torchrun`: the same on servers, one process per card, started by
  ``torchrun``, built from this module's rank functions.

Notes from measuring on a laptop CPU: the job's dropout must be 0 (each stage's random numbers would differ
from single-process accumulation: :func:`~batchlab.measure.pipeline_local.check_no_dropout`); give each rank one thread (``torch.set_num_threads(1)``,
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
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import torch

from batchlab.formulas.checks import one_of, positive, whole
from batchlab.formulas.job import Job
from batchlab.formulas.pipeline_schedules import Op, Timeline, median_timeline
from batchlab.measure.device import accelerator_module, select_device, synchronize
from batchlab.measure.model import build_model, next_token_loss
from batchlab.measure.pipeline_local import check_pipeline_job, pipeline_batch, split_model

try:  # torch ≥ 2.4; imported here so that forked ranks start without importing it again
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
except ImportError:  # pragma: no cover - old torch, or a build without torch.distributed
    dist = None
    PipelineStage = Schedule1F1B = ScheduleGPipe = None

__all__ = ["BACKENDS", "require_pipelining", "one_thread", "rank_device", "RankStep", "RankResult", "run_rank",
           "DistributedPipelineRun", "merge_ranks", "free_port", "run_pipeline_distributed"]

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


@dataclass(frozen=True)
class RankStep:
    """One step on one rank: ``begin`` and ``end`` (``perf_counter`` seconds, after the barrier before it) and
    its ops, ``(kind, microbatch, start, end)`` each."""

    begin: float
    end: float
    ops: tuple[tuple[str, int, float, float], ...]


@dataclass(frozen=True)
class RankResult:
    """What one rank of :func:`run_rank` returns: its steps (the warm-up first), when it was ready, the last
    step's gradients of its stage (GPT names; empty when not gathered) and the mean loss (last rank only)."""

    rank: int
    ready: float
    steps: tuple[RankStep, ...]
    grads: dict[str, torch.Tensor]
    loss: float | None


def run_rank(rank: int, job: Job, steps: int, seed: int, device: torch.device) -> RankResult:
    """The work of one rank of ``job`` (``job.pipeline_stages`` ranks, one stage each), once its process group
    is up: build the job's seeded GPT, keep stage ``rank``, run one warm-up step and ``steps`` timed ones."""
    world, m, schedule = job.pipeline_stages, job.num_microbatches, job.schedule
    stage_module = split_model(build_model(job, seed), world, job.partition)[rank].to(device)
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
    inputs, targets = pipeline_batch(job, seed)
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
        steps_out.append(RankStep(begin, time.perf_counter(), tuple(tuple(op) for op in ops)))
    grads = {name: param.grad.detach().cpu().clone() for name, param in stage_module.named_parameters()
             if param.grad is not None}
    return RankResult(rank=rank, ready=ready, steps=tuple(steps_out), grads=grads,
                      loss=sum(loss.item() for loss in losses) / m if losses else None)


def _worker(rank: int, port: int, kind: str, backend: str, job: Job, steps: int, seed: int, timeout: float,
            out_dir: str) -> None:
    """One rank started by :func:`run_pipeline_distributed`: results to ``out_dir/rank{rank}.pt``, a
    traceback to ``out_dir/rank{rank}.err`` on failure (and a non-zero exit code)."""
    one_thread()
    world = job.pipeline_stages
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        device = rank_device(kind, rank)
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(seconds=timeout))
        try:
            result = run_rank(rank, job, steps, seed, device)
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


@dataclass(frozen=True)
class DistributedPipelineRun:
    """What :func:`run_pipeline_distributed` (or ``torchrun``, :mod:`batchlab.measure.pipeline_torchrun`)
    measured for ``job``, one process per stage: set it beside the modelled figures of the same job."""

    job: Job
    timeline: Timeline
    """A typical timed step: each op at the median of its start and end over the timed steps
    (:func:`~batchlab.formulas.pipeline_schedules.median_timeline`), seconds after the earliest op
    (``time.perf_counter``; the loss counts in the last stage's forward) — not the warm-up's shape exchange,
    and not one op that a busy machine slowed in one step."""
    grads: dict[str, torch.Tensor]
    """The last step's, merged over ranks: the tied ``wte.weight`` is the sum of the first and last stage's
    (see :func:`~batchlab.measure.pipeline_local.split_model`)."""
    loss: float | None
    """The mean loss over micro-batches (the last rank's)."""
    step_seconds: tuple[float, ...]
    """One per timed step: first begin to last end over ranks."""
    warmup_seconds: float
    """The warm-up step (stages exchange tensor shapes)."""
    start_seconds: float | None = None
    """From starting the processes until every rank had its process group and stage."""


def merge_ranks(results: list[RankResult], job: Job, align: str = "clock") -> DistributedPipelineRun:
    """The ranks' results as one run of ``job``: the median timeline of the timed steps (each op at its median
    start and end, :func:`~batchlab.formulas.pipeline_schedules.median_timeline`), the gradients summed over
    ranks where a name appears twice (the tied ``wte.weight``), step times.

    ``align="clock"``: the ranks share one clock (one machine; ``perf_counter`` is system-wide).
    ``"barrier"``: each rank's times count from its own exit from the barrier before each step
    (several machines, whose clocks are unrelated)."""
    one_of("align", align, ("clock", "barrier"))
    steps = len(results[0].steps)

    def origin(result: RankResult, step: int) -> float:
        return result.steps[step].begin if align == "barrier" else 0.0

    step_seconds = tuple(max(r.steps[k].end - origin(r, k) for r in results)
                         - min(r.steps[k].begin - origin(r, k) for r in results) for k in range(1, steps))
    if not step_seconds:
        raise ValueError("只有预热一步：至少需要一个计时步")

    def step_timeline(step: int) -> Timeline:
        ops = tuple(Op(stage=r.rank, microbatch=mb, kind=kind, start=start - origin(r, step),
                       end=end - origin(r, step)) for r in results for kind, mb, start, end in r.steps[step].ops)
        return Timeline(job.schedule, len(results), job.num_microbatches, ops)

    # results[·].steps[0] is the warm-up
    timeline = median_timeline([step_timeline(k) for k in range(1, steps)])
    grads: dict[str, torch.Tensor] = {}
    for r in results:
        for name, grad in r.grads.items():
            grads[name] = grads[name] + grad if name in grads else grad
    warmup = (max(r.steps[0].end - origin(r, 0) for r in results)
              - min(r.steps[0].begin - origin(r, 0) for r in results))
    return DistributedPipelineRun(job=job, timeline=timeline, grads=grads, loss=results[-1].loss,
                                  step_seconds=step_seconds, warmup_seconds=warmup)


def run_pipeline_distributed(
    job: Job,
    *,
    steps: int = 2,
    seed: int = 0,
    device: str | None = "cpu",
    backend: str | None = None,
    start_method: str = "fork",
    timeout: float = 300.0,
) -> DistributedPipelineRun:
    """Train ``steps`` timed steps (after one warm-up) of ``job`` on ``job.pipeline_stages`` processes, one
    stage each, on ``torch.distributed.pipelining`` (``ScheduleGPipe`` or ``Schedule1F1B``, ``job.schedule``).

    The job is the one the formulas model: every rank builds its GPT (:func:`~batchlab.measure.model.build_model`
    ``(job, seed)``) and keeps its stage (:func:`split_model`, ``job.partition``); the data is
    :func:`pipeline_batch` ``(job, seed)`` (one replica's m × b sequences). No optimizer steps: every step sees
    the same weights, so the gradients are comparable with :func:`run_pipeline_local`'s for the same job.

    What only a measurement has: ``device``, ``"cpu"`` (default), ``"cuda"`` or ``"npu"`` (rank r on card r),
    or ``None``/``"auto"`` for :func:`~batchlab.measure.device.select_device`'s choice; ``backend`` defaults to
    :data:`BACKENDS`'s (gloo, nccl, hccl). ``start_method``: ``"fork"`` starts in a fraction of a second (CPU
    only: an accelerator cannot be used in a forked child), ``"spawn"`` in seconds and from any script guarded
    by ``if __name__ == "__main__":``. ``timeout`` (s) bounds the whole run. The rendezvous is over
    TCP on 127.0.0.1, on a free port.

    Every process is joined, or terminated, before this returns or raises; a rank's exception is raised
    here as a RuntimeError carrying its traceback.
    """
    require_pipelining()
    check_pipeline_job(job)
    p = job.pipeline_stages
    whole("steps", steps)
    whole("seed", seed, minimum=0)
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
                                       args=(rank, port, kind, backend, job, steps, seed, timeout, out_dir))
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
    return replace(merge_ranks(results, job), start_seconds=max(r.ready for r in results) - launched)
