"""Real pipelines of the GPT: one process replaying a schedule, or one process per stage (4.4).

The math layer (:mod:`batchlab.pipeline_schedules`) says in which order a schedule runs its
forward (F) and backward (B) passes and what bubble that leaves. This module runs those orders on
the GPT of :mod:`batchlab.model` and measures them:

* :func:`split_model` cuts a :class:`~batchlab.model.GPT` into stage modules, using
  :func:`batchlab.partition.partition_layers` (the first stage holds the embeddings, the last the
  final LayerNorm and the head, as in Megatron-LM);
* :func:`run_pipeline_local` runs every stage in this process, one op after the other, in an order
  that respects the pipeline's dependencies, with real autograd across the stage boundaries. Its
  gradients equal plain gradient accumulation; its per-op times, replayed under the dependencies
  (``"replayed"``), show the bubble that p devices with free communication would have;
* :func:`run_pipeline_distributed` starts p processes that talk through ``torch.distributed``
  (gloo on CPU, nccl on CUDA, hccl on Ascend NPU) and run ``torch.distributed.pipelining``'s
  ``ScheduleGPipe`` or ``Schedule1F1B``; it returns the measured timeline (communication and all),
  the gradients and the start-up and step times;
* :func:`main`: the same on a server, one process per card, started by ``torchrun``.

On an NPU server (8 cards, one process per card, hccl)::

    torchrun --nproc-per-node 4 -m batchlab.pipeline_run --device npu \\
        --stages 4 --micro-batches 8 --micro-batch-size 8 --seq-len 256 --model gpt2 --n-layer 12

On several NPU servers, one ``torchrun`` per server, the same command on each but ``--node-rank``
(0 on the server whose address is ``--master-addr``, then 1, 2, ...); ``--stages`` is the total number of
processes, ``--nnodes`` × ``--nproc-per-node``::

    # server 0 (address 10.0.0.1)                 # server 1
    torchrun --nnodes 2 --node-rank 0 \\            torchrun --nnodes 2 --node-rank 1 \\
      --nproc-per-node 8 \\                           --nproc-per-node 8 \\
      --master-addr 10.0.0.1 --master-port 29500 \\   --master-addr 10.0.0.1 --master-port 29500 \\
      -m batchlab.pipeline_run --device npu \\         -m batchlab.pipeline_run --device npu \\
      --stages 16 --micro-batches 32 --n-layer 48     --stages 16 --micro-batches 32 --n-layer 48

Without ``torchrun`` (no ``RANK`` in the environment), ``python -m batchlab.pipeline_run ...`` starts
the processes itself through :func:`run_pipeline_distributed`. Across servers, each machine's clock is
its own, so the timeline is aligned on a barrier at the start of each step (good to a message's latency).

Notes from measuring on a laptop CPU: use dropout 0 (each stage's random numbers would differ from
single-process accumulation); give each rank one thread (``torch.set_num_threads(1)``,
``OMP_NUM_THREADS=1``; with ``fork`` after OpenMP work in the parent, more threads can hang);
``OMP_WAIT_POLICY=PASSIVE`` stops idle ranks from spinning on shared cores; the first step exchanges
tensor shapes between stages and is slow, so one warm-up step precedes the timed ones. With ops of a
few milliseconds on a few shared cores, fixed per-message costs make the measured bubble much larger
than (p − 1)/(m + p − 1); with wider layers it approaches the formula.
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
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from .checks import at_most, divides, one_of, positive, whole
from .data import make_corpus
from .device import accelerator_module, as_device, select_device, synchronize
from .model import GPT, GPTConfig, get_config
from .partition import PARTITION_METHODS, Stage, partition_layers
from .pipeline_schedules import Op, Timeline, check_runnable, schedule_order, simulate

try:  # torch ≥ 2.4; imported here so that forked ranks start without importing it again
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
except ImportError:  # pragma: no cover - old torch, or a build without torch.distributed
    dist = None
    PipelineStage = Schedule1F1B = ScheduleGPipe = None

__all__ = ["StageModule", "split_model", "pipeline_batch", "run_pipeline_local", "run_pipeline_distributed",
           "BACKENDS", "main"]

# The collective library of each device type; ``backend=`` overrides it.
BACKENDS: dict[str, str] = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}


# ---------------------------------------------------------------------------
# Splitting the model
# ---------------------------------------------------------------------------


class StageModule(nn.Module):
    """One pipeline stage of a :class:`~batchlab.model.GPT`, made of that GPT's own submodules.

    ``forward(x, targets=None)``: the first stage takes token ids [batch, seq], the others the hidden
    state [batch, seq, d_model]; every stage but the last returns the hidden state, the last returns
    the logits, or the mean cross-entropy when ``targets`` are given. Parameter names are the GPT's
    (``blocks.5.attn.c_attn.weight`` stays ``blocks.5...`` on whichever stage holds layer 5).
    """

    def __init__(self, model: GPT, stage: Stage) -> None:
        super().__init__()
        self.index, self.layers = stage.index, stage.layers
        self.has_embedding, self.has_head = stage.has_embedding, stage.has_head
        self.config, self.recompute = model.config, model.recompute
        self.tied = model.lm_head is None
        if stage.has_embedding or (stage.has_head and self.tied):
            self.wte = model.wte  # the lookup table on the first stage, the tied head on the last
        if stage.has_embedding:
            self.wpe, self.drop = model.wpe, model.drop
        # Keyed by the GPT's layer index, so that parameter names match the GPT's.
        self.blocks = nn.ModuleDict({str(i): model.blocks[i] for i in stage.layers})
        if stage.has_head:
            self.ln_f = model.ln_f
            if not self.tied:
                self.lm_head = model.lm_head

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        if self.has_embedding:
            t = at_most("seq_len", x.shape[-1], self.config.n_positions, "n_positions")
            x = self.drop(self.wte(x) + self.wpe(torch.arange(t, device=x.device)))
        for block in self.blocks.values():  # as GPT.forward, recomputation included
            if self.recompute == "full" and torch.is_grad_enabled():
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x, recompute_attention=self.recompute == "selective" and torch.is_grad_enabled())
        if not self.has_head:
            return x
        logits = F.linear(self.ln_f(x), self.wte.weight if self.tied else self.lm_head.weight)
        return logits if targets is None else _loss_fn(logits, targets)


def _loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """GPT.loss's cross-entropy: the mean over every position of the micro-batch."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def split_model(model: GPT, pipeline_stages: int, method: str = "uniform") -> list[StageModule]:
    """Cut ``model`` into ``pipeline_stages`` :class:`StageModule` s along
    :func:`~batchlab.partition.partition_layers` (``method``: ``"uniform"`` or ``"balanced"``).

    The stages share the GPT's modules (no copy): training a stage trains the GPT.

    **The tied head.** GPT-2's head is the token-embedding matrix ``wte.weight``, needed by the first
    stage (lookup) and the last (logits). The last stage reuses it, as Megatron-LM does: in one
    process both stages hold the *same* parameter, so autograd adds the two stages' gradients into one
    ``.grad``; with one process per stage each rank builds its own GPT, so the last rank holds a *copy*,
    and the gradient of the tied weight is the **sum** of the first stage's gradient (from the lookup) and
    the last stage's (from the head). Megatron-LM all-reduces the two after every step so that both
    copies take the same update; :func:`run_pipeline_distributed` adds them when it merges the ranks'
    gradients. Untied, the last stage holds ``lm_head`` alone and nothing is shared.
    """
    if not isinstance(model, GPT):
        raise ValueError(f"model = {type(model).__name__}：必须是 batchlab.model.GPT")
    one_of("method", method, PARTITION_METHODS)
    return [StageModule(model, stage) for stage in partition_layers(model.config, pipeline_stages, method)]


