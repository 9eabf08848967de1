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

so 16-bit mixed-precision Adam costs the usual 2 + 2 + 12 = 16 bytes per parameter. ZeRO-1 shards
the optimizer column (master copy included) over the data-parallel replicas.

**Activations per transformer layer and micro-batch** (Korthikanti et al. 2022, §4), with s the
sequence length, b the micro-batch size, h the width, a the heads, e the bytes of one activation
element (2 in 16-bit, 4 in fp32) and k the bytes of one dropout-mask element (1; 0 without dropout):

* the linear and LayerNorm inputs, Q, K, V, the GELU input and output: 16·e·sbh (16-bit: 32sbh)
* two dropout masks (attention output, MLP output): 2·k·sbh (16-bit: 2sbh) → 34sbh in total
* attention with the s×s scores materialised: the softmax output e·as²b, and with dropout its mask
  k·as²b and its output e·as²b → 5as²b in 16-bit. Fused attention (FlashAttention, SDPA) keeps none.

Recompute modes: ``selective`` recomputes the s² part (keeps 34sbh); ``full`` keeps only each layer's
input, e·sbh, and recomputes the rest during the backward pass, when one layer's full set exists again
(the working set added to the peak). Outside the layers: the first stage holds the token ids (8 bytes
each, int64) and, with dropout, the embedding dropout mask; the last stage holds the final LayerNorm's
and the head's inputs (2·e·sbh) and the log-softmax of the logits in fp32 (4·sbV — large at V = 50257).

The model leaves out what is small against these terms: LayerNorm statistics (2 fp32 per token per
LayerNorm), a causal mask of s² bytes, scalar losses. On the book's tiny model they make the measured
bytes about 1 % larger than the model (chapter 4.3 measures it).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from batchlab.formulas.checks import fraction, one_of, positive, whole
from batchlab.formulas.partition import Stage, partition_layers
from batchlab.formulas.pipeline_schedules import SCHEDULES, in_flight_microbatches
from batchlab.formulas.presets import GPTConfig

__all__ = [
    "PRECISIONS", "OPTIMIZER_STATES", "RECOMPUTE_MODES", "ATTENTION_KINDS", "GIB", "DEVICE_MEMORY_GIB",
    "default_precision", "bytes_per_param", "ModelStates", "model_states", "MemorySettings",
    "layer_activation_bytes", "stage_activation_bytes", "StageMemory", "MemoryReport", "stage_memory",
    "grow_micro_batch",
]

GIB = 2**30
DEVICE_MEMORY_GIB = 64.0
"""An Ascend 910B card's HBM: npu-smi reports 65536 MB (MiB units), i.e. 64 GiB."""

PRECISIONS: dict[str, str] = {
    "bf16-mixed": "16 位混合精度（bf16/fp16 计算，fp32 主权重）",
    "fp32": "fp32 全精度",
}
# (weights, gradients, activation element) bytes, and whether an fp32 master copy is kept
_PRECISION_BYTES: dict[str, tuple[int, int, int, int]] = {"bf16-mixed": (2, 2, 2, 4), "fp32": (4, 4, 4, 0)}
OPTIMIZER_STATES: dict[str, int] = {"sgd": 0, "sgd-momentum": 4, "adam": 8, "adamw": 8}
"""Optimizer-state bytes per parameter, fp32 (momentum: one buffer; Adam: two moments)."""
RECOMPUTE_MODES: dict[str, str] = {
    "none": "不重计算",
    "selective": "选择性重计算（只重算注意力的 s² 部分）",
    "full": "完全重计算（每层只存输入）",
}
ATTENTION_KINDS: dict[str, str] = {
    "materialized": "显式注意力（保存 s×s 分数矩阵）",
    "fused": "融合注意力（FlashAttention/SDPA，不保存 s×s）",
}
LOGIT_BYTES = 4       # the loss's log-softmax is kept in fp32 in both precisions
TOKEN_ID_BYTES = 8    # int64 token ids


def default_precision(config: GPTConfig) -> str:
    """16-bit mixed for the GPT-2 sizes (as on a 910B); fp32 for the small models the book runs on a CPU."""
    return "bf16-mixed" if config.name.startswith("gpt2") else "fp32"


def bytes_per_param(precision: str, optimizer: str) -> dict[str, int]:
    """Bytes each parameter costs in weights, gradients and optimizer states (see the module table)."""
    one_of("precision", precision, PRECISIONS)
    one_of("optimizer", optimizer, OPTIMIZER_STATES)
    weights, grads, _, master = _PRECISION_BYTES[precision]
    return {"parameters": weights, "gradients": grads, "optimizer": master + OPTIMIZER_STATES[optimizer]}


@dataclass(frozen=True)
class ModelStates:
    """Bytes of one stage's parameters, gradients and optimizer states."""

    parameters: int
    gradients: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer


