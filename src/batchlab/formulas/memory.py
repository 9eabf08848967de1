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
input, e·sbh, and recomputes the rest during the backward pass, when one layer's full set exists again:
the part it recomputes (the whole layer less what the layer keeps, already counted) is the working set
added to the peak. Outside the layers: the first stage holds the token ids (8 bytes
each, int64) and, with dropout, the embedding dropout mask; the last stage holds the final LayerNorm's
and the head's inputs (2·e·sbh) and the log-softmax of the logits in fp32 (4·sbV — large at V = 50257).

**Tensor, sequence and context parallelism** (Korthikanti et al. 2022, Table 2; Megatron-LM). Tensor
parallelism t splits each layer's attention heads and MLP columns over t devices. Of the 34sbh above,
24sbh (Q, K, V, the attention-over-values and projection inputs, the GELU input and the second MLP
input: 12 e-sized tensors) and the 5as²b of the scores are split; 10sbh (the two LayerNorm inputs, the
QKV and first MLP inputs: 4 e-sized tensors, and the two dropout masks) stay whole on every device:

    without SP: sbh·(10 + 24/t + 5as/(ht))        with sequence parallelism (SP): sbh·(34 + 5as/h)/t

since SP splits those 10sbh along the sequence as well. Selective recomputation drops the 5as/h term,
fused attention keeps none, and full recomputation keeps the layer's input (split by t under SP).
Context parallelism cp cuts the sequence into cp pieces, so every s above becomes s/cp (with stored
scores: the local s/cp queries against all s keys). Outside the layers, the head's logits are split by t
(Megatron's vocabulary-parallel cross entropy), the final-LayerNorm and head inputs and the embedding's
dropout mask by t under SP; the token ids stay whole.

Model states under t: the matrices, the column-parallel biases (QKV, first MLP) and the vocabulary-
parallel token embedding and head are split t ways; LayerNorms, the row-parallel biases (projection,
second MLP) and the position embedding are replicated on each of the t devices
(:func:`device_params`). ZeRO-1 (Megatron-LM's distributed optimizer) shards the optimizer column over
the d · cp replicas that hold the same weights (Megatron's ``dp_cp`` group): under ``fp32_grads`` that is
its 2 + 4 + 12/d = 6 + 12/d bytes per parameter at cp = 1.

**Interleaved schedules** (v > 1): a device holds v chunks of n_layer/(p·v) layers, and the schedule
decides how many chunk activations it holds at once (:func:`~batchlab.formulas.pipeline_schedules.in_flight_chunks`).

The model leaves out what is small against these terms: LayerNorm statistics (2 fp32 per token per
LayerNorm), a causal mask of s² bytes, scalar losses. On the book's tiny model they make the measured
bytes about 1% larger than the model (chapter 4.3 measures it).
"""
from __future__ import annotations

from dataclasses import dataclass

from batchlab.formulas.checks import fraction, one_of, whole
from batchlab.formulas.job import ATTENTION_KINDS, OPTIMIZER_STATES, Job
from batchlab.formulas.partition import Stage
from batchlab.formulas.pipeline_schedules import placement_of, virtual_stage
from batchlab.formulas.schedule_orders import interleaved_order, zbv_order
from batchlab.formulas.precision import ELEMENT_BYTES, MASTER_WEIGHT_BYTES, PRECISION_DTYPE, PRECISIONS, gradient_bytes
from batchlab.formulas.presets import GPTConfig

__all__ = ["activation_basis", "bytes_per_param", "ModelStates", "model_states", "device_params", "optimizer_shards",
           "layer_activation_bytes", "stage_activation_bytes",
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


def optimizer_shards(job: Job) -> int:
    """Over how many devices ZeRO-1 shards the optimizer states: the d · cp replicas that hold the same
    weights (Megatron-LM's distributed optimizer uses its ``dp_cp`` group), 1 without ZeRO-1."""
    return job.data_parallel * job.context_parallel if job.zero1 else 1


def model_states(params: int, job: Job) -> ModelStates:
    """Model-state bytes of ``params`` parameters (one device's: :func:`device_params`) under ``job``'s
    precision and optimizer; ZeRO-1 divides the optimizer states (master copy included) over
    :func:`optimizer_shards`, rounding up."""
    per = _bytes_per_param(job.precision, job.optimizer, job.fp32_grads)  # the job's choices are already checked
    optimizer_bytes = -(-per["optimizer"] * params // optimizer_shards(job))
    return ModelStates(per["parameters"] * params, per["gradients"] * params, optimizer_bytes)


def _replicated_params(config: GPTConfig, stage: Stage) -> int:
    """Parameters of ``stage`` every tensor-parallel device holds whole: per layer the two LayerNorms (4h)
    and the row-parallel biases of the projection and the second MLP matrix (2h); the position embedding
    on the first stage, the final LayerNorm on the last."""
    h = config.d_model
    replicated = stage.num_layers * 6 * h
    if stage.has_embedding:
        replicated += config.n_positions * h
    if stage.has_head:
        replicated += 2 * h
    return replicated


def device_params(job: Job, stage: Stage | None = None) -> int:
    """Parameters one device of ``stage`` (default: the first) holds under tensor parallelism t (module
    docstring): the split part divided by t (rounded up, as Megatron-LM pads the vocabulary), the
    replicated part whole. t = 1: ``stage.params``."""
    stage = job.stages[0] if stage is None else stage
    replicated = _replicated_params(job.model, stage)
    return -(-(stage.params - replicated) // job.tensor_parallel) + replicated


def layer_activation_bytes(job: Job, recompute: str | None = None) -> int:
    """Bytes one transformer layer keeps for the backward pass, for one micro-batch (module docstring).
    ``recompute`` overrides ``job.recompute`` (the recomputed layer's working set is the ``"none"`` value)."""
    mode = job.recompute if recompute is None else recompute
    s, b, h, a = _local_seq(job), job.micro_batch_size, job.model.d_model, job.model.n_head
    t, sp = job.tensor_parallel, _sequence_split(job)
    e = job.element_bytes
    k = job.dropout_mask_bytes if job.has_dropout else 0
    sbh = s * b * h  # h and a are multiples of t (the Job checks n_head % t), so every division is exact
    if mode == "full":
        return e * sbh // sp
    linear_part = (4 * e + 2 * k) * sbh // sp + 12 * e * sbh // t
    if mode == "selective" or job.attention == "fused":
        return linear_part
    scores = a // t * s * job.seq_len * b  # the local s/cp queries against all s keys
    return linear_part + e * scores + ((k + e) * scores if k else 0)


def _local_seq(job: Job) -> int:
    """The tokens of one sequence on one device: s / cp (the Job checks that cp divides s)."""
    return job.seq_len // job.context_parallel


def _sequence_split(job: Job) -> int:
    """What the sequence-parallel activations are divided by: t under sequence parallelism, else 1."""
    return job.tensor_parallel if job.sequence_parallel else 1


def activation_basis(attention: str) -> str:
    """The one short phrase that says which attention activation bytes assume (``Job.attention``): every
    table, summary and CLI line that prints a job's activations shows it, so that the 5as²b of stored
    scores is never assumed silently."""
    return f"激活值按{ATTENTION_KINDS[one_of('attention', attention, ATTENTION_KINDS)]}计"


def logit_bytes(job: Job) -> int:
    """Bytes of the last stage's fp32 log-softmax for one micro-batch, 4·s·b·V: the largest single term
    of a GPT-2-sized vocabulary (in :func:`stage_activation_bytes`). The loss's backward makes a gradient
    of the same shape while it is still held, a transient the peak of :func:`stage_memory` leaves out."""
    vocab_per_device = -(-job.model.vocab_size // job.tensor_parallel)  # vocabulary-parallel, padded up
    return LOGIT_BYTES * _local_seq(job) * job.micro_batch_size * vocab_per_device


def stage_activation_bytes(job: Job, stage: Stage | None = None) -> int:
    """Activation bytes one micro-batch leaves on ``stage`` (default: the job's first): its layers, plus
    the token ids (and the embedding's dropout mask) on the first stage, plus the final LayerNorm, head
    inputs and fp32 log-softmax on the last."""
    stage = job.stages[0] if stage is None else stage
    return (stage.num_layers * layer_activation_bytes(job) + (_embedding_bytes(job) if stage.has_embedding else 0)
            + (_head_bytes(job) if stage.has_head else 0))


def _embedding_bytes(job: Job) -> int:
    """One micro-batch's activations of the embedding: token ids, and the dropout mask."""
    s, b, h = _local_seq(job), job.micro_batch_size, job.model.d_model
    mask = job.dropout_mask_bytes * s * b * h // _sequence_split(job) if job.has_dropout else 0
    return TOKEN_ID_BYTES * s * b + mask


def _head_bytes(job: Job) -> int:
    """One micro-batch's activations of the head: final-LayerNorm and head inputs, fp32 logits."""
    s, b, h = _local_seq(job), job.micro_batch_size, job.model.d_model
    return 2 * job.element_bytes * s * b * h // _sequence_split(job) + logit_bytes(job)


@dataclass(frozen=True)
class StageMemory:
    """One stage's peak, broken into what the memory explorer stacks."""

    stage: int
    states: ModelStates
    in_flight: int
    """Micro-batches held at once; with v > 1 chunks their whole micro-batches' worth, ⌈ :attr:`in_flight_chunks` / v ⌉
    (:attr:`Job.in_flight_microbatches <batchlab.formulas.job.Job.in_flight_microbatches>`)."""
    activation_bytes_per_microbatch: int
    """One micro-batch's activations over all the layers (all chunks) this device holds."""
    working_bytes: int
    """With recomputation: one layer's full activations for one micro-batch, rebuilt in the backward."""
    activation_bytes: int
    """Peak in-flight activations: in_flight × one micro-batch's activations (v = 1); with v > 1 the chunks
    held × one chunk's layers, plus the embedding's and the head's activations as often as their chunks are held."""
    in_flight_chunks: int
    """Model chunks (n_layer/(p·v) layers each) held at once; v = 1: :attr:`in_flight`."""

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
        } | ({"in_flight_chunks": [st.in_flight_chunks for st in self.stages]} if self.job.virtual_stages > 1 else {})


def stage_memory(job: Job) -> MemoryReport:
    """Peak bytes on each pipeline stage of ``job`` for one training step (module docstring): the job's
    layer split and the schedule's in-flight micro-batches."""
    # the backward pass regenerates one layer's recomputed part; what the layer keeps is already counted in
    # the in-flight bytes, so the working set is the difference, not the whole layer again
    working = layer_activation_bytes(job, recompute="none") - layer_activation_bytes(job)
    if job.virtual_stages == 1:
        held = [n * stage_activation_bytes(job, stage) for stage, n in zip(job.stages, job.in_flight_microbatches)]
    else:
        held = _interleaved_held(job)
    rows = tuple(StageMemory(stage=stage.index, states=model_states(device_params(job, stage), job), in_flight=n,
                             activation_bytes_per_microbatch=stage_activation_bytes(job, stage),
                             working_bytes=working, activation_bytes=bytes_held, in_flight_chunks=chunks)
                 for stage, n, chunks, bytes_held in zip(job.stages, job.in_flight_microbatches, job.in_flight_chunks,
                                                         held))
    return MemoryReport(rows, job)


PERIODIC_MICROBATCHES = 4
"""With v > 1 the peak of each chunk is read off the schedule's order for at most this many × p micro-batches:
the orders repeat every p micro-batches after the warm-up, so more add no new peak (a test checks it)."""


def chunk_peaks(schedule: str, pipeline_stages: int, num_microbatches: int, virtual_stages: int) -> list[list[int]]:
    """Per device, per local chunk, the most micro-batches whose activations that chunk holds at once, for a
    runnable v > 1 schedule (interleaved 1F1B, ZB-V), read off its orders (those of
    :func:`~batchlab.formulas.pipeline_schedules.schedule_order`; held from F until W with a split backward,
    else until B). Only the embedding's and the head's chunks need it: their extra activations (token ids,
    logits) are held as often as their chunk is, not as often as the device's busiest chunk. Plain
    arithmetic on a validated job's counts."""
    p, v = pipeline_stages, virtual_stages
    m = min(num_microbatches, PERIODIC_MICROBATCHES * p)  # a multiple of p when it is the cap
    if schedule == "interleaved-1f1b":
        orders, frees = [interleaved_order(p, m, v, device) for device in range(p)], "B"
    else:  # ZB-V, the one zero-bubble schedule with two chunks; its backward is split
        orders, frees = [zbv_order(p, m, device) for device in range(p)], "W"
    peaks = []
    for order in orders:
        held, peak = [0] * v, [0] * v
        for kind, _, chunk in order:
            held[chunk] += 1 if kind == "F" else -1 if kind == frees else 0
            peak[chunk] = max(peak[chunk], held[chunk])
        peaks.append(peak)
    return peaks


def _interleaved_held(job: Job) -> list[int]:
    """Per device with v > 1 chunks: the activation bytes it holds at its peak. The layers: the
    chunks held (:func:`~batchlab.formulas.pipeline_schedules.in_flight_chunks`) × n_layer/(p·v) layers; the
    embedding's and the head's activations as often as their own chunk holds micro-batches (:func:`chunk_peaks`)."""
    p, m, v = job.pipeline_stages, job.num_microbatches, job.virtual_stages
    chunk_layers = job.model.n_layer // (p * v)  # the Job checks that p·v divides n_layer
    placement = placement_of(job.schedule, v)
    peaks = chunk_peaks(job.schedule, p, m, v)
    rows = []
    for device, chunks in enumerate(job.in_flight_chunks):
        total = chunks * chunk_layers * layer_activation_bytes(job)
        for chunk in range(v):
            stage = virtual_stage(device, chunk, p, placement)
            if stage == 0:
                total += peaks[device][chunk] * _embedding_bytes(job)
            if stage == p * v - 1:
                total += peaks[device][chunk] * _head_bytes(job)
        rows.append(total)
    return rows


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
