"""The memory model of section 4.3: bytes per pipeline stage, from the shapes alone (pure math, no torch).

A stage's peak memory is its **model states** (parameters, gradients, optimizer states) plus the
**activations** of the micro-batches it holds at once — which the schedule decides
(:func:`batchlab.formulas.pipeline_schedules.in_flight_microbatches`) — plus, with recomputation, the working
set of the one layer being recomputed.

**Model states, bytes per parameter** (Rajbhandari et al. 2020, ZeRO, §3.1):

===============  =======  =========  ==========================================
precision        weights  gradients  optimizer                                  
===============  =======  =========  ==========================================
``fp32``         4        4          SGD 0, SGD+momentum 4, Adam/AdamW 8
``bf16-mixed``   2        2          fp32 master copy 4 + the same (Adam: 12)
===============  =======  =========  ==========================================

so 16-bit mixed-precision Adam costs the usual 2 + 2 + 12 = 16 bytes per parameter: ZeRO's convention,
16-bit gradients. Megatron-LM under bf16 keeps fp32 *main* gradients instead (and all-reduces them in
fp32), so without its distributed optimizer it costs 2 + 4 + 12 = 18 bytes per parameter; the Megatron-based
Ascend stacks (MindSpeed) inherit that. ``Job.fp32_grads`` picks the convention. ZeRO-1 shards the
optimizer column (master copy included) over the data-parallel replicas.

**Activations per transformer layer and micro-batch** (Korthikanti et al. 2022, §4), with s the
sequence length, b the micro-batch size, h the width, a the heads, e the bytes of one activation
element (2 in 16-bit, 4 in fp32) and k the bytes of one dropout-mask element (1; 0 without dropout):

* the linear and LayerNorm inputs, Q, K, V, the GELU input and output: 16·e·sbh (16-bit: 32sbh)
* two dropout masks (attention output, MLP output): 2·k·sbh (16-bit: 2sbh) → 34sbh in total
* attention with the s×s scores materialised: the softmax output e·as²b, and with dropout its mask
  k·as²b and its output e·as²b → 5as²b in 16-bit. Fused attention (FlashAttention, SDPA) keeps none.
  ``Job.attention`` picks one; the lecture's case (and every case number the book prints) keeps the scores,
  so wherever activation bytes are printed :func:`activation_basis` names which attention they assume.

Recompute modes: ``selective`` recomputes the s² part (keeps 34sbh); ``full`` keeps only each layer's
input, e·sbh, and recomputes the rest during the backward pass, when one layer's full set exists again
(the working set added to the peak). Outside the layers: the first stage holds the token ids (8 bytes
each, int64) and, with dropout, the embedding dropout mask; the last stage holds the final LayerNorm's
and the head's inputs (2·e·sbh) and the log-softmax of the logits in fp32 (4·sbV — large at V = 50257).

The model leaves out what is small against these terms: LayerNorm statistics (2 fp32 per token per
LayerNorm), a causal mask of s² bytes, scalar losses. On the book's tiny model they make the measured
bytes about 1% larger than the model (chapter 4.3 measures it).
"""
from __future__ import annotations

from dataclasses import dataclass

from batchlab.formulas.checks import fraction, one_of, whole
from batchlab.formulas.job import ATTENTION_KINDS, OPTIMIZER_STATES, Job
from batchlab.formulas.partition import Stage
from batchlab.formulas.precision import ELEMENT_BYTES, MASTER_WEIGHT_BYTES, PRECISION_DTYPE, PRECISIONS, gradient_bytes

__all__ = ["activation_basis", "bytes_per_param", "ModelStates", "model_states", "layer_activation_bytes", "stage_activation_bytes",
           "StageMemory", "MemoryReport", "stage_memory", "grow_micro_batch", "logit_bytes"]

LOGIT_BYTES = 4       # the loss's log-softmax is kept in fp32 in both precisions
TOKEN_ID_BYTES = 8    # int64 token ids