def model_states(params: int, precision: str, optimizer: str, zero1: bool = False,
                 data_parallel: int = 1) -> ModelStates:
    """Model-state bytes for ``params`` parameters; ZeRO-1 divides the optimizer states (master copy
    included) over ``data_parallel`` replicas, rounding up."""
    whole("params", params, 0)
    dp = whole("data_parallel", data_parallel)
    per = bytes_per_param(precision, optimizer)
    optimizer_bytes = per["optimizer"] * params
    if zero1:
        optimizer_bytes = -(-optimizer_bytes // dp)
    return ModelStates(per["parameters"] * params, per["gradients"] * params, optimizer_bytes)


@dataclass(frozen=True)
class MemorySettings:
    """How a run is configured, as far as memory is concerned."""

    precision: str = "bf16-mixed"
    optimizer: str = "adam"
    zero1: bool = False
    data_parallel: int = 1
    recompute: str = "none"
    attention: str = "materialized"
    dropout: bool | None = None
    """Dropout masks present? None: as the model's ``dropout`` > 0 says."""
    dropout_mask_bytes: int = 1

    def __post_init__(self) -> None:
        one_of("precision", self.precision, PRECISIONS)
        one_of("optimizer", self.optimizer, OPTIMIZER_STATES)
        one_of("zero1", self.zero1, (True, False))
        whole("data_parallel", self.data_parallel)
        one_of("recompute", self.recompute, RECOMPUTE_MODES)
        one_of("attention", self.attention, ATTENTION_KINDS)
        one_of("dropout", self.dropout, (None, True, False))
        whole("dropout_mask_bytes", self.dropout_mask_bytes)

    def has_dropout(self, config: GPTConfig) -> bool:
        return config.dropout > 0 if self.dropout is None else self.dropout

    @property
    def element_bytes(self) -> int:
        return _PRECISION_BYTES[self.precision][2]


def _check_shape(config: GPTConfig, micro_batch_size: int, seq_len: int) -> tuple[int, int]:
    b = whole("micro_batch_size", micro_batch_size)
    s = whole("seq_len", seq_len)
    if s > config.n_positions:
        raise ValueError(f"seq_len = {s} 超过了 {config.name} 的 n_positions = {config.n_positions}")
    return b, s


def layer_activation_bytes(config: GPTConfig, micro_batch_size: int, seq_len: int,
                           settings: MemorySettings = MemorySettings(), recompute: str | None = None) -> int:
    """Bytes one transformer layer keeps for the backward pass, for one micro-batch (module docstring).
    ``recompute`` overrides ``settings.recompute`` (the working set is the ``"none"`` value)."""
    b, s = _check_shape(config, micro_batch_size, seq_len)
    mode = one_of("recompute", settings.recompute if recompute is None else recompute, RECOMPUTE_MODES)
    e, h, a = settings.element_bytes, config.d_model, config.n_head
    k = settings.dropout_mask_bytes if settings.has_dropout(config) else 0
    sbh = s * b * h
    if mode == "full":
        return e * sbh
    linear_part = (16 * e + 2 * k) * sbh
    if mode == "selective" or settings.attention == "fused":
        return linear_part
    scores = a * s * s * b
    return linear_part + e * scores + ((k + e) * scores if k else 0)


def stage_activation_bytes(config: GPTConfig, stage: Stage, micro_batch_size: int, seq_len: int,
                           settings: MemorySettings = MemorySettings()) -> int:
    """Activation bytes one micro-batch leaves on ``stage``: its layers, plus the token ids (and the
    embedding's dropout mask) on the first stage, plus the final LayerNorm, head inputs and fp32
    log-softmax on the last."""
    b, s = _check_shape(config, micro_batch_size, seq_len)
    total = stage.num_layers * layer_activation_bytes(config, b, s, settings)
    if stage.has_embedding:
        total += TOKEN_ID_BYTES * s * b
        if settings.has_dropout(config):
            total += settings.dropout_mask_bytes * s * b * config.d_model
    if stage.has_head:
        total += 2 * settings.element_bytes * s * b * config.d_model + LOGIT_BYTES * s * b * config.vocab_size
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
    """Peak memory of every stage of one pipeline replica, against a device's capacity."""

    stages: tuple[StageMemory, ...]
    device_memory_bytes: int
    settings: MemorySettings = field(default_factory=MemorySettings)

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


def stage_memory(config: GPTConfig, pipeline_stages: int, micro_batch_size: int, seq_len: int,
                 num_microbatches: int, schedule: str = "1f1b", settings: MemorySettings = MemorySettings(),
                 device_memory_gib: float = DEVICE_MEMORY_GIB, partition: str = "uniform") -> MemoryReport:
    """Peak bytes on each pipeline stage for one training step (module docstring), with the layers
    split by :func:`batchlab.formulas.partition.partition_layers` and the schedule's in-flight micro-batches."""
    one_of("schedule", schedule, SCHEDULES)
    capacity = int(positive("device_memory_gib", device_memory_gib) * GIB)
    b, s = _check_shape(config, micro_batch_size, seq_len)
    in_flight = in_flight_microbatches(schedule, pipeline_stages, num_microbatches)
    working = 0 if settings.recompute == "none" else layer_activation_bytes(config, b, s, settings, recompute="none")
    rows = []
    for stage, held in zip(partition_layers(config, pipeline_stages, partition), in_flight):
        rows.append(StageMemory(
            stage=stage.index,
            states=model_states(stage.params, settings.precision, settings.optimizer, settings.zero1,
                                settings.data_parallel),
            in_flight=held,
            activation_bytes_per_microbatch=stage_activation_bytes(config, stage, b, s, settings),
            working_bytes=working,
        ))
    return MemoryReport(tuple(rows), capacity, settings)


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
