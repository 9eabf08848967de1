"""One process per pipeline stage: ``torch.distributed.pipelining`` on the GPT (4.4).

* :func:`run_pipeline_distributed` starts p processes that talk through ``torch.distributed``
  (gloo on CPU, nccl on CUDA, hccl on Ascend NPU) and run the job's schedule on
  ``torch.distributed.pipelining`` (:func:`torch_schedule`: ``ScheduleGPipe``, ``Schedule1F1B``,
  ``ScheduleInterleaved1F1B`` with v model chunks per rank, ``ScheduleInterleavedZeroBubble`` with one
  (ZB-H1) or ``ScheduleZBVZeroBubble`` with two in V placement (ZB-V)); it returns the measured timeline
  (communication and all; F, B and, where the schedule splits the backward, W per rank, chunk and
  micro-batch), the gradients and the start-up and step times;
* :mod:`batchlab.measure.pipeline_torchrun`: the same on servers, one process per card, started by
  ``torchrun``, built from this module's rank functions.

Notes from measuring on a laptop CPU: the job's dropout must be 0 (each stage's random numbers would differ
from single-process accumulation: :func:`~batchlab.measure.pipeline_local.check_no_dropout`); give each rank one thread (``torch.set_num_threads(1)``,
``OMP_NUM_THREADS=1``; with ``fork`` after OpenMP work in the parent, more threads can hang);
``OMP_WAIT_POLICY=PASSIVE`` stops idle ranks from spinning on shared cores; the first step exchanges
tensor shapes between stages and is slow, so one warm-up step precedes the timed ones. With ops of a
few milliseconds on a few shared cores, fixed per-message costs make the measured bubble much larger
than (p − 1)/(m + p − 1); with wider layers it approaches the formula.

The chunks are :func:`batchlab.measure.pipeline_local.split_model`'s, the model cut into p · v (the embedding
on the first, the head and loss on the last); rank r holds virtual stages r, r + p, … (ZB-V: r and 2p − 1 − r,
so the head sits on rank 0). Its one-process replay (GPipe, 1F1B) is the measurement without communication.
"""
from __future__ import annotations

import copy
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
from batchlab.formulas.measured_timeline import median_timeline
from batchlab.formulas.pipeline_schedules import SCHEDULES, Op, Timeline, placement_of, virtual_stage
from batchlab.measure.device import accelerator_module, select_device, synchronize
from batchlab.measure.model import build_model, next_token_loss
from batchlab.measure.pipeline_local import check_pipeline_job, pipeline_batch, split_model

try:  # torch ≥ 2.4; imported here so that forked ranks start without importing it again
    import torch.distributed as dist
    import torch.distributed.pipelining as pipelining
    from torch.distributed.pipelining import PipelineStage
except ImportError:  # pragma: no cover - old torch, or a build without torch.distributed
    dist = pipelining = PipelineStage = None