def pipeline_batch(config: GPTConfig, num_microbatches: int, micro_batch_size: int, seq_len: int,
                   seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch (m × b sequences of ``seq_len`` tokens) the pipelines of this module train on:
    ``(inputs, targets)`` from :func:`batchlab.data.make_corpus`, the same on every rank."""
    m, b = _check_batch(config, num_microbatches, micro_batch_size, seq_len)
    data = make_corpus(m * b, seq_len, vocab_size=config.vocab_size, seed=seed)
    return data.inputs, data.targets


def _check_batch(config: GPTConfig, num_microbatches: int, micro_batch_size: int, seq_len: int) -> tuple[int, int]:
    at_most("seq_len", whole("seq_len", seq_len), config.n_positions, "n_positions")
    return whole("num_microbatches", num_microbatches), whole("micro_batch_size", micro_batch_size)


def _check_dropout(config: GPTConfig) -> None:
    if config.dropout != 0:
        raise ValueError(f"dropout = {config.dropout!r}：流水线运行要求 dropout = 0"
                         "（各段的随机数与单进程不同，梯度就无法和梯度累积逐一比对）")


# ---------------------------------------------------------------------------
# One process
# ---------------------------------------------------------------------------


def run_pipeline_local(
    model: GPT,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    pipeline_stages: int,
    num_microbatches: int,
    schedule: str = "1f1b",
    device: torch.device | str | None = None,
    *,
    method: str = "uniform",
) -> dict[str, Any]:
    """Run one pipelined step of ``model`` in this process and time every op.

    ``inputs`` and ``targets`` ([batch, seq]) are cut into ``num_microbatches`` equal micro-batches.
    The ops of :func:`~batchlab.pipeline_schedules.schedule_order` run one at a time, in the order of
    their simulated start times (which respects F(s, i) after F(s−1, i) and B(s, i) after B(s+1, i)).
    Each stage boundary is cut (``detach().requires_grad_()``), and a stage's backward feeds the
    gradient received from the next stage into its output, as between two devices. Each micro-batch's
    loss is divided by m, so the gradients are those of the mean loss: they equal gradient accumulation.

    ``device``: where to run; ``None`` keeps the model where it is, anything else moves it there.
    ``method``: how :func:`split_model` cuts the layers. The model's ``.grad`` are cleared first and hold this step's gradients afterwards.

    Returns a dict: ``"timeline"`` (:class:`~batchlab.pipeline_schedules.Timeline` of the measured
    start/end times, seconds after the first op: one process runs one op at a time, so its idle share
    is about 1 − 1/p whatever the schedule), ``"replayed"`` (the measured op durations replayed under
    the dependencies: what p devices with free communication would do), ``"loss"`` (the mean loss),
    ``"grads"`` ({parameter name: gradient}, the GPT's names), ``"p2p_messages"`` and ``"p2p_bytes"``
    (the tensors that crossed a stage boundary, activations forward and their gradients backward:
    what devices would send each other, :func:`batchlab.comm.p2p_bytes`).
    """
    check_runnable(schedule, pipeline_stages, num_microbatches)
    p, m = pipeline_stages, num_microbatches
    stages = split_model(model, p, method)
    _check_dropout(model.config)
    if inputs.shape != targets.shape or inputs.dim() != 2:
        raise ValueError(f"inputs {tuple(inputs.shape)} 与 targets {tuple(targets.shape)}：必须是形状相同的 [batch, seq]")
    divides("batch", inputs.shape[0], "num_microbatches", m)
    if device is None:
        device = next(model.parameters()).device
    else:
        device = as_device(device)
        model.to(device)
    xs = inputs.to(device).tensor_split(m)
    ys = targets.to(device).tensor_split(m)
    model.zero_grad(set_to_none=True)

    orders = schedule_order(schedule, p, m)
    issue = sorted(simulate(orders), key=lambda op: (op.start, op.stage))
    stage_in: dict[tuple[int, int], torch.Tensor] = {}   # (s, i): stage s's input (a leaf for s > 0)
    stage_out: dict[tuple[int, int], torch.Tensor] = {}  # (s, i): its output, or the last stage's loss / m
    loss_sum = torch.zeros((), device=device)
    times: dict[tuple[str, int, int], tuple[float, float]] = {}
    p2p_messages = p2p_bytes = 0
    synchronize(device)
    for op in issue:
        s, i, kind = op.stage, op.microbatch, op.kind
        start = time.perf_counter()
        if kind == "F":
            x = xs[i] if s == 0 else stage_out[(s - 1, i)].detach().requires_grad_()
            if s > 0:  # activations received from stage s − 1
                p2p_messages, p2p_bytes = p2p_messages + 1, p2p_bytes + x.numel() * x.element_size()
            stage_in[(s, i)] = x
            if s == p - 1:
                loss = stages[s](x, ys[i])
                loss_sum += loss.detach()
                stage_out[(s, i)] = loss / m
            else:
                stage_out[(s, i)] = stages[s](x)
        else:
            out = stage_out.pop((s, i))
            if s == p - 1:
                out.backward()
            else:  # the gradient of its output, received from stage s + 1
                grad = stage_in.pop((s + 1, i)).grad
                p2p_messages, p2p_bytes = p2p_messages + 1, p2p_bytes + grad.numel() * grad.element_size()
                out.backward(grad)
            if s == 0:
                stage_in.pop((s, i))
        synchronize(device)
        times[(kind, s, i)] = (start, time.perf_counter())

    first = min(start for start, _ in times.values())
    ops = tuple(Op(stage=s, microbatch=i, kind=kind, start=start - first, end=end - first)
                for (kind, s, i), (start, end) in sorted(times.items(), key=lambda kv: kv[1][0]))
    durations = {key: end - start for key, (start, end) in times.items()}
    return {
        "timeline": Timeline(schedule, p, m, ops),
        "replayed": Timeline(schedule, p, m, simulate(orders, durations=durations)),
        "loss": float(loss_sum) / m,
        "grads": {name: param.grad.detach().clone() for name, param in model.named_parameters()
                  if param.grad is not None},
        "p2p_messages": p2p_messages,
        "p2p_bytes": p2p_bytes,
    }


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
        loss = _loss_fn(logits, target)
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


def _free_port() -> int:
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

    ``config``: a preset name (``"tiny"``) or a :class:`~batchlab.model.GPTConfig`; every rank builds
    ``GPT(config, seed=seed)`` and keeps its stage (:func:`split_model`). The data is
    :func:`pipeline_batch` (m × b sequences). No optimizer steps: every step sees the same weights,
    so the returned gradients are comparable with :func:`run_pipeline_local`'s.

    ``device``: ``"cpu"`` (default), ``"cuda"`` or ``"npu"`` (rank r on card r), or ``None``/``"auto"``
    for :func:`~batchlab.device.select_device`'s choice; ``backend`` defaults to :data:`BACKENDS`'s
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
            port = _free_port()
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
    from .pipeline_schedules import bubble_fraction

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
        prog="python -m batchlab.pipeline_run",
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
    """``python -m batchlab.pipeline_run``: under ``torchrun`` (``RANK`` set) this process is one
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
