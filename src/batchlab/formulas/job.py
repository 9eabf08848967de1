"""One training job, one record: what every formula of 4.3–4.6 reads, validated once when it is made.

A job is the model shape, the sequence length, the global batch and how it is cut (micro-batch size,
pipeline stages, data parallel), the schedule, recomputation, precision, optimizer, ZeRO-1, dropout,
the attention kind and the device's memory. It is built once — from CLI flags, widget controls or
notebook code — and handed whole to the memory model (:func:`batchlab.formulas.memory.stage_memory`),
the throughput model (:func:`batchlab.formulas.throughput.model_step`), the communication count
(:func:`batchlab.formulas.comm.step_communication`), the tuner and the audit, which check nothing again.
A variant is ``dataclasses.replace(job, micro_batch_size=4)``: a new record, validated when it is made.

The vocabularies of the choices (with the labels readers see) live here too, once.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from batchlab.formulas.batching import BatchPlan, device_count, plan_batch
from batchlab.formulas.checks import at_most, between, fraction, one_of, whole
from batchlab.formulas.partition import Stage, check_virtual_stages, partition_chunks, partition_layers
from batchlab.formulas.pipeline_schedules import check_runnable, in_flight_chunks, in_flight_microbatches, placement_of
from batchlab.formulas.precision import ELEMENT_BYTES, PRECISION_DTYPE, PRECISIONS, default_precision, gradient_bytes
from batchlab.formulas.presets import GPTConfig, check_context_parallel, check_seq_len, check_tensor_parallel

__all__ = ["Job", "LIMITS", "OPTIMIZER_STATES", "OPTIMIZER_NAMES", "RECOMPUTE_MODES", "ATTENTION_KINDS", "DEVICE_MEMORY_GIB", "GIB"]

GIB = 2**30
DEVICE_MEMORY_GIB = 64.0
"""An Ascend 910B card's HBM: npu-smi reports 65536 MB (MiB units), i.e. 64 GiB."""

LIMITS: dict[str, tuple[int | float, int | float]] = {
    "global_batch": (1, 2**20),
    "micro_batch_size": (1, 2**16),
    "data_parallel": (1, 2**16),
    "virtual_stages": (1, 64),
    "tensor_parallel": (1, 2**10),
    "context_parallel": (1, 2**10),
    "device_memory_gib": (0.001, 1_000_000),
}
"""The range each count or size of a job may take (pipeline stages: up to the model's layers). Generous
for any real job — 2²⁰ sequences is a 1-billion-token step at s = 1024 — and small enough that every
formula, the tuner's search over micro-batch sizes included, answers within a second; the CLI's flags
and the explorers' controls take their bounds from here."""

OPTIMIZER_STATES: dict[str, int] = {"sgd": 0, "sgd-momentum": 4, "adam": 8, "adamw": 8}
"""Optimizer-state bytes per parameter, fp32 (momentum: one buffer; Adam: two moments)."""
OPTIMIZER_NAMES: dict[str, str] = {"sgd": "SGD", "sgd-momentum": "带动量的 SGD", "adam": "Adam", "adamw": "AdamW",
                                  "lamb": "LAMB"}
"""The name readers see for each optimizer code (tables and figures never show the code)."""
RECOMPUTE_MODES: dict[str, str] = {
    "none": "不重计算",
    "selective": "选择性重计算（只重算注意力的 s² 部分）",
    "full": "完全重计算（每层只存输入）",
}
ATTENTION_KINDS: dict[str, str] = {
    "materialized": "显式注意力（保存 s×s 分数矩阵）",
    "fused": "融合注意力（FlashAttention/SDPA，不保存 s×s）",
}


