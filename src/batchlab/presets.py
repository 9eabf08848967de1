"""GPT-2 shapes as plain numbers: the tiny model's and the four published sizes.

Pure math, no torch: parameter counts (and, in later chapters, memory and FLOPs) of models that
are never built. ``batchlab.model`` builds the same shapes as torch modules.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["GPTConfig", "PRESETS", "PUBLISHED_PARAMS", "get_config", "count_params"]


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a GPT-2-style decoder (pre-LayerNorm, GELU MLP of width 4·d, tied embeddings)."""

    n_layer: int
    n_head: int
    d_model: int
    vocab_size: int
    n_positions: int
    dropout: float = 0.0
    name: str = "custom"

    def __post_init__(self) -> None:
        for field in ("n_layer", "n_head", "d_model", "vocab_size", "n_positions"):
            value = getattr(self, field)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} = {value!r} must be a positive integer")
        if self.d_model % self.n_head:
            raise ValueError(
                f"d_model {self.d_model} is not divisible by n_head {self.n_head}: "
                "each attention head needs d_model / n_head dimensions"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout = {self.dropout!r} must lie in [0, 1)")


# Shapes from the GPT-2 release (Radford et al. 2019); the tiny one is ours.
PRESETS: dict[str, GPTConfig] = {
    "tiny": GPTConfig(n_layer=2, n_head=4, d_model=64, vocab_size=64, n_positions=64, name="tiny"),
    # One layer of width 32: small enough that 4.2 can train a dozen runs in seconds on a laptop.
    "nano": GPTConfig(n_layer=1, n_head=2, d_model=32, vocab_size=64, n_positions=64, name="nano"),
    "gpt2": GPTConfig(n_layer=12, n_head=12, d_model=768, vocab_size=50257, n_positions=1024, name="gpt2"),
    "gpt2-medium": GPTConfig(n_layer=24, n_head=16, d_model=1024, vocab_size=50257, n_positions=1024, name="gpt2-medium"),
    "gpt2-large": GPTConfig(n_layer=36, n_head=20, d_model=1280, vocab_size=50257, n_positions=1024, name="gpt2-large"),
    "gpt2-xl": GPTConfig(n_layer=48, n_head=25, d_model=1600, vocab_size=50257, n_positions=1024, name="gpt2-xl"),
}

# Parameter counts of the released checkpoints (tied input/output embedding), for tests and prose.
PUBLISHED_PARAMS: dict[str, int] = {
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
}


def get_config(name: str, **overrides: object) -> GPTConfig:
    """Return the preset called ``name`` (e.g. ``"gpt2-xl"``), optionally with fields replaced."""
    try:
        config = PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(PRESETS)}") from None
    return replace(config, **overrides) if overrides else config


def count_params(config: GPTConfig) -> int:
    """Exact parameter count of :class:`TinyGPT` for ``config``, without building it.

    Token and position embeddings, then per layer 12·d² + 13·d (QKV, attention output,
    the 4·d MLP, two LayerNorms, all with biases), then the final LayerNorm. The output
    head shares the token-embedding matrix, so it adds nothing.
    """
    d = config.d_model
    embeddings = config.vocab_size * d + config.n_positions * d
    per_layer = 12 * d * d + 13 * d
    return embeddings + config.n_layer * per_layer + 2 * d
