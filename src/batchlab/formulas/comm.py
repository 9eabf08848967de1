"""Communication of one training step under pipeline and data parallelism, as plain numbers (4.6).

**Pipeline, point to point.** In every step each micro-batch crosses each of the p − 1 stage
boundaries twice: forward, stage s sends its output activations [b, s, h] to stage s + 1; backward,
stage s + 1 sends the gradient of that same tensor back (GPipe, Huang et al. 2019; Megatron-LM's
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

from batchlab.formulas.batching import plan_batch
from batchlab.formulas.checks import whole
from batchlab.formulas.memory import MemorySettings, bytes_per_param
from batchlab.formulas.partition import partition_layers
from batchlab.formulas.presets import GPTConfig

__all__ = ["p2p_messages", "p2p_bytes", "allreduce_bytes", "StepCommunication", "step_communication"]


def p2p_messages(pipeline_stages: int, num_microbatches: int) -> int:
    """Point-to-point messages of one step: 2 (p − 1) m (one forward, one backward per boundary and micro-batch)."""
    p = whole("pipeline_stages", pipeline_stages)
    m = whole("num_microbatches", num_microbatches)
    return 2 * (p - 1) * m


def p2p_bytes(pipeline_stages: int, num_microbatches: int, micro_batch_size: int, seq_len: int, d_model: int,
              element_bytes: int) -> int:
    """Bytes of those messages: each carries one micro-batch's [b, s, h] activations or their gradient."""
    message = (whole("micro_batch_size", micro_batch_size) * whole("seq_len", seq_len) * whole("d_model", d_model)
               * whole("element_bytes", element_bytes))
    return p2p_messages(pipeline_stages, num_microbatches) * message


def allreduce_bytes(gradient_bytes: int, data_parallel: int) -> float:
    """Bytes each device sends in a ring all-reduce of ``gradient_bytes`` over ``data_parallel`` replicas:
    2 (d − 1) / d × gradient_bytes (0 without data parallelism)."""
    g = whole("gradient_bytes", gradient_bytes, 0)
    d = whole("data_parallel", data_parallel)
    return 2 * (d - 1) / d * g


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


def step_communication(config: GPTConfig, seq_len: int, global_batch: int, micro_batch_size: int,
                       pipeline_stages: int, data_parallel: int, precision: str = "bf16-mixed") -> StepCommunication:
    """Point-to-point and all-reduce traffic of one step of the given job (module docstring).

    Activations travel at the precision's activation element size, gradients are all-reduced at its
    gradient size (both as in :mod:`batchlab.formulas.memory`).
    """
    plan = plan_batch(micro_batch_size, pipeline_stages, data_parallel, global_batch=global_batch)
    settings = MemorySettings(precision=precision)
    grad_bytes = bytes_per_param(precision, settings.optimizer)["gradients"]
    largest = max(stage.params for stage in partition_layers(config, pipeline_stages))
    return StepCommunication(
        num_microbatches=plan.num_microbatches,
        p2p_messages=p2p_messages(pipeline_stages, plan.num_microbatches),
        p2p_bytes=p2p_bytes(pipeline_stages, plan.num_microbatches, micro_batch_size, seq_len, config.d_model,
                            settings.element_bytes),
        allreduce_bytes=allreduce_bytes(largest * grad_bytes, data_parallel),
        global_batch=plan.global_batch,
    )