__all__ = ["BACKENDS", "require_pipelining", "torch_schedule", "check_torch_schedule", "rank_chunks", "one_thread",
           "rank_device", "RankStep", "RankResult", "run_rank", "DistributedPipelineRun", "merge_ranks", "free_port",
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


def torch_schedule(job: Job) -> str:
    """The ``torch.distributed.pipelining`` class that runs ``job``'s schedule: ScheduleGPipe, Schedule1F1B,
    ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble (ZB-H1, v = 1) or ScheduleZBVZeroBubble (ZB-V, v = 2)."""
    if job.schedule == "zero-bubble":
        return "ScheduleZBVZeroBubble" if job.virtual_stages == 2 else "ScheduleInterleavedZeroBubble"
    return {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B", "interleaved-1f1b": "ScheduleInterleaved1F1B"}[job.schedule]


def check_torch_schedule(job: Job) -> Job:
    """``job`` if this torch's pipelining has the class that runs its schedule (:func:`torch_schedule`); else
    ValueError, one line naming the schedule and why. The schedule's own rules (m vs p, v, the layers into p · v
    chunks, torch's rounds for ZB-H1) were checked when the job was made (``pipeline_schedules.check_runnable``)."""
    name = torch_schedule(job)
    if pipelining is not None and not hasattr(pipelining, name):
        raise ValueError(f"schedule = {job.schedule!r}：torch {torch.__version__} 的 torch.distributed.pipelining "
                         f"没有 {name}，{SCHEDULES[job.schedule]} 无法实测（需要更新的 torch）")
    return job


def rank_chunks(job: Job, rank: int) -> list[int]:
    """The virtual stages (0 = the embedding's, p · v − 1 = the head's) of ``rank``'s model chunks, in the order
    torch lists the rank's stages: the local chunk index of :class:`~batchlab.formulas.pipeline_schedules.Op`."""
    placement = placement_of(job.schedule, job.virtual_stages)
    return [virtual_stage(rank, chunk, job.pipeline_stages, placement) for chunk in range(job.virtual_stages)]


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
    its ops, ``(kind, microbatch, start, end, chunk)`` each (kind F, B or W; chunk the local index)."""

    begin: float
    end: float
    ops: tuple[tuple[str, int, float, float, int], ...]


@dataclass(frozen=True)
class RankResult:
    """What one rank of :func:`run_rank` returns: its steps (the warm-up first), when it was ready, the last
    step's gradients of its chunks (GPT names, summed over its chunks where a name is on two: the tied
    ``wte.weight`` under ZB-V; empty when not gathered) and the mean loss (the rank of the head only)."""

    rank: int
    ready: float
    steps: tuple[RankStep, ...]
    grads: dict[str, torch.Tensor]
    loss: float | None


def run_rank(rank: int, job: Job, steps: int, seed: int, device: torch.device) -> RankResult:
    """The work of one rank of ``job`` (``job.pipeline_stages`` ranks, ``job.virtual_stages`` chunks each), once
    its process group is up: build the job's seeded GPT, cut it into p · v chunks, keep this rank's
    (:func:`rank_chunks`), run one warm-up step and ``steps`` timed ones of :func:`torch_schedule`."""
    world, m, v = job.pipeline_stages, job.num_microbatches, job.virtual_stages
    chunks = split_model(build_model(job, seed), world * v, job.partition)
    mine = rank_chunks(job, rank)
    # Several chunks on one rank get their own copies: two that shared the tied wte.weight (ZB-V's first and last)
    # would each divide the shared gradient by m at the end of the step.
    modules = [(chunks[k] if v == 1 else copy.deepcopy(chunks[k])).to(device) for k in mine]
    stages = [PipelineStage(module, k, world * v, device) for module, k in zip(modules, mine)]
    ops: list[list] = []  # [kind, microbatch, start, end, chunk], perf_counter seconds

    def timed(kind: str, chunk: int, method_):
        def run(chunk_id, *args, **kwargs):
            start = time.perf_counter()
            out = method_(chunk_id, *args, **kwargs)
            synchronize(device)
            ops.append([kind, chunk_id, start, time.perf_counter(), chunk])
            return out
        return run

    # B: the whole backward, or only the input gradient when the schedule splits it and runs W later (the first
    # virtual stage has no input gradient: torch leaves its B empty and does the whole backward in W).
    methods = {"F": "forward_one_chunk", "B": "backward_one_chunk", "W": "backward_weight_one_chunk"}
    for chunk, stage in enumerate(stages):
        for kind, name in methods.items():
            if not callable(getattr(stage, name, None)):
                raise RuntimeError(f"torch {torch.__version__} 的 PipelineStage 没有 {name}，无法逐个操作计时")
            setattr(stage, name, timed(kind, chunk, getattr(stage, name)))

    def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = next_token_loss(logits, target)
        synchronize(device)
        if ops and ops[-1][0] == "F":  # not during the warm-up's shape inference, which calls it too
            ops[-1][3] = time.perf_counter()  # the loss belongs to the last chunk's forward, as locally
        return loss

    name = torch_schedule(job)
    single = name in ("ScheduleGPipe", "Schedule1F1B")  # one stage per rank; the others take a list
    pipe = getattr(pipelining, name)(stages[0] if single else stages, m, loss_fn=loss_fn)  # scale_grads: the mean
    inputs, targets = pipeline_batch(job, seed)
    args = (inputs.to(device),) if 0 in mine else ()
    target = targets.to(device) if world * v - 1 in mine else None
    ready = time.perf_counter()
    steps_out, losses = [], []
    for step in range(steps + 1):  # step 0 is the warm-up: stages exchange shapes
        for module in modules:
            module.zero_grad(set_to_none=True)
        ops.clear()
        dist.barrier()
        begin = time.perf_counter()
        pipe.step(*args, target=target, losses=losses if target is not None else None)
        synchronize(device)
        steps_out.append(RankStep(begin, time.perf_counter(), tuple(tuple(op) for op in ops)))
    grads: dict[str, torch.Tensor] = {}
    for key, param in ((k, q) for module in modules for k, q in module.named_parameters() if q.grad is not None):
        grads[key] = grads[key] + param.grad.detach().cpu() if key in grads else param.grad.detach().cpu().clone()
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
    (:func:`~batchlab.formulas.measured_timeline.median_timeline`), seconds after the earliest op
    (``time.perf_counter``; the loss counts in the last chunk's forward) — not the warm-up's shape exchange,
    and not one op that a busy machine slowed in one step. ``stage`` is the rank, ``chunk`` its local chunk;
    ``virtual_stages`` the job's."""
    grads: dict[str, torch.Tensor]
    """The last step's, merged over ranks: the tied ``wte.weight`` is the sum of the first and last chunk's
    (see :func:`~batchlab.measure.pipeline_local.split_model`)."""
    loss: float | None
    """The mean loss over micro-batches (the head's rank's)."""
    step_seconds: tuple[float, ...]
    """One per timed step: first begin to last end over ranks."""
    warmup_seconds: float
    """The warm-up step (stages exchange tensor shapes)."""
    start_seconds: float | None = None
    """From starting the processes until every rank had its process group and stage."""


def merge_ranks(results: list[RankResult], job: Job, align: str = "clock") -> DistributedPipelineRun:
    """The ranks' results as one run of ``job``: the median timeline of the timed steps (each op at its median
    start and end, :func:`~batchlab.formulas.measured_timeline.median_timeline`), the gradients summed over
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
                       end=end - origin(r, step), chunk=chunk)
                    for r in results for kind, mb, start, end, chunk in r.steps[step].ops)
        return Timeline(job.schedule, len(results), job.num_microbatches, ops, job.virtual_stages)

    # results[·].steps[0] is the warm-up
    timeline = median_timeline([step_timeline(k) for k in range(1, steps)])
    grads: dict[str, torch.Tensor] = {}
    for r in results:
        for name, grad in r.grads.items():
            grads[name] = grads[name] + grad if name in grads else grad
    warmup = (max(r.steps[0].end - origin(r, 0) for r in results)
              - min(r.steps[0].begin - origin(r, 0) for r in results))
    loss = next((r.loss for r in results if r.loss is not None), None)  # the head's rank: the last, or 0 (ZB-V)
    return DistributedPipelineRun(job=job, timeline=timeline, grads=grads, loss=loss,
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
    """Train ``steps`` timed steps (after one warm-up) of ``job`` on ``job.pipeline_stages`` processes, each with
    ``job.virtual_stages`` model chunks, on ``torch.distributed.pipelining``'s class for ``job.schedule``
    (:func:`torch_schedule`; one it cannot run is refused before any process starts, :func:`check_torch_schedule`).

    The job is the one the formulas model: every rank builds its GPT (:func:`~batchlab.measure.model.build_model`
    ``(job, seed)``) and keeps its chunks (:func:`split_model` into p · v, ``job.partition``; :func:`rank_chunks`);
    the data is
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
    check_torch_schedule(check_pipeline_job(job))
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
