"""Communication of one training step under pipeline and data parallelism, as plain numbers (4.6).

**Pipeline, point to point.** In every step each micro-batch crosses each of the p − 1 stage
boundaries twice: forward, stage i sends its output activations [b, s, h] to stage i + 1; backward,
stage i + 1 sends the gradient of that same tensor back (GPipe, Huang et al. 2019; Megatron-LM's
``send_forward``/``send_backward``). So per step

    messages = 2 (p − 1) m,    bytes = messages · b · s · h · e

with m micro-batches of b sequences of length s, width h and e bytes per activation element. For a
fixed pipeline batch b·m the bytes do not depend on how it is cut; the *number* of messages, each
with its fixed latency, is proportional to m. (:func:`batchlab.measure.pipeline_local.run_pipeline_local`
counts its boundary crossings; a test checks them against this formula.)

**Data parallel, all-reduce.** After the last backward of the step, each stage's gradients are summed
over its d replicas. A ring all-reduce (Patarasuk & Yuan 2009; NCCL and HCCL use rings) sends
2 (d − 1) / d of the gradient's bytes from every device. Per step that is the same whatever the batch;
per training sample it is divided by the global batch. (A tied embedding adds one all-reduce of the
V × h embedding gradient between the first and the last stage; it is per step as well and not counted.)
Context parallelism's cp devices hold the same weights too, so the reduction runs over d · cp devices
(Megatron-LM's ``dp_cp`` group).

**ZeRO-1 (Megatron-LM's distributed optimizer).** Each of the n = d · cp devices updates only its 1/n of
the parameters, so the all-reduce becomes a reduce-scatter of the gradients ((n − 1)/n of their bytes, at
the gradient's element size: fp32 under ``fp32_grads``) and, after the update, an all-gather of the new
16-bit parameters ((n − 1)/n of their bytes).

**Tensor parallelism** (Shoeybi et al. 2019; Korthikanti et al. 2022, §4.2.2). Each layer all-reduces its
[b, s/cp, h] activations across the t devices twice in the forward pass (after attention, after the MLP)
and twice in the backward; with sequence parallelism each all-reduce becomes an all-gather plus a
reduce-scatter, the same bytes. A ring all-reduce sends 2 (t − 1)/t of the tensor from every device, so
per layer and micro-batch one device sends 4 · 2 (t − 1)/t · b · (s/cp) · h · e; full recomputation
runs the forward's two again. These sit on the critical path of every layer (Megatron-LM overlaps little
of them), which is why t stays inside a node.

**Interleaving** (v > 1) cuts a replica into p · v virtual stages, so a micro-batch crosses more device
boundaries: p · v − 1 with Megatron-LM's looped placement (chunk k on device k mod p), 2p − 2 with ZB-V's
V placement (its middle boundary stays on one device).
"""
from __future__ import annotations

from dataclasses import dataclass

from batchlab.formulas.job import Job
from batchlab.formulas.memory import device_params

__all__ = ["p2p_messages", "p2p_bytes", "allreduce_bytes", "zero1_bytes", "tensor_parallel_bytes_per_layer",
           "StepCommunication", "step_communication"]

TP_COLLECTIVES_FORWARD = 2
"""Tensor-parallel all-reduces of one layer's forward pass (after attention, after the MLP); the backward
has as many (Megatron-LM's ``f`` and ``g`` operators, Shoeybi et al. 2019, Fig. 3)."""


def _boundaries(pipeline_stages: int, virtual_stages: int, schedule: str) -> int:
    """Device boundaries a micro-batch crosses one way: p − 1; interleaved, p · v − 1 (looped placement);
    ZB-V's V placement 2p − 2 (its two middle virtual stages share a device)."""
    p, v = pipeline_stages, virtual_stages
    if p == 1:
        return 0
    if schedule == "zero-bubble" and v == 2:
        return 2 * p - 2
    return p * v - 1


def p2p_messages(pipeline_stages: int, num_microbatches: int, virtual_stages: int = 1,
                 schedule: str = "1f1b") -> int:
    """Point-to-point messages of one step: 2 (p − 1) m (one forward, one backward per boundary and micro-batch);
    with v > 1 the boundaries of the virtual stages (module docstring)."""
    return 2 * _boundaries(pipeline_stages, virtual_stages, schedule) * num_microbatches


