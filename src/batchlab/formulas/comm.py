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
"""
from __future__ import annotations

from dataclasses import dataclass

from batchlab.formulas.job import Job

__all__ = ["p2p_messages", "p2p_bytes", "allreduce_bytes", "StepCommunication", "step_communication"]


def p2p_messages(pipeline_stages: int, num_microbatches: int) -> int:
    """Point-to-point messages of one step: 2 (p − 1) m (one forward, one backward per boundary and micro-batch)."""
    return 2 * (pipeline_stages - 1) * num_microbatches


def p2p_bytes(pipeline_stages: int, num_microbatches: int, micro_batch_size: int, seq_len: int, d_model: int,
              element_bytes: int) -> int:
    """Bytes of those messages: each carries one micro-batch's [b, s, h] activations or their gradient."""
    return p2p_messages(pipeline_stages, num_microbatches) * micro_batch_size * seq_len * d_model * element_bytes


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
    """Sent by one device of the stage with the most parameters."""
    global_batch: int

    @property
    def allreduce_bytes_per_sample(self) -> float:
        return self.allreduce_bytes / self.global_batch


def step_communication(job: Job) -> StepCommunication:
    """Point-to-point and all-reduce traffic of one step of ``job`` (module docstring).

    Activations travel at the precision's activation element size, gradients are all-reduced at
    ``job.gradient_bytes`` (16-bit under ZeRO's convention, fp32 under Megatron-LM's ``fp32_grads``).
    """
    p, m = job.pipeline_stages, job.num_microbatches
    grad_bytes = job.gradient_bytes
    largest = max(stage.params for stage in job.stages)
    return StepCommunication(
        num_microbatches=m,
        p2p_messages=p2p_messages(p, m),
        p2p_bytes=p2p_bytes(p, m, job.micro_batch_size, job.seq_len, job.model.d_model, job.element_bytes),
        allreduce_bytes=allreduce_bytes(largest * grad_bytes, job.data_parallel),
        global_batch=job.global_batch,
    )