def bytes_per_param(precision: str, optimizer: str, fp32_grads: bool = False) -> dict[str, int]:
    """Bytes each parameter costs in weights, gradients and optimizer states (see the module table);
    ``fp32_grads`` is Megatron-LM's convention (fp32 main gradients), False ZeRO's."""
    return _bytes_per_param(one_of("precision", precision, PRECISIONS), one_of("optimizer", optimizer, OPTIMIZER_STATES),
                            one_of("fp32_grads", fp32_grads, (True, False)))


def _bytes_per_param(precision: str, optimizer: str, fp32_grads: bool) -> dict[str, int]:
    element = ELEMENT_BYTES[PRECISION_DTYPE[precision]]
    return {"parameters": element, "gradients": gradient_bytes(precision, fp32_grads),
            "optimizer": MASTER_WEIGHT_BYTES[precision] + OPTIMIZER_STATES[optimizer]}


@dataclass(frozen=True)
class ModelStates:
    """Bytes of one stage's parameters, gradients and optimizer states."""

    parameters: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer


def model_states(params: int, job: Job) -> ModelStates:
    """Model-state bytes of ``params`` parameters under ``job``'s precision and optimizer; ZeRO-1 divides
    the optimizer states (master copy included) over the data-parallel replicas, rounding up."""
    per = _bytes_per_param(job.precision, job.optimizer, job.fp32_grads)  # the job's choices are already checked
    optimizer_bytes = per["optimizer"] * params
    if job.zero1:
        optimizer_bytes = -(-optimizer_bytes // job.data_parallel)
    return ModelStates(per["parameters"] * params, per["gradients"] * params, optimizer_bytes)


def layer_activation_bytes(job: Job, recompute: str | None = None) -> int:
    """Bytes one transformer layer keeps for the backward pass, for one micro-batch (module docstring).
    ``recompute`` overrides ``job.recompute`` (the recomputed layer's working set is the ``"none"`` value)."""
    mode = job.recompute if recompute is None else recompute
    s, b, h, a = job.seq_len, job.micro_batch_size, job.model.d_model, job.model.n_head
    e = job.element_bytes
    k = job.dropout_mask_bytes if job.has_dropout else 0
    sbh = s * b * h
    if mode == "full":
        return e * sbh
    linear_part = (16 * e + 2 * k) * sbh
    if mode == "selective" or job.attention == "fused":
        return linear_part
    scores = a * s * s * b
    return linear_part + e * scores + ((k + e) * scores if k else 0)


def activation_basis(attention: str) -> str:
    """The one short phrase that says which attention activation bytes assume (``Job.attention``): every
    table, summary and CLI line that prints a job's activations shows it, so that the 5as²b of stored
    scores is never assumed silently."""
    return f"激活值按{ATTENTION_KINDS[one_of('attention', attention, ATTENTION_KINDS)]}计"


def logit_bytes(job: Job) -> int:
    """Bytes of the last stage's fp32 log-softmax for one micro-batch, 4·s·b·V: the largest single term
    of a GPT-2-sized vocabulary (in :func:`stage_activation_bytes`). The loss's backward makes a gradient
    of the same shape while it is still held, a transient the peak of :func:`stage_memory` leaves out."""
    return LOGIT_BYTES * job.seq_len * job.micro_batch_size * job.model.vocab_size


def stage_activation_bytes(job: Job, stage: Stage | None = None) -> int:
    """Activation bytes one micro-batch leaves on ``stage`` (default: the job's first): its layers, plus
    the token ids (and the embedding's dropout mask) on the first stage, plus the final LayerNorm, head
    inputs and fp32 log-softmax on the last."""
    stage = job.stages[0] if stage is None else stage
    s, b, h = job.seq_len, job.micro_batch_size, job.model.d_model
    total = stage.num_layers * layer_activation_bytes(job)
    if stage.has_embedding:
        total += TOKEN_ID_BYTES * s * b
        if job.has_dropout:
            total += job.dropout_mask_bytes * s * b * h
    if stage.has_head:
        total += 2 * job.element_bytes * s * b * h + logit_bytes(job)
    return total


@dataclass(frozen=True)
class StageMemory:
    """One stage's peak, broken into what the memory explorer stacks."""

    stage: int
    states: ModelStates
    in_flight: int
    activation_bytes_per_microbatch: int
    working_bytes: int
    """With recomputation: one layer's full activations for one micro-batch, rebuilt in the backward."""

    @property
    def activation_bytes(self) -> int:
        """Peak in-flight activations: in_flight × one micro-batch's activations."""
        return self.in_flight * self.activation_bytes_per_microbatch

    @property
    def peak_bytes(self) -> int:
        return self.states.total + self.activation_bytes + self.working_bytes


@dataclass(frozen=True)
class MemoryReport:
    """Peak memory of every stage of one pipeline replica of ``job``, against its device's capacity."""

    stages: tuple[StageMemory, ...]
    job: Job

    @property
    def device_memory_bytes(self) -> int:
        return self.job.device_memory_bytes

    @property
    def peak_bytes_per_stage(self) -> list[int]:
        return [st.peak_bytes for st in self.stages]

    @property
    def peak_memory_fraction(self) -> float:
        """The worst stage's peak / device memory."""
        return max(self.peak_bytes_per_stage) / self.device_memory_bytes

    @property
    def fits(self) -> bool:
        return self.peak_memory_fraction <= 1.0

    def to_dict(self) -> dict:
        """The JSON keys of ``python -m batchlab plan``."""
        return {
            "model_state_bytes_per_stage": [st.states.total for st in self.stages],
            "activation_bytes_per_stage": [st.activation_bytes for st in self.stages],
            "peak_bytes_per_stage": self.peak_bytes_per_stage,
            "peak_memory_fraction": self.peak_memory_fraction,
            "device_memory_bytes": self.device_memory_bytes,
            "in_flight_microbatches": [st.in_flight for st in self.stages],
        }


def stage_memory(job: Job) -> MemoryReport:
    """Peak bytes on each pipeline stage of ``job`` for one training step (module docstring): the job's
    layer split and the schedule's in-flight micro-batches."""
    working = 0 if job.recompute == "none" else layer_activation_bytes(job, recompute="none")
    rows = tuple(StageMemory(stage=stage.index, states=model_states(stage.params, job), in_flight=held,
                             activation_bytes_per_microbatch=stage_activation_bytes(job, stage),
                             working_bytes=working)
                 for stage, held in zip(job.stages, job.in_flight_microbatches))
    return MemoryReport(rows, job)


def grow_micro_batch(measure, target_fraction: float = 0.9, start: int = 1, limit: int = 4096) -> dict:
    """The lecture's procedure (原文 4.3): start small, grow the micro-batch until memory reaches the
    target share, and keep the largest size that stays at or under it.

    ``measure(micro_batch_size)`` returns the peak memory fraction of one training step at that size,
    or None when the step ran out of memory. Sizes double from ``start`` until one fails or passes the
    target (or reaches ``limit``); then a bisection between the last good and the first bad size finds
    the largest good one, assuming memory grows with the micro-batch. Returns ``best`` (None if even
    ``start`` fails) and ``tried``: one dict per attempt, in order, with ``micro_batch_size``,
    ``fraction`` (None for out-of-memory) and ``fits``.
    """
    fraction("target_fraction", target_fraction, closed=True)
    size = whole("start", start)
    limit = whole("limit", limit)
    tried: list[dict] = []

    def attempt(b: int) -> bool:
        value = measure(b)
        ok = value is not None and value <= target_fraction
        tried.append({"micro_batch_size": b, "fraction": value, "fits": ok})
        return ok

    good, bad = None, None
    while size <= limit:
        if attempt(size):
            good, size = size, size * 2
        else:
            bad = size
            break
    if good is None:
        return {"best": None, "tried": tried, "target_fraction": target_fraction}
    high = bad if bad is not None else None
    if high is not None:
        low = good
        while high - low > 1:
            mid = (low + high) // 2
            if attempt(mid):
                low = mid
            else:
                high = mid
        good = low
    return {"best": good, "tried": tried, "target_fraction": target_fraction}