def p2p_bytes(pipeline_stages: int, num_microbatches: int, micro_batch_size: int, seq_len: int, d_model: int,
              element_bytes: int, virtual_stages: int = 1, schedule: str = "1f1b") -> int:
    """Bytes of those messages: each carries one micro-batch's [b, s, h] activations or their gradient
    (``seq_len``: the tokens one device holds, s/cp; ``d_model``: h, or h/t for a sequence-parallel shard)."""
    return (p2p_messages(pipeline_stages, num_microbatches, virtual_stages, schedule)
            * micro_batch_size * seq_len * d_model * element_bytes)


def zero1_bytes(gradient_bytes: int, parameter_bytes: int, shards: int) -> float:
    """Bytes each device sends for ZeRO-1's reduce-scatter of ``gradient_bytes`` and all-gather of
    ``parameter_bytes`` over ``shards`` devices: (n − 1)/n × (gradients + parameters)."""
    return (shards - 1) / shards * (gradient_bytes + parameter_bytes)


def tensor_parallel_bytes_per_layer(job: Job) -> float:
    """Bytes one device sends in the tensor-parallel collectives of one layer, one micro-batch, forward and
    backward (module docstring): collectives × 2 (t − 1)/t × b · (s/cp) · h · e; 0 at t = 1."""
    t = job.tensor_parallel
    forward = TP_COLLECTIVES_FORWARD * (2 if job.recompute == "full" else 1)
    tensor = job.micro_batch_size * (job.seq_len // job.context_parallel) * job.model.d_model * job.element_bytes
    return (forward + TP_COLLECTIVES_FORWARD) * allreduce_bytes(tensor, t)


def allreduce_bytes(gradient_bytes: int, data_parallel: int) -> float:
    """Bytes each device sends in a ring all-reduce of ``gradient_bytes`` over ``data_parallel`` replicas:
    2 (d − 1) / d × gradient_bytes (0 without data parallelism)."""
    return 2 * (data_parallel - 1) / data_parallel * gradient_bytes


@dataclass(frozen=True)
class StepCommunication:
    """What one training step sends, counted per device of the busiest stage."""

    num_microbatches: int
    p2p_messages: int
    """Messages between neighbouring stages, all boundaries together."""
    p2p_bytes: int
    allreduce_bytes: float
    """Sent by one device of the stage with the most parameters: the gradient all-reduce over d · cp, or under
    ZeRO-1 its reduce-scatter plus the parameters' all-gather."""
    global_batch: int
    tensor_parallel_bytes: float = 0.0
    """Sent by one device of the busiest stage in its tensor-parallel collectives over the whole step."""

    @property
    def allreduce_bytes_per_sample(self) -> float:
        return self.allreduce_bytes / self.global_batch


def step_communication(job: Job) -> StepCommunication:
    """Point-to-point and all-reduce traffic of one step of ``job`` (module docstring).

    Activations travel at the precision's activation element size, gradients are all-reduced at
    ``job.gradient_bytes`` (16-bit under ZeRO's convention, fp32 under Megatron-LM's ``fp32_grads``).
    """
    p, m, v = job.pipeline_stages, job.num_microbatches, job.virtual_stages
    largest = max(device_params(job, stage) for stage in job.stages)
    replicas = job.data_parallel * job.context_parallel
    if job.zero1:
        data_parallel = zero1_bytes(largest * job.gradient_bytes, largest * job.element_bytes, replicas)
    else:
        data_parallel = allreduce_bytes(largest * job.gradient_bytes, replicas)
    # a sequence-parallel boundary tensor is already split t ways (h is a multiple of t: n_head % t == 0);
    # otherwise each tensor-parallel rank sends it whole
    width = job.model.d_model // (job.tensor_parallel if job.sequence_parallel else 1)
    layers = max(stage.num_layers for stage in job.stages)
    return StepCommunication(
        num_microbatches=m,
        p2p_messages=p2p_messages(p, m, v, job.schedule),
        p2p_bytes=p2p_bytes(p, m, job.micro_batch_size, job.seq_len // job.context_parallel, width, job.element_bytes, v,
                            job.schedule),
        allreduce_bytes=data_parallel,
        global_batch=job.global_batch,
        tensor_parallel_bytes=m * layers * tensor_parallel_bytes_per_layer(job),
    )
