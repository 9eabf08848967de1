"""Measuring the memory that 4.3 models: activation bytes, step peaks, and the lecture's growth procedure.

* :func:`saved_activation_bytes` — exactly what autograd keeps for the backward pass, on any device:
  every tensor saved during the forward pass, through ``torch.autograd.graph.saved_tensors_hooks``,
  counted once per storage (two views of one buffer are one buffer) and without the parameters and
  buffers (about a third of saved tensors are weights or views of them, like ``weight.t()``, which are
  model states, not activations). This is the quantity the memory model's activation term predicts.
* :func:`step_peak` — one forward + backward on a device; on cuda/npu the allocator's peak
  (``max_memory_allocated``), on the CPU the model states plus the saved activations (process RSS, the
  only CPU counter, is not comparable: see :class:`batchlab.measure.device_memory.MemoryInfo`).
* :func:`find_micro_batch` — the lecture's procedure on a :class:`~batchlab.formulas.job.Job`: grow its
  micro-batch until the step's peak reaches the target share of memory, catching out-of-memory errors and
  freeing the cache so the device stays usable. The search itself is
  :func:`batchlab.formulas.memory.grow_micro_batch` (pure math); the answer is a :class:`MicroBatchSearch`.

Dropout is the job's (:func:`batchlab.measure.model.build_model`): a memory run can have it, and its saved
masks then count, as the memory model's 34·sbh + 5·as²b does.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass

import torch
from torch import nn

from batchlab.formulas.checks import positive, whole
from batchlab.formulas.job import Job
from batchlab.formulas.memory import ModelStates, grow_micro_batch
from batchlab.measure.data import random_tokens
from batchlab.measure.device import accelerator_module, as_device, card_index
from batchlab.measure.device_memory import memory_info, reset_peak_memory
from batchlab.measure.model import GPT, LossFn, build_model, check_job_model, next_token_loss

__all__ = ["saved_activation_bytes", "model_state_bytes", "timed_step", "step_peak",
           "is_out_of_memory", "MicroBatchTrial", "MicroBatchSearch", "find_micro_batch"]



def saved_activation_bytes(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor,
                           loss_fn: LossFn = next_token_loss) -> int:
    """Bytes of the tensors autograd saves in one forward pass (and the loss), de-duplicated by storage,
    parameters and buffers excluded. Runs no backward pass."""
    state_storages = {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())}
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in state_storages:
            seen[ptr] = storage.nbytes()
        return tensor

    was_training = model.training
    model.train()
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            loss_fn(model(inputs), targets)
    finally:
        model.train(was_training)
    return sum(seen.values())


def model_state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> ModelStates:
    """Bytes of the tensors that hold the model's states, read off the tensors themselves: parameters,
    their ``.grad`` and every tensor in the optimizer's state (Adam: two moments and a step counter per
    parameter tensor). The record is the modelled one's (:func:`batchlab.formulas.memory.model_states`),
    so measured and modelled compare field by field."""
    def size(t: torch.Tensor) -> int:
        return t.numel() * t.element_size()

    params = list(model.parameters())
    states = [] if optimizer is None else [v for st in optimizer.state.values() for v in st.values()
                                           if isinstance(v, torch.Tensor)]
    return ModelStates(parameters=sum(size(p) for p in params),
                           gradients=sum(size(p.grad) for p in params if p.grad is not None),
                           optimizer=sum(size(t) for t in states))


def timed_step(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor,
               loss_fn: LossFn = next_token_loss) -> float:
    """Seconds of one forward + backward pass (gradients are left in ``.grad``, then cleared)."""
    device = inputs.device
    backend = accelerator_module(device)
    if backend is not None:
        backend.synchronize(card_index(device, backend))
    start = time.perf_counter()
    loss_fn(model(inputs), targets).backward()
    if backend is not None:
        backend.synchronize(card_index(device, backend))
    seconds = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    return seconds


def is_out_of_memory(error: BaseException) -> bool:
    """True for CUDA's ``OutOfMemoryError`` and for the RuntimeError an NPU (or CPU) raises when an
    allocation fails ("NPU out of memory", "CPU ... not enough memory")."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    text = str(error).lower()
    return isinstance(error, RuntimeError) and ("out of memory" in text or "not enough memory" in text)


def _free(device: torch.device) -> None:
    gc.collect()
    backend = accelerator_module(device)
    if backend is not None:
        backend.empty_cache()


