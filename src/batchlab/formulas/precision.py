"""Bytes per element, once: the dtypes the book benchmarks and the training precisions built on them.

A *dtype* is one tensor element's format (``float32``, ``bfloat16``, ``float16``); a *precision* is how
a training job uses them (Micikevicius et al. 2018): ``fp32`` keeps weights, gradients and activations
in 4-byte floats; ``bf16-mixed`` computes in a 2-byte dtype and keeps an fp32 master copy of the
weights for the optimizer. The memory model, the roofline and the communication counts all read
their byte sizes from here.
"""
from __future__ import annotations

from batchlab.formulas.checks import one_of
from batchlab.formulas.presets import GPTConfig

__all__ = ["ELEMENT_BYTES", "element_bytes", "PRECISIONS", "PRECISION_DTYPE", "MASTER_WEIGHT_BYTES",
           "gradient_bytes", "default_precision"]

ELEMENT_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2}
"""Bytes per element of each dtype."""

PRECISIONS: dict[str, str] = {
    "bf16-mixed": "16 位混合精度（bf16/fp16 计算，fp32 主权重）",
    "fp32": "fp32 全精度",
}
PRECISION_DTYPE: dict[str, str] = {"bf16-mixed": "bfloat16", "fp32": "float32"}
"""The dtype of a precision's weights, gradients and activations."""
MASTER_WEIGHT_BYTES: dict[str, int] = {"bf16-mixed": 4, "fp32": 0}
"""Bytes per parameter of the fp32 master copy the optimizer updates (none in plain fp32)."""


def element_bytes(dtype: str) -> int:
    """Bytes per element of ``dtype`` (``"float32"``, ``"bfloat16"`` or ``"float16"``)."""
    return ELEMENT_BYTES[one_of("dtype", dtype, ELEMENT_BYTES)]


def gradient_bytes(precision: str, fp32_grads: bool) -> int:
    """Bytes of one gradient element as kept and all-reduced: the precision's dtype (ZeRO's convention), or
    fp32 with ``fp32_grads`` (Megatron-LM's under bf16: fp32 main gradients). ``precision`` is already checked."""
    return 4 if fp32_grads else ELEMENT_BYTES[PRECISION_DTYPE[precision]]


def default_precision(config: GPTConfig) -> str:
    """16-bit mixed for the GPT-2 sizes (as on a 910B); fp32 for the small models the book runs on a CPU."""
    return "bf16-mixed" if config.name.startswith("gpt2") else "fp32"