@dataclass(frozen=True)
class Job:
    """A training job, validated when it is made (each rule's wording lives in ``checks``, ``presets``,
    ``batching``, ``partition`` or ``pipeline_schedules``, and is written nowhere else).

    ``precision`` None takes the model's default (16-bit mixed for GPT-2, fp32 for the small models);
    ``dropout`` is the dropout probability; None takes the model's (0.1 for the GPT-2 presets, as GPT-2 and
    Megatron-LM train; 0 for the small models), so the printed job always shows the value the bytes assume;
    with dropout > 0 the memory model keeps its masks (Korthikanti et al.'s 34·sbh + 5·as²b);
    ``dropout_mask_bytes`` is 1 on accelerators (CPU ``F.dropout`` keeps 4).
    ``fp32_grads`` False is ZeRO's convention (16-bit gradients: 16 B/param with Adam); True is Megatron-LM's
    under bf16 (fp32 main gradients, all-reduced in fp32: 18 B/param without its distributed optimizer).
    ``virtual_stages`` v is the model chunks per device of an interleaved or ZB-V schedule (the layers cut
    into p · v chunks). ``tensor_parallel`` t splits each layer's heads and MLP columns across t devices
    (Megatron-LM); ``sequence_parallel`` (needs t > 1) also splits the norm and dropout activations along
    the sequence; ``context_parallel`` cp splits the sequence itself. Devices = t · p · d · cp.
    """

    model: GPTConfig
    seq_len: int
    global_batch: int
    micro_batch_size: int
    pipeline_stages: int = 1
    data_parallel: int = 1
    schedule: str = "1f1b"
    virtual_stages: int = 1
    tensor_parallel: int = 1
    sequence_parallel: bool = False
    context_parallel: int = 1
    recompute: str = "none"
    precision: str | None = None
    optimizer: str = "adam"
    zero1: bool = False
    fp32_grads: bool = False
    attention: str = "materialized"
    dropout: float | None = None
    dropout_mask_bytes: int = 1
    device_memory_gib: float = DEVICE_MEMORY_GIB
    partition: str = "uniform"

    def __post_init__(self) -> None:
        if not isinstance(self.model, GPTConfig):
            raise ValueError(f"model = {self.model!r}：必须是 GPTConfig（batchlab.formulas.presets.get_config）")
        check_seq_len(self.model, self.seq_len)
        plan = plan_batch(self.micro_batch_size, self.pipeline_stages, self.data_parallel,
                          global_batch=self.global_batch)  # whole numbers, and m = G / (b · d) whole
        for name in ("global_batch", "micro_batch_size", "data_parallel", "virtual_stages", "tensor_parallel",
                     "context_parallel"):
            whole(name, getattr(self, name))
            at_most(name, getattr(self, name), LIMITS[name][1], "上限")
        stages = partition_layers(self.model, self.pipeline_stages, self.partition, self.seq_len)
        check_runnable(self.schedule, self.pipeline_stages, plan.num_microbatches, self.virtual_stages)
        check_virtual_stages(self.model, self.pipeline_stages, self.virtual_stages)
        if self.virtual_stages > 1:  # p · v equal chunks, placed as the schedule places them
            stages = partition_chunks(self.model, self.pipeline_stages, self.virtual_stages,
                                      placement_of(self.schedule, self.virtual_stages), self.partition)
        check_tensor_parallel(self.model, self.tensor_parallel)
        one_of("sequence_parallel", self.sequence_parallel, (True, False))
        if self.sequence_parallel and self.tensor_parallel == 1:
            raise ValueError("sequence_parallel = True：序列并行切分的是张量并行组内的激活，需要 tensor_parallel > 1")
        check_context_parallel(self.seq_len, self.context_parallel)
        one_of("recompute", self.recompute, RECOMPUTE_MODES)
        if self.precision is None:  # frozen: the default is filled in once, here
            object.__setattr__(self, "precision", default_precision(self.model))
        one_of("precision", self.precision, PRECISIONS)
        one_of("optimizer", self.optimizer, OPTIMIZER_STATES)
        one_of("zero1", self.zero1, (True, False))
        one_of("fp32_grads", self.fp32_grads, (True, False))
        one_of("attention", self.attention, ATTENTION_KINDS)
        if self.dropout is None:
            object.__setattr__(self, "dropout", self.model.dropout)
        fraction("dropout", self.dropout)
        whole("dropout_mask_bytes", self.dropout_mask_bytes)
        between("device_memory_gib", self.device_memory_gib, *LIMITS["device_memory_gib"])
        # Derived once; not fields, so equality, hashing and replace() see only what was chosen.
        object.__setattr__(self, "_plan", plan)
        object.__setattr__(self, "_stages", tuple(stages))
        counts = (self.schedule, self.pipeline_stages, plan.num_microbatches, self.virtual_stages)
        object.__setattr__(self, "_in_flight", tuple(in_flight_microbatches(*counts)))
        object.__setattr__(self, "_in_flight_chunks", tuple(in_flight_chunks(*counts)))

    @property
    def plan(self) -> BatchPlan:
        """The batch arithmetic of 4.1 for this job."""
        return self._plan

    def read_grad_accum(self, stated_grad_accum: int) -> BatchPlan:
        """:attr:`plan` with a stated 梯度累积步数 checked against both readings (ValueError if neither fits)."""
        return plan_batch(self.micro_batch_size, self.pipeline_stages, self.data_parallel,
                          global_batch=self.global_batch, stated_grad_accum=stated_grad_accum)

    @property
    def num_microbatches(self) -> int:
        """m = global_batch / (micro_batch_size × data_parallel), per replica and step."""
        return self._plan.num_microbatches

    @property
    def devices(self) -> int:
        """t × p × d × cp (:func:`~batchlab.formulas.batching.device_count`)."""
        return device_count(self.pipeline_stages, self.data_parallel, self.tensor_parallel, self.context_parallel)

    @property
    def stages(self) -> tuple[Stage, ...]:
        """The layers and parameters of each pipeline stage (:func:`~batchlab.formulas.partition.partition_layers`;
        with v > 1 chunks per device :func:`~batchlab.formulas.partition.partition_chunks`: under ZB-V the head
        is on device 0)."""
        return self._stages

    @property
    def in_flight_microbatches(self) -> tuple[int, ...]:
        """Per stage, the most micro-batches whose activations it holds at once under this schedule
        (with v > 1 chunks per device, whole micro-batches' worth: ⌈ :attr:`in_flight_chunks` / v ⌉)."""
        return self._in_flight

    @property
    def in_flight_chunks(self) -> tuple[int, ...]:
        """Per stage, the most model-chunk activations (n_layer/(p·v) layers each) it holds at once
        (:func:`~batchlab.formulas.pipeline_schedules.in_flight_chunks`; v = 1: :attr:`in_flight_microbatches`)."""
        return self._in_flight_chunks

    @property
    def tokens_per_microbatch(self) -> int:
        """M = micro_batch_size × seq_len: the rows of every matmul in a layer."""
        return self.micro_batch_size * self.seq_len

    @property
    def has_dropout(self) -> bool:
        """Dropout masks kept for the backward pass? (any dropout > 0: the bytes do not depend on the rate)"""
        return self.dropout > 0

    @property
    def element_bytes(self) -> int:
        """Bytes of one activation (and weight) element under this job's precision; a gradient element is
        :attr:`gradient_bytes`."""
        return ELEMENT_BYTES[PRECISION_DTYPE[self.precision]]

    @property
    def gradient_bytes(self) -> int:
        """Bytes of one gradient element, as kept and all-reduced: the precision's, or 4 with ``fp32_grads``."""
        return gradient_bytes(self.precision, self.fp32_grads)

    @property
    def device_memory_bytes(self) -> int:
        return int(self.device_memory_gib * GIB)

    def as_record(self) -> dict:
        """The job as JSON-ready data (the model as its fields), to hand to the reader's browser; the
        same job again is :meth:`from_record`."""
        record = {f.name: getattr(self, f.name) for f in fields(self)}
        record["model"] = asdict(self.model)
        return record

    @classmethod
    def one_device(cls, model: GPTConfig, micro_batch_size: int, seq_len: int, **settings: Any) -> "Job":
        """A job that runs whole on one device: one stage, one replica, one micro-batch a step (the global
        batch is the micro-batch). ``settings`` are the other fields (``precision``, ``recompute``, …)."""
        return cls(model, seq_len=seq_len, global_batch=micro_batch_size, micro_batch_size=micro_batch_size,
                   **settings)

    @classmethod
    def from_record(cls, record: dict) -> "Job":
        """The job :meth:`as_record` wrote (validated again: a record is data from outside)."""
        return cls(**{**record, "model": GPTConfig(**record["model"])})