def step_peak(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor,
              loss_fn: LossFn = next_token_loss) -> int:
    """Peak bytes of one forward + backward pass. On cuda/npu: the allocator's peak since a reset
    (everything torch holds: weights, gradients, optimizer states already created, activations, the
    backward's temporaries). On the CPU: parameters + gradients + the saved activations, measured."""
    device = inputs.device
    if accelerator_module(device) is None:
        states = 2 * sum(p.numel() * p.element_size() for p in model.parameters())
        return states + saved_activation_bytes(model, inputs, targets, loss_fn)
    reset_peak_memory(device)
    loss_fn(model(inputs), targets).backward()
    peak = memory_info(device).peak
    model.zero_grad(set_to_none=True)
    return peak


@dataclass(frozen=True)
class MicroBatchTrial:
    """One size :func:`find_micro_batch` tried: its step's peak (None after an out-of-memory error), that
    peak as a fraction of the capacity, and whether it stayed at or under the target."""

    micro_batch_size: int
    peak_bytes: int | None
    fraction: float | None
    fits: bool


@dataclass(frozen=True)
class MicroBatchSearch:
    """What :func:`find_micro_batch` found for ``job``: the largest micro-batch whose step peak stays at or under
    ``target_fraction`` of ``capacity_bytes`` (None if even the first size does not), and every size tried."""

    job: Job
    best: int | None
    tried: tuple[MicroBatchTrial, ...]
    target_fraction: float
    capacity_bytes: int


def find_micro_batch(job: Job, model: GPT | None = None, *, target_fraction: float = 0.9,
                     capacity_bytes: int | None = None, limit: int = 1024, seed: int = 0,
                     device: torch.device | str | None = None,
                     loss_fn: LossFn = next_token_loss) -> MicroBatchSearch:
    """Run the lecture's procedure on ``job``: the largest micro-batch whose one-step peak (:func:`step_peak`:
    forward and backward of one micro-batch) stays at or under ``target_fraction`` of the memory.

    The job says the model (shape, dropout, recompute mode) and the sequence length; the search starts at its
    ``micro_batch_size`` (1 in the lecture) and doubles, then bisects, up to ``limit``. What only a
    measurement has: ``model``, the GPT to measure (default :func:`~batchlab.measure.model.build_model`
    ``(job, seed)``; one given must be the job's), ``device`` (default: where the model is), ``seed`` (the
    weights when built here, and the sequences) and ``capacity_bytes`` (on the CPU it must be given: a byte
    budget; else the card's total memory). ``loss_fn`` is the step's loss. An out-of-memory error counts as
    "does not fit"; the cache is freed and the search carries on.
    """
    model = build_model(job, seed) if model is None else check_job_model(job, model)
    if device is not None:
        model.to(as_device(device))
    device = next(model.parameters()).device
    if capacity_bytes is None:
        if accelerator_module(device) is None:
            raise ValueError("capacity_bytes：CPU 上没有“显存容量”，请给出一个字节预算")
        capacity_bytes = memory_info(device).total
    capacity = positive("capacity_bytes", capacity_bytes)
    whole("limit", limit)
    peaks: dict[int, int | None] = {}

    def measure(b: int) -> float | None:
        batch = None
        try:
            # a peak does not depend on which tokens: uniform ids cost nothing at GPT-2's vocabulary
            inputs, targets = random_tokens(b, job.seq_len, job.model.vocab_size, seed=seed)
            batch = inputs.to(device), targets.to(device)  # two buffers, as a loader gives
            peaks[b] = step_peak(model, *batch, loss_fn=loss_fn)
        except Exception as error:  # noqa: BLE001 — only out-of-memory is expected; the rest re-raise
            if not is_out_of_memory(error):
                raise
            peaks[b] = None
            model.zero_grad(set_to_none=True)
        finally:
            del batch
            _free(device)
        return None if peaks[b] is None else peaks[b] / capacity

    result = grow_micro_batch(measure, target_fraction, start=job.micro_batch_size, limit=limit)
    tried = tuple(MicroBatchTrial(micro_batch_size=row["micro_batch_size"], peak_bytes=peaks[row["micro_batch_size"]],
                                  fraction=row["fraction"], fits=row["fits"]) for row in result["tried"])
    return MicroBatchSearch(job=job, best=result["best"], tried=tried, target_fraction=target_fraction,
                            capacity_bytes=int(capacity))
